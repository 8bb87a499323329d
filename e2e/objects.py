"""One-line builders of the objects e2e tests create, and reads of what the operator wrote."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusters import Cluster

GROUP = "scheduling.sharekeeper.io/v1alpha1"
NAMESPACE = "team"


def node(name: str, cpu: str = "8", memory: str = "32Gi", **labels: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "500"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": resources, "allocatable": resources},
    }


def queue(
    name: str, weight: int = 1, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "Queue",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"weight": weight, **spec},
    }


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "SchedulerPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(
    name: str, queue_name: str, cpu: str, memory: str, node_name: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "example/app:1",
             "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ]
    }  # fmt: skip
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"sharekeeper.io/queue": queue_name},
        },
        "spec": spec,
    }


def status(cluster: Cluster, kind: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.get(kind, name).get("status", {})
    return got


def deserved(cluster: Cluster, name: str) -> tuple[str | None, str | None]:
    got = status(cluster, "queue", name).get("deserved", {})
    return got.get("cpu"), got.get("memory")


def condition(cluster: Cluster, kind: str, name: str, type_: str) -> dict[str, Any] | None:
    conditions = status(cluster, kind, name).get("conditions", [])
    return next((c for c in conditions if c["type"] == type_), None)


def clean_slate(cluster: Cluster) -> None:
    cluster.kubectl(
        "delete", "queues,schedulerpolicies,nodeqosensurancepolicies", "--all", "--wait=false"
    )
    # One deletecollection call; grace 0 because no kubelet will ever confirm a bound pod's end.
    cluster.kubectl("delete", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods?gracePeriodSeconds=0")
    cluster.kubectl("delete", "--raw", "/api/v1/nodes")


def true_condition(cluster: Cluster, kind: str, name: str, type_: str) -> dict[str, Any] | None:
    """The condition if it is True now (conditions stay listed, False, when they clear)."""
    found = condition(cluster, kind, name, type_)
    return found if found is not None and found["status"] == "True" else None
