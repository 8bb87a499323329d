"""Node and pod usage from ``metrics.k8s.io/v1beta1`` (metrics-server), for the QoS checks.

Belongs here: reading NodeMetrics and PodMetrics through the API server and handing back the
raw dicts that ``model.qos.node_from_dicts`` reads (``usage`` of a NodeMetrics,
``containers[].usage`` of a PodMetrics), keyed the way it wants them. When there is no usage to
read (the APIService is not registered, its server is down or not ready, access is denied, the
API server is unreachable or answers with something that is not a list) the reader raises
``UsageUnavailable`` with the reason; it never lets a transport or HTTP error through. What to
do without usage is the caller's decision.

Does not belong: parsing quantities (``model``), deciding anything (``engine``), a clock.
``UsageSource`` is the seam: tests and other sources (a file, a fake) implement the same two
methods.
"""

from __future__ import annotations

from typing import Protocol

import httpx2 as httpx  # lightkube's HTTP client

from sharekeeper.kube.kinds import NODE_METRICS, POD_METRICS, Resource
from sharekeeper.kube.listing import PAGE_SIZE, UNREACHABLE, page_of
from sharekeeper.kube.transient import status_message
from sharekeeper.model.objects import MutableObj


class UsageUnavailable(Exception):
    """No usage could be read. ``code`` is the HTTP status, if there was one: 404 when no
    metrics API is registered, 503 when its server is down or not ready, 401/403 when access
    is refused; None when the API server itself could not be reached."""

    def __init__(self, reason: str, *, code: int | None = None) -> None:
        super().__init__(reason if code is None else f"{reason} (HTTP {code})")
        self.reason = reason
        self.code = code


class UsageSource(Protocol):
    """Where node and pod usage comes from: NodeMetrics and PodMetrics dicts, all of them."""

    async def node_metrics(self) -> list[MutableObj]:
        """Every NodeMetrics; raises UsageUnavailable when there is none to read."""
        ...

    async def pod_metrics(self) -> list[MutableObj]:
        """Every PodMetrics in every namespace; raises UsageUnavailable likewise."""
        ...


class MetricsApiUsage:
    """Reads usage from the metrics.k8s.io API (a UsageSource) through ``http``, the plain HTTP
    client of the watches (``clients.Clients.http``): paged LISTs, each page parsed into plain
    dicts (``listing.page_of``), in half the time of lightkube's typed list or less."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def node_metrics(self) -> list[MutableObj]:
        return await self._list(NODE_METRICS)

    async def pod_metrics(self) -> list[MutableObj]:
        return await self._list(POD_METRICS)  # all namespaces: the cluster-wide collection

    async def _list(self, resource: Resource) -> list[MutableObj]:
        kind = resource.kind
        items: list[MutableObj] = []
        params = {"limit": str(PAGE_SIZE)}
        while True:
            try:
                response = await self._http.get(resource.path, params=params)
            except UNREACHABLE as error:  # connection refused, timeout, TLS, credentials
                raise UsageUnavailable(f"cannot read {kind}: {error!r}") from error
            code = response.status_code
            if code != 200:  # a Status, or plain text (e.g. from the aggregator)
                raise UsageUnavailable(_why(kind, code, status_message(response)), code=code)
            try:
                page, token = page_of(response)
            except ValueError as error:
                raise UsageUnavailable(
                    f"cannot read {kind}: not a Kubernetes list: {error}"
                ) from error
            items += page
            if not token:
                return items
            params["continue"] = token


def _why(kind: str, code: int, message: str) -> str:
    detail = message.strip()[:300]
    if code == 404:
        return f"metrics.k8s.io is not served (no metrics-server registered?): {detail}"
    if code == 503:
        return f"metrics.k8s.io is registered but its server is unavailable: {detail}"
    if code in (401, 403):
        return f"not allowed to list {kind}: {detail}"
    return f"cannot read {kind}: {detail}"
