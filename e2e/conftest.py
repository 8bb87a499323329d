"""End-to-end fixtures: one real API server per test session.

``E2E_TARGET=local`` (the default) starts etcd + kube-apiserver on 127.0.0.1 (see
``controlplane.py``); ``E2E_TARGET=kind`` uses the cluster of the current kubeconfig, which
``e2e/kind/run.sh`` has created and deployed the operator into.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
import metrics_server as metrics_server_module
import objects
from metrics_server import MetricsServer
from operating import Operator, eventually, start_operator

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "crds"
MANIFESTS = REPO / "manifests"
TARGET = os.environ.get("E2E_TARGET", "local")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@dataclass
class Cluster:
    """A reachable API server and the means to talk to it as a person would."""

    kubeconfig: Path
    kubectl_path: str
    plane: controlplane.ControlPlane | None

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args],
            check=False,  # checked below, with kubectl's own message
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, *manifests: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))


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
def crds(cluster: Cluster) -> Cluster:
    """The cluster with our CRDs installed and established."""
    cluster.kubectl("apply", "-f", str(CRDS))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        *(f"crd/{path.stem}" for path in sorted(CRDS.glob("*.yaml"))),
    )  # fmt: skip
    return cluster


@pytest.fixture(scope="session")
def deployed(crds: Cluster) -> Cluster:
    """The cluster with the operator's namespace, ServiceAccount, RBAC and Deployment applied."""
    crds.kubectl("apply", "-k", str(MANIFESTS))
    return crds


# --- metrics.k8s.io: a stand-in metrics-server behind the real aggregation layer -------------

METRICS_APISERVICE = "v1beta1.metrics.k8s.io"
# Where metrics-server lives in a real cluster; the aggregator checks the serving certificate
# against <name>.<namespace>.svc.
METRICS_SERVICE = ("kube-system", "metrics-server")


def metrics_api_objects(server: MetricsServer) -> list[dict[str, Any]]:
    """An ExternalName Service naming 127.0.0.1 and the APIService that points at it.

    The aggregator's default resolver turns an ExternalName Service into
    ``https://<externalName>:<APIService port>``; EndpointSlices cannot carry a loopback
    address, and a ClusterIP would need kube-proxy."""
    namespace, name = METRICS_SERVICE
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": METRICS_APISERVICE},
         "spec": {"group": metrics_server_module.GROUP, "version": metrics_server_module.VERSION,
                  "groupPriorityMinimum": 100, "versionPriority": 100,
                  "service": {"name": name, "namespace": namespace, "port": server.port},
                  "caBundle": base64.b64encode(server.ca_bundle).decode()}},
    ]  # fmt: skip


def register_metrics_api(cluster: Cluster, server: MetricsServer, timeout: float = 60) -> None:
    """Register ``server`` and wait until a list of NodeMetrics goes through the API server."""
    cluster.apply(*metrics_api_objects(server))
    # A touch makes the aggregator check availability now rather than at its next resync.
    cluster.kubectl("annotate", "--overwrite", "apiservice", METRICS_APISERVICE,
                    f"sharekeeper.io/e2e-touched={time.monotonic_ns()}")  # fmt: skip

    def served() -> bool:
        result = cluster.kubectl("get", "--raw", f"{metrics_server_module.PREFIX}/nodes",
                                 check=False)  # fmt: skip
        assert result.returncode == 0, result.stderr
        return True

    eventually(served, timeout=timeout)
    cluster.kubectl(
        "wait", "--for=condition=Available", f"--timeout={int(timeout)}s",
        f"apiservice/{METRICS_APISERVICE}",
    )  # fmt: skip


def unregister_metrics_api(cluster: Cluster, timeout: float = 60) -> None:
    """Remove the APIService and its Service; wait until metrics.k8s.io answers 404."""
    namespace, name = METRICS_SERVICE
    cluster.kubectl("delete", "apiservice", METRICS_APISERVICE, "--ignore-not-found")
    cluster.kubectl("delete", "service", name, "-n", namespace, "--ignore-not-found")

    def gone() -> bool:
        result = cluster.kubectl("get", "--raw", f"{metrics_server_module.PREFIX}/nodes",
                                 check=False)  # fmt: skip
        assert "NotFound" in result.stderr, result.stderr or result.stdout
        return True

    eventually(gone, timeout=timeout)


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
