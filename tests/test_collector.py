"""The collector settings the operator runs with (``sharekeeper.collector``)."""

from __future__ import annotations

import gc
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


def test_refreezer_freezes_what_lives_without_walking_it() -> None:
    gc.disable()  # only the collections the refreezer makes
    gc.unfreeze()
    refreeze = collector.Refreezer(clock=lambda: 0.0, full_every=60.0)
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
        refreeze()
    finally:
        gc.callbacks.remove(seen)
    assert collections == [], "a round's end walks nothing (a round makes no garbage cycles)"
    walked = gc.get_objects()  # what the collector walks: frozen objects are not in it
    assert not any(obj is piece for obj in walked for piece in kept)
    assert gone() is not None, "a young garbage cycle waits, frozen, for the full pass"


def test_a_cycle_frozen_before_it_died_is_freed_by_the_next_full_pass() -> None:
    gc.disable()
    gc.unfreeze()
    now = [0.0]
    refreeze = collector.Refreezer(clock=lambda: now[0], full_every=60.0)
    old = Cycle()
    gone = weakref.ref(old)
    gc.freeze()  # it lived through a round's freeze, then died
    del old
    now[0] = 59.0
    refreeze()
    assert gone() is not None, "frozen, it waits for the full pass"
    now[0] = 60.0
    refreeze()
    assert gone() is None
    now[0] = 119.0
    frozen_again = Cycle()
    again = weakref.ref(frozen_again)
    gc.freeze()
    del frozen_again
    refreeze()
    assert again() is not None, "the next full pass is a full interval after the last"
