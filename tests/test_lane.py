"""The share round and the QoS check compute one at a time (``runtime`` gives both loops one
lane): each computes in a worker thread, and under the GIL two at once would each take about
as long as both together."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.collector import Refreezer
from sharekeeper.loops import lane as lane_module
from sharekeeper.loops import qos, recompute
from sharekeeper.loops.lane import Lane
from sharekeeper.loops.qos import QosLoop
from sharekeeper.loops.recompute import Recompute
from test_isolation import NOW, Recorder, Usage, Writer, example, share_cluster

COMPUTING_SECONDS = 0.2
Span = tuple[float, float]


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> list[Span]:
    """When the round's and the check's computations ran (each made to take at least
    COMPUTING_SECONDS, as a busy thread would)."""
    found: list[Span] = []

    def timed(compute: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            assert threading.current_thread() is not threading.main_thread()
            started = time.monotonic()
            result = compute(*args, **kwargs)
            time.sleep(COMPUTING_SECONDS)
            found.append((started, time.monotonic()))
            return result

        return run

    monkeypatch.setattr(recompute, "_decide", timed(recompute._decide))
    monkeypatch.setattr(qos, "cluster_check", timed(qos.cluster_check))
    return found


def both_clusters() -> ClusterStore:
    """The share cluster and the QoS example in one store."""
    store = ClusterStore()
    objects = [*share_cluster(), *(d for d in example() if "Metrics" not in d["kind"])]
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("uid", f"uid-{obj['metadata']['name']}")
    store.load(objects)
    return store


class TimedUsage(Usage):
    """The example's usage, and when it was read."""

    def __init__(self) -> None:
        super().__init__([d for d in example() if "Metrics" in d["kind"]])
        self.read_at: list[float] = []

    async def node_metrics(self) -> list[dict[str, Any]]:
        self.read_at.append(time.monotonic())
        return await super().node_metrics()


def round_and_check_at_once(*, one_lane: bool) -> None:
    store = both_clusters()
    usage = TimedUsage()

    async def scenario() -> None:
        lane = Lane()
        rounds = Recompute(Writer(), store, clock=lambda: NOW, lane=lane if one_lane else None)
        checks = QosLoop(Recorder(), usage, store, clock=lambda: NOW)
        if one_lane:
            checks.lane = lane
        await asyncio.gather(rounds.recompute(), checks.check())

    asyncio.run(scenario())


def overlap(spans: list[Span]) -> float:
    """How long the second computation ran while the first still did."""
    (_, first_end), (second_start, _) = sorted(spans)
    return first_end - second_start


def test_a_round_and_a_check_take_turns(spans: list[Span]) -> None:
    round_and_check_at_once(one_lane=True)
    assert len(spans) == 2
    assert overlap(spans) <= 0


def test_with_a_lane_each_they_compute_at_once(spans: list[Span]) -> None:
    """The control: what the loops would do without sharing the lane."""
    round_and_check_at_once(one_lane=False)
    assert overlap(spans) > COMPUTING_SECONDS / 2


def test_a_check_due_while_a_round_is_due_reads_usage_after_that_round(
    spans: list[Span],
) -> None:
    """Reading usage is event-loop work that would slow the round's thread: a check that comes
    due between the round's wake-up and its end starts once the round is done."""
    store = both_clusters()
    usage = TimedUsage()

    async def scenario() -> None:
        lane = Lane()
        rounds = Recompute(Writer(), store, clock=lambda: NOW, lane=lane)
        checks = QosLoop(Recorder(), usage, store, clock=lambda: NOW, lane=lane)
        rounds.wake()  # an event: the round settles before it runs

        async def settled_round() -> None:
            await asyncio.sleep(0.1)
            await rounds.recompute()

        await asyncio.gather(settled_round(), checks.check())

    asyncio.run(scenario())
    (round_ended, check_started) = (min(end for _, end in spans), usage.read_at[0])
    assert check_started >= round_ended


def test_a_round_that_never_comes_holds_a_check_back_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Woken but not run (a follower's watches wake it; a leader's round may fail): the check
    waits ``CHECK_DEFERRAL_SECONDS`` at most, then checks."""
    monkeypatch.setattr(lane_module, "CHECK_DEFERRAL_SECONDS", 0.3)
    store = both_clusters()
    usage = TimedUsage()

    async def scenario() -> float:
        lane = Lane()
        Recompute(Writer(), store, clock=lambda: NOW, lane=lane).wake()
        checks = QosLoop(Recorder(), usage, store, clock=lambda: NOW, lane=lane)
        started = time.monotonic()
        # The bound only keeps a check that waited for ever from hanging the suite.
        async with asyncio.timeout(30):
            await checks.check()
        return started

    started = asyncio.run(scenario())
    assert usage.read_at[0] - started >= 0.3  # it waited for the round, then checked


def test_the_collector_waits_while_a_round_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The round's thread runs without the cyclic collector; what the round keeps is frozen
    (``collector.Refreezer``) before the collector runs again."""
    seen: list[tuple[str, bool]] = []

    def decide(*args: Any, **kwargs: Any) -> Any:
        seen.append(("decide", gc.isenabled()))
        return decided(*args, **kwargs)

    decided = recompute._decide
    monkeypatch.setattr(recompute, "_decide", decide)
    store = ClusterStore()
    store.load(share_cluster())

    async def scenario() -> None:
        rounds = Recompute(Writer(), store, clock=lambda: NOW, refreezer=Freezes(seen))
        await rounds.recompute()

    assert gc.isenabled()
    asyncio.run(scenario())
    assert seen == [("decide", False), ("freeze", False)]
    assert gc.isenabled()


class Freezes(Refreezer):
    """A refreezer that says when it was called and whether the collector ran then."""

    def __init__(self, seen: list[tuple[str, bool]]) -> None:
        super().__init__()
        self._seen = seen

    def __call__(self) -> bool:
        self._seen.append(("freeze", gc.isenabled()))
        return False


def test_work_between_rounds_waits_for_the_round_due_and_holds_the_collector_back() -> None:
    lane = Lane()
    order: list[tuple[str, bool]] = []

    async def scenario() -> None:
        lane.round_due()
        work = asyncio.create_task(
            lane.between_rounds(lambda: order.append(("work", gc.isenabled())))
        )
        await asyncio.sleep(0.1)
        order.append(("round done", gc.isenabled()))
        lane.round_done()
        await work

    asyncio.run(scenario())
    assert order == [("round done", True), ("work", False)]
    assert gc.isenabled()


def test_the_lane_gives_the_collector_back_when_a_computation_fails() -> None:
    lane = Lane()
    held: list[bool] = []

    async def failing() -> None:
        async with lane:
            held.append(gc.isenabled())
            raise RuntimeError("the engine failed")

    async def scenario() -> None:
        with pytest.raises(RuntimeError):
            await failing()
        assert gc.isenabled()
        async with lane:  # and the turn is free again
            held.append(gc.isenabled())
        assert gc.isenabled()

    asyncio.run(scenario())
    assert held == [False, False]


def test_the_lane_leaves_an_idle_collector_idle() -> None:
    """Off before (the start-up's lists read with the collector off): off after."""

    async def scenario() -> None:
        async with Lane():
            pass

    gc.disable()
    try:
        asyncio.run(scenario())
        assert not gc.isenabled()
    finally:
        gc.enable()
