"""Node objects -> what the operator keeps of a node, and admission facts -> our node
annotations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sharekeeper.engine.admission import NodeAdmission
from sharekeeper.engine.node_constraints import SCHEDULING_EFFECTS, Taint
from sharekeeper.engine.overcommit import factor_number
from sharekeeper.engine.shares import ShareNode
from sharekeeper.engine.shares.snapshot import NodeName
from sharekeeper.model import qos
from sharekeeper.model.objects import (
    Obj,
    ObjectError,
    at,
    labels_of,
    mapping_at,
    name_of,
    of_kind,
    resources_at,
)
from sharekeeper.model.quantities import format_resources
from sharekeeper.model.records import NodeRecord


def node_record(obj: Obj) -> NodeRecord:
    """Everything the operator keeps of a node; raises ``ObjectError`` if it cannot be read."""
    try:
        taints = at(obj, "spec.taints") or ()
        return NodeRecord(
            snapshot=node_snapshot(obj),
            annotations=our_annotations(obj),
            qos=qos.node_view(obj),
            taints=tuple(dict(taint) for taint in taints if isinstance(taint, Mapping)),
            resource_version=str(at(obj, "metadata.resourceVersion") or ""),
        )
    except ObjectError as error:
        raise of_kind("Node", error) from None


def node_snapshot(obj: Obj) -> ShareNode:
    return ShareNode(
        name=NodeName(name_of(obj)),
        labels=labels_of(obj),
        allocatable=resources_at(obj, "status.allocatable"),
        taints=scheduling_taints(obj),
    )


UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
"""What a cordoned node (``spec.unschedulable``) keeps off: the node controller puts it on as
a taint too, and kube-scheduler's NodeUnschedulable filter reads it as one."""


def scheduling_taints(obj: Obj) -> tuple[Taint, ...]:
    """The node's taints that keep pods off (``NoSchedule``, ``NoExecute``), an entry that is
    not a taint skipped; a cordoned node's unschedulable taint among them."""
    found: list[Taint] = []
    taints = at(obj, "spec.taints")
    for taint in taints if isinstance(taints, list) else ():
        if isinstance(taint, Mapping) and taint.get("effect") in SCHEDULING_EFFECTS:
            found.append(
                Taint(str(taint.get("key") or ""), str(taint.get("value") or ""), taint["effect"])
            )
    if at(obj, "spec.unschedulable") is True and UNSCHEDULABLE_TAINT not in found:
        found.append(UNSCHEDULABLE_TAINT)
    return tuple(found)


PREFIX = "sharekeeper.io/"
POLICY = PREFIX + "policy"
OVERCOMMIT_FACTORS = PREFIX + "overcommit-factors"
OVERCOMMIT_ALLOCATABLE = PREFIX + "overcommit-allocatable"
PROPORTIONAL_RESERVED = PREFIX + "proportional-reserved"
PROPORTIONAL_AVAILABLE = PREFIX + "proportional-available"
SHARE_ANNOTATIONS = frozenset(
    {POLICY, OVERCOMMIT_FACTORS, OVERCOMMIT_ALLOCATABLE, PROPORTIONAL_RESERVED,
     PROPORTIONAL_AVAILABLE}
)  # fmt: skip
"""The node annotations the share loop owns; it adds, changes and removes only these."""


def our_annotations(obj: Obj) -> dict[str, str]:
    """The node's ``sharekeeper.io/`` annotations (what our publishers diff against)."""
    annotations = mapping_at(obj, "metadata.annotations")
    return {key: str(value) for key, value in annotations.items() if key.startswith(PREFIX)}


Spellings = dict[tuple[object, ...], tuple[str, str]]
"""Overcommit annotations already spelled, by the factors and allocatable they spell."""


def node_annotations(
    facts: NodeAdmission | None, spelled: Spellings | None = None
) -> dict[str, str]:
    """The share loop's annotations for one node; empty for a node no single policy governs.
    ``spelled``: the overcommit annotations of nodes before it in the round, to spell those of
    nodes alike once (a cluster's nodes come in a few sizes; 5,000 of them a round)."""
    if facts is None:
        return {}
    overcommit = facts.overcommit
    key = (tuple(overcommit.factors.items()), tuple(overcommit.allocatable.items()))
    found = spelled.get(key) if spelled is not None else None
    if found is None:
        found = (
            compact_json({name: factor_number(f) for name, f in overcommit.factors.items()}),
            compact_json(format_resources(overcommit.allocatable)),
        )
        if spelled is not None:
            spelled[key] = found
    annotations = {
        POLICY: str(facts.policy),
        OVERCOMMIT_FACTORS: found[0],
        OVERCOMMIT_ALLOCATABLE: found[1],
    }
    if facts.reservation is not None:
        annotations[PROPORTIONAL_RESERVED] = compact_json(
            format_resources(facts.reservation.reserved)
        )
        annotations[PROPORTIONAL_AVAILABLE] = compact_json(
            format_resources(facts.reservation.available)
        )
    return annotations


def compact_json(value: Any) -> str:
    """One canonical spelling, so that equal values compare equal as annotation strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
