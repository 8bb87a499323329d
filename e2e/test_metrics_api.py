"""Node and pod usage through the real API server's aggregation layer (metrics.k8s.io).

The stand-in metrics-server (``metrics_server.py``) is registered as an APIService; everything
here reads through kube-apiserver, which authenticates, authorizes (RBAC) and proxies to it
with its front-proxy client certificate, exactly as with metrics-server in a real cluster.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

import controlplane
from clusters import TARGET, Cluster
from metrics_api import register_metrics_api, unregister_metrics_api
from metrics_server import PREFIX, MetricsServer
from operating import SERVICE_ACCOUNT
from sharekeeper.kube.clients import connect
from sharekeeper.kube.usage import MetricsApiUsage, UsageUnavailable
from sharekeeper.model.qos import node_from_dicts, node_metrics_by_name, pod_metrics_by_key

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="the stand-in metrics-server is for the local control plane"
)


def raw(cluster: Cluster, path: str) -> Any:
    return json.loads(cluster.kubectl("get", "--raw", f"{PREFIX}{path}").stdout)


def raw_error(cluster: Cluster, path: str) -> str:
    result = cluster.kubectl("get", "--raw", f"{PREFIX}{path}", check=False)
    assert result.returncode != 0, result.stdout
    return result.stderr


def read(kubeconfig: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """NodeMetrics and PodMetrics as the operator reads them: MetricsApiUsage with the plain
    HTTP client of its watches, configured as the operator's (``connect``, ``$KUBECONFIG``)."""

    async def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        clients = connect()
        try:
            usage = MetricsApiUsage(clients.http)
            return await usage.node_metrics(), await usage.pod_metrics()
        finally:
            await clients.close()

    with pytest.MonkeyPatch.context() as env:
        env.setenv("KUBECONFIG", str(kubeconfig))
        return asyncio.run(both())


def unavailable(kubeconfig: Path) -> UsageUnavailable:
    with pytest.raises(UsageUnavailable) as raised:
        read(kubeconfig)
    return raised.value


def names(items: list[dict[str, Any]]) -> list[str]:
    return [
        "/".join(filter(None, (i["metadata"].get("namespace"), i["metadata"]["name"])))
        for i in items
    ]


def test_node_metrics_through_the_api_server(cluster: Cluster, metrics: MetricsServer) -> None:
    metrics.set_node("n1", cpu="3500m", memory="6Gi")
    metrics.set_node("n2", cpu="250000000n", memory="1048576Ki")

    listed = raw(cluster, "/nodes")
    assert listed["kind"] == "NodeMetricsList"
    assert names(listed["items"]) == ["n1", "n2"]
    n1 = raw(cluster, "/nodes/n1")
    assert n1["kind"] == "NodeMetrics"
    assert n1["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert n1["usage"] == {"cpu": "3500m", "memory": "6Gi"}
    assert n1["window"] == "10s"
    assert n1["timestamp"].endswith("Z")
    assert raw(cluster, "/nodes/n2")["usage"] == {"cpu": "250000000n", "memory": "1048576Ki"}
    assert 'nodes.metrics.k8s.io "n3" not found' in raw_error(cluster, "/nodes/n3")

    metrics.set_node("n1", cpu="7", memory="6Gi")  # the test moves the numbers at will
    assert raw(cluster, "/nodes/n1")["usage"]["cpu"] == "7"
    metrics.remove_node("n2")
    assert names(raw(cluster, "/nodes")["items"]) == ["n1"]
    # The aggregator called the server with the caller's identity, as it does metrics-server.
    assert any(r.path == f"{PREFIX}/nodes/n1" and r.user == "admin" for r in metrics.requests)


def test_pod_metrics_per_namespace_and_across(cluster: Cluster, metrics: MetricsServer) -> None:
    metrics.set_pod("team", "web", {"main": {"cpu": "1", "memory": "1Gi"},
                                    "sidecar": {"cpu": "50m", "memory": "64Mi"}},
                    labels={"app": "web"})  # fmt: skip
    metrics.set_pod("team", "batch", {"main": {"cpu": "2", "memory": "2Gi"}})
    metrics.set_pod("other", "web", {"main": {"cpu": "100m", "memory": "128Mi"}})

    everywhere = raw(cluster, "/pods")
    assert everywhere["kind"] == "PodMetricsList"
    assert names(everywhere["items"]) == ["other/web", "team/batch", "team/web"]
    assert names(raw(cluster, "/namespaces/team/pods")["items"]) == ["team/batch", "team/web"]
    labelled = raw(cluster, "/namespaces/team/pods?labelSelector=app%3Dweb")
    assert names(labelled["items"]) == ["team/web"]
    web = raw(cluster, "/namespaces/team/pods/web")
    assert web["kind"] == "PodMetrics"
    assert web["containers"] == [
        {"name": "main", "usage": {"cpu": "1", "memory": "1Gi"}},
        {"name": "sidecar", "usage": {"cpu": "50m", "memory": "64Mi"}},
    ]
    assert {"timestamp", "window"} <= set(web)

    missing = raw_error(cluster, "/namespaces/team/pods/gone")
    assert "NotFound" in missing
    assert 'pods.metrics.k8s.io "team/gone" not found' in missing
    metrics.remove_pod("team", "web")
    assert "NotFound" in raw_error(cluster, "/namespaces/team/pods/web")
    assert names(raw(cluster, "/pods")["items"]) == ["other/web", "team/batch"]
    metrics.clear()
    assert raw(cluster, "/pods")["items"] == []
    assert raw(cluster, "/nodes")["items"] == []


def test_reader_returns_what_node_from_dicts_reads(
    cluster: Cluster, metrics: MetricsServer
) -> None:
    metrics.set_node("n1", cpu="3500m", memory="6Gi")
    metrics.set_pod("team", "web", {"main": {"cpu": "1", "memory": "1Gi"},
                                    "sidecar": {"cpu": "500m", "memory": "1Gi"}})  # fmt: skip
    metrics.set_pod("other", "idle", {"main": {"cpu": "0", "memory": "0"}})

    nodes, pods = read(cluster.kubeconfig)
    assert names(nodes) == ["n1"]
    assert names(pods) == ["other/idle", "team/web"]
    assert nodes[0]["usage"] == {"cpu": "3500m", "memory": "6Gi"}

    node = {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}
    pod = {
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main"}, {"name": "sidecar"}]},
        "status": {"phase": "Running"},
    }
    snapshot = node_from_dicts(
        node, [pod], node_metrics_by_name(nodes).get("n1"), pod_metrics_by_key(pods)
    )
    assert (snapshot.cpu_usage_milli, snapshot.memory_usage_bytes) == (3500, 6 * 2**30)
    assert (snapshot.pods[0].cpu_usage_milli, snapshot.pods[0].memory_usage_bytes) == (
        1500,
        2 * 2**30,
    )


@pytest.fixture(scope="module")
def token_kubeconfigs(deployed: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Kubeconfigs for the operator's ServiceAccount (manifests/ RBAC) and for one without."""
    assert deployed.plane is not None
    workdir = tmp_path_factory.mktemp("metrics-tokens")
    deployed.kubectl("create", "serviceaccount", "nobody", "-n", "sharekeeper", check=False)
    configs = {}
    for account in ("sharekeeper", "nobody"):
        token = deployed.kubectl(
            "create", "token", account, "-n", "sharekeeper", "--duration=1h"
        ).stdout.strip()
        configs[account] = controlplane.write_token_kubeconfig(
            deployed.plane, workdir / f"{account}.kubeconfig", token, account
        )
    yield configs
    deployed.kubectl("delete", "serviceaccount", "nobody", "-n", "sharekeeper", "--wait=false")


def test_operator_service_account_may_read_usage(
    metrics: MetricsServer, token_kubeconfigs: dict[str, Path]
) -> None:
    metrics.set_node("n1", cpu="1", memory="1Gi")
    metrics.set_pod("team", "web", {"main": {"cpu": "1", "memory": "1Gi"}})
    nodes, pods = read(token_kubeconfigs["sharekeeper"])
    assert (names(nodes), names(pods)) == (["n1"], ["team/web"])
    users = {r.user for r in metrics.requests if r.path.endswith(("/nodes", "/pods"))}
    assert users == {SERVICE_ACCOUNT}
    # RBAC is the API server's: a ServiceAccount without the grant never reaches the server.
    before = len(metrics.requests)
    refused = unavailable(token_kubeconfigs["nobody"])
    assert refused.code == 403
    assert "not allowed" in str(refused)
    assert len(metrics.requests) == before


def test_reader_when_the_server_is_down(cluster: Cluster, metrics: MetricsServer) -> None:
    metrics.set_node("n1", cpu="1", memory="1Gi")
    try:
        with metrics.down():
            down = unavailable(cluster.kubeconfig)
            assert down.code == 503
            assert "unavailable" in str(down)
            assert "ServiceUnavailable" in raw_error(cluster, "/nodes")
    finally:
        register_metrics_api(cluster, metrics)  # the aggregator may have marked it unavailable
    nodes, _ = read(cluster.kubeconfig)
    assert names(nodes) == ["n1"]


def test_reader_when_no_metrics_api_is_registered(cluster: Cluster, metrics: MetricsServer) -> None:
    metrics.set_node("n1", cpu="1", memory="1Gi")
    unregister_metrics_api(cluster)
    try:
        absent = unavailable(cluster.kubeconfig)
        assert absent.code == 404
        assert "not served" in str(absent)
    finally:
        register_metrics_api(cluster, metrics)
    nodes, _ = read(cluster.kubeconfig)
    assert names(nodes) == ["n1"]


def test_only_the_aggregator_may_call_the_server(metrics: MetricsServer) -> None:
    """Like metrics-server, the stand-in wants the front-proxy client certificate."""
    context = ssl.create_default_context(cafile=str(metrics.ca_file))
    answer = b""
    with socket.create_connection(("127.0.0.1", metrics.port), timeout=5) as plain:
        try:
            with context.wrap_socket(plain, server_hostname="127.0.0.1") as tls:
                tls.sendall(f"GET {PREFIX}/nodes HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                answer = tls.recv(1024)
        except (ssl.SSLError, ConnectionError):
            pass  # refused in the handshake, or (TLS 1.3) by an alert at the first read
    assert answer == b""


def test_stop_leaves_no_thread_and_no_port(tmp_path: Path) -> None:
    """A server of its own (no API server): an idle keep-alive connection does not hold it up."""
    server = MetricsServer(tmp_path).start()
    server.set_node("n1", cpu="1", memory="1Gi")
    context = ssl.create_default_context(cafile=str(server.ca_file))
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context)
    try:
        connection.request("GET", f"{PREFIX}/nodes/n1")
        response = connection.getresponse()
        assert json.loads(response.read())["usage"] == {"cpu": "1", "memory": "1Gi"}
        assert any(
            t.name.startswith(f"metrics-server:{server.port}") for t in threading.enumerate()
        )
        server.stop()  # the connection is still open, idle, on the client side
        mine = f"metrics-server:{server.port}"
        assert not [t for t in threading.enumerate() if t.name.startswith(mine)]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    finally:
        connection.close()
        server.stop()
