"""Nodes and Jobs for the full control plane (``controlplane.start(full=True)``).

kwok plays the kubelet of the nodes ``fake_node`` describes: they become Ready and keep their
heartbeats, the pods the real scheduler binds to them run, and a Job's pods succeed after their
``run_for`` (the stage rules are in ``controlplane``'s docstring). Fake nodes carry no taint, so
pods need no toleration.

On a full control plane use fake nodes only: a plain node (``objects.node``) has no conditions,
so the node-lifecycle controller lifts the not-ready taint the API server gave it, the scheduler
binds pods to it, and nothing ever runs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import controlplane
from operating import eventually

if TYPE_CHECKING:
    from clusters import Cluster

GPU = "nvidia.com/gpu"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def fake_node(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    gpu: int = 0,
    pods: str = "110",
    **labels: str,
) -> dict[str, Any]:
    """A Node kwok manages, with this capacity (all of it allocatable) and these labels on top
    of the ones a kubelet sets."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpu:
        resources[GPU] = str(gpu)
    annotation, value = controlplane.FAKE_NODE_ANNOTATION
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {annotation: value},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **labels,
            },
        },
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def wait_nodes_ready(cluster: Cluster, names: Iterable[str], timeout: float = 30.0) -> None:
    """Until the nodes are Ready and the node-lifecycle controller has lifted their not-ready
    taint, i.e. until the scheduler may bind pods to them."""
    names = list(names)

    def ready() -> bool:
        nodes = {node["metadata"]["name"]: node for node in cluster.get("nodes")["items"]}
        for name in names:
            node = nodes.get(name)
            assert node is not None, f"node {name} does not exist"
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            assert conditions.get("Ready") == "True", f"{name} is not Ready: {conditions}"
            taints = [t["key"] for t in node["spec"].get("taints", [])]
            assert NOT_READY_TAINT not in taints, f"{name} is still tainted: {taints}"
        return True

    eventually(ready, timeout=timeout, interval=0.5)


def job(
    name: str,
    namespace: str,
    *,
    completions: int,
    parallelism: int,
    cpu: str,
    memory: str = "1Gi",
    run_for: str = "5s",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    gpu: int = 0,
) -> dict[str, Any]:
    """A batch/v1 Job whose pods each request ``cpu``, ``memory`` and ``gpu`` and, once running
    on a fake node, succeed after ``run_for`` (a Go duration). ``annotations`` and ``labels``
    go onto its pods (e.g. ``{"scheduling.volcano.sh/queue-name": "a"}``)."""
    requests = {"cpu": cpu, "memory": memory}
    resources: dict[str, dict[str, str]] = {"requests": requests}
    if gpu:
        # An extended resource is asked for as a limit, which the request must equal.
        requests[GPU] = str(gpu)
        resources["limits"] = {GPU: str(gpu)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "template": {
                "metadata": {
                    "annotations": {
                        controlplane.POD_COMPLETE_DELAY_ANNOTATION: run_for,
                        **(annotations or {}),
                    },
                    "labels": labels or {},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "example/app:1", "resources": resources}
                    ],
                },
            },
        },
    }


def wait_job_complete(
    cluster: Cluster, namespace: str, name: str, timeout: float = 60.0
) -> dict[str, Any]:
    """The Job once its Complete condition is True; fails at once if it failed instead."""

    def complete() -> dict[str, Any]:
        got: dict[str, Any] = cluster.get("job", name, "-n", namespace)
        conditions = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
        if conditions.get("Failed") == "True":
            raise RuntimeError(f"job {namespace}/{name} failed: {got['status']}")
        assert conditions.get("Complete") == "True", f"job {name}: {got.get('status')}"
        return got

    return eventually(complete, timeout=timeout, interval=0.5)
