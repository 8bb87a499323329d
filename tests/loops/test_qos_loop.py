"""The QoS loop with a recording actuator and writer: what it does, and what it leaves alone.

The cluster is examples/qos-check.yaml: worker-1 at 6.5 cores against a 6-core evict rule.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.kube.usage import UsageUnavailable
from sharekeeper.loops.qos import QosLoop
from sharekeeper.model.objects import rfc3339
from sharekeeper.model.qos import TAINT, WATERLINES_ANNOTATION
from sharekeeper.model.records import OwnRecord

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qos-check.yaml"
NOW = 1_795_000_000


class Recorder:
    """Actuator and writer at once; ``refuse`` names pods whose eviction a PDB blocks."""

    def __init__(self, refuse: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.refuse = refuse
        self.evicted: list[str] = []
        self.statuses: dict[str, dict[str, Any]] = {}
        self.status_patches = 0
        self.annotation_patches: list[tuple[str, dict[str, str | None]]] = []
        self.taints: list[tuple[str, bool]] = []
        self.events: list[str] = []
        self.uids: dict[str, str] = {}

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[str, str]:
        if f"{namespace}/{name}" in self.refuse:
            budget = "429: Cannot evict pod as it would violate the pod's disruption budget."
            return "blocked", budget
        self.evicted.append(f"{namespace}/{name}")
        return "accepted", "evicted"

    async def resize_cpu_limits(self, namespace: str, name: str, parts: Any) -> str | None:
        raise AssertionError("no throttle rule in this example")

    async def set_taints(self, node: str, taints: Any, resource_version: str) -> None:
        self.taints.append((node, any(t["key"] == TAINT["key"] for t in taints)))

    async def event(self, target: Any, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append(f"{target['kind']}/{target['name']}: {reason}")
        self.uids[f"{target['kind']}/{target['name']}"] = target.get("uid", "")

    async def patch_status(self, kind: Any, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.status_patches += 1
        merged = {**self.statuses.get(name, {}), **patch}
        self.statuses[name] = {k: v for k, v in merged.items() if v is not None}
        return self.statuses[name]

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str]:
        self.annotation_patches.append((name, patch))
        return {k: v for k, v in patch.items() if v is not None}


class Usage:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    async def node_metrics(self) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == "NodeMetrics"]

    async def pod_metrics(self) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == "PodMetrics"]


def example() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]


def loop_for(
    docs: list[dict[str, Any]],
    recorder: Recorder,
    status: dict[str, Any] | None = None,
    *,
    now: int = NOW,
) -> QosLoop:
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    store = ClusterStore()
    store.load(d for d in docs if d["kind"] in ("Node", "Pod"))
    record = OwnRecord(
        "cpu-guard",
        "uid-1",
        1,
        {"metadata": {"name": "cpu-guard"}, "spec": policy["spec"]},
        status or {},
    )
    store.qos_policies.records["cpu-guard"] = record
    return QosLoop(recorder, Usage(docs), store, clock=lambda: now)


def test_a_blocked_eviction_stops_there_and_does_not_count() -> None:
    recorder = Recorder(refuse={"batch/batch-0"})
    docs = example()
    for doc in docs:
        if doc["kind"] == "Pod":
            doc["metadata"]["uid"] = f"uid-{doc['metadata']['name']}"
    asyncio.run(loop_for(docs, recorder).check())
    # batch-0 (900m) is protected by its budget: batch-2 (600m), ranked after it, is not
    # evicted in its place, and the release that never happened is not counted.
    assert recorder.evicted == []
    entry = recorder.statuses["cpu-guard"]["nodes"][0]
    assert [(a["pod"], a["outcome"].split(":")[0]) for a in entry["lastActions"]] == [
        ("batch/batch-0", "Blocked"),
    ]
    assert "Pod/batch-0: EvictionBlocked" in recorder.events
    assert "Node/worker-1: EvictionBlocked" in recorder.events
    assert "NodeQosEnsurancePolicy/cpu-guard: EvictionBlocked" in recorder.events
    # The pod's Event names its UID: `kubectl describe pod` asks for the Events of that UID.
    assert recorder.uids["Pod/batch-0"] == "uid-batch-0"
    assert recorder.taints == [("worker-1", True)]


def test_a_calm_cluster_causes_no_writes() -> None:
    docs = example()
    next(d for d in docs if d["kind"] == "NodeMetrics")["usage"]["cpu"] = "3"
    recorder = Recorder()
    loop = loop_for(docs, recorder)
    asyncio.run(loop.check())
    first = recorder.status_patches
    asyncio.run(loop.check())
    asyncio.run(loop.check())
    assert recorder.evicted == []
    assert recorder.status_patches == first, (
        "counters saturate: nothing changes, nothing is written"
    )
    assert recorder.annotation_patches == []
    assert recorder.taints == []


def test_a_restart_continues_the_episode_from_status() -> None:
    first = Recorder()
    asyncio.run(loop_for(example(), first).check())
    docs = [d for d in example() if d["metadata"]["name"] != "batch-0"]
    # A minute later, a sample begun after batch-0's deletion deadline: what it shows is real.
    sample = next(d for d in docs if d["kind"] == "NodeMetrics")
    sample["timestamp"], sample["usage"]["cpu"] = rfc3339(NOW + 55), "6300m"
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["spec"]["objectiveEnsurances"][0]["avoidanceThreshold"] = 3
    second = Recorder()
    # A new loop (a restarted operator) that only has what the first one persisted.
    status = first.statuses["cpu-guard"]
    asyncio.run(loop_for(docs, second, status=status, now=NOW + 60).check())
    assert second.evicted == ["batch/batch-2"]  # still triggered: no three new hot checks needed


def test_a_failing_check_marks_the_policy_stale_until_a_check_succeeds() -> None:
    class BrokenUsage(Usage):
        broken = True

        async def node_metrics(self) -> list[dict[str, Any]]:
            if self.broken:
                raise RuntimeError("metrics adapter returned garbage")
            return await super().node_metrics()

    docs = example()
    recorder = Recorder()
    loop = loop_for(docs, recorder)
    usage = BrokenUsage(docs)
    loop.usage = usage

    async def scenario() -> None:
        loop.store_synced.set()
        task = asyncio.create_task(loop.run())
        await asyncio.sleep(0.05)
        conditions = {c["type"]: c for c in recorder.statuses["cpu-guard"]["conditions"]}
        assert conditions["Stale"]["status"] == "True"
        assert "RuntimeError: metrics adapter returned garbage" in conditions["Stale"]["message"]
        assert conditions["Ready"]["status"] == "False"
        usage.broken = False
        await loop.check()  # what the next interval does
        task.cancel()

    asyncio.run(scenario())
    types = {c["type"] for c in recorder.statuses["cpu-guard"]["conditions"]}
    assert "Stale" not in types


def test_usage_unavailable_is_said_once_and_no_policy_needs_no_usage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: without metrics-server, or without any policy, a warning every 10 s."""

    class NoMetricsServer(Usage):
        asked = 0

        async def node_metrics(self) -> list[dict[str, Any]]:
            self.asked += 1
            raise UsageUnavailable("metrics.k8s.io is not served")

    docs = example()
    recorder = Recorder()
    loop = loop_for(docs, recorder)
    usage = NoMetricsServer(docs)
    loop.usage = usage
    with caplog.at_level(logging.INFO, logger="sharekeeper.loops.qos"):
        for _ in range(3):
            asyncio.run(loop.check())
    assert [r.getMessage() for r in caplog.records if "usage unavailable" in r.getMessage()] == [
        "usage unavailable, nothing is acted on: metrics.k8s.io is not served"
    ]
    ready = next(c for c in recorder.statuses["cpu-guard"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MetricsUnavailable")

    loop.store.qos_policies.records.clear()
    asked = usage.asked
    asyncio.run(loop.check())
    assert usage.asked == asked, "no policy: usage is not read at all"


def test_usage_unavailable_is_a_condition_on_every_policy_and_a_gauge() -> None:
    """The policies say it all along (not only the log, once): ``UsageAvailable`` False while
    metrics.k8s.io cannot be read, True again once it can; ``sharekeeper_usage_available``."""

    class Flaky(Usage):
        served = False

        async def node_metrics(self) -> list[dict[str, Any]]:
            if not self.served:
                raise UsageUnavailable("metrics.k8s.io is not served", code=404)
            return await super().node_metrics()

    docs = example()
    recorder = Recorder()
    loop = loop_for(docs, recorder)
    usage = Flaky(docs)
    loop.usage = usage

    def condition(kind: str) -> dict[str, Any]:
        conditions = recorder.statuses["cpu-guard"]["conditions"]
        found: dict[str, Any] = next(c for c in conditions if c["type"] == kind)
        return found

    def gauge() -> float | None:
        return REGISTRY.get_sample_value("sharekeeper_usage_available")

    asyncio.run(loop.check())
    unavailable = condition("UsageAvailable")
    assert (unavailable["status"], unavailable["reason"]) == ("False", "MetricsUnavailable")
    assert "metrics.k8s.io is not served (HTTP 404)" in unavailable["message"]
    assert gauge() == 0
    assert recorder.evicted == [], "nothing is acted on blind"
    usage.served = True
    asyncio.run(loop.check())
    assert (condition("UsageAvailable")["status"], condition("Ready")["status"]) == ("True", "True")
    assert gauge() == 1


def test_unreadable_node_usage_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    docs = example()
    next(d for d in docs if d["kind"] == "NodeMetrics")["usage"]["cpu"] = "lots"
    loop = loop_for(docs, Recorder())
    with caplog.at_level(logging.INFO, logger="sharekeeper.loops.qos"):
        for _ in range(3):
            asyncio.run(loop.check())
        next(d for d in docs if d["kind"] == "NodeMetrics")["usage"]["cpu"] = "3"
        asyncio.run(loop.check())
    said = [r.getMessage() for r in caplog.records if "worker-1" in r.getMessage()]
    assert len(said) == 2
    assert said[0].startswith("usage of node worker-1 cannot be read: ")
    assert said[1] == "usage of node worker-1 can be read again"


def test_a_node_that_becomes_calm_loses_the_waterlines_annotation() -> None:
    """The annotation says which waterlines are in force (for node agents); a calm node has
    none, so one published while it was hot is removed, and none is written while it is calm."""
    docs = example()
    node = next(d for d in docs if d["kind"] == "Node")
    node["metadata"]["annotations"] = {
        WATERLINES_ANNOTATION: '{"evict.cpu_total_usage":"6"}',
        "other.io/keep": "yes",
    }
    next(d for d in docs if d["kind"] == "NodeMetrics")["usage"]["cpu"] = "3"
    recorder = Recorder()
    asyncio.run(loop_for(docs, recorder).check())
    assert recorder.annotation_patches == [("worker-1", {WATERLINES_ANNOTATION: None})]


def test_checks_on_a_sample_older_than_the_eviction_evict_nothing_more() -> None:
    """metrics-server samples every 15 s or so and a pod takes its grace period to stop: the
    checks in between see the evicted pod's usage still in the node's. They used to evict the
    next pod each time (batch-2, then batch-4 and batch-6, for one gap of 550m)."""
    docs = example()
    for doc in docs:
        if doc["kind"] == "Pod":
            doc["metadata"]["uid"] = f"uid-{doc['metadata']['name']}"
    sample = next(d for d in docs if d["kind"] == "NodeMetrics")
    sample["timestamp"], sample["window"] = rfc3339(NOW - 5), "10s"
    recorder = Recorder()
    clock = [NOW]
    loop = loop_for(docs, recorder)
    loop.clock = lambda: clock[0]
    asyncio.run(loop.check())
    assert recorder.evicted == ["batch/batch-0"]
    # The eviction is accepted: the pod terminates (the action's 30 s), the sample is the same.
    victim = next(d for d in docs if d["metadata"]["name"] == "batch-0")
    dying = {**victim, "metadata": {**victim["metadata"], "deletionTimestamp": rfc3339(NOW + 30)}}
    loop.store.pods.event("MODIFIED", dying)
    clock[0] = NOW + 10
    asyncio.run(loop.check())
    assert recorder.evicted == ["batch/batch-0"]
    entry = recorder.statuses["cpu-guard"]["nodes"][0]
    assert entry["gaps"][0]["leaving"] == "900m"
    assert [r["pod"] for r in entry["releasing"]] == ["batch/batch-0"]
    # The pod is gone; the sample is still the same. A restarted operator knows it too.
    loop.store.pods.event("DELETED", dying)
    clock[0] = NOW + 20
    restarted = loop_for(docs, recorder, status=recorder.statuses["cpu-guard"])
    restarted.store.pods.event("DELETED", dying)
    restarted.clock = lambda: clock[0]
    asyncio.run(restarted.check())
    assert recorder.evicted == ["batch/batch-0"]
    # A sample begun after the pod stopped, still above 6 cores: what is left is real.
    sample["timestamp"], sample["usage"]["cpu"] = rfc3339(NOW + 38), "6300m"
    clock[0] = NOW + 40
    asyncio.run(restarted.check())
    assert recorder.evicted == ["batch/batch-0", "batch/batch-2"]
    entry = recorder.statuses["cpu-guard"]["nodes"][0]
    assert [r["pod"] for r in entry["releasing"]] == ["batch/batch-2"]


def test_usage_stamped_ahead_of_our_clock_is_said_once_and_measured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    docs = example()
    sample = next(d for d in docs if d["kind"] == "NodeMetrics")
    loop = loop_for(docs, Recorder())

    def check_stamped(at: int) -> float | None:
        sample["timestamp"] = rfc3339(at)
        asyncio.run(loop.check())
        return REGISTRY.get_sample_value("sharekeeper_qos_usage_clock_ahead_seconds")

    def said(text: str) -> int:
        return sum(text in record.getMessage() for record in caplog.records)

    with caplog.at_level(logging.INFO, logger="sharekeeper.loops.qos"):
        assert check_stamped(NOW - 20) == 0  # an older sample: the usual case
        assert check_stamped(NOW + 40) == 40
        assert check_stamped(NOW + 41) == 41
        assert said("usage is stamped 40s ahead of this operator's clock") == 1
        assert said("usage is stamped 41s ahead") == 0  # once, not at every check
        assert check_stamped(NOW + 2) == 2  # within the settle margin: in step
        assert said("in step with this operator's clock again") == 1
