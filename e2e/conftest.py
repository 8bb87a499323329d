"""End-to-end fixtures: one real API server per test session.

``E2E_TARGET=local`` (the default) starts etcd + kube-apiserver on 127.0.0.1 (see
``controlplane.py``); ``E2E_TARGET=kind`` uses the cluster of the current kubeconfig, which
``e2e/kind/run.sh`` has created and deployed the operator into.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

import controlplane
import objects
import realnode
from clusters import (
    CRDS,
    MANIFESTS,
    TARGET,
    Cluster,
    Installed,
    NodeCluster,
    RealNodeBox,
    install_sharekeeper,
)
from metrics_api import METRICS_SERVICE, register_metrics_api, unregister_metrics_api
from metrics_server import MetricsServer
from operating import Operator, start_operator

REAL_NODE_FILES = "real_node.py"
"""How the name of every file whose tests run a real node ends: only one node runs on a host at
a time (fixed host paths: /run/containerd, ...), so those files share one worker."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if here not in path.parents:
            continue
        item.add_marker(pytest.mark.e2e)
        if "real_node_box" in item.fixturenames and not path.name.endswith(REAL_NODE_FILES):
            raise pytest.UsageError(
                f"{item.nodeid} runs a real node: its file's name must end in {REAL_NODE_FILES}, "
                "so that parallel runs keep it beside the other real-node tests"
            )


class _ByFile(LoadScopeScheduling):
    """``make test``'s workers (pytest-xdist): each file's tests to one worker, so its module
    fixtures start once, and every real-node file to the same worker, first (the longest unit:
    sent last, it would end the run alone)."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return REAL_NODE_FILES if path.endswith(REAL_NODE_FILES) else path

    def _assign_work_unit(self, node: WorkerController) -> None:
        if REAL_NODE_FILES in self.workqueue:
            self.workqueue.move_to_end(REAL_NODE_FILES, last=False)
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> _ByFile:
    # pytest-xdist's loadgroup would do it with marks, but it no longer groups under pytest 9.2.
    return _ByFile(config, log)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if TARGET == "kind":
        kubectl = shutil.which("kubectl")
        assert kubectl, "E2E_TARGET=kind needs kubectl on PATH"
        kubeconfig = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
        yield Cluster(kubeconfig=kubeconfig, kubectl_path=kubectl, plane=None)
        return
    assert TARGET == "local", f"E2E_TARGET must be local or kind, not {TARGET!r}"
    with controlplane.running() as plane:
        yield Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)


@pytest.fixture(scope="session")
def full_cluster() -> Iterator[Cluster]:
    """A control plane of its own with kube-controller-manager, kube-scheduler and kwok: Jobs
    run, the real scheduler binds pods and kwok runs them on fake nodes (``fakenodes``). Local
    target only; started the first time a test asks for it."""
    if TARGET != "local":
        pytest.skip("the full control plane is for the local target only")
    with controlplane.running(full=True) as plane:
        yield Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)


@pytest.fixture(scope="session")
def full_installed(full_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The full control plane with Sharekeeper's CRDs and manifests, and the operator's
    kubeconfig."""
    return install_sharekeeper(full_cluster, tmp_path_factory.mktemp("full-installed"))


@pytest.fixture(scope="session")
def real_node_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodeBox]:
    """The session's control plane with a real node (``realnode.py``), started when a test
    first asks for it (``real_node``). Skips where a node cannot run (not root, no containerd:
    ``realnode.unavailable`` says why). At the end the node is stopped, and the host must be as
    it was before it started: no process, mount, cgroup, iptables rule, sysctl, link, network
    namespace or directory of the node's left."""
    if TARGET != "local":
        pytest.skip("the real node runs next to the local control plane only")
    reason = realnode.unavailable()
    if reason:
        pytest.skip(reason)
    box = RealNodeBox(tmp_path_factory.mktemp("real-node"))
    yield box
    changes = box.close()
    assert not changes, f"the real node left the host changed: {changes}"


@pytest.fixture
def real_node(real_node_box: RealNodeBox) -> NodeCluster:
    """The real node and its control plane (started at the first test that asks)."""
    return real_node_box.get()


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> Cluster:
    """The cluster with our CRDs installed and established."""
    cluster.install_crds(CRDS, *(path.stem for path in sorted(CRDS.glob("*.yaml"))))
    return cluster


@pytest.fixture(scope="session")
def deployed(crds: Cluster) -> Cluster:
    """The cluster with the operator's namespace, ServiceAccount, RBAC and Deployment applied."""
    crds.kubectl("apply", "-k", str(MANIFESTS))
    return crds


# --- metrics.k8s.io: a stand-in metrics-server behind the real aggregation layer -------------


@pytest.fixture(scope="session")
def metrics_server(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsServer]:
    """A stand-in metrics-server registered as ``v1beta1.metrics.k8s.io`` (local target only).

    Usage is whatever the test sets (``set_node``, ``set_pod``, ...); it is read through the
    real API server, its authentication, RBAC and aggregation layer."""
    if TARGET != "local":
        pytest.skip("the stand-in metrics-server is for the local control plane only")
    assert cluster.plane is not None
    namespace, name = METRICS_SERVICE
    server = MetricsServer(
        tmp_path_factory.mktemp("metrics-server"),
        hosts=(f"{name}.{namespace}.svc",),
        client_ca=cluster.plane.front_proxy_ca,  # only the aggregator may call it
    )
    with server:
        try:
            register_metrics_api(cluster, server)
            yield server
        finally:
            unregister_metrics_api(cluster)


@pytest.fixture
def metrics(metrics_server: MetricsServer) -> MetricsServer:
    """The stand-in metrics-server, with no usage set."""
    metrics_server.clear()
    return metrics_server


@pytest.fixture(scope="session")
def operator_kubeconfig(deployed: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig acting as the operator's ServiceAccount, with a token the API server issued."""
    assert deployed.plane is not None
    token = deployed.kubectl(
        "create", "token", "sharekeeper", "-n", "sharekeeper", "--duration=2h"
    ).stdout.strip()
    path = tmp_path_factory.mktemp("operator") / "kubeconfig"
    deployed.kubectl("create", "namespace", objects.NAMESPACE, check=False)
    return controlplane.write_token_kubeconfig(deployed.plane, path, token, "sharekeeper")


@pytest.fixture
def cluster_with(deployed: Cluster) -> Cluster:
    objects.clean_slate(deployed)
    return deployed


@pytest.fixture
def operator(
    cluster_with: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> Iterator[Operator]:
    running = start_operator(operator_kubeconfig, tmp_path / "operator.log")
    try:
        running.wait_rounds(0)
        yield running
    finally:
        running.stop(signal.SIGKILL)
