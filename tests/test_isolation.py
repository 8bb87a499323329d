"""One malformed object never stops anything for anyone else: it is reported on itself (an
Invalid condition where it has a status; a log line and ``sharekeeper_unreadable_objects``
in every case) and left out, and the round or the QoS check goes on for every other object.

One test per kind: Queue, SchedulerPolicy, NodeQosEnsurancePolicy (custom resources), a pod's
QoS field (its start time), a Node, and a NodeMetrics.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from builders import node, pod, policy, queue
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.loops.qos import QosLoop
from sharekeeper.loops.recompute import Recompute
from sharekeeper.model.objects import MutableObj
from sharekeeper.publish.statuses import Kind

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "qos-check.yaml"
NOW = 1_795_000_000


def unreadable(kind: str) -> float | None:
    return REGISTRY.get_sample_value("sharekeeper_unreadable_objects", {"kind": kind})


def condition(status: MutableObj, kind: str) -> MutableObj:
    return next(c for c in status["conditions"] if c["type"] == kind)


# --- Queue and SchedulerPolicy: the share round ------------------------------------------------


class Writer:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], MutableObj] = {}
        self.events: list[tuple[str, str, str]] = []

    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
        merged = {**self.stored.get((kind, name), {}), **patch}
        self.stored[(kind, name)] = merged
        return merged

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        return {k: v for k, v in patch.items() if v is not None}

    async def event(
        self, target: dict[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        self.events.append((target["kind"], target["name"], reason))


def share_round(objects: list[dict[str, Any]]) -> Writer:
    store = ClusterStore()
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("uid", f"uid-{obj['metadata']['name']}")
    store.load(objects)
    writer = Writer()
    loop = Recompute(writer, store, clock=lambda: NOW)

    async def scenario() -> None:
        await loop.recompute()
        await loop.written()

    asyncio.run(scenario())
    return writer


def share_cluster() -> list[dict[str, Any]]:
    return [
        node("n1", cpu="8", memory="16Gi"),
        pod("p1", "a", node="n1", cpu="2", memory="4Gi"),
        policy("all"),
        queue("a"),
    ]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            queue("bad", weight=0),
            "Queue bad: spec.weight: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            queue("bad", capability={"cpu": "lots"}),
            "Queue bad: spec.capability.cpu: must be a non-negative Kubernetes quantity",
        ),
        (
            {
                **queue("bad"),
                "spec": {"guarantee": {"resource": {"cpu": "9"}}, "capability": {"cpu": "8"}},
            },
            "Queue bad: spec: guarantee must not exceed capability",
        ),
        # Found: 9Ei overflowed int64 and froze every queue's status.
        (queue("bad", capability={"cpu": "9Ei"}), "Queue bad: spec.capability.cpu:"),
        (queue("bad", guarantee={"memory": "8Ei"}), "Queue bad: spec.guarantee.resource.memory:"),
    ],
    ids=["weight", "quantity", "guarantee-above-capability", "huge-capability", "huge-guarantee"],
)
def test_an_unreadable_queue_is_invalid_and_the_others_get_their_shares(
    bad: dict[str, Any], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        writer = share_round([*share_cluster(), bad])
    invalid = condition(writer.stored[("Queue", "bad")], "Invalid")
    assert invalid["status"] == "True"
    assert message in invalid["message"]
    assert ("Queue", "bad", "Invalid") in writer.events  # an Event on the object
    assert condition(writer.stored[("Queue", "bad")], "Ready")["status"] == "False"
    assert writer.stored[("Queue", "a")]["deserved"] == {"cpu": "2", "memory": "4Gi"}
    assert message in caplog.text
    assert unreadable("Queue") == 1


@pytest.mark.parametrize("request_", [{"cpu": "10P"}, {"memory": "8Ei"}])
def test_a_pod_beyond_the_quantity_bound_is_left_out_and_every_queue_still_computes(
    request_: dict[str, str],
) -> None:
    """Found: one tenant pod requesting ``cpu: 10P`` overflowed int64, every share round failed
    and every queue kept a stale ``Ready=True``."""
    writer = share_round([*share_cluster(), pod("greedy", "a", **request_)])
    assert writer.stored[("Queue", "a")]["deserved"] == {"cpu": "2", "memory": "4Gi"}
    assert condition(writer.stored[("Queue", "a")], "Ready")["status"] == "True"
    assert unreadable("Pod") == 1


def test_guarantees_summing_beyond_int64_do_not_wrap_around() -> None:
    """Found: two ``4Ei`` guarantees gave ``totalGuarantee: -8Ei`` and "GuaranteesFit". At the
    bound (4P each), three cpu guarantees sum beyond int64: the sum saturates instead."""
    queues = [queue(f"g{i}", guarantee={"cpu": "4P"}) for i in range(3)]
    writer = share_round([*share_cluster(), *queues])
    status = writer.stored[("SchedulerPolicy", "all")]
    assert not status["totalGuarantee"]["cpu"].startswith("-")
    assert condition(status, "GuaranteeUnsatisfiable")["status"] == "True"


def test_an_unreadable_scheduler_policy_is_invalid_and_the_others_go_on() -> None:
    bad = policy("bad", queue_selector={"matchLabels": {"team": "x"}})
    bad["spec"]["overcommit"] = {"factors": {"cpu": 0.5}}
    writer = share_round([*share_cluster(), bad])
    invalid = condition(writer.stored[("SchedulerPolicy", "bad")], "Invalid")
    assert (
        "SchedulerPolicy bad: spec.overcommit.factors.cpu: Input should be greater than or "
        "equal to 1 (got 0.5)" in invalid["message"]
    )
    assert writer.stored[("SchedulerPolicy", "all")]["queues"] == 1
    assert writer.stored[("Queue", "a")]["policy"] == "all"
    assert unreadable("SchedulerPolicy") == 1


# --- the QoS check --------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.evicted: list[str] = []
        self.statuses: dict[str, MutableObj] = {}

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[str, str]:
        self.evicted.append(f"{namespace}/{name}")
        return "accepted", "evicted"

    async def resize_cpu_limits(self, namespace: str, name: str, parts: Any) -> str | None:
        return None

    async def set_taints(self, node: str, taints: Any, resource_version: str) -> None:
        pass

    async def event(self, target: Any, reason: str, message: str, *, warning: bool = False) -> None:
        pass

    async def patch_status(self, kind: Any, name: str, patch: MutableObj) -> MutableObj:
        self.statuses[name] = {**self.statuses.get(name, {}), **patch}
        return self.statuses[name]

    async def patch_node_annotations(self, name: str, patch: dict[str, str | None]) -> MutableObj:
        return {k: v for k, v in patch.items() if v is not None}


class Usage:
    def __init__(self, docs: list[MutableObj]) -> None:
        self.docs = docs

    async def node_metrics(self) -> list[MutableObj]:
        return [d for d in self.docs if d["kind"] == "NodeMetrics"]

    async def pod_metrics(self) -> list[MutableObj]:
        return [d for d in self.docs if d["kind"] == "PodMetrics"]


def example() -> list[MutableObj]:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    for doc in docs:
        doc["metadata"].setdefault("uid", f"uid-{doc['metadata']['name']}")
    return docs


def qos_check(docs: list[MutableObj]) -> Recorder:
    store = ClusterStore()
    store.load(d for d in docs if d["kind"] not in ("NodeMetrics", "PodMetrics"))
    recorder = Recorder()
    asyncio.run(QosLoop(recorder, Usage(docs), store, clock=lambda: NOW).check())
    return recorder


def test_the_example_evicts_one_pod() -> None:
    """The baseline the tests below break one object of."""
    assert qos_check(example()).evicted == ["batch/batch-0"]


def test_an_unreadable_qos_policy_is_invalid_and_the_valid_one_still_acts() -> None:
    docs = example()
    bad = copy.deepcopy(next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy"))
    bad["metadata"] = {"name": "broken", "uid": "uid-broken"}
    bad["spec"]["objectiveEnsurances"][0]["actionName"] = "nothing"
    recorder = qos_check([*docs, bad])
    assert recorder.evicted == ["batch/batch-0"]
    invalid = condition(recorder.statuses["broken"], "Invalid")
    assert invalid["status"] == "True"
    assert (
        "NodeQosEnsurancePolicy broken: spec: every objectiveEnsurances[].actionName must "
        "be the name of an entry in spec.actions (missing: nothing)" in invalid["message"]
    )
    assert recorder.statuses["cpu-guard"]["matchedNodes"] == 1
    assert unreadable("NodeQosEnsurancePolicy") == 1


def test_a_pod_with_a_malformed_qos_field_is_left_alone_and_the_check_goes_on() -> None:
    docs = example()
    target = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "batch-0")
    target["status"]["startTime"] = "not a time"
    recorder = qos_check(docs)
    assert recorder.evicted, "the check still acts"
    assert "batch/batch-0" not in recorder.evicted
    assert unreadable("Pod") == 1


def test_an_unreadable_node_is_left_out_and_the_others_are_checked() -> None:
    docs = example()
    worker = next(d for d in docs if d["kind"] == "Node")
    broken = copy.deepcopy(worker)
    broken["metadata"] = {"name": "worker-9", "labels": {"tier": 1}}  # not a string
    recorder = qos_check([*docs, broken])
    assert recorder.evicted == ["batch/batch-0"]
    assert [n["name"] for n in recorder.statuses["cpu-guard"]["nodes"]] == ["worker-1"]
    assert unreadable("Node") == 1


def test_malformed_node_metrics_make_only_that_nodes_usage_unknown() -> None:
    docs = example()
    worker = next(d for d in docs if d["kind"] == "Node")
    other = copy.deepcopy(worker)
    other["metadata"] = {"name": "worker-2", "labels": {}}
    docs.append(other)
    docs.append(
        {"kind": "NodeMetrics", "metadata": {"name": "worker-2"}, "usage": {"cpu": "a lot"}}
    )
    recorder = qos_check(docs)
    assert recorder.evicted == ["batch/batch-0"]
    names = [n["name"] for n in recorder.statuses["cpu-guard"]["nodes"]]
    assert names == ["worker-1", "worker-2"]


def test_a_queue_with_an_invalid_parent_is_told_and_the_others_get_their_shares() -> None:
    lost = queue("lost")
    lost["spec"]["parent"] = "nowhere"
    writer = share_round([*share_cluster(), lost])
    assert ("Queue", "lost", "InvalidParent") in writer.events
    assert condition(writer.stored[("Queue", "lost")], "Ready")["reason"] == "InvalidParent"
    assert writer.stored[("Queue", "a")]["deserved"]["cpu"] == "2"
