"""A tenant cannot make node QoS evict someone else: what it writes on its own pods (a system
priority class, a DaemonSet owner reference) exempts nothing, so the check evicts the
tenant's pod that hogs the CPU, not another team's Guaranteed pod.

The tenant is a ServiceAccount bound to the built-in ClusterRole ``edit`` in its namespace
(``tenants.py``), impersonated through kubectl. This is the plain control plane (the stand-in
metrics-server needs it), where no kube-controller-manager aggregates ``edit``: ``make_tenant``
fills it as the aggregation controller would. There is no kubelet either: the test plays it
(pod status, usage) and the DaemonSet controller (a DaemonSet's pod).

The usage is set, not burnt on the real node: what is tested is which pod the check picks,
which needs each pod's usage held at a chosen value (real burners drift, and a throttle moves
them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import qosing
from clusters import TARGET, Cluster
from metrics_server import MetricsServer
from operating import Operator, eventually
from qosing import EVICT, guard, node_entry, node_w1, pod, run, teams, terminating
from sharekeeper.engine.qos.releasing import LEAVING_SECONDS, STUCK_AFTER_SECONDS
from sharekeeper.model.objects import rfc3339_seconds
from tenants import Tenant

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="needs the stand-in metrics-server of the local control plane"
)
explain_failures = qosing.explain_failures  # autouse: the operator's log after a failed test

TENANT = "qos-tenant"
VICTIM = "qos-victim"
POLICY = "tenant-guard"


@pytest.fixture(scope="module")
def tenant(deployed: Cluster) -> Iterator[Tenant]:
    """The attacker's namespace (edit there, nothing else) and the victim team's namespace."""
    with teams(deployed, TENANT, VICTIM, "daemonsets") as created:
        yield created


@pytest.fixture
def hot_node(
    cluster_with: Cluster, metrics: MetricsServer, tenant: Tenant, operator: Operator
) -> Iterator[Cluster]:
    """w1: 8 cores, 6.5 in use. The victim team's Guaranteed pod train-0 uses 1 core."""
    with node_w1(cluster_with, POLICY, (TENANT, VICTIM), "daemonsets"):
        cluster_with.apply(pod("train-0", VICTIM, cpu="1"))
        run(cluster_with, metrics, VICTIM, "train-0", "1")
        metrics.set_node("w1", cpu="6500m", memory="8Gi")
        yield cluster_with


def deleted_at(cluster: Cluster, name: str) -> float:
    """When the tenant's pod ``name`` was deleted, by the API server's clock: its deletion
    deadline minus its grace period."""
    meta = cluster.get("pod", name, "-n", TENANT)["metadata"]
    deadline = rfc3339_seconds(meta["deletionTimestamp"])
    return deadline - float(meta["deletionGracePeriodSeconds"])


def only_the_tenant_goes(cluster: Cluster, metrics: MetricsServer, name: str) -> None:
    """The policy (evict above 6 cores, at the first hot check; gap (6.5 - 6) x 1.1 = 550m) is
    applied: the check evicts the tenant's pod ``name`` and, once the node is calm again, has
    evicted nothing else."""
    cluster.apply(guard(POLICY, EVICT))

    def tenant_evicted() -> bool:
        gone = terminating(cluster, TENANT, VICTIM)
        assert gone == [f"{TENANT}/{name}"], f"evicted: {gone}"
        return True

    eventually(tenant_evicted, timeout=30)
    metrics.remove_pod(TENANT, name)  # what the kubelet's numbers would show
    metrics.set_node("w1", cpu="3500m", memory="8Gi")

    def calm() -> bool:
        entry = node_entry(cluster, POLICY)
        return entry.get("rules", [{}])[0].get("observation") == "Calm"

    eventually(calm, timeout=30)
    assert terminating(cluster, TENANT, VICTIM) == [f"{TENANT}/{name}"]


@pytest.mark.parametrize("priority_class", ["system-cluster-critical", "system-node-critical"])
def test_a_system_priority_class_does_not_shield_a_tenants_pod(
    hot_node: Cluster, metrics: MetricsServer, tenant: Tenant, priority_class: str
) -> None:
    """The API server lets the tenant name the class (it is not limited to kube-system); before,
    the pod counted as system-critical, was never a candidate, and the check evicted train-0."""
    hog = pod("hog", TENANT, priority_class=priority_class)
    tenant.kubectl("create", "-f", "-", input=json.dumps(hog))
    created = hot_node.get("pod", "hog", "-n", TENANT)
    assert created["spec"]["priority"] >= 2_000_000_000  # what the Priority admission gave it
    run(hot_node, metrics, TENANT, "hog", "3")
    only_the_tenant_goes(hot_node, metrics, "hog")


@pytest.mark.parametrize(
    ("api_version", "real_uid"),
    [
        ("apps/v1beta2", True),  # the garbage collector cannot resolve it: the pod stays
        ("apps/v1", False),  # no DaemonSet has this UID
    ],
    ids=["apps-v1beta2", "unknown-uid"],
)
def test_a_forged_daemonset_owner_does_not_shield_a_tenants_pod(
    hot_node: Cluster, metrics: MetricsServer, tenant: Tenant, api_version: str, real_uid: bool
) -> None:
    """The tenant runs a real DaemonSet (edit lets it), whose pod stays exempt, and claims that
    DaemonSet from a pod it creates itself. Before, any ``apps/`` DaemonSet controller reference
    exempted a pod, and the check evicted train-0."""
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": TENANT},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "main", "image": "example/agent:1"}]},
            },
        },
    }
    tenant.kubectl("create", "-f", "-", input=json.dumps(daemonset))
    uid = hot_node.get("daemonset", "agent", "-n", TENANT)["metadata"]["uid"]

    def owner(version: str, owner_uid: str) -> dict[str, Any]:
        return {"apiVersion": version, "kind": "DaemonSet", "name": "agent", "uid": owner_uid,
                "controller": True}  # fmt: skip

    # The DaemonSet controller's pod (no controller runs here: the test creates it as it would).
    hot_node.apply(pod("agent-w1", TENANT, owners=[owner("apps/v1", uid)]))
    run(hot_node, metrics, TENANT, "agent-w1", "3")
    forged_uid = uid if real_uid else "7d1e9b0c-2f4a-4e8b-a6c3-5b9d0e1f2a3b"
    forged = pod("fake-agent", TENANT, owners=[owner(api_version, forged_uid)])
    tenant.kubectl("create", "-f", "-", input=json.dumps(forged))
    run(hot_node, metrics, TENANT, "fake-agent", "2")
    only_the_tenant_goes(hot_node, metrics, "fake-agent")


def test_a_tenant_deleting_its_busy_pod_with_a_long_grace_holds_the_evictions_two_minutes_at_most(
    hot_node: Cluster, metrics: MetricsServer, tenant: Tenant
) -> None:
    """A terminating pod's usage is on its way out, so the gap leaves it out. The tenant deletes
    its own busy pod with a day's grace period, and the pod goes on burning (SIGTERM trapped):
    without a bound the node's evictions would wait a day. The bound is 2 minutes after the
    deletion plus 30 s stuck (``LEAVING_SECONDS``, ``STUCK_AFTER_SECONDS``); after it the check
    evicts the tenant's next pod, and only that one."""
    for name, cpu in (("hog", "3"), ("b", "600m")):
        tenant.kubectl("create", "-f", "-", input=json.dumps(pod(name, TENANT)))
        run(hot_node, metrics, TENANT, name, cpu)
    tenant.kubectl("delete", "pod", "hog", "-n", TENANT, "--grace-period=86400", "--wait=false")
    hog_deleted = deleted_at(hot_node, "hog")
    hot_node.apply(guard(POLICY, EVICT))

    def leaving() -> str:
        gaps = node_entry(hot_node, POLICY).get("gaps", [])
        assert gaps, "no gap reported yet"
        return str(gaps[0].get("leaving"))

    # 6.5 cores used, 3 of them leaving: under the 6-core waterline, nothing to evict yet.
    assert eventually(leaving, timeout=30) == "3"
    assert terminating(hot_node, TENANT, VICTIM) == [f"{TENANT}/hog"]

    def evicted() -> list[str]:
        gone = terminating(hot_node, TENANT, VICTIM)
        assert gone != [f"{TENANT}/hog"], "nothing evicted yet"
        return gone

    # The bound is 150 s; the check runs every 2 s.
    assert eventually(evicted, timeout=200) == [f"{TENANT}/b", f"{TENANT}/hog"]
    held_back = deleted_at(hot_node, "b") - hog_deleted
    assert held_back >= LEAVING_SECONDS + STUCK_AFTER_SECONDS - 1  # whole seconds
    # What is leaving now is b's usage; the hog's counts again.
    eventually(lambda: leaving() == "600m", timeout=30)
