"""SchedulerPolicy objects -> engine snapshots, and engine results -> the share part of their
status (other engines add their own parts, e.g. ``overcommit``)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.overcommit import (
    OvercommitResult,
    OvercommitSpec,
    factor_from_number,
    factor_number,
)
from sharekeeper.engine.proportional import Proportion
from sharekeeper.engine.shares import PolicyShare, PolicySnapshot, Sharing
from sharekeeper.engine.shares.snapshot import (
    ElasticOrder,
    PolicyKind,
    PolicyName,
    PriorityType,
)
from sharekeeper.model.conditions import condition
from sharekeeper.model.objects import (
    Obj,
    at,
    bool_at,
    choice_at,
    fail,
    int_at,
    mapping_at,
    name_of,
    resource_list,
)
from sharekeeper.model.quantities import CPU, MEMORY, format_resources
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


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A SchedulerPolicy's spec as the engines read it."""

    shares: PolicySnapshot
    nodes: NodePolicy


def policy_spec(obj: Obj) -> PolicySpec:
    return PolicySpec(policy_snapshot(obj), node_policy(obj))


def node_policy(obj: Obj) -> NodePolicy:
    """``spec.overcommit`` and ``spec.proportional``: the node-level settings."""
    factors = {}
    for resource, value in mapping_at(obj, "spec.overcommit.factors").items():
        factors[resource] = _factor(obj, f"spec.overcommit.factors.{resource}", value)
    factor = at(obj, "spec.overcommit.factor")
    proportions = {}
    if bool_at(obj, "spec.proportional.enable", False):
        for resource, per_unit in mapping_at(obj, "spec.proportional.resources").items():
            path = f"spec.proportional.resources[{resource}]"
            amounts = resource_list(obj, per_unit or {}, path)
            missing = [name for name in (CPU, MEMORY) if name not in amounts]
            if missing:
                raise fail(obj, path, f"needs {' and '.join(missing)} per unit")
            proportions[resource] = Proportion(amounts[CPU], amounts[MEMORY])
    return NodePolicy(
        overcommit=OvercommitSpec(
            factor=None if factor is None else _factor(obj, "spec.overcommit.factor", factor),
            factors=factors,
        ),
        proportions=proportions,
    )


def _factor(obj: Obj, path: str, value: Any) -> Fraction:
    try:
        return factor_from_number(value)
    except (ValueError, ArithmeticError) as error:
        raise fail(obj, path, f"{value!r} is not an overcommit factor of at least 1") from error


def overcommit_section(result: OvercommitResult) -> dict[str, Any]:
    """``status.overcommit`` of a SchedulerPolicy."""
    return {
        "factors": {name: factor_number(f) for name, f in sorted(result.factors.items())},
        "overcommittedTotal": format_resources(result.overcommitted_total),
        "used": format_resources(result.used),
        "inqueue": format_resources(result.inqueue),
        "headroom": format_resources(result.headroom),
    }


_CLEAR = {
    "GuaranteeUnsatisfiable": ("GuaranteesFit", "the guarantees fit in the policy's nodes"),
    "Overlapping": ("NoOverlap", "no other SchedulerPolicy selects this policy's queues or nodes"),
}
"""Conditions a policy always carries, False (with this reason) while they do not hold."""


def policy_status(result: PolicyShare) -> dict[str, Any]:
    conditions = [condition("Ready", True, "Computed", "shares computed")]
    for kind, (reason, message) in _CLEAR.items():
        found = [r.message for r in result.reasons if r.kind == kind]
        conditions.append(
            condition(kind, True, kind, "; ".join(found))
            if found
            else condition(kind, False, reason, message)
        )
    return {
        "nodes": result.nodes,
        "queues": result.queues,
        "total": format_resources(result.total),
        "totalGuarantee": format_resources(result.total_guarantee),
        "conditions": conditions,
    }
