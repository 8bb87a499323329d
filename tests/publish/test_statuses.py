"""Which condition changes are told as an Event each, and which are counted on the policy."""

from __future__ import annotations

from sharekeeper.publish.diffing import Transition
from sharekeeper.publish.statuses import StatusWrite, Untold, told_in_turn

OVERUSED = Transition("Overused", "AllocatedAboveDeserved", "cpu 3 of its deserved 2")
INVALID_PARENT = Transition("InvalidParent", "ParentMissing", "queue x does not exist")


def write(kind: str, name: str, policy: str, *transitions: Transition) -> StatusWrite:
    status = {"policy": policy} if policy else {}
    return StatusWrite(kind, name, f"uid-{name}", {}, status, transitions)  # type: ignore[arg-type]


def test_past_the_limit_a_conditions_queues_are_counted_per_policy() -> None:
    writes = [
        write("Queue", "a", "p", OVERUSED),
        write("Queue", "b", "p", OVERUSED, INVALID_PARENT),
        write("Queue", "c", "q", OVERUSED),
        write("Queue", "d", "", OVERUSED),
        write("SchedulerPolicy", "p", "", OVERUSED),  # only Queues are limited
    ]
    kept, untold = told_in_turn(writes, limit=1)
    assert [(w.name, [t.type for t in w.transitions]) for w in kept] == [
        ("a", ["Overused"]),
        ("b", ["InvalidParent"]),  # its own condition's first
        ("c", []),
        ("d", []),
        ("p", ["Overused"]),
    ]
    assert [w.status for w in kept] == [w.status for w in writes]  # every condition written
    assert untold == [
        Untold("", "Overused", 1),
        Untold("p", "Overused", 1),
        Untold("q", "Overused", 1),
    ]


def test_a_normal_condition_is_counted_as_normal_and_the_others_as_warnings() -> None:
    assert not Untold("p", "Overused", 5).warning
    assert Untold("p", "Stale", 5).warning


def test_within_the_limit_the_writes_are_the_same_objects() -> None:
    writes = [write("Queue", name, "p", OVERUSED) for name in "abc"]
    kept, untold = told_in_turn(writes, limit=3)
    assert all(k is w for k, w in zip(kept, writes, strict=True))
    assert untold == []
