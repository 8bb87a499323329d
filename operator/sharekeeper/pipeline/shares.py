"""Everything Sharekeeper publishes for one snapshot, as Kubernetes-shaped values.

The running operator and ``sharekeeper simulate`` both call ``publication``: what simulate
prints is what the operator writes, by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sharekeeper.api.policy import overcommit_section, policy_status
from sharekeeper.api.queue import queue_status
from sharekeeper.engine.admission import NodePolicy, admission_facts, placements
from sharekeeper.engine.overcommit import QueueAdmission, Shortfall
from sharekeeper.engine.proportional import PendingPod, PodPlacement
from sharekeeper.engine.shares import ShareResult, ShareSnapshot, deserved_shares
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.conditions import condition
from sharekeeper.model.nodes import node_annotations
from sharekeeper.model.quantities import to_quantity

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Publication:
    queues: Mapping[str, Json]
    """Queue name -> status."""
    policies: Mapping[str, Json]
    """SchedulerPolicy name -> status."""
    nodes: Mapping[str, Mapping[str, str]]
    """Node name -> the share loop's annotations (empty: remove ours)."""
    placements: Mapping[str, Json]
    """Pending pod (``namespace/name``) -> where the proportional predicate lets it go; only
    for the ``pending`` pods asked about."""
    unknown_queues: tuple[str, ...]
    """Pods that name a queue that does not exist."""
    shares: ShareResult
    """The share engine's numbers, for metrics."""


def publication(
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    pending: Iterable[PendingPod] = (),
) -> Publication:
    """``pending``: the pods to run the proportional predicate for (``placements``); the
    operator passes none, since nothing it publishes reads them."""
    shares = deserved_shares(snapshot)
    facts = admission_facts(snapshot, node_policies, shares)
    queues = {}
    for name, share in sorted(shares.queues.items()):
        status = queue_status(share)
        verdict = facts.queues.get(name)
        if verdict is not None and verdict.podgroup is not None:
            status["conditions"].append(enqueueable(verdict))
        queues[str(name)] = status
    policies = {}
    for policy, policy_share in sorted(shares.policies.items()):
        status = policy_status(policy_share)
        if policy in facts.policies:
            status["overcommit"] = overcommit_section(facts.policies[policy])
        policies[str(policy)] = status
    return Publication(
        queues=queues,
        policies=policies,
        nodes={node.name: node_annotations(facts.nodes.get(node.name)) for node in snapshot.nodes},
        placements={
            pod: placement_view(p)
            for pod, p in placements(pending, snapshot, node_policies, facts).items()
        },
        unknown_queues=tuple(r.message for r in shares.reasons if r.kind == "UnknownQueue"),
        shares=shares,
    )


def enqueueable(verdict: QueueAdmission) -> Json:
    """The answer to "why is my job not starting", as the queue's Enqueueable condition."""
    job = f"PodGroup {verdict.podgroup}"
    if verdict.admitted:
        return condition("Enqueueable", True, "Admissible", f"{job} would be admitted now")
    if verdict.closed:
        return condition("Enqueueable", False, "QueueClosed", f"{job} waits: the queue is Closed")
    if verdict.inner:
        return condition(
            "Enqueueable", False, "QueueNotLeaf",
            f"{job} waits: this queue has queues below it, and jobs belong in leaf queues",
        )  # fmt: skip
    if verdict.overcommit:
        return condition(
            "Enqueueable", False, "OvercommitHeadroomExceeded",
            f"{job} asks for more than the policy's overcommitted headroom: "
            + shortfall_text(verdict.overcommit),
        )  # fmt: skip
    where = "the queue's" if verdict.limiting is None else f"queue {verdict.limiting}'s"
    return condition(
        "Enqueueable", False, "CapabilityExceeded",
        f"{job} does not fit in {where} capability: " + shortfall_text(verdict.quota),
    )  # fmt: skip


def shortfall_text(shortfalls: tuple[Shortfall, ...]) -> str:
    return "; ".join(
        f"{s.resource} {to_quantity(s.resource, s.requested)} requested, "
        f"{to_quantity(s.resource, s.available)} available"
        for s in shortfalls
    )


def placement_view(placement: PodPlacement) -> Json:
    return {
        "nodes": list(placement.nodes),
        "refused": {
            node: [
                f"{r.dimension}: {to_quantity(r.dimension, r.requested)} requested of "
                f"{to_quantity(r.dimension, r.idle)} idle, {to_quantity(r.dimension, r.reserved)} "
                f"kept for idle {r.resource}"
                for r in refusals
            ]
            for node, refusals in placement.refused.items()
        },
    }
