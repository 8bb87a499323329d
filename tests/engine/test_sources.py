"""A Queue people made that has the name of a Volcano Queue being mirrored shadows it: the
engine reports it on that Queue (``VolcanoQueueShadowed``), and only there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from builders import share_policy, share_queue
from sharekeeper.engine.shares import (
    QueueSnapshot,
    ShareResult,
    ShareSnapshot,
    deserved_shares,
)
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.engine.shares.sources import shadowed
from sharekeeper.pipeline.statuses import queue_status


def queues(*items: QueueSnapshot) -> dict[QueueName, QueueSnapshot]:
    return {item.name: item for item in items}


def test_only_a_queue_that_is_not_the_mirror_shadows() -> None:
    made = share_queue("made")
    mirror = share_queue("mirrored", mirror_of="uid-mirrored")
    stale = share_queue("renewed", mirror_of="uid-old")
    found = shadowed(
        queues(made, mirror, stale),
        {
            QueueName("made"): "uid-made",
            QueueName("mirrored"): "uid-mirrored",
            QueueName("renewed"): "uid-new",  # its old mirror is deleted: no conflict
            QueueName("absent"): "uid-absent",  # not mirrored yet: nothing to say
        },
    )
    assert list(found) == ["made"]
    assert found[QueueName("made")].kind == "VolcanoQueueShadowed"
    assert "Volcano Queue made is not mirrored" in found[QueueName("made")].message


def test_the_condition_is_true_on_the_shadowing_queue_and_false_elsewhere() -> None:
    snapshot = ShareSnapshot(
        policies=(share_policy("p"),),
        queues=(share_queue("a"), share_queue("b")),
    )
    without = deserved_shares(snapshot)
    shadowing = deserved_shares(replace(snapshot, volcano_queues={QueueName("a"): "uid-v"}))

    def condition(result: ShareResult, name: str) -> dict[str, Any]:
        status = queue_status(result.queues[QueueName(name)])
        found: dict[str, Any] = next(
            c for c in status["conditions"] if c["type"] == "VolcanoQueueShadowed"
        )
        return found

    assert condition(without, "a")["status"] == "False"
    assert condition(without, "a")["reason"] == "NotShadowing"
    assert condition(shadowing, "a")["status"] == "True"
    assert condition(shadowing, "a")["reason"] == "VolcanoQueueShadowed"
    assert condition(shadowing, "b")["status"] == "False"
    # Shadowing changes no number: the queue is governed and shared as before.
    assert shadowing.queues[QueueName("a")].deserved == without.queues[QueueName("a")].deserved
    assert shadowing.queues[QueueName("a")].policy == "p"
