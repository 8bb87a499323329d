"""One complete list of every kind the operator watches, as plain dicts: what
``sharekeeper explain`` computes from, once, where the operator keeps watching.

The client is configured as the watches' (``clients``): the in-cluster service account, else
``$KUBECONFIG``, else ``~/.kube/config``; the requests are the watches' LISTs (paged, pods
without the finished ones). A kind whose CRD is not served (Volcano's PodGroups, or our own
resources before ``kubectl apply -f crds/``) lists as nothing, as the operator then sees
nothing of it.

Items of a LIST carry no ``kind`` and ``apiVersion`` (the list does): each item gets them, so
that the objects read exactly as ``kubectl get -o yaml`` prints them, and as simulate reads
files. Every failure is one ``ClusterUnreachable`` with a one-line reason: this is a command a
person runs, and it never retries.

How a LIST page is read (``page_of``) is shared with the operator's usage reader (``usage``),
whose client is asynchronous; how a refusal is read, with every client (``transient``).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2 as httpx  # lightkube's HTTP client
from lightkube.core.exceptions import ConfigError

from sharekeeper.kube.clients import sync_http
from sharekeeper.kube.kinds import STORED, Resource
from sharekeeper.kube.transient import status_message
from sharekeeper.model import jsontext
from sharekeeper.model.objects import MutableObj

PAGE_SIZE = 500


class ClusterUnreachable(Exception):
    """The cluster could not be read: no usable kubeconfig, no answer, or a refusal."""


def http_client() -> httpx.Client:
    """A synchronous client configured as the operator's watches configure theirs."""
    try:
        return sync_http()
    # A kubeconfig can be missing, not YAML, without a context, or name files that are not
    # there: whichever it is, it is one line for the person who runs the command.
    except Exception as error:
        raise ClusterUnreachable(f"cannot use the kubeconfig: {error}") from None


def list_objects(client: httpx.Client | None = None) -> list[MutableObj]:
    """Every object of every kind the operator stores (``kinds.STORED``), each with its
    ``kind`` and ``apiVersion``.
    ``client``: for tests; by default one from the kubeconfig, closed when done."""
    own = client is None
    http = http_client() if client is None else client
    try:
        return [obj for resource in STORED for obj in list_items(http, resource)]
    finally:
        if own:
            http.close()


UNREACHABLE = (httpx.HTTPError, ConfigError, OSError)
"""What a request raises when the API server cannot be reached (or the kubeconfig used)."""


def unreachable(http: httpx.Client, error: Exception) -> ClusterUnreachable:
    reason = str(error) or type(error).__name__
    return ClusterUnreachable(f"cannot reach the API server at {http.base_url}: {reason}")


def list_items(http: httpx.Client, resource: Resource) -> Iterator[MutableObj]:
    params = {"limit": str(PAGE_SIZE)}
    if resource.field_selector:
        params["fieldSelector"] = resource.field_selector
    while True:
        where = f"GET {resource.path}"
        try:
            response = http.get(resource.path, params=params)
        except UNREACHABLE as error:
            raise unreachable(http, error) from None
        if response.status_code == 404 and resource.optional:
            return  # the CRD is not served: none of this kind
        if response.status_code != 200:
            raise ClusterUnreachable(f"{where}: {refusal(response)}")
        try:
            items, token = page_of(response)
        except ValueError as error:
            raise ClusterUnreachable(f"{where}: not a Kubernetes list: {error}") from None
        for item in items:
            yield {"apiVersion": resource.api_version, "kind": resource.kind, **item}
        if not token:
            return
        params["continue"] = token


def page_of(response: httpx.Response) -> tuple[list[MutableObj], str | None]:
    """The objects of one LIST page (its ``items`` as the API server sent them, anything that
    is not an object left out) and its ``continue`` token, None on the last page.
    ``ValueError`` when the body is not a Kubernetes list."""
    page = jsontext.parse(response.content)
    if not isinstance(page, dict) or "items" not in page:
        raise ValueError("not a JSON object with items")
    items, metadata = page["items"] or [], page.get("metadata") or {}
    if not isinstance(items, list) or not isinstance(metadata, dict):
        raise ValueError("its items are not an array, or its metadata not an object")
    token = metadata.get("continue")
    return [item for item in items if isinstance(item, dict)], str(token) if token else None


def refusal(response: httpx.Response) -> str:
    """``HTTP 403: nodes is forbidden: User "x" cannot list ...``: the API server's Status."""
    detail = status_message(response)
    return f"HTTP {response.status_code}" + (f": {detail}" if detail else "")
