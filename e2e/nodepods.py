"""Pods on the real node (``realnode.py``) and what the host and metrics-server say of them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import realnode
from clusters import Cluster
from operating import eventually

BURN = "while :; do :; done"
STOP_DIR = "/control"


def burn_until_stopped() -> str:
    """Burn a core until ``STOP_DIR/stop`` exists (``host_dir`` mounted there), then idle."""
    return f"while [ ! -e {STOP_DIR}/stop ]; do :; done; exec sleep 86400"


CPU_HIERARCHY = Path("/sys/fs/cgroup/cpu")


def busybox_pod(
    name: str,
    namespace: str,
    command: str,
    *,
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    priority_class: str | None = None,
    host_dir: Path | None = None,
) -> dict[str, Any]:
    """A pod bound to the real node running ``sh -c command`` in the local busybox image, with
    32Mi of memory requested and limited and the CPU given, labelled ``app: <name>``;
    ``host_dir`` (a directory of the host) is mounted at ``STOP_DIR``."""
    requests: dict[str, str] = {"memory": "32Mi"}
    limits: dict[str, str] = {"memory": "32Mi"}
    if cpu_request:
        requests["cpu"] = cpu_request
    if cpu_limit:
        limits["cpu"] = cpu_limit
    spec: dict[str, Any] = {
        "nodeName": realnode.NODE_NAME,
        # busybox's sh as PID 1 ignores SIGTERM: a deleted pod waits out its grace period.
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "main", "image": realnode.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
             "command": ["sh", "-c", command],
             "resources": {"requests": requests, "limits": limits}}
        ],
    }  # fmt: skip
    if priority_class:
        spec["priorityClassName"] = priority_class
    if host_dir is not None:
        spec["volumes"] = [
            {"name": "control", "hostPath": {"path": str(host_dir), "type": "Directory"}}
        ]
        spec["containers"][0]["volumeMounts"] = [{"name": "control", "mountPath": STOP_DIR}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": spec,
    }


def wait_running(cluster: Cluster, namespace: str, name: str, timeout: float = 60) -> float:
    """Until the pod is Ready; returns the seconds waited."""
    started = time.monotonic()
    cluster.kubectl("wait", "--for=condition=Ready", f"pod/{name}", "-n", namespace,
                    f"--timeout={int(timeout)}s", timeout=timeout + 10)  # fmt: skip
    return time.monotonic() - started


def container_cgroup(cluster: Cluster, node: realnode.RealNode, namespace: str, name: str) -> Path:
    """The cpu cgroup (v1) of the pod's one container, where runc wrote its CFS quota."""
    pod = cluster.get("pod", name, "-n", namespace)
    container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    for directory, subdirs, _ in os.walk(CPU_HIERARCHY / node.cgroup):
        if container_id in subdirs:
            return Path(directory) / container_id
    raise AssertionError(f"no cgroup of container {container_id} under {node.cgroup}")


def cfs_quota_cores(cgroup: Path) -> float:
    """The CFS quota of a cpu cgroup in cores (-1: none)."""
    quota = int((cgroup / "cpu.cfs_quota_us").read_text())
    period = int((cgroup / "cpu.cfs_period_us").read_text())
    return -1.0 if quota < 0 else quota / period


def cores(quantity: str) -> float:
    """A CPU quantity as metrics-server writes it (``"1234567n"``, ``"250m"``, ``"2"``)."""
    for suffix, scale in (("n", 1e-9), ("u", 1e-6), ("m", 1e-3)):
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * scale
    return float(quantity)


def metrics(cluster: Cluster, path: str) -> dict[str, Any]:
    """``GET /apis/metrics.k8s.io/v1beta1/<path>`` through the API server."""
    raw = cluster.kubectl("get", "--raw", f"/apis/metrics.k8s.io/v1beta1/{path}").stdout
    found: dict[str, Any] = json.loads(raw)
    return found


def node_usage(cluster: Cluster) -> tuple[float, str]:
    """The node's CPU usage in cores from metrics-server, and the sample's timestamp."""
    sample = metrics(cluster, f"nodes/{realnode.NODE_NAME}")
    return cores(sample["usage"]["cpu"]), str(sample["timestamp"])


def pod_usage(cluster: Cluster, namespace: str, name: str) -> float | None:
    """The pod's CPU usage in cores from metrics-server; None until it has a sample."""
    result = cluster.kubectl(
        "get", "--raw", f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}",
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    sample = json.loads(result.stdout)
    return sum(cores(c["usage"]["cpu"]) for c in sample["containers"])


def wait_pod_usage(cluster: Cluster, namespace: str, name: str, timeout: float = 60) -> float:
    """Until metrics-server has a sample of the pod (two scrapes, 15 s apart); returns it."""

    def sampled() -> float:
        usage = pod_usage(cluster, namespace, name)
        assert usage is not None, f"no PodMetrics of {namespace}/{name} yet"
        return usage if usage > 0 else 1e-9

    return eventually(sampled, timeout=timeout, interval=1)
