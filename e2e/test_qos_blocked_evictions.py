"""A tenant's PodDisruptionBudget cannot send a node QoS eviction to another team's pod.

Found (issue "Tenant-proof", attack 5): a tenant with ``edit`` in its namespace put a budget
with ``maxUnavailable: 0`` over its own pod. When the node crossed the eviction waterline, the
Eviction API refused (429) to evict that pod, and the check moved on to the next pod in
order: another team's Guaranteed pod, ranked above the tenant's, was evicted to close the gap
while the tenant kept its CPU. Now a refused eviction ends the node's evictions for the check:
the tenant's pod gets ``EvictionBlocked`` and, where the policy throttles, is throttled.

The tenant is a ServiceAccount bound to the built-in ClusterRole ``edit`` in its namespace
(``tenants.py``), impersonated through kubectl. This is the plain control plane (the stand-in
metrics-server needs it): no kube-controller-manager aggregates ``edit`` (``make_tenant`` fills
it as the aggregation controller would) and no disruption controller computes the budget's
status (the test writes it as that controller would). There is no kubelet either: the test
plays it (pod status, usage). Evictions are counted from the API server's audit log.

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
from operating import Operator, eventually, operator_writes
from qosing import EVICT, guard, more_checks, node_entry, node_w1, pod, run, teams, terminating
from tenants import Tenant

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="needs the stand-in metrics-server of the local control plane"
)
explain_failures = qosing.explain_failures  # autouse: the operator's log after a failed test

TENANT = "pdb-tenant"
OTHER = "pdb-other"
POLICY = "pdb-guard"
THROTTLE = {
    "name": "throttle",
    "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 20}},
}


@pytest.fixture(scope="module")
def tenant(deployed: Cluster) -> Iterator[Tenant]:
    """The tenant's namespace (edit there, nothing else) and the other team's namespace."""
    with teams(deployed, TENANT, OTHER, "pdb") as created:
        yield created


def evictions(cluster: Cluster, since: int) -> list[tuple[str, int]]:
    """The operator's evictions since audit entry ``since``: ``(namespace/name, code)``."""
    assert cluster.plane is not None
    return [
        (f"{ref.get('namespace')}/{ref.get('name')}", entry.get("responseStatus", {}).get("code"))
        for entry in operator_writes(cluster.plane.audit_log)[since:]
        if (ref := entry.get("objectRef", {})).get("resource") == "pods"
        and ref.get("subresource") == "eviction"
        and entry["verb"] == "create"
    ]


def pod_deletions(cluster: Cluster, since: int) -> list[str]:
    assert cluster.plane is not None
    return [
        str(entry.get("objectRef", {}).get("name"))
        for entry in operator_writes(cluster.plane.audit_log)[since:]
        if entry["verb"] in ("delete", "deletecollection")
        and entry.get("objectRef", {}).get("resource") == "pods"
    ]


def events(cluster: Cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cluster.get(
        "events", "-n", namespace, "--field-selector", selector
    )["items"]
    return found


@pytest.fixture
def guarded_tenant(
    cluster_with: Cluster, metrics: MetricsServer, tenant: Tenant, operator: Operator
) -> Iterator[Cluster]:
    """w1: 8 cores, 7 in use. The tenant's Burstable pod ``greedy`` (1.5 cores, limit 2) under
    its own budget ``keep-me`` (maxUnavailable 0); the other team's Guaranteed pod ``db``
    (3 cores): ranked above greedy (Guaranteed after Burstable), and alone enough to close
    the 1.1-core gap."""
    assert cluster_with.plane is not None
    with node_w1(cluster_with, POLICY, (TENANT, OTHER), "pdb"):
        greedy = pod("greedy", TENANT, cpu="100m", cpu_limit="2")
        tenant.kubectl("create", "-f", "-", input=json.dumps(greedy))
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep-me", "namespace": TENANT},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "greedy"}}},
        }
        tenant.kubectl("create", "-f", "-", input=json.dumps(budget))
        # Playing the disruption controller: one healthy pod expected, none may go.
        observed = cluster_with.get("pdb", "keep-me", "-n", TENANT)["metadata"]["generation"]
        budget_status = {"status": {"observedGeneration": observed, "expectedPods": 1,
                                    "currentHealthy": 1, "desiredHealthy": 1,
                                    "disruptionsAllowed": 0}}  # fmt: skip
        cluster_with.kubectl(
            "patch", "pdb", "keep-me", "-n", TENANT, "--subresource=status", "--type=merge",
            "-p", json.dumps(budget_status),
        )  # fmt: skip
        cluster_with.apply(pod("db", OTHER, cpu="3"))
        run(cluster_with, metrics, TENANT, "greedy", "1500m")
        run(cluster_with, metrics, OTHER, "db", "3")
        metrics.set_node("w1", cpu="7", memory="8Gi")
        yield cluster_with


def test_a_tenants_budget_stops_the_evictions_instead_of_sending_them_to_another_team(
    guarded_tenant: Cluster, operator: Operator
) -> None:
    cluster = guarded_tenant
    assert cluster.plane is not None
    since = len(operator_writes(cluster.plane.audit_log))
    cluster.apply(guard(POLICY, EVICT))
    eventually(lambda: evictions(cluster, since), timeout=30)
    # A few more checks, each trying greedy first again: none goes on to db (before, the
    # first check evicted db right after greedy's refusal).
    more_checks(operator, 3)
    tried = evictions(cluster, since)
    assert {name for name, _ in tried} == {f"{TENANT}/greedy"}, tried
    assert {code for _, code in tried} == {429}, "every eviction of greedy was refused"
    assert pod_deletions(cluster, since) == [], "a refused eviction never becomes a delete"
    assert terminating(cluster, TENANT, OTHER) == []

    entry = node_entry(cluster, POLICY)
    (blocked,) = entry["blockedEvictions"]
    uid = cluster.get("pod", "greedy", "-n", TENANT)["metadata"]["uid"]
    assert (blocked["pod"], blocked["uid"], blocked["metric"]) == (
        f"{TENANT}/greedy",
        uid,
        "cpu_total_usage",
    )
    assert "keep-me needs 1 healthy pods and has 1 currently" in blocked["message"]
    assert [(a["pod"], a["outcome"].split(":")[0]) for a in entry["lastActions"]] == [
        (f"{TENANT}/greedy", "Blocked")
    ]
    assert f"evictions stop at {TENANT}/greedy" in entry["message"]

    on_pod = events(cluster, TENANT, "involvedObject.name=greedy,reason=EvictionBlocked")
    assert [e["type"] for e in on_pod] == ["Warning"]
    on_policy = events(
        cluster, "default",
        f"involvedObject.kind=NodeQosEnsurancePolicy,involvedObject.name={POLICY},"
        "reason=EvictionBlocked",
    )  # fmt: skip
    assert [e["type"] for e in on_policy] == ["Warning"]
    assert "keep-me" in on_policy[0]["message"]
    assert operator.metric("sharekeeper_qos_evictions_blocked_total", metric="cpu_total_usage") >= 3


def test_where_the_policy_throttles_the_blocked_pod_is_throttled_instead(
    guarded_tenant: Cluster, operator: Operator
) -> None:
    cluster = guarded_tenant
    assert cluster.plane is not None
    since = len(operator_writes(cluster.plane.audit_log))

    def limit(namespace: str, name: str) -> str:
        found = cluster.get("pod", name, "-n", namespace)
        return str(found["spec"]["containers"][0]["resources"]["limits"]["cpu"])

    cluster.apply(guard(POLICY, EVICT, THROTTLE))
    eventually(lambda: evictions(cluster, since), timeout=30)
    more_checks(operator, 2)
    assert {name for name, _ in evictions(cluster, since)} == {f"{TENANT}/greedy"}
    # 20 % from what greedy uses (1.5 cores): 1.2, through pods/resize; then a step a check.
    eventually(lambda: limit(TENANT, "greedy") != "2", timeout=30)
    eventually(lambda: node_entry(cluster, POLICY).get("throttled"), timeout=30)
    uid = cluster.get("pod", "greedy", "-n", TENANT)["metadata"]["uid"]
    entry = node_entry(cluster, POLICY)
    records = {(r["pod"], r["uid"], r["originalLimit"]) for r in entry["throttled"]}
    assert (f"{TENANT}/greedy", uid, "2") in records
    assert [b["pod"] for b in entry["blockedEvictions"]] == [f"{TENANT}/greedy"]
    assert {name for name, _ in evictions(cluster, since)} == {f"{TENANT}/greedy"}
    assert pod_deletions(cluster, since) == []
    assert terminating(cluster, TENANT, OTHER) == []
    assert limit(OTHER, "db") == "3", "the other team's pod keeps its CPU"
