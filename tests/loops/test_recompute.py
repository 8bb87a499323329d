"""The recompute loop against a recording writer: the writes it makes, and the ones it does not."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from builders import exposed_value, node, pod, policy, queue, shares
from sharekeeper.api.policy import policy_spec
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.cluster.snapshots import node_policies, share_snapshot, specs
from sharekeeper.cluster.store import ClusterStore, Listeners
from sharekeeper.collector import Refreezer
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.loops.recompute import EARLY_AT_MOST, Decision, Recompute, _decide
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.records import OwnRecord
from sharekeeper.pipeline.shares import Carried
from sharekeeper.publish.statuses import Kind, StatusWrite
from sharekeeper.settings import LoopSettings
from sharekeeper.telemetry import QUEUES, QueueSeries


class RecordingWriter:
    """Stands in for the API server: stores what it is sent, returns what it stored."""

    def __init__(self) -> None:
        self.patches: list[tuple[Kind, str, MutableObj]] = []
        self.events: list[tuple[Kind, str, str]] = []
        self.stored: dict[tuple[Kind, str], MutableObj] = {}
        self.annotations: dict[str, dict[str, str]] = {}
        self.pod_events: list[tuple[str, str, str]] = []
        self.released: list[str] = []

    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
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

    async def event(
        self, target: dict[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        if target["kind"] == "Pod":
            self.pod_events.append((f"{target['namespace']}/{target['name']}", reason, message))
        else:
            self.events.append((target["kind"], target["name"], reason))

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        self.released.append(f"{namespace}/{name}")
        return True


def record(obj: dict[str, Any], reader: Any, status: MutableObj | None = None) -> OwnRecord[Any]:
    return OwnRecord(
        obj["metadata"]["name"], f"uid-{obj['metadata']['name']}", 1, reader(obj), status or {}
    )


def cluster(
    queues: list[OwnRecord[Any]],
    policies: list[OwnRecord[Any]],
    annotations: dict[str, dict[str, str]] | None = None,
    listeners: Listeners = Listeners(),
) -> ClusterStore:
    """One 8-cpu node n1, a pod of queue a bound to it and a pending pod of queue b."""
    n1 = node("n1", cpu="8", memory="16Gi")
    n1["metadata"]["annotations"] = (annotations or {}).get("n1", {})
    store = ClusterStore(listeners)
    store.load(
        [
            n1,
            pod("p1", "a", node="n1", cpu="2", memory="4Gi"),
            pod("p2", "b", cpu="9", memory="1Gi"),
        ]
    )
    store.queues.records.update((r.name, r) for r in queues)
    store.policies.records.update((r.name, r) for r in policies)
    return store


def recompute_loop(
    writer: RecordingWriter,
    queues: list[OwnRecord[Any]],
    policies: list[OwnRecord[Any]],
    annotations: dict[str, dict[str, str]] | None = None,
    now: float = 1_000_000.0,
) -> Recompute:
    return Recompute(writer, cluster(queues, policies, annotations), clock=lambda: now)


async def round_written(loop: Recompute) -> None:
    """One round, and every write it decided sent."""
    await loop.recompute()
    await loop.written()


def one_policy() -> OwnRecord[Any]:
    return OwnRecord("all", "uid-all", 1, policy_spec(policy("all")), {})


class DuePass(Refreezer):
    """A refreezer whose full pass is due after every round: when each call came, and whether
    the collector ran then."""

    def __init__(self, loop: Callable[[], Recompute]) -> None:
        super().__init__()
        self._loop = loop
        self.seen: list[tuple[str, int, bool]] = []
        self.passed = asyncio.Event()

    def __call__(self) -> bool:
        self.seen.append(("freeze", self._loop().rounds + 1, gc.isenabled()))
        return True

    def full_pass(self) -> None:
        self.seen.append(("full pass", self._loop().rounds, gc.isenabled()))
        self.passed.set()


def test_a_full_pass_found_due_takes_a_turn_of_its_own_after_the_round() -> None:
    """Each round's end freezes what it kept, in its turn of the lane; the full pass the
    refreezer finds due comes once the round is done and its writes handed on, in a turn of
    its own with the collector held back, and one at a time: two rounds, one pass."""
    store = cluster([record(queue("a"), queue_snapshot)], [one_policy()])
    refreezer = DuePass(lambda: loop)
    loop = Recompute(RecordingWriter(), store, clock=lambda: 1_000_000.0, refreezer=refreezer)

    async def scenario() -> None:
        await loop.recompute()
        await loop.recompute()
        await asyncio.wait_for(refreezer.passed.wait(), 5)
        await loop.written()

    asyncio.run(scenario())
    assert refreezer.seen == [
        ("freeze", 1, False),
        ("freeze", 2, False),
        ("full pass", 2, False),
    ]
    assert gc.isenabled()


def test_first_round_writes_each_object_once_then_nothing() -> None:
    writer = RecordingWriter()
    queues = [
        record(queue("a", weight=1), queue_snapshot),
        record(queue("b", weight=1), queue_snapshot),
    ]
    loop = recompute_loop(writer, queues, [one_policy()])

    async def scenario() -> None:
        assert not loop.first_round.is_set()
        await round_written(loop)
        assert loop.first_round.is_set()  # what the runtime waits for to freeze queue state
        assert sorted((kind, name) for kind, name, _ in writer.patches) == [
            ("Node", "n1"), ("Queue", "a"), ("Queue", "b"), ("SchedulerPolicy", "all"),
        ]  # fmt: skip
        assert writer.stored[("Queue", "a")]["deserved"] == {"cpu": "2", "memory": "4Gi"}
        assert writer.annotations["n1"]["sharekeeper.io/overcommit-allocatable"] == (
            '{"cpu":"9600m","memory":"20615843020"}'  # 8 x 1.2 cpu; 16Gi x 1.2, floored
        )
        # The watch has not echoed the writes yet: the loop must remember them, not write again.
        await round_written(loop)
        assert len(writer.patches) == 4

    asyncio.run(scenario())


class HeldWriter(RecordingWriter):
    """A writer whose status patches wait until ``answer`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()

    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
        await self.answer.wait()
        return await super().patch_status(kind, name, patch)


def test_writes_not_yet_answered_are_counted_until_they_are() -> None:
    """What ``/healthz`` reports as ``pendingWrites``: queued or in flight, not yet answered."""
    writer = HeldWriter()
    queues = [record(queue("a"), queue_snapshot), record(queue("b"), queue_snapshot)]
    loop = recompute_loop(writer, queues, [one_policy()])

    async def scenario() -> None:
        assert loop.pending_writes == 0
        await loop.recompute()
        await asyncio.sleep(0)  # the workers take the first writes
        # Two queues and the policy wait for the writer; the node's annotations went through.
        assert loop.pending_writes == 3
        writer.answer.set()
        await loop.written()
        assert loop.pending_writes == 0
        assert len(writer.stored) == 3

    asyncio.run(scenario())


def test_a_restart_that_finds_its_own_statuses_writes_nothing() -> None:
    first = RecordingWriter()
    queues = [record(queue("a"), queue_snapshot), record(queue("b"), queue_snapshot)]
    loop = recompute_loop(first, queues, [one_policy()])
    asyncio.run(round_written(loop))

    # A new process sees the objects with the statuses the first one wrote, an hour later.
    seen = [replace(r, status=first.stored[("Queue", r.name)]) for r in queues]
    policy = replace(one_policy(), status=first.stored[("SchedulerPolicy", "all")])
    restarted = RecordingWriter()
    later = recompute_loop(restarted, seen, [policy], first.annotations, now=1_003_600.0)
    asyncio.run(round_written(later))
    assert restarted.patches == []


def test_a_spec_change_writes_only_what_changed_once() -> None:
    writer = RecordingWriter()
    queues = [record(queue("a"), queue_snapshot), record(queue("b"), queue_snapshot)]
    loop = recompute_loop(writer, queues, [one_policy()])

    async def scenario() -> None:
        await round_written(loop)
        writer.patches.clear()
        changed = OwnRecord(
            "a", "uid-a", 2, queue_snapshot(queue("a", weight=3)), writer.stored[("Queue", "a")]
        )
        loop._store.queues.records["a"] = changed
        await round_written(loop)

    asyncio.run(scenario())
    # b's share does not move (a asks for less than half). a's write, handed over before the
    # round was done (``EARLY_AT_MOST``), is not sent again with the round's.
    assert [name for kind, name, _ in writer.patches if kind == "Queue"] == ["a"]
    patched_a = writer.patches[0][2]
    assert patched_a["observedGeneration"] == 2
    assert "state" not in patched_a  # unchanged fields are not resent


def decided(store: ClusterStore, carried: Carried, early: Any) -> Decision:
    """A round's decision as the loop makes it, in this thread."""
    queues, policies = store.queues.sorted_records(), store.policies.sorted_records()
    snapshot = share_snapshot(
        store, specs(queues), [spec.shares for spec in specs(policies)], now_seconds=1_000_000.0
    )
    return _decide(
        snapshot, node_policies(policies), queues, policies, store.nodes.sorted_records(),
        stamp="2026-01-01T00:00:00Z", carried=carried, early=early,
    )  # fmt: skip


def test_a_queue_whose_spec_moved_is_handed_over_before_the_others_are_rendered() -> None:
    store = cluster([record(queue(n), queue_snapshot) for n in "ab"], [one_policy()])
    store.pods.listed([pod("p3", "a", cpu="9", memory="1Gi")])  # a wants more than half too
    carried = Carried()
    handed: list[tuple[list[str], MutableObj | None]] = []

    def early(writes: list[StatusWrite]) -> None:
        b = carried.queues.last.get(QueueName("b"))
        handed.append(([write.name for write in writes], b[1] if b is not None else None))

    first = decided(store, carried, early)
    for write in first.statuses:
        kind = store.queues if write.kind == "Queue" else store.policies
        kind.records[write.name] = replace(kind.records[write.name], status=write.status)
    b_before = carried.queues.last[QueueName("b")][1]
    a = store.queues.records["a"]
    store.queues.records["a"] = replace(a, generation=2, spec=queue_snapshot(queue("a", weight=3)))
    second = decided(store, carried, early)

    # No status yet is a spec not seen yet: both are early in the first round.
    assert handed == [(["a", "b"], None), (["a"], b_before)]
    assert carried.queues.last[QueueName("b")][1] is not b_before  # b's share moved with a's
    assert [w.name for w in second.statuses if w.kind == "Queue"] == ["a", "b"]


def test_a_bulk_spec_change_is_sent_in_the_rounds_order() -> None:
    writer = RecordingWriter()
    names = [f"q{index:02d}" for index in range(EARLY_AT_MOST + 1)]
    queues = [record(queue(name), queue_snapshot) for name in names]
    loop = recompute_loop(writer, queues, [one_policy()])
    handed: list[object] = []
    loop._outbox.send_first = handed.append  # type: ignore[method-assign]

    async def scenario() -> None:
        await round_written(loop)
        for name in names:
            loop._store.queues.records[name] = OwnRecord(
                name, f"uid-{name}", 2, queue_snapshot(queue(name, weight=2)),
                writer.stored[("Queue", name)],
            )  # fmt: skip
        writer.patches.clear()
        await round_written(loop)

    asyncio.run(scenario())
    assert handed == []
    assert sorted(name for kind, name, _ in writer.patches if kind == "Queue") == names


@pytest.mark.timeout(10)
def test_a_burst_of_wakes_costs_one_round() -> None:
    writer = RecordingWriter()

    async def scenario() -> int:
        loop = recompute_loop(writer, [record(queue("a"), queue_snapshot)], [one_policy()])
        loop.store_synced.set()
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


def condition_of(status: MutableObj, kind: str) -> MutableObj:
    return next(c for c in status.get("conditions", []) if c["type"] == kind)


def test_failing_rounds_mark_every_object_stale_and_the_next_good_round_clears_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: when every round failed, statuses froze with ``Ready=True`` and nothing told."""
    import sharekeeper.loops.recompute as recompute_module

    working = recompute_module.publication
    broken = {"now": False}

    def maybe_failing(*args: Any, **kwargs: Any) -> Any:
        if broken["now"]:
            raise OverflowError("Python int too large to convert to C long")
        return working(*args, **kwargs)

    monkeypatch.setattr(recompute_module, "publication", maybe_failing)
    writer = RecordingWriter()
    settings = LoopSettings(quiet_seconds=0.01, max_delay_seconds=0.05, error_backoff_seconds=0.05)

    async def scenario() -> None:
        loop = Recompute(
            writer, cluster([record(queue("a"), queue_snapshot)], [one_policy()]), settings
        )
        loop.store_synced.set()
        task = asyncio.create_task(loop.run())
        while loop.rounds == 0:
            await asyncio.sleep(0.01)
        await loop.written()
        assert condition_of(writer.stored[("Queue", "a")], "Ready")["status"] == "True"
        good = writer.stored[("Queue", "a")]["deserved"]

        broken["now"] = True
        loop.wake()
        await asyncio.sleep(0.2)
        await loop.written()
        for key in (("Queue", "a"), ("SchedulerPolicy", "all")):
            stale = condition_of(writer.stored[key], "Stale")
            assert stale["status"] == "True"
            assert "OverflowError: Python int too large" in stale["message"]
            assert condition_of(writer.stored[key], "Ready")["status"] == "False"
        assert writer.stored[("Queue", "a")]["deserved"] == good  # the last good numbers stay
        assert ("Queue", "a", "RoundFailed") in writer.events  # the Stale condition's reason
        assert loop.health.error is not None

        broken["now"] = False
        await asyncio.sleep(0.2)
        await loop.written()
        task.cancel()
        status = writer.stored[("Queue", "a")]
        assert "Stale" not in {c["type"] for c in status["conditions"]}
        assert condition_of(status, "Ready")["status"] == "True"
        assert loop.health.stale() is None

    asyncio.run(scenario())


def test_a_queue_deleted_and_created_again_gets_its_status_written_again() -> None:
    """Found: the loop remembered its write to the old object and diffed the new one against it,
    so a re-created queue with the same numbers never got a status."""
    writer = RecordingWriter()
    loops: list[Recompute] = []

    def gone(kind: str, name: str) -> None:
        loops[0].forget(kind, name)

    store = cluster([], [one_policy()], listeners=Listeners(gone=gone))
    loop = Recompute(writer, store, clock=lambda: 1_000_000.0)
    loops.append(loop)
    old = {**queue("a"), "metadata": {"name": "a", "uid": "uid-1", "generation": 1}}

    async def scenario() -> None:
        store.queues.event("ADDED", old)
        await round_written(loop)
        assert "deserved" in writer.stored[("Queue", "a")]
        store.queues.event("DELETED", old)
        again = {**old, "metadata": {**old["metadata"], "uid": "uid-2"}}
        store.queues.event("ADDED", again)  # a new object: no status yet
        writer.stored.pop(("Queue", "a"))
        await round_written(loop)
        assert "deserved" in writer.stored[("Queue", "a")]

    asyncio.run(scenario())


def test_each_pod_naming_a_queue_that_does_not_admit_its_namespace_is_told_once() -> None:
    writer = RecordingWriter()
    production = queue("production")
    production["spec"]["namespaces"] = {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    store = cluster(
        [record(q, queue_snapshot) for q in (production, queue("a"), queue("b"))], [one_policy()]
    )
    loop = Recompute(writer, store, clock=lambda: 1_000_000.0)

    async def scenario() -> None:
        store.pods.event("ADDED", pod("mine", "production", namespace="team-a", cpu="1"))
        store.pods.event("ADDED", pod("theirs", "production", namespace="team-b", cpu="1"))
        await round_written(loop)
        await asyncio.sleep(0)
        assert [(pod_name, reason) for pod_name, reason, _ in writer.pod_events] == [
            ("team-b/theirs", "NamespaceNotAdmitted")
        ]
        assert "queue production" in writer.pod_events[0][2]
        await round_written(loop)  # nothing changed: nobody is told twice
        store.pods.event("ADDED", pod("more", "production", namespace="team-b", cpu="1"))
        await round_written(loop)
        await asyncio.sleep(0)
        assert [pod_name for pod_name, _, _ in writer.pod_events] == [
            "team-b/theirs", "team-b/more"
        ]  # fmt: skip
        status = writer.stored[("Queue", "production")]
        admitted = next(c for c in status["conditions"] if c["type"] == "NamespaceNotAdmitted")
        assert admitted["status"] == "True"
        assert admitted["message"].startswith("2 pods in namespace team-b name this queue")
        assert status["allocated"] == {}
        assert status["request"] == {"cpu": "1", "pods": "1"}

    asyncio.run(scenario())


def test_a_pod_naming_a_queue_that_does_not_exist_is_told_once() -> None:
    """Found: a typo'd queue name was ignored here but made simulate refuse its whole input."""
    writer = RecordingWriter()
    store = cluster(
        [record(queue(name), queue_snapshot) for name in ("production", "a", "b")], [one_policy()]
    )
    loop = Recompute(writer, store, clock=lambda: 1_000_000.0)

    async def scenario() -> None:
        store.pods.event("ADDED", pod("typo", "prodution", namespace="team-a", cpu="1"))
        store.pods.event("ADDED", pod("fine", "production", namespace="team-a", cpu="1"))
        await round_written(loop)
        await asyncio.sleep(0)
        assert [(pod_name, reason) for pod_name, reason, _ in writer.pod_events] == [
            ("team-a/typo", "QueueNotFound")
        ]
        assert "queue prodution, which does not exist" in writer.pod_events[0][2]
        await round_written(loop)
        await asyncio.sleep(0)
        assert len(writer.pod_events) == 1  # told once
        assert writer.stored[("Queue", "production")]["request"] == {"cpu": "1", "pods": "1"}

    asyncio.run(scenario())


def test_the_series_are_the_last_rounds_and_a_deleted_queues_are_gone() -> None:
    """Found: a deleted queue kept reporting its last deserved share until a restart."""
    series = QueueSeries()

    def sample(name: str, **labels: str) -> float | None:
        return exposed_value(series.exposition(), name, **labels)

    bound = pod("p", "gone", node="n1", cpu="4")
    cluster_objects = [policy("all"), node("n1", cpu="8"), bound]
    series.export(shares(*cluster_objects, queue("kept"), queue("gone")))
    assert sample("sharekeeper_queue_deserved", queue="gone", resource="cpu") == 4.0
    assert sample("sharekeeper_queue_allocated", queue="gone", resource="cpu") == 4.0
    assert sample("sharekeeper_queue_share", queue="gone") == 1.0
    assert sample("sharekeeper_queue_overused", queue="gone") == 0.0
    series.export(shares(*cluster_objects, pod("q", "gone", cpu="2"), queue("gone")))
    assert sample("sharekeeper_queue_deserved", queue="gone", resource="cpu") == 6.0
    assert sample("sharekeeper_queue_share", queue="kept") is None
    series.export(shares(*cluster_objects, queue("kept")))
    assert sample("sharekeeper_queue_deserved", queue="gone", resource="cpu") is None
    assert sample("sharekeeper_queue_share", queue="gone") is None
    assert sample("sharekeeper_queue_share", queue="kept") is not None


def test_a_round_hands_its_result_to_the_registered_series() -> None:
    """What /metrics serves: the operator's rounds export into ``telemetry.QUEUES``."""
    writer = RecordingWriter()
    loop = recompute_loop(writer, [record(queue("metered"), queue_snapshot)], [one_policy()])

    async def scenario() -> None:
        await round_written(loop)

    asyncio.run(scenario())
    text = QUEUES.exposition()
    assert exposed_value(text, "sharekeeper_queue_share", queue="metered") is not None


def test_held_pods_are_released_once_and_the_others_told_why_they_wait_once_per_reason() -> None:
    writer = RecordingWriter()
    queues = [record(queue("a"), queue_snapshot), record(queue("b"), queue_snapshot)]
    loop = recompute_loop(writer, queues, [one_policy()])
    held = [
        pod(f"h{i}", "b", held=True, created=f"2026-01-01T00:00:0{i}Z", cpu="3", memory="1Gi")
        for i in range(3)
    ]
    loop._store.load(held)

    async def scenario() -> None:
        await round_written(loop)
        await asyncio.gather(*loop._telling)
        # b deserves 6 of the 8 cpu (a's pod holds 2). p2, pending and not gated, counts as
        # admitted: its 9 cpu already exceed b's 6, so nothing held goes.
        assert writer.released == []
        assert [(pod, reason) for pod, reason, _ in writer.pod_events] == [
            ("ns/h0", "AdmissionWaiting"), ("ns/h1", "AdmissionWaiting"),
            ("ns/h2", "AdmissionWaiting"),
        ]  # fmt: skip
        assert "no room in queue b's deserved share: cpu 3 requested" in writer.pod_events[0][2]
        # p2 goes away: h0 and h1 fit in b's deserved 6 cpu; each is released once, even though
        # the store shows them held until the watch brings the patched pods.
        loop._store.pods.event("DELETED", pod("p2", "b", cpu="9", memory="1Gi"))
        await round_written(loop)
        await round_written(loop)
        await asyncio.gather(*loop._telling)
        assert writer.released == ["ns/h0", "ns/h1"]
        # h2 was told it waits behind h0; first in line now, it is told there is no room.
        assert len(writer.pod_events) == 4
        assert writer.pod_events[3][:2] == ("ns/h2", "AdmissionWaiting")
        assert "behind" in writer.pod_events[2][2]
        assert writer.pod_events[3][2].endswith(
            "cpu 3 requested, 0 available; 1st of 1 held in queue b"
        )
        await round_written(loop)
        await asyncio.gather(*loop._telling)
        assert len(writer.pod_events) == 4  # told once per reason

    asyncio.run(scenario())


def test_a_round_that_turns_many_queues_overused_tells_a_hundred_and_counts_the_rest() -> None:
    """Found at 11,430 queues in a tree: a weight change at the top turned 1,000 to 3,000
    queues Overused a round, an Event each."""
    names = [f"q{i:03d}" for i in range(130)]
    store = ClusterStore()
    store.load(
        [
            node("n1", cpu="1000", memory="1000Gi"),
            *(pod(f"p-{name}", name, node="n1", cpu="2", memory="1Gi") for name in names),
        ]
    )
    queues = [record(queue(name, deserved={"cpu": "1", "memory": "1Gi"}), queue_snapshot)
              for name in names]  # fmt: skip
    capacity = OwnRecord("all", "uid-all", 1, policy_spec(policy("all", "Capacity")), {})
    store.queues.records.update((r.name, r) for r in queues)
    store.policies.records.update([(capacity.name, capacity)])
    writer = RecordingWriter()
    loop = Recompute(writer, store, clock=lambda: 1_000_000.0)
    asyncio.run(round_written(loop))
    assert all(
        condition_of(writer.stored[("Queue", name)], "Overused")["status"] == "True"
        for name in names
    )
    told = [name for kind, name, reason in writer.events if reason == "AllocatedAboveDeserved"]
    assert told == names[:100]
    summaries = [event for event in writer.events if event[0] == "SchedulerPolicy"]
    assert summaries == [("SchedulerPolicy", "all", "OverusedQueues")]
