"""SchedulerPolicy objects -> engine snapshots, and engine results -> the share part of their
status (other engines add their own parts, e.g. ``overcommit``)."""

from __future__ import annotations

from typing import Any

from sharekeeper.engine.shares import PolicyShare, PolicySnapshot, Sharing
from sharekeeper.engine.shares.snapshot import (
    ElasticOrder,
    PolicyKind,
    PolicyName,
    PriorityType,
)
from sharekeeper.model.conditions import condition
from sharekeeper.model.objects import Obj, bool_at, choice_at, int_at, name_of
from sharekeeper.model.quantities import format_resources
from sharekeeper.model.selectors import label_selector

_POLICIES: tuple[PolicyKind, ...] = (
    "Proportion",
    "Capacity",
    "ProportionOptimize",
    "GuaranteeQuota",
)
_PRIORITIES: tuple[PriorityType, ...] = ("Weight", "Guarantee")
_ORDERS: tuple[ElasticOrder, ...] = ("Weight", "Share", "Random")


def policy_snapshot(obj: Obj) -> PolicySnapshot:
    policy = choice_at(obj, "spec.sharing.policy", "Proportion", _POLICIES)
    priority = choice_at(obj, "spec.sharing.priorityType", "Weight", _PRIORITIES)
    order = choice_at(obj, "spec.sharing.elasticOrder", "Weight", _ORDERS)
    sharing = Sharing(
        policy=next(kind for kind in _POLICIES if kind == policy),
        guarantee_enable=bool_at(obj, "spec.sharing.guaranteeEnable", True),
        elastic_enable=bool_at(obj, "spec.sharing.elasticEnable", True),
        priority_type=next(kind for kind in _PRIORITIES if kind == priority),
        elastic_order=next(kind for kind in _ORDERS if kind == order),
        reshuffle_seconds=int_at(obj, "spec.sharing.reshuffleSeconds", 300, low=1, high=2**31 - 1),
    )
    return PolicySnapshot(
        name=PolicyName(name_of(obj)),
        queue_selector=label_selector(obj, "spec.queueSelector"),
        node_selector=label_selector(obj, "spec.nodeSelector"),
        sharing=sharing,
    )


def policy_status(result: PolicyShare) -> dict[str, Any]:
    kinds = {reason.kind for reason in result.reasons}
    conditions = [condition("Ready", True, "Computed", "shares computed")]
    conditions += [
        condition(
            kind,
            True,
            kind,
            "; ".join(reason.message for reason in result.reasons if reason.kind == kind),
        )
        for kind in sorted(kinds)
    ]
    return {
        "nodes": result.nodes,
        "queues": result.queues,
        "total": format_resources(result.total),
        "totalGuarantee": format_resources(result.total_guarantee),
        "conditions": conditions,
    }
