"""The collector settings the operator runs with (``sharekeeper.collector``)."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest
from prometheus_client import REGISTRY

from sharekeeper import collector

pytestmark = pytest.mark.usefixtures("collector_restored")


class Cycle:
    """Only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_tune_batches_young_collections_and_keeps_the_older_ratios() -> None:
    gc.set_threshold(700, 11, 12)
    collector.tune()
    assert gc.get_threshold() == (collector.YOUNG_OBJECTS, 11, 12)


def pauses(generation: int) -> tuple[float, float]:
    """Collections of ``generation`` timed so far, and their seconds."""
    labels = {"generation": str(generation)}
    count = REGISTRY.get_sample_value("sharekeeper_gc_pause_seconds_count", labels)
    total = REGISTRY.get_sample_value("sharekeeper_gc_pause_seconds_sum", labels)
    return count or 0.0, total or 0.0


def test_tune_times_each_collection_by_generation_once() -> None:
    collector.tune()
    collector.tune()  # a second tune must not time each collection twice
    gc.disable()  # only the collections asked for below
    full, young = pauses(2), pauses(0)
    garbage = [[index] for index in range(100_000)]
    gc.collect()
    del garbage
    gc.collect(0)
    assert pauses(2)[0] == full[0] + 1
    assert pauses(2)[1] > full[1]
    assert pauses(0)[0] == young[0] + 1


def test_settle_freezes_what_lives_and_collects_what_does_not() -> None:
    gc.unfreeze()
    kept = [[index] for index in range(10)]
    cycle = Cycle()
    found = {"garbage": False}

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["collected"]:
            found["garbage"] = True

    del cycle
    gc.callbacks.append(seen)
    try:
        collector.settle()
    finally:
        gc.callbacks.remove(seen)
    assert found["garbage"], "the cycle was collected before the freeze"
    walked = gc.get_objects()  # what the collector walks: frozen objects are not in it
    assert not any(obj is piece for obj in walked for piece in kept)


class Blocks:
    """A stand-in for ``sys.getallocatedblocks``: the memory blocks in use, as the test says."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __call__(self) -> int:
        return self.count


def test_refreezer_freezes_what_lives_without_walking_it() -> None:
    gc.disable()  # only the collections the refreezer makes
    gc.unfreeze()
    refreeze = collector.Refreezer(clock=lambda: 0.0, blocks=Blocks(1_000))
    assert not refreeze()  # the first call measures what lives
    kept = [[index] for index in range(10)]
    young = Cycle()
    gone = weakref.ref(young)
    del young
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        assert not refreeze()
    finally:
        gc.callbacks.remove(seen)
    assert collections == [], "a round's end walks nothing (a round makes no garbage cycles)"
    walked = gc.get_objects()  # what the collector walks: frozen objects are not in it
    assert not any(obj is piece for obj in walked for piece in kept)
    assert gone() is not None, "a young garbage cycle waits, frozen, for the full pass"


def frozen_garbage() -> weakref.ref[Cycle]:
    """A cycle that lived through a round's freeze, then died: only a full pass frees it."""
    cycle = Cycle()
    gone = weakref.ref(cycle)
    gc.freeze()
    del cycle
    return gone


def started_refreezer(now: list[float], blocks: Blocks) -> collector.Refreezer:
    """A refreezer that has measured ``blocks`` at its first call, at ``now[0]``; no
    collections but its own."""
    gc.disable()
    gc.unfreeze()
    refreeze = collector.Refreezer(clock=lambda: now[0], blocks=blocks, growth=0.25, spacing=60.0)
    assert not refreeze()
    return refreeze


def test_a_full_pass_is_due_once_memory_grew_by_the_share_and_the_spacing_passed() -> None:
    now, blocks = [0.0], Blocks(1_000)
    refreeze = started_refreezer(now, blocks)
    now[0], blocks.count = 3_600.0, 1_250
    assert not refreeze(), "a quarter more, not more than a quarter"
    blocks.count = 1_251
    assert refreeze()
    assert refreeze(), "still due until the owner makes the pass"


def test_the_full_pass_frees_frozen_cycles_and_freezes_what_lives() -> None:
    now, blocks = [0.0], Blocks(1_000)
    refreeze = started_refreezer(now, blocks)
    kept = [[index] for index in range(10)]
    gone = frozen_garbage()
    refreeze.full_pass()
    assert gone() is None
    walked = gc.get_objects()
    assert not any(obj is piece for obj in walked for piece in kept), "what lives is frozen"


def test_full_passes_are_spaced_and_measure_what_lives_again() -> None:
    now, blocks = [0.0], Blocks(1_000)
    refreeze = started_refreezer(now, blocks)
    now[0], blocks.count = 30.0, 5_000  # the cluster grew within the first minute
    assert not refreeze(), "a minute has not passed since the refreezer started"
    now[0] = 60.0
    assert refreeze()
    refreeze.full_pass()  # which measures 5,000 blocks in use
    now[0], blocks.count = 61.0, 6_300
    assert not refreeze(), "a minute has not passed since the last full pass"
    now[0], blocks.count = 121.0, 6_250
    assert not refreeze(), "6,250 is not more than a quarter above the 5,000 in use"
    blocks.count = 6_251
    assert refreeze()


def test_garbage_frozen_round_after_round_stays_within_the_share_of_what_lives() -> None:
    """Real memory blocks: each "round" the event loop leaves garbage cycles that the round's
    end freezes; without full passes frozen garbage would grow for ever."""
    gc.disable()
    gc.unfreeze()
    now = [0.0]
    lives = [[index] for index in range(200_000)]  # what the operator keeps
    refreeze = collector.Refreezer(clock=lambda: now[0], growth=0.25, spacing=60.0)
    refreeze()
    alive = sys.getallocatedblocks()
    highest = alive
    for _ in range(40):
        for _ in range(5_000):
            Cycle()
        highest = max(highest, sys.getallocatedblocks())
        now[0] += 60.0
        if refreeze():
            refreeze.full_pass()
    assert highest <= alive * 1.25 + 5_000 * 3, "garbage held beyond a quarter and a round's"
    assert len(lives) == 200_000
    assert sys.getallocatedblocks() < alive * 1.3
