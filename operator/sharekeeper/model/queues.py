"""Queue objects (``scheduling.sharekeeper.io/v1alpha1``; a Volcano ``scheduling.volcano.sh``
Queue reads the same) -> engine snapshots, and engine results -> Queue status."""

from __future__ import annotations

from typing import Any

from sharekeeper.engine.shares import QueueShare, QueueSnapshot
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.model.conditions import condition
from sharekeeper.model.objects import Obj, choice_at, int_at, labels_of, name_of, resources_at
from sharekeeper.model.quantities import format_resources

MAX_WEIGHT = 65535


def queue_snapshot(obj: Obj) -> QueueSnapshot:
    state = choice_at(obj, "spec.state", "Open", ("Open", "Closed"))
    return QueueSnapshot(
        name=QueueName(name_of(obj)),
        labels=labels_of(obj),
        weight=int_at(obj, "spec.weight", 1, low=1, high=MAX_WEIGHT),
        capability=resources_at(obj, "spec.capability"),
        guarantee=resources_at(obj, "spec.guarantee.resource"),
        deserved=resources_at(obj, "spec.deserved"),
        state="Closed" if state == "Closed" else "Open",
    )


def share_text(share: float) -> str:
    """``"0.75"``: two decimals at most, trailing zeros dropped."""
    text = f"{share:.2f}".rstrip("0").rstrip(".")
    return text or "0"


# Conditions a queue always carries: False (with the reason below) while they do not hold, so a
# person sees them clear rather than vanish.
_CLEAR = {
    "NoPolicy": ("Governed", "exactly one SchedulerPolicy selects this queue"),
    "Conflict": ("SinglePolicy", "no other SchedulerPolicy selects this queue"),
    "GuaranteeUnsatisfiable": ("GuaranteesFit", "the guarantees fit in the policy's nodes"),
}


def queue_status(result: QueueShare) -> dict[str, Any]:
    kinds = {reason.kind for reason in result.reasons}
    governed = result.policy is not None
    conditions = [
        condition(
            "Ready",
            governed,
            "Computed" if governed else sorted(kinds)[0],
            "deserved computed" if governed else result.reasons[0].message,
        ),
        condition(
            "Overused",
            result.overused,
            "AllocatedAboveDeserved" if result.overused else "WithinDeserved",
            "allocated exceeds deserved in some resource"
            if result.overused
            else "allocated is within deserved",
        ),
    ]
    for kind, (reason, message) in _CLEAR.items():
        found = [r.message for r in sorted(result.reasons) if r.kind == kind]
        conditions.append(
            condition(kind, True, kind, "; ".join(found))
            if found
            else condition(kind, False, reason, message)
        )
    status: dict[str, Any] = {"state": result.state}
    if result.policy is not None:
        status["policy"] = result.policy
    status |= {
        "deserved": format_resources(result.deserved),
        "guarantee": format_resources(result.guarantee),
        "realCapability": format_resources(result.real_capability),
        "allocated": format_resources(result.allocated),
        "request": format_resources(result.request),
        "inqueue": format_resources(result.inqueue),
        "share": share_text(result.share),
        "overused": result.overused,
        "conditions": conditions,
    }
    return status
