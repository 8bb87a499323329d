"""The recompute loop against a recording writer: the writes it makes, and the ones it does not."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from builders import node, pod, policy, queue
from sharekeeper.cluster.snapshots import ClusterIndexes
from sharekeeper.loops.recompute import Recompute
from sharekeeper.model.nodes import node_snapshot
from sharekeeper.model.pods import pod_snapshot
from sharekeeper.model.policies import policy_spec
from sharekeeper.model.queues import queue_snapshot
from sharekeeper.model.records import NodeRecord, OwnRecord
from sharekeeper.publish.diffing import Json, Transition
from sharekeeper.publish.statuses import Kind


class RecordingWriter:
    """Stands in for the API server: stores what it is sent, returns what it stored."""

    def __init__(self) -> None:
        self.patches: list[tuple[Kind, str, Json]] = []
        self.events: list[tuple[Kind, str, str]] = []
        self.stored: dict[tuple[Kind, str], Json] = {}
        self.annotations: dict[str, dict[str, str]] = {}

    async def patch_status(self, kind: Kind, name: str, patch: Json) -> Json | None:
        self.patches.append((kind, name, patch))
        current = self.stored.get((kind, name), {})
        merged = {k: v for k, v in {**current, **patch}.items() if v is not None}
        self.stored[(kind, name)] = merged
        return merged

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        self.patches.append(("Node", name, patch))  # type: ignore[arg-type]
        merged = {**self.annotations.get(name, {}), **patch}
        self.annotations[name] = {k: v for k, v in merged.items() if v is not None}
        return self.annotations[name]

    async def event(self, kind: Kind, name: str, uid: str, transition: Transition) -> None:
        self.events.append((kind, name, transition.type))


def record(obj: dict[str, Any], reader: Any, status: Json | None = None) -> OwnRecord[Any]:
    return OwnRecord(
        obj["metadata"]["name"], f"uid-{obj['metadata']['name']}", 1, reader(obj), status or {}
    )


def indexes(
    queues: list[OwnRecord[Any]],
    policies: list[OwnRecord[Any]],
    annotations: dict[str, dict[str, str]] | None = None,
) -> ClusterIndexes:
    nodes = [node("n1", cpu="8", memory="16Gi")]
    pods = [pod("p1", "a", node="n1", cpu="2", memory="4Gi"), pod("p2", "b", cpu="9", memory="1Gi")]
    return ClusterIndexes(
        nodes={
            n["metadata"]["name"]: [
                NodeRecord(node_snapshot(n), (annotations or {}).get(n["metadata"]["name"], {}))
            ]
            for n in nodes
        },
        pods={(p["metadata"]["namespace"], p["metadata"]["name"]): [pod_snapshot(p)] for p in pods},
        queues={r.name: [r] for r in queues},
        policies={r.name: [r] for r in policies},
    )


def one_policy() -> OwnRecord[Any]:
    return OwnRecord("all", "uid-all", 1, policy_spec(policy("all")), {})


def test_first_round_writes_each_object_once_then_nothing() -> None:
    writer = RecordingWriter()
    loop = Recompute(writer, clock=lambda: 1_000_000.0)
    queues = [
        record(queue("a", weight=1), queue_snapshot),
        record(queue("b", weight=1), queue_snapshot),
    ]
    loop.attach(indexes(queues, [one_policy()]))

    asyncio.run(loop.recompute())
    assert sorted((kind, name) for kind, name, _ in writer.patches) == [
        ("Node", "n1"), ("Queue", "a"), ("Queue", "b"), ("SchedulerPolicy", "all"),
    ]  # fmt: skip
    assert writer.stored[("Queue", "a")]["deserved"] == {"cpu": "2", "memory": "4Gi"}
    assert writer.annotations["n1"]["sharekeeper.io/overcommit-allocatable"] == (
        '{"cpu":"9600m","memory":"20615843020"}'  # 8 x 1.2 cpu; 16Gi x 1.2, floored
    )

    # The watch has not echoed the writes yet: the loop must remember them, not write again.
    asyncio.run(loop.recompute())
    assert len(writer.patches) == 4


def test_a_restart_that_finds_its_own_statuses_writes_nothing() -> None:
    first = RecordingWriter()
    loop = Recompute(first, clock=lambda: 1_000_000.0)
    queues = [record(queue("a"), queue_snapshot), record(queue("b"), queue_snapshot)]
    loop.attach(indexes(queues, [one_policy()]))
    asyncio.run(loop.recompute())

    # A new process sees the objects with the statuses the first one wrote, an hour later.
    seen = [replace(r, status=first.stored[("Queue", r.name)]) for r in queues]
    policy = replace(one_policy(), status=first.stored[("SchedulerPolicy", "all")])
    restarted = RecordingWriter()
    later = Recompute(restarted, clock=lambda: 1_003_600.0)
    later.attach(indexes(seen, [policy], first.annotations))
    asyncio.run(later.recompute())
    assert restarted.patches == []


def test_a_spec_change_writes_only_what_changed() -> None:
    writer = RecordingWriter()
    loop = Recompute(writer, clock=lambda: 1_000_000.0)
    queues = [record(queue("a"), queue_snapshot), record(queue("b"), queue_snapshot)]
    loop.attach(indexes(queues, [one_policy()]))
    asyncio.run(loop.recompute())
    writer.patches.clear()

    changed = OwnRecord(
        "a", "uid-a", 2, queue_snapshot(queue("a", weight=3)), writer.stored[("Queue", "a")]
    )
    loop.attach(indexes([changed, queues[1]], [one_policy()]))  # no effect: already attached
    loop._indexes = indexes([changed, queues[1]], [one_policy()])
    asyncio.run(loop.recompute())
    patched_a = next(patch for kind, name, patch in writer.patches if name == "a")
    assert patched_a["observedGeneration"] == 2
    assert "state" not in patched_a  # unchanged fields are not resent


@pytest.mark.timeout(10)
def test_a_burst_of_wakes_costs_one_round() -> None:
    writer = RecordingWriter()

    async def scenario() -> int:
        loop = Recompute(writer, clock=lambda: 1_000_000.0)
        loop.attach(indexes([record(queue("a"), queue_snapshot)], [one_policy()]))
        task = asyncio.create_task(loop.run())
        for _ in range(500):
            loop.wake()
            await asyncio.sleep(0)
        while loop.rounds == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # longer than the quiet period: a second round would show
        task.cancel()
        return loop.rounds

    assert asyncio.run(scenario()) == 1
