"""Registering the stand-in metrics-server as ``v1beta1.metrics.k8s.io`` with the API server."""

from __future__ import annotations

import base64
import time
from typing import Any

import metrics_server as metrics_server_module
from clusters import Cluster
from metrics_server import MetricsServer
from operating import eventually

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
