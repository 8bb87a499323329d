"""``sharekeeper release``: every pod of a namespace let through the admission gate by hand,
with the patch the operator sends (the gate removed, the time recorded). For when the
operator is down for long, or a namespace leaves admission with pods still held."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx2 as httpx

from sharekeeper.cluster.listing import PAGE_SIZE, ClusterUnreachable, http_client, refusal
from sharekeeper.model.objects import rfc3339
from sharekeeper.model.pods import has_admission_gate, release_patch

STRATEGIC = "application/strategic-merge-patch+json"


@dataclass
class Released:
    pods: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """``name: why`` for each pod the API server refused to patch."""


def release_namespace(namespace: str, client: httpx.Client | None = None) -> Released:
    own = client is None
    http = http_client() if client is None else client
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
    body = json.dumps(release_patch(rfc3339(time.time())))
    result = Released()
    try:
        for name in list(_held(http, path)):
            response = _request(http, "PATCH", f"{path}/{quote(name, safe='')}", body)
            if response.status_code == 200:
                result.pods.append(name)
            elif response.status_code != 404:  # gone meanwhile: nothing to release
                result.failed.append(f"{name}: {refusal(response)}")
        return result
    finally:
        if own:
            http.close()


def _held(http: httpx.Client, path: str) -> Iterator[str]:
    params = {"limit": str(PAGE_SIZE)}
    while True:
        response = _request(http, "GET", path, params=params)
        if response.status_code != 200:
            raise ClusterUnreachable(f"GET {path}: {refusal(response)}")
        page = response.json()
        for pod in page.get("items") or []:
            spec = pod.get("spec") or {}
            if has_admission_gate(spec.get("schedulingGates")):
                yield str((pod.get("metadata") or {}).get("name"))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return
        params["continue"] = str(token)


def _request(
    http: httpx.Client,
    method: str,
    path: str,
    body: str | None = None,
    params: dict[str, str] | None = None,
) -> httpx.Response:
    headers = {"Content-Type": STRATEGIC} if body is not None else {}
    try:
        return http.request(method, path, content=body, params=params, headers=headers)
    except (httpx.HTTPError, OSError) as error:
        raise ClusterUnreachable(
            f"cannot reach the API server at {http.base_url}: {error or type(error).__name__}"
        ) from None
