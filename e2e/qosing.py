"""Node QoS against a tenant, on the plain control plane (the stand-in metrics-server needs it):
what ``test_tenant_qos.py`` and ``test_qos_blocked_evictions.py`` share (``test_node_qos.py``
takes ``EVICT`` and ``node_entry`` too).

The tenant (``tenants.py``) and another team each have a namespace; their pods are bound to the
node ``w1`` by hand (no scheduler runs here). There is no kubelet either: the tests play it
(``run``: pod status and usage), and a pod that is deleted stays until deleted with grace 0
(``delete_pods``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from clusters import Cluster
from metrics_server import MetricsServer
from objects import node, status
from operating import Operator, eventually
from tenants import Tenant, make_tenant

NODE = "w1"
EVICT = {"name": "evict", "eviction": {"terminationGracePeriodSeconds": 30}}


@contextmanager
def teams(cluster: Cluster, tenant: str, other: str, *kinds: str) -> Iterator[Tenant]:
    """The tenant's namespace ``tenant`` (``edit`` there, nothing else; not opted in to
    admission) and another team's ``other``. At the end their pods and objects of ``kinds``
    (those the tests make besides pods, e.g. ``daemonsets``) go, then the namespaces."""
    created = make_tenant(cluster, tenant, admission=False)
    cluster.kubectl("create", "namespace", other)
    try:
        yield created
    finally:
        for namespace in (tenant, other):
            delete_pods(cluster, namespace, *kinds)
            cluster.kubectl("delete", "namespace", namespace, "--wait=false")


@contextmanager
def node_w1(
    cluster: Cluster, policy: str, namespaces: tuple[str, ...], *kinds: str
) -> Iterator[None]:
    """The node ``w1`` (8 cores, 32Gi) for a test; at the end the QoS policy ``policy`` goes, and
    the pods of ``namespaces`` with their objects of ``kinds``."""
    cluster.apply(node(NODE, cpu="8", memory="32Gi"))
    try:
        yield
    finally:
        cluster.kubectl("delete", "nodeqosensurancepolicy", policy, "--ignore-not-found")
        for namespace in namespaces:
            delete_pods(cluster, namespace, *kinds)


def delete_pods(cluster: Cluster, namespace: str, *kinds: str) -> None:
    """Every pod of ``namespace``, and every object of ``kinds`` there."""
    # Grace 0: no kubelet will ever confirm a bound pod's end.
    cluster.kubectl("delete", "--raw", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
    for kind in kinds:
        cluster.kubectl("delete", kind, "--all", "-n", namespace, "--wait=false")


def pod(
    name: str,
    namespace: str,
    *,
    cpu: str | None = None,
    cpu_limit: str | None = None,
    priority_class: str | None = None,
    owners: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod bound to w1, labelled ``app: <name>``: BestEffort without ``cpu``; with it, ``cpu``
    and 64Mi requested, ``cpu_limit`` (``cpu`` unless told) and 64Mi limited, so Guaranteed
    when the two are the same."""
    resources: dict[str, Any] = {}
    if cpu:
        resources = {
            "requests": {"cpu": cpu, "memory": "64Mi"},
            "limits": {"cpu": cpu_limit or cpu, "memory": "64Mi"},
        }
    spec: dict[str, Any] = {
        "nodeName": NODE,
        "containers": [{"name": "main", "image": "example/app:1", "resources": resources}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": name}}
    if owners:
        metadata["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def run(cluster: Cluster, metrics: MetricsServer, namespace: str, name: str, cpu: str) -> None:
    """Playing the kubelet: the pod runs, is ready, and uses ``cpu``."""
    running = {
        "status": {
            "phase": "Running",
            "startTime": "2026-11-21T10:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }
    cluster.kubectl(
        "patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps(running),
    )  # fmt: skip
    metrics.set_pod(namespace, name, {"main": {"cpu": cpu, "memory": "100Mi"}})


def guard(policy: str, *actions: dict[str, Any]) -> dict[str, Any]:
    """The QoS policy ``policy``: one rule per action, named after it, all above 6 cores, at the
    first hot check (avoidance and restore thresholds 1), checking every 2 s. The gap closed is
    (usage - 6) x 1.1."""
    rules = [
        {"name": a["name"], "metricRule": {"name": "cpu_total_usage", "value": "6"},
         "avoidanceThreshold": 1, "restoreThreshold": 1, "actionName": a["name"]}
        for a in actions
    ]  # fmt: skip
    return {
        "apiVersion": "ensurance.sharekeeper.io/v1alpha1",
        "kind": "NodeQosEnsurancePolicy",
        "metadata": {"name": policy},
        "spec": {"checkIntervalSeconds": 2, "objectiveEnsurances": rules, "actions": list(actions)},
    }


def node_entry(cluster: Cluster, policy: str, node: str = NODE) -> dict[str, Any]:
    """``node``'s entry (w1's unless told) in the status of the QoS policy ``policy`` (``{}``
    until there is one)."""
    nodes = status(cluster, "nodeqosensurancepolicy", policy).get("nodes", [])
    return next((n for n in nodes if n["name"] == node), {})


def terminating(cluster: Cluster, *namespaces: str) -> list[str]:
    """``namespace/name`` of the pods of ``namespaces`` that an eviction is terminating."""
    found = []
    for namespace in namespaces:
        for item in cluster.get("pods", "-n", namespace)["items"]:
            if item["metadata"].get("deletionTimestamp"):
                found.append(f"{namespace}/{item['metadata']['name']}")
    return sorted(found)


def more_checks(operator: Operator, count: int, timeout: float = 30) -> None:
    """Until the operator has completed ``count`` more QoS checks than it has now."""
    checks = int(operator.health()["qosChecks"])
    eventually(lambda: int(operator.health()["qosChecks"]) >= checks + count, timeout=timeout)


@pytest.fixture(autouse=True)
def explain_failures(request: pytest.FixtureRequest, operator: Operator) -> Iterator[None]:
    """On failure, print what the operator did: its log. Autouse in a module that takes it in
    (``explain_failures = qosing.explain_failures``)."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        print(operator.tail(80))
