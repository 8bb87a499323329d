"""When a woken loop runs its rounds: a batch window after the first event, and a pause after
each round as long as the round took."""

from __future__ import annotations

import asyncio
import itertools

from sharekeeper.loops.health import LoopHealth
from sharekeeper.loops.pacing import next_start, paced_rounds
from sharekeeper.settings import LoopSettings


def test_a_round_starts_a_batch_window_after_the_event_that_woke_it() -> None:
    timing = LoopSettings(batch_seconds=0.3, pause_ratio=1.0)
    assert next_start(10.0, last_end=2.0, last_seconds=1.0, timing=timing) == 10.3


def test_a_round_starts_no_sooner_than_the_last_one_took_after_it_ended() -> None:
    timing = LoopSettings(batch_seconds=0.3, pause_ratio=1.0)
    assert next_start(10.0, last_end=10.0, last_seconds=1.7, timing=timing) == 11.7
    halved = LoopSettings(batch_seconds=0.3, pause_ratio=0.5)
    assert next_start(10.0, last_end=10.0, last_seconds=1.7, timing=halved) == 10.85


class Rounds:
    """A round that takes ``seconds`` and records when it started and ended (loop time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spans: list[tuple[float, float]] = []

    async def __call__(self) -> None:
        began = asyncio.get_running_loop().time()
        await asyncio.sleep(self.seconds)
        self.spans.append((began, asyncio.get_running_loop().time()))


async def _run(
    rounds: Rounds, timing: LoopSettings, events: list[float]
) -> tuple[asyncio.Event, asyncio.Task[None]]:
    woken = asyncio.Event()
    health = LoopHealth("test", lambda: 1.0)
    task = asyncio.create_task(paced_rounds("test", woken, timing, health, rounds))
    for pause in events:
        woken.set()
        await asyncio.sleep(pause)
    return woken, task


def test_a_burst_of_events_costs_one_round() -> None:
    async def scenario() -> Rounds:
        rounds = Rounds(0.01)
        _, task = await _run(rounds, LoopSettings(batch_seconds=0.2), [0.0] * 50)
        await asyncio.sleep(0.5)
        task.cancel()
        return rounds

    assert len(asyncio.run(scenario()).spans) == 1


def test_a_steady_stream_of_events_does_not_hold_rounds_back() -> None:
    """Events every 10 ms for a second: rounds run while they keep coming (a loop that waited
    for a quiet gap would run its first only after the stream), each after the pause."""

    async def scenario() -> tuple[Rounds, float]:
        rounds = Rounds(0.05)
        loop = asyncio.get_running_loop()
        _, task = await _run(rounds, LoopSettings(batch_seconds=0.05), [0.01] * 100)
        stream_end = loop.time()
        await asyncio.sleep(0.5)
        task.cancel()
        return rounds, stream_end

    rounds, stream_end = asyncio.run(scenario())
    during = [span for span in rounds.spans if span[1] < stream_end]
    assert len(during) >= 2, rounds.spans
    for (_, ended), (began, _) in itertools.pairwise(rounds.spans):
        assert began - ended >= 0.05 - 1e-3, rounds.spans  # paused as long as a round takes
    # The last events of the stream got a round of their own after it.
    assert rounds.spans[-1][0] > stream_end - 0.05


def test_events_during_a_round_cost_one_more_round() -> None:
    async def scenario() -> Rounds:
        rounds = Rounds(0.2)
        woken, task = await _run(rounds, LoopSettings(batch_seconds=0.01), [0.05])
        for _ in range(20):  # while the first round runs
            woken.set()
            await asyncio.sleep(0.005)
        await asyncio.sleep(1.0)
        task.cancel()
        return rounds

    assert len(asyncio.run(scenario()).spans) == 2
