"""A blocked eviction through the QoS loop: what is written, posted and counted.

Node w1 (8 cores) uses 7 against a 6-core waterline: gap 1.1 cores. A tenant's Burstable pod
(1.5 cores used, limit 2) is first in line and its PodDisruptionBudget blocks the eviction;
another team's Guaranteed pod (3 cores) ranks after it, and would close the gap alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.loops.qos import QosLoop
from sharekeeper.model.objects import rfc3339
from sharekeeper.model.records import OwnRecord

NOW = 1_795_000_000
BUDGET = (
    "429: Cannot evict pod as it would violate the pod's disruption budget. "
    "The disruption budget keep-me needs 1 healthy pods and has 1 currently"
)
EVICT = {"name": "evict", "eviction": {"terminationGracePeriodSeconds": 30}}
THROTTLE = {
    "name": "throttle",
    "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 20}},
}


class Cluster:
    """Actuator and writer at once, playing an API server where ``tenant/greedy`` has a budget
    that allows no disruption."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.statuses: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, str, str, bool]] = []

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[str, str]:
        self.calls.append(f"evict {namespace}/{name}")
        if f"{namespace}/{name}" == "tenant/greedy":
            return "blocked", BUDGET
        return "accepted", "evicted"

    async def resize_cpu_limits(self, namespace: str, name: str, parts: Any) -> str | None:
        self.calls.append(f"throttle {namespace}/{name} {sum(parts.values())}m {dict(parts)}")
        return None

    async def set_taints(self, node: str, taints: Any, resource_version: str) -> None:
        pass

    async def event(self, target: Any, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append((f"{target['kind']}/{target['name']}", reason, message, warning))

    async def patch_status(self, kind: Any, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        merged = {**self.statuses.get(name, {}), **patch}
        self.statuses[name] = {k: v for k, v in merged.items() if v is not None}
        return self.statuses[name]

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str]:
        return {k: v for k, v in patch.items() if v is not None}


class Usage:
    def __init__(self, node_cpu: str, pods: dict[tuple[str, str], str]) -> None:
        self.node_cpu = node_cpu
        self.pods = pods

    async def node_metrics(self) -> list[dict[str, Any]]:
        return [{"kind": "NodeMetrics", "metadata": {"name": "w1"},
                 "usage": {"cpu": self.node_cpu, "memory": "8Gi"}}]  # fmt: skip

    async def pod_metrics(self) -> list[dict[str, Any]]:
        return [
            {"kind": "PodMetrics", "metadata": {"name": name, "namespace": namespace},
             "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": "100Mi"}}]}
            for (namespace, name), cpu in self.pods.items()
        ]  # fmt: skip


def pod(namespace: str, name: str, qos: str, requests: str, limits: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "creationTimestamp": "2026-11-21T10:00:00Z"},
        "spec": {"nodeName": "w1", "priority": 0, "containers": [{
            "name": "main", "image": "example/app:1",
            "resources": {"requests": {"cpu": requests, "memory": "1Gi"},
                          "limits": {"cpu": limits, "memory": "1Gi"}},
        }]},
        "status": {"phase": "Running", "qosClass": qos, "startTime": "2026-11-21T10:00:00Z"},
    }  # fmt: skip


def loop(actions: list[dict[str, Any]], cluster: Cluster) -> QosLoop:
    rules = [
        {"name": a["name"], "metricRule": {"name": "cpu_total_usage", "value": "6"},
         "actionName": a["name"]}
        for a in actions
    ]  # fmt: skip
    store = ClusterStore()
    store.load(
        [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w1"},
             "status": {"capacity": {"cpu": "8", "memory": "32Gi"},
                        "allocatable": {"cpu": "8", "memory": "32Gi"}}},
            pod("tenant", "greedy", "Burstable", "100m", "2"),
            pod("other", "db", "Guaranteed", "3", "3"),
        ]
    )  # fmt: skip
    spec = {"objectiveEnsurances": rules, "actions": actions}
    store.qos_policies.records["guard"] = OwnRecord(
        "guard", "uid-guard", 1, {"metadata": {"name": "guard"}, "spec": spec}, {}
    )
    usage = Usage("7", {("tenant", "greedy"): "1500m", ("other", "db"): "3"})
    return QosLoop(cluster, usage, store, clock=lambda: NOW)


def blocked_count() -> float:
    labels = {"metric": "cpu_total_usage"}
    return REGISTRY.get_sample_value("sharekeeper_qos_evictions_blocked_total", labels) or 0.0


def test_a_blocked_pod_is_throttled_instead_and_nobody_is_evicted_in_its_place() -> None:
    cluster = Cluster()
    before = blocked_count()
    asyncio.run(loop([EVICT, THROTTLE], cluster).check())
    # One step of 20 % from what it uses (1.5 cores): 1.2, through the resize path.
    assert cluster.calls == ["evict tenant/greedy", "throttle tenant/greedy 1200m {'main': 1200}"]
    (entry,) = cluster.statuses["guard"]["nodes"]
    assert entry["throttled"] == [
        {"pod": "tenant/greedy", "uid": "uid-greedy", "originalLimit": "2", "limit": "1200m"}
    ]
    (blocked,) = entry["blockedEvictions"]
    assert blocked == {
        "pod": "tenant/greedy",
        "uid": "uid-greedy",
        "metric": "cpu_total_usage",
        "message": BUDGET,
        "time": rfc3339(NOW),
    }
    outcomes = [(a["kind"], a["pod"], a["outcome"]) for a in entry["lastActions"]]
    assert outcomes == [
        ("throttle", "tenant/greedy", "Done"),
        ("evict", "tenant/greedy", f"Blocked: {BUDGET}"),
    ]
    assert blocked_count() == before + 1


def test_the_refusal_is_a_warning_on_the_pod_the_node_and_the_policy() -> None:
    cluster = Cluster()
    asyncio.run(loop([EVICT], cluster).check())
    assert cluster.calls == ["evict tenant/greedy"], "only reported: the policy does not throttle"
    blocked = [(target, warning) for target, reason, _, warning in cluster.events
               if reason == "EvictionBlocked"]  # fmt: skip
    assert blocked == [
        ("Pod/greedy", True),
        ("Node/w1", True),
        ("NodeQosEnsurancePolicy/guard", True),
    ]
    message = next(m for _, reason, m, _ in cluster.events if reason == "EvictionBlocked")
    assert "keep-me needs 1 healthy pods" in message
    assert "no pod ranked after it is evicted in its place" in message
    assert not [e for e in cluster.events if e[1] in ("Evicted", "EvictedRefused")]
    (entry,) = cluster.statuses["guard"]["nodes"]
    assert "throttled" not in entry
    assert "evictions stop at tenant/greedy, whose eviction was refused" in entry["message"]
    assert "1100m still to release" in entry["message"]


def test_the_next_check_is_blocked_again_and_never_evicts_the_other_team() -> None:
    cluster = Cluster()
    guard = loop([EVICT, THROTTLE], cluster)
    for _ in range(3):
        asyncio.run(guard.check())
        guard.store.qos_policies.records["guard"] = OwnRecord(
            "guard", "uid-guard", 1, guard.store.qos_policies.records["guard"].spec,
            cluster.statuses["guard"],
        )  # fmt: skip
    assert [c for c in cluster.calls if c.startswith("evict")] == ["evict tenant/greedy"] * 3
    # Stepped down from the recorded limit each check, the record kept by UID.
    (entry,) = cluster.statuses["guard"]["nodes"]
    (record,) = entry["throttled"]
    assert (record["uid"], record["originalLimit"]) == ("uid-greedy", "2")
    assert [c.split()[2] for c in cluster.calls if c.startswith("throttle")] == [
        "1200m", "960m", "768m"
    ]  # fmt: skip
