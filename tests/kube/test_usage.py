"""The metrics.k8s.io reader against a fake client: what it returns, and every way it fails.

(Through a real API server and aggregator: ``e2e/test_metrics_api.py``.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest
from lightkube import ApiError

from sharekeeper.engine.keys import PodKey
from sharekeeper.kube.usage import (
    MetricsApiUsage,
    NodeMetrics,
    PodMetrics,
    UsageSource,
    UsageUnavailable,
)
from sharekeeper.model.qos import node_from_dicts, node_metrics_by_name, pod_metrics_by_key

NODE = {
    "kind": "NodeMetrics",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {"name": "n1"},
    "timestamp": "2026-01-01T00:00:00Z",
    "window": "10s",
    "usage": {"cpu": "3500m", "memory": "6Gi"},
}
POD = {
    "kind": "PodMetrics",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {"name": "web", "namespace": "team"},
    "timestamp": "2026-01-01T00:00:00Z",
    "window": "10s",
    "containers": [{"name": "main", "usage": {"cpu": "1", "memory": "1Gi"}}],
}


class FakeClient:
    """The one lightkube call the reader makes: ``list``, yielding items or failing."""

    def __init__(self, items: dict[Any, list[dict[str, Any]]], error: Exception | None = None):
        self.items, self.error = items, error
        self.calls: list[tuple[Any, str | None]] = []

    def list(self, res: Any, *, namespace: str | None = None) -> AsyncIterator[dict[str, Any]]:
        self.calls.append((res, namespace))

        async def iterate() -> AsyncIterator[dict[str, Any]]:
            if self.error is not None:
                raise self.error
            for item in self.items.get(res, []):
                yield res(item)  # lightkube hands back Generic (dict) instances

        return iterate()


def reader(client: FakeClient) -> MetricsApiUsage:
    return MetricsApiUsage(client)  # type: ignore[arg-type]


def test_reads_node_and_pod_metrics_as_plain_dicts() -> None:
    client = FakeClient({NodeMetrics: [NODE], PodMetrics: [POD]})
    usage: UsageSource = reader(client)
    nodes = asyncio.run(usage.node_metrics())
    pods = asyncio.run(usage.pod_metrics())
    assert nodes == [NODE]
    assert pods == [POD]
    assert type(nodes[0]) is dict
    assert type(pods[0]) is dict
    # Pods from every namespace; nodes are cluster-scoped.
    assert client.calls == [(NodeMetrics, None), (PodMetrics, "*")]


def test_keyed_metrics_feed_node_from_dicts() -> None:
    node = {
        "metadata": {"name": "n1"},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi"}},
    }
    pod = {
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main"}]},
        "status": {"phase": "Running"},
    }
    by_name = node_metrics_by_name([NODE])
    by_key = pod_metrics_by_key([POD])
    assert set(by_key) == {PodKey("team", "web")}
    snapshot = node_from_dicts(node, [pod], by_name.get("n1"), by_key)
    assert snapshot.cpu_usage_milli == 3500
    assert snapshot.memory_usage_bytes == 6 * 2**30
    assert snapshot.pods[0].cpu_usage_milli == 1000


def api_error(code: int, reason: str, message: str) -> ApiError:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}  # fmt: skip
    request = httpx.Request("GET", "https://127.0.0.1/apis/metrics.k8s.io/v1beta1/nodes")
    return ApiError(request=request, response=httpx.Response(code, json=body, request=request))


def plain_error(code: int, text: str) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "https://127.0.0.1/apis/metrics.k8s.io/v1beta1/nodes")
    response = httpx.Response(code, text=text, request=request)
    return httpx.HTTPStatusError(text, request=request, response=response)


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        (api_error(404, "NotFound", "the server could not find the requested resource"),
         404, "not served"),
        (api_error(503, "ServiceUnavailable", "the server is currently unable to handle"),
         503, "unavailable"),
        (plain_error(503, "service unavailable\n"), 503, "unavailable"),
        (api_error(403, "Forbidden", 'cannot list resource "nodes"'), 403, "not allowed"),
        (api_error(500, "InternalError", "boom"), 500, "boom"),
        (httpx.ConnectError("connection refused"), None, "connection refused"),
    ],
)  # fmt: skip
def test_every_failure_is_usage_unavailable(error: Exception, code: int | None, words: str) -> None:
    usage = reader(FakeClient({}, error))
    for read in (usage.node_metrics, usage.pod_metrics):
        with pytest.raises(UsageUnavailable) as raised:
            asyncio.run(read())
        assert raised.value.code == code
        assert words in str(raised.value)
        assert raised.value.__cause__ is error


def test_programming_errors_are_not_swallowed() -> None:
    usage = reader(FakeClient({}, ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(usage.node_metrics())
