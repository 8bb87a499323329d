"""Queue and SchedulerPolicy status: from the desired statuses to the writes that are needed.

Pure: the desired status comes from ``pipeline.statuses``; whether and what to write comes
from ``diffing`` against the status the object has. Nothing here calls the API.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from sharekeeper.model.conditions import condition
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.records import OwnRecord, PolicyRecord, QueueRecord
from sharekeeper.publish.diffing import (
    Transition,
    Unchanged,
    merge_patch,
    stamped_conditions,
    transitions,
)

Kind = Literal["Queue", "SchedulerPolicy", "NodeQosEnsurancePolicy"]

# Conditions whose turning True deserves an Event on the object.
QUEUE_EVENTS = {
    "Overused", "GuaranteeUnsatisfiable", "Invalid", "NoPolicy", "NamespaceNotAdmitted",
    "VolcanoQueueShadowed", "InvalidParent", "PodsInInnerQueue",
}  # fmt: skip
POLICY_EVENTS = {"GuaranteeUnsatisfiable", "Overlapping", "Invalid", "TreeUnsupported"}
NORMAL_TRANSITIONS = {"Overused", "NoPolicy"}
"""Transitions told as Normal Events (a queue borrowing, a queue no policy covers); the others
are Warnings."""
QUEUE_EVENTS_PER_ROUND = 100
"""Queues told one by one per condition and round. A weight change at the top of a queue tree
can turn thousands of queues Overused at once (and a failed round turns every queue Stale): an
Event each would be a storm that also delays the status writes. The rest are counted in one
Event on their policy (``told_in_turn``)."""


@dataclass(frozen=True, slots=True)
class StatusWrite:
    kind: Kind
    name: str
    uid: str
    patch: MutableObj
    status: MutableObj
    """The whole status after the patch: what the object will hold."""
    transitions: tuple[Transition, ...]
    spec_changed: bool = False
    """The status has not seen the object's current generation yet: a person just changed it."""


@dataclass(frozen=True, slots=True)
class Untold:
    """Queues of one policy ("" for none) whose condition turned True without an Event each."""

    policy: str
    condition: str
    queues: int

    @property
    def warning(self) -> bool:
        return self.condition not in NORMAL_TRANSITIONS


def told_in_turn(
    writes: Sequence[StatusWrite], limit: int = QUEUE_EVENTS_PER_ROUND
) -> tuple[list[StatusWrite], list[Untold]]:
    """``writes`` with the transitions of Queues past the first ``limit`` of each condition
    taken off (in the writes' order: by name), and how many were taken per policy and
    condition. The conditions themselves are written all the same."""
    told: Counter[str] = Counter()
    untold: Counter[tuple[str, str]] = Counter()
    kept: list[StatusWrite] = []
    for write in writes:
        if write.kind != "Queue" or not write.transitions:
            kept.append(write)
            continue
        tellable = []
        for transition in write.transitions:
            if told[transition.type] < limit:
                told[transition.type] += 1
                tellable.append(transition)
            else:
                untold[(str(write.status.get("policy") or ""), transition.type)] += 1
        whole = len(tellable) == len(write.transitions)
        kept.append(write if whole else replace(write, transitions=tuple(tellable)))
    return kept, [Untold(policy, kind, n) for (policy, kind), n in sorted(untold.items())]


def queue_writes(
    records: Iterable[QueueRecord],
    desired: Mapping[str, MutableObj],
    *,
    now: str,
    unchanged: Unchanged | None = None,
) -> list[StatusWrite]:
    return own_writes("Queue", records, desired, QUEUE_EVENTS, now=now, unchanged=unchanged)


def policy_writes(
    records: Iterable[PolicyRecord], desired: Mapping[str, MutableObj], *, now: str
) -> list[StatusWrite]:
    writes = own_writes("SchedulerPolicy", records, desired, POLICY_EVENTS, now=now)
    for write in writes:
        # When the result was computed is news only when the result changed; stamping it on
        # every round would turn an idle cluster into a stream of writes.
        write.patch["lastComputed"] = write.status["lastComputed"] = now
    return writes


def own_writes(
    kind: Kind,
    records: Iterable[OwnRecord[Any]],
    desired: Mapping[str, MutableObj],
    watched: set[str],
    *,
    now: str,
    unchanged: Unchanged | None = None,
) -> list[StatusWrite]:
    """The writes for our own objects; one the engine has no result for is reported Invalid.
    ``unchanged``: the last round's objects that needed no write (updated)."""
    wanted = ((r.name, r, desired.get(r.name) or invalid_status(r)) for r in records)
    return (unchanged if unchanged is not None else Unchanged()).writes(
        wanted, lambda record, status: status_write(kind, record, status, watched, now=now)
    )


def invalid_status(record: OwnRecord[Any]) -> MutableObj:
    message = record.error or "the object could not be read"
    return {
        "conditions": [
            condition("Ready", False, "Invalid", message),
            condition("Invalid", True, "Invalid", message),
        ]
    }


def stale_writes(
    kind: Kind, records: Iterable[OwnRecord[Any]], problem: str, *, now: str
) -> list[StatusWrite]:
    """What to write when rounds fail: every other field stays as the last good round left it,
    ``Ready`` turns False and ``Stale`` says why, until a round succeeds and rewrites the
    conditions whole."""
    writes = []
    for record in records:
        current = dict(record.status)
        kept = [c for c in current.get("conditions") or [] if c.get("type") not in _STALE_TYPES]
        desired = {
            **current,
            "conditions": [
                *kept,
                condition("Ready", False, "Stale", problem),
                condition("Stale", True, "RoundFailed", problem),
            ],
        }
        # The numbers are the last good round's: so is the generation they observed.
        observed = replace(record, generation=current.get("observedGeneration", record.generation))
        write = status_write(kind, observed, desired, {"Stale"}, now=now)
        if write is not None:
            writes.append(write)
    return writes


_STALE_TYPES = frozenset({"Ready", "Stale"})


def spec_unseen(record: OwnRecord[Any]) -> bool:
    """Whether ``record``'s status has not observed its spec yet: a spec just changed (or no
    status yet), which someone is waiting to see (``StatusWrite.spec_changed``)."""
    return record.status.get("observedGeneration") != record.generation


def status_write(
    kind: Kind,
    record: OwnRecord[Any],
    desired: Mapping[str, Any],
    watched: set[str],
    *,
    now: str,
) -> StatusWrite | None:
    """The write that brings ``record``'s status to ``desired``, or None if it is there."""
    current = dict(record.status)
    current_conditions = current.get("conditions") or []
    status = dict(desired)
    if "lastComputed" in current:
        status["lastComputed"] = current["lastComputed"]
    status["observedGeneration"] = record.generation
    status["conditions"] = stamped_conditions(
        current_conditions, desired.get("conditions", []), generation=record.generation, now=now
    )
    patch = merge_patch(current, status)
    if not patch:
        return None
    changes = transitions(current_conditions, status["conditions"], watched)
    spec_changed = spec_unseen(record)
    return StatusWrite(kind, record.name, record.uid, patch, status, tuple(changes), spec_changed)
