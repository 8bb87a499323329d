"""The collector settings the operator runs with (``sharekeeper.collector``)."""

from __future__ import annotations

import gc

import pytest

from sharekeeper import collector

pytestmark = pytest.mark.usefixtures("collector_restored")


def test_tune_batches_young_collections_and_keeps_the_older_ratios() -> None:
    gc.set_threshold(700, 11, 12)
    collector.tune()
    assert gc.get_threshold() == (collector.YOUNG_OBJECTS, 11, 12)


def test_settle_freezes_what_lives_and_collects_what_does_not() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the cyclic collector frees it

    gc.unfreeze()
    kept = [[index] for index in range(10)]
    cycle = Node()
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
