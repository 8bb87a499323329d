"""Node and pod usage from ``metrics.k8s.io/v1beta1`` (metrics-server), for the QoS checks.

Belongs here: reading NodeMetrics and PodMetrics through the API server and handing back the
raw dicts that ``model.qos.node_from_dicts`` reads (``usage`` of a NodeMetrics,
``containers[].usage`` of a PodMetrics), keyed the way it wants them. When there is no usage to
read (the APIService is not registered, its server is down or not ready, access is denied, the
API server is unreachable) the reader raises ``UsageUnavailable`` with the reason; it never
lets a transport or HTTP error through. What to do without usage is the caller's decision.

Does not belong: parsing quantities (``model``), deciding anything (``engine``), a clock.
``UsageSource`` is the seam: tests and other sources (a file, a fake) implement the same two
methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import httpx2 as httpx  # lightkube's HTTP client: its errors are lightkube's errors
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from sharekeeper.model.objects import MutableObj

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
NodeMetrics = create_global_resource(GROUP, VERSION, "NodeMetrics", "nodes", verbs=["get", "list"])
PodMetrics = create_namespaced_resource(
    GROUP, VERSION, "PodMetrics", "pods", verbs=["get", "list", "global_list"]
)


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
    """Reads usage from the metrics.k8s.io API through ``client`` (a UsageSource)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def node_metrics(self) -> list[MutableObj]:
        async def read() -> list[MutableObj]:
            return [dict(item) async for item in self._client.list(NodeMetrics)]

        return await _unavailable_on_error("NodeMetrics", read)

    async def pod_metrics(self) -> list[MutableObj]:
        async def read() -> list[MutableObj]:
            return [dict(item) async for item in self._client.list(PodMetrics, namespace="*")]

        return await _unavailable_on_error("PodMetrics", read)


async def _unavailable_on_error(
    kind: str, read: Callable[[], Awaitable[list[MutableObj]]]
) -> list[MutableObj]:
    try:
        return await read()
    except ApiError as error:
        code = error.status.code
        raise UsageUnavailable(_why(kind, code, error.status.message), code=code) from error
    except httpx.HTTPStatusError as error:  # a plain-text error, e.g. from the aggregator
        code = error.response.status_code
        raise UsageUnavailable(_why(kind, code, error.response.text), code=code) from error
    except httpx.HTTPError as error:  # connection refused, timeout, TLS
        raise UsageUnavailable(f"cannot read {kind}: {error!r}") from error


def _why(kind: str, code: int | None, message: str | None) -> str:
    detail = (message or "").strip()[:300]
    if code == 404:
        return f"metrics.k8s.io is not served (no metrics-server registered?): {detail}"
    if code == 503:
        return f"metrics.k8s.io is registered but its server is unavailable: {detail}"
    if code in (401, 403):
        return f"not allowed to list {kind}: {detail}"
    return f"cannot read {kind}: {detail}"
