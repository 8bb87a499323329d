"""The metrics.k8s.io reader against a fake API server (``httpx.MockTransport``): the requests it
sends, what it returns, and every way it fails.

(Through a real API server and aggregator: ``e2e/test_metrics_api.py``.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import pytest

from sharekeeper.engine.keys import PodKey
from sharekeeper.kube.listing import PAGE_SIZE
from sharekeeper.kube.usage import MetricsApiUsage, UsageSource, UsageUnavailable
from sharekeeper.model.qos import node_from_dicts, node_metrics_by_name, pod_metrics_by_key

NODES = "/apis/metrics.k8s.io/v1beta1/nodes"
PODS = "/apis/metrics.k8s.io/v1beta1/pods"  # every namespace's
# Items as a LIST carries them (metrics-server's may also carry kind and apiVersion).
NODE = {
    "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:05Z"},
    "timestamp": "2026-01-01T00:00:00Z",
    "window": "10s",
    "usage": {"cpu": "3500m", "memory": "6Gi"},
}
POD = {
    "metadata": {"name": "web", "namespace": "team"},
    "timestamp": "2026-01-01T00:00:00Z",
    "window": "10s",
    "containers": [
        {"name": "main", "usage": {"cpu": "1", "memory": "1Gi"}},
        {"name": "sidecar", "usage": {"cpu": "500m", "memory": "64Mi"}},
    ],
}

Answer = Callable[[httpx.Request], httpx.Response]


def metrics_list(kind: str, items: list[Any], token: str = "") -> httpx.Response:
    metadata = {"continue": token} if token else {}
    body = {"kind": f"{kind}List", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": metadata, "items": items}  # fmt: skip
    return httpx.Response(200, json=body)


def status(code: int, reason: str, message: str) -> httpx.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip
    return httpx.Response(code, json=body)


def served(nodes: list[Any], pods: list[Any]) -> Answer:
    """The two collections, each in one page."""
    lists = {NODES: metrics_list("NodeMetrics", nodes), PODS: metrics_list("PodMetrics", pods)}
    return lambda request: lists.get(request.url.path) or status(404, "NotFound", "not found")


class Server:
    """Answers each request with ``answer``, and keeps (path, query) of every request."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[tuple[str, dict[str, str]]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.url.path, dict(request.url.params)))
        return self.answer(request)


def read(server: Server, which: str) -> list[dict[str, Any]]:
    """``node_metrics`` or ``pod_metrics`` of a reader whose API server is ``server``."""

    async def main() -> list[dict[str, Any]]:
        transport = httpx.MockTransport(server.handle)
        async with httpx.AsyncClient(transport=transport, base_url="https://127.0.0.1") as http:
            usage: UsageSource = MetricsApiUsage(http)
            metrics: list[dict[str, Any]] = await getattr(usage, which)()
            return metrics

    return asyncio.run(main())


def unavailable(server: Server, which: str) -> UsageUnavailable:
    with pytest.raises(UsageUnavailable) as raised:
        read(server, which)
    return raised.value


BOTH = pytest.mark.parametrize("which", ["node_metrics", "pod_metrics"])


# --- what it reads ---


def test_reads_each_collection_as_the_plain_dicts_of_its_items() -> None:
    server = Server(served([NODE], [POD]))
    nodes = read(server, "node_metrics")
    pods = read(server, "pod_metrics")
    assert nodes == [NODE]  # as listed: nothing added (no kind), nothing left out
    assert pods == [POD]
    assert type(nodes[0]) is dict
    assert type(pods[0]["containers"][0]["usage"]) is dict
    # One paged LIST each; pods from every namespace (the cluster-wide path); nodes unscoped.
    assert server.requests == [
        (NODES, {"limit": str(PAGE_SIZE)}),
        (PODS, {"limit": str(PAGE_SIZE)}),
    ]


@BOTH
def test_pages_are_joined_by_their_continue_tokens(which: str) -> None:
    kind = "NodeMetrics" if which == "node_metrics" else "PodMetrics"
    items = [{"metadata": {"name": f"i{i}", "namespace": "team"}, "usage": {}} for i in range(5)]
    pages = {"": (items[0:2], "t1"), "t1": (items[2:4], "t2"), "t2": (items[4:], "")}

    def answer(request: httpx.Request) -> httpx.Response:
        page, token = pages[request.url.params.get("continue", "")]
        return metrics_list(kind, page, token)

    server = Server(answer)
    assert read(server, which) == items  # every page, in order, each item once
    path = NODES if which == "node_metrics" else PODS
    limit = str(PAGE_SIZE)
    assert server.requests == [
        (path, {"limit": limit}),
        (path, {"limit": limit, "continue": "t1"}),
        (path, {"limit": limit, "continue": "t2"}),
    ]


def test_an_empty_collection_is_no_usage_not_a_failure() -> None:
    # Go's encoder writes an empty list's items as null as often as [].
    server = Server(lambda request: httpx.Response(200, json={"metadata": {}, "items": None}))
    assert read(server, "node_metrics") == []
    assert read(Server(served([], [])), "pod_metrics") == []


def test_what_it_reads_feeds_node_from_dicts() -> None:
    server = Server(served([NODE], [POD]))
    by_name = node_metrics_by_name(read(server, "node_metrics"))
    by_key = pod_metrics_by_key(read(server, "pod_metrics"))
    assert set(by_key) == {PodKey("team", "web")}
    node = {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}
    pod = {
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main"}, {"name": "sidecar"}]},
        "status": {"phase": "Running"},
    }
    snapshot = node_from_dicts(node, [pod], by_name.get("n1"), by_key)
    assert (snapshot.cpu_usage_milli, snapshot.memory_usage_bytes) == (3500, 6 * 2**30)
    assert (snapshot.pods[0].cpu_usage_milli, snapshot.pods[0].memory_usage_bytes) == (
        1500,
        2**30 + 64 * 2**20,
    )


# --- how it fails: always UsageUnavailable, with the code and the API server's words ---

NOT_FOUND = "the server could not find the requested resource"
UNAVAILABLE = "the server is currently unable to handle the request"
FORBIDDEN = 'nodes.metrics.k8s.io is forbidden: User "x" cannot list resource "nodes"'


@BOTH
@pytest.mark.parametrize(
    ("answer", "code", "words", "reason"),
    [
        (status(404, "NotFound", NOT_FOUND), 404, "is not served", NOT_FOUND),
        (status(503, "ServiceUnavailable", UNAVAILABLE), 503, "server is unavailable",
         UNAVAILABLE),
        # The aggregator's own answer when the APIService's server is gone: plain text.
        (httpx.Response(503, text="service unavailable\n"), 503, "server is unavailable",
         "service unavailable"),
        (status(403, "Forbidden", FORBIDDEN), 403, "not allowed to list", FORBIDDEN),
        (status(401, "Unauthorized", "Unauthorized"), 401, "not allowed to list", "Unauthorized"),
        (status(500, "InternalError", "etcd is sad"), 500, "cannot read", "etcd is sad"),
        # A Status without a message says its reason.
        (httpx.Response(429, json={"kind": "Status", "reason": "TooManyRequests"}), 429,
         "cannot read", "TooManyRequests"),
    ],
)  # fmt: skip
def test_every_refusal_is_usage_unavailable_with_its_code_and_reason(
    which: str, answer: httpx.Response, code: int, words: str, reason: str
) -> None:
    server = Server(lambda request: answer)
    refused = unavailable(server, which)
    assert refused.code == code
    kind = "NodeMetrics" if which == "node_metrics" else "PodMetrics"
    assert refused.reason.startswith(
        {
            404: "metrics.k8s.io is not served (no metrics-server registered?): ",
            503: "metrics.k8s.io is registered but its server is unavailable: ",
            401: f"not allowed to list {kind}: ",
            403: f"not allowed to list {kind}: ",
        }.get(code, f"cannot read {kind}: ")
    )
    assert refused.reason.endswith(reason)
    assert words in str(refused)
    assert str(refused).endswith(f"(HTTP {code})")
    assert len(server.requests) == 1  # not retried: the next check reads again


def test_a_long_refusal_is_cut_short() -> None:
    server = Server(lambda request: status(500, "InternalError", "x" * 1000))
    refused = unavailable(server, "node_metrics")
    assert refused.reason == "cannot read NodeMetrics: " + "x" * 300


def test_a_refusal_of_a_later_page_returns_nothing_read_before_it() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if "continue" in request.url.params:
            return status(410, "Expired", "The provided continue parameter is too old")
        return metrics_list("PodMetrics", [POD], "t1")

    refused = unavailable(Server(answer), "pod_metrics")
    assert refused.code == 410
    assert refused.reason == "cannot read PodMetrics: The provided continue parameter is too old"


@BOTH
@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError("[Errno 111] Connection refused"), httpx.ReadTimeout("timed out")],
)
def test_an_unreachable_api_server_is_usage_unavailable_without_a_code(
    which: str, error: Exception
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        raise error

    failed = unavailable(Server(answer), which)
    assert failed.code is None
    kind = "NodeMetrics" if which == "node_metrics" else "PodMetrics"
    assert failed.reason == f"cannot read {kind}: {error!r}"
    assert str(failed) == failed.reason  # no "(HTTP ...)" without a code
    assert failed.__cause__ is error


@BOTH
@pytest.mark.parametrize(
    "body",
    [
        b"<html>502 Bad Gateway</html>",  # not JSON
        json.dumps({"kind": "Status", "status": "Success"}).encode(),  # no items
        json.dumps([{"metadata": {"name": "n1"}}]).encode(),  # an array, not a list object
        json.dumps({"metadata": {}, "items": {"n1": {}}}).encode(),  # items not an array
        json.dumps({"metadata": "v1", "items": []}).encode(),  # metadata not an object
    ],
)
def test_a_body_that_is_not_a_kubernetes_list_is_usage_unavailable(which: str, body: bytes) -> None:
    server = Server(lambda request: httpx.Response(200, content=body))
    failed = unavailable(server, which)
    assert failed.code is None
    kind = "NodeMetrics" if which == "node_metrics" else "PodMetrics"
    assert failed.reason.startswith(f"cannot read {kind}: not a Kubernetes list: ")
    assert isinstance(failed.__cause__, ValueError)


def test_programming_errors_are_not_swallowed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        read(Server(answer), "node_metrics")
