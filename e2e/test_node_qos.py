"""Node QoS ensurance on a real API server, with the operator under its own RBAC.

Usage comes from a stand-in metrics-server registered with the real aggregation layer (see
``metrics_server.py``): the operator reads it through the API server exactly as it would read
metrics-server. The test plays the node: it sets usage, and lowers it when a pod is evicted
or throttled, as the kubelet's numbers would. There is no kubelet, so an evicted pod stays
Terminating (its 30 s grace period never ends) instead of disappearing.

The stand-in stays here because these tests need usage they set exactly (which pod ranks
first, a gap closed by one eviction, usage that goes missing) and, for the last one, a
thousand nodes. Throttling through ``pods/resize`` and restoring, with real usage, is tested
on the real node (``test_qos_real_node.py``).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from clusters import TARGET, Cluster
from metrics_server import MetricsServer
from objects import NAMESPACE, node, status
from operating import Operator, describe_writes, eventually, operator_writes, start_operator
from qosing import EVICT, more_checks, node_entry

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="needs the stand-in metrics-server of the local control plane"
)

TAINT_KEY = "sharekeeper.io/interference"


def qos_policy(
    name: str,
    *,
    value: str = "6",
    action: dict[str, Any],
    avoidance: int = 1,
    restore: int = 1,
    strategy: str = "None",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "ensurance.sharekeeper.io/v1alpha1",
        "kind": "NodeQosEnsurancePolicy",
        "metadata": {"name": name},
        "spec": {
            "checkIntervalSeconds": 2,
            "objectiveEnsurances": [
                {
                    "name": "cpu",
                    "metricRule": {"name": "cpu_total_usage", "value": value},
                    "avoidanceThreshold": avoidance,
                    "restoreThreshold": restore,
                    "actionName": action["name"],
                    "strategy": strategy,
                }
            ],
            "actions": [action],
            **spec,
        },
    }


def workload(
    name: str, *, cpu_limit: str | None = None, priority_class: str | None = None, **labels: str
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu_limit:
        resources = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": cpu_limit}}
    spec: dict[str, Any] = {
        "nodeName": "w1",
        "containers": [{"name": "main", "image": "example/batch:1", "resources": resources}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


def pod_state(cluster: Cluster, name: str) -> dict[str, Any]:
    result = cluster.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def evicted(cluster: Cluster) -> list[str]:
    pods = cluster.get("pods", "-n", NAMESPACE)["items"]
    return sorted(p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp"))


def taints(cluster: Cluster) -> list[str]:
    return [t["key"] for t in cluster.get("node", "w1")["spec"].get("taints", [])]


@pytest.fixture(autouse=True)
def explain_failures(
    request: pytest.FixtureRequest, cluster_with: Cluster, operator: Operator
) -> Iterator[None]:
    """On failure, print what the operator saw and did: the policies' status and its log."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        policies = cluster_with.get("nodeqosensurancepolicies")["items"]
        print(json.dumps({p["metadata"]["name"]: p.get("status") for p in policies}, indent=1))
        print("evicted:", evicted(cluster_with))
        print(operator.tail(80))


@pytest.fixture
def hot_node(cluster_with: Cluster, metrics: MetricsServer) -> Cluster:
    return make_hot_node(cluster_with, metrics)


def make_hot_node(cluster_with: Cluster, metrics: MetricsServer) -> Cluster:
    """w1: 8 cores, 6.5 in use. Four candidates (usage): BestEffort a (900m), b (600m),
    c (300m), and Burstable d (1 core, so ranked after every BestEffort pod)."""
    cluster_with.kubectl(
        "apply", "-f", "-",
        input=json.dumps({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": "important"}, "value": 5000}),
    )  # fmt: skip
    cluster_with.apply(
        node("w1", cpu="8", memory="32Gi"),
        workload("a", app="a"),
        workload("b", app="b"),
        workload("c", app="c"),
        workload("d", cpu_limit="2", app="d"),
        workload("vip", priority_class="important", app="vip"),  # above maxPriority 999
    )
    # Playing the kubelet: running pods (the Eviction API ignores budgets for Pending ones).
    running = json.dumps({"status": {"phase": "Running", "startTime": "2026-11-21T10:00:00Z"}})
    for name in ("a", "b", "c", "d", "vip"):
        cluster_with.kubectl(
            "patch", "pod", name, "-n", NAMESPACE, "--subresource=status", "--type=merge",
            "-p", running,
        )  # fmt: skip
    metrics.set_node("w1", cpu="6500m", memory="8Gi")
    for name, cpu in (("a", "900m"), ("b", "600m"), ("c", "300m"), ("d", "1"), ("vip", "2")):
        metrics.set_pod(NAMESPACE, name, {"main": {"cpu": cpu, "memory": "100Mi"}})
    return cluster_with


def test_eviction_takes_the_lowest_ranked_busiest_pod_and_stops_at_the_waterline(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    hot_node.apply(qos_policy("guard", action=EVICT, avoidance=2))
    # Gap (6.5 - 6) x 1.1 = 550m: BestEffort pods go first, the busiest first; a alone does it.
    eventually(lambda: evicted(hot_node) == ["a"], timeout=30)
    metrics.remove_pod(NAMESPACE, "a")
    metrics.set_node("w1", cpu="5600m", memory="8Gi")

    def acted() -> dict[str, Any]:
        # The check writes its status after the eviction and its Events; a later calm check
        # changes the rule's phase but keeps the last actions.
        entry = node_entry(hot_node, "guard")
        actions = [(a["pod"], a["outcome"]) for a in entry.get("lastActions", [])]
        assert actions == [(f"{NAMESPACE}/a", "Done")], entry
        return entry

    entry = eventually(acted, timeout=10)
    assert entry["lastActions"][0]["released"] == "900m"
    eventually(lambda: node_entry(hot_node, "guard")["rules"][0]["observation"] == "Calm")
    assert evicted(hot_node) == ["a"]
    selector = "involvedObject.name=a,reason=Evicted"
    events = hot_node.kubectl(
        "get", "events", "-n", NAMESPACE, "--field-selector", selector, "-o", "name"
    ).stdout
    assert events.strip(), "the evicted pod carries an Event"


def test_a_sample_older_than_the_eviction_evicts_nothing_more(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    """metrics-server samples every 15 s or so, and an evicted pod takes its grace period to
    stop: checks in between see its usage still in the node's. They used to evict the next
    pod at each check. Here the node's sample stays the one from before the eviction."""
    hot_node.apply(qos_policy("guard", action=EVICT))
    eventually(lambda: evicted(hot_node) == ["a"], timeout=30)
    more_checks(operator, 5)  # a terminating, the sample unchanged
    assert evicted(hot_node) == ["a"]
    entry = node_entry(hot_node, "guard")
    assert entry["gaps"][0]["leaving"] == "900m", entry
    # Playing the kubelet: a stops and goes; the node's sample is still the old one.
    hot_node.kubectl("delete", "pod", "a", "-n", NAMESPACE, "--grace-period=0", "--force")
    metrics.remove_pod(NAMESPACE, "a")

    def found_gone() -> str:
        (release,) = node_entry(hot_node, "guard")["releasing"]
        assert release["pod"] == f"{NAMESPACE}/a"
        assert "goneAt" in release, release
        return str(release["goneAt"])

    gone_at = datetime.fromisoformat(eventually(found_gone, timeout=30))
    more_checks(operator, 3)
    assert evicted(hot_node) == []  # a is gone, and nothing else was evicted
    # A sample whose 10 s window began after a stopped, still above 6 cores: b (600m) goes for
    # the 330m left, and nothing more.
    metrics.set_node("w1", cpu="6300m", memory="8Gi", timestamp=gone_at + timedelta(seconds=11))
    eventually(lambda: evicted(hot_node) == ["b"], timeout=30)
    more_checks(operator, 3)
    assert evicted(hot_node) == ["b"]


def test_a_pod_protected_by_a_disruption_budget_stops_the_evictions(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    # No disruption controller runs here, so the budget allows no disruption at all.
    hot_node.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep-a", "namespace": NAMESPACE},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
        },
        qos_policy("guard", action=EVICT),
    )
    # a is blocked; its 900m is not counted, and b (600m), ranked after it, is not evicted in
    # its place (see test_qos_blocked_evictions.py: a tenant's budget must not pick a victim).
    eventually(lambda: node_entry(hot_node, "guard").get("blockedEvictions"), timeout=30)
    more_checks(operator, 2)
    assert evicted(hot_node) == []
    outcomes = [(a["pod"], a["outcome"][:7]) for a in node_entry(hot_node, "guard")["lastActions"]]
    assert outcomes == [(f"{NAMESPACE}/a", "Blocked")]
    hot_node.kubectl("delete", "pdb", "keep-a", "-n", NAMESPACE)


def test_a_forged_throttle_annotation_does_not_raise_a_limit(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    """Found: ``{"limit": "2", "originalLimit": "64"}`` written by the tenant on its own pod made
    the operator "restore" the pod's CPU limit to 64 cores (the tenant gets 403 on resize)."""
    forged = json.dumps({"originalLimit": "64", "limit": "1"})
    hot_node.kubectl(
        "annotate", "pod", "d", "-n", NAMESPACE, f"sharekeeper.io/cpu-throttle={forged}"
    )
    metrics.set_node("w1", cpu="1", memory="8Gi")  # calm: a restore would run now
    throttle = {"name": "throttle", "throttle": {"cpuThrottle": {"stepCPURatio": 20}}}
    candidates = {"podSelector": {"matchLabels": {"app": "d"}}}
    hot_node.apply(qos_policy("forged", action=throttle, restore=1, candidates=candidates))
    more_checks(operator, 3)
    limits = pod_state(hot_node, "d")["spec"]["containers"][0]["resources"]["limits"]
    assert limits["cpu"] == "2"
    assert "lastActions" not in node_entry(hot_node, "forged")


def test_the_taint_comes_with_the_trigger_and_goes_after_the_cool_down(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    action = {"name": "fence", "disableScheduling": True, "coolDownSeconds": 4}
    hot_node.apply(qos_policy("fence", action=action))
    eventually(lambda: TAINT_KEY in taints(hot_node), timeout=30)
    assert evicted(hot_node) == [], "this action only fences the node"
    metrics.set_node("w1", cpu="3", memory="8Gi")
    eventually(lambda: node_entry(hot_node, "fence")["rules"][0]["phase"] == "Calm", timeout=30)
    assert TAINT_KEY in taints(hot_node), "the cool-down keeps it a little longer"
    eventually(lambda: TAINT_KEY not in taints(hot_node), timeout=30)


def test_preview_reports_the_plan_and_changes_nothing(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    fence_and_evict = {**EVICT, "disableScheduling": True}
    hot_node.apply(qos_policy("look", action=fence_and_evict, strategy="Preview"))
    eventually(lambda: node_entry(hot_node, "look").get("lastActions"), timeout=30)
    entry = node_entry(hot_node, "look")
    assert [(a["pod"], a["outcome"]) for a in entry["lastActions"]] == [
        (f"{NAMESPACE}/a", "Preview")
    ]
    assert evicted(hot_node) == []
    assert TAINT_KEY not in taints(hot_node)


def test_missing_metrics_never_evict_unless_opted_in(
    hot_node: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    hot_node.apply(qos_policy("blind", action=EVICT, restore=5))
    eventually(lambda: evicted(hot_node) == ["a"], timeout=30)  # triggered, a precise eviction
    metrics.remove_node("w1")  # then the node's usage goes missing while the rule is in force
    eventually(
        lambda: (
            "evictOnMissingMetrics is false" in node_entry(hot_node, "blind").get("message", "")
        ),
        timeout=30,
    )
    assert evicted(hot_node) == ["a"]
    hot_node.apply(qos_policy("blind", action=EVICT, restore=5, evictOnMissingMetrics=True))
    # Opted in: every candidate goes, but never vip, whose priority is above maxPriority.
    eventually(lambda: evicted(hot_node) == ["a", "b", "c", "d"], timeout=30)


def test_a_restart_mid_episode_continues_it(
    hot_node: Cluster,
    metrics: MetricsServer,
    operator: Operator,
    operator_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    hot_node.apply(qos_policy("patient", action=EVICT, avoidance=4, checkIntervalSeconds=3))
    eventually(
        lambda: node_entry(hot_node, "patient").get("rules", [{}])[0].get("hotStreak") == 2,
        timeout=30,
    )
    operator.stop(signal.SIGKILL)
    restarted = start_operator(operator_kubeconfig, tmp_path / "restarted.log")
    try:
        # Two more hot checks finish the streak of four; a fresh count would need four.
        eventually(lambda: evicted(hot_node) == ["a"], timeout=30)
        checks = int(restarted.health()["qosChecks"])
    finally:
        restarted.stop(signal.SIGKILL)
    assert checks <= 3, f"the restarted operator needed {checks} checks"


def test_a_calm_thousand_node_cluster_causes_no_writes(
    cluster_with: Cluster, metrics: MetricsServer, operator: Operator
) -> None:
    assert cluster_with.plane is not None
    names = [f"calm-{i:04d}" for i in range(1000)]
    listing = {"apiVersion": "v1", "kind": "List", "items": [node(n, pool="calm") for n in names]}
    cluster_with.kubectl("create", "-f", "-", input=json.dumps(listing), timeout=300)
    for name in names:
        metrics.set_node(name, cpu="1", memory="4Gi")
    cluster_with.apply(
        qos_policy("calm", action=EVICT, nodeSelector={"matchLabels": {"pool": "calm"}})
    )
    eventually(
        lambda: status(cluster_with, "nodeqosensurancepolicy", "calm").get("matchedNodes") == 1000,
        timeout=120,
    )
    checks = int(operator.health()["qosChecks"])
    before = len(operator_writes(cluster_with.plane.audit_log))
    eventually(lambda: int(operator.health()["qosChecks"]) >= checks + 3, timeout=60)
    writes = describe_writes(operator_writes(cluster_with.plane.audit_log)[before:])
    assert writes == [], "three calm checks of 1,000 nodes write nothing"
