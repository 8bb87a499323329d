"""Everything Sharekeeper publishes for one snapshot, as Kubernetes-shaped values.

The running operator and ``sharekeeper simulate`` both call ``publication``: what simulate
prints is what the operator writes, by construction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sharekeeper.api.policy import overcommit_section, policy_status
from sharekeeper.api.queue import queue_status
from sharekeeper.engine.admission import NodePolicy, admission_facts, placements
from sharekeeper.engine.gates import GateDecisions, Waiting, gate_decisions
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.overcommit import QueueAdmission, Shortfall
from sharekeeper.engine.proportional import PendingPod, PodPlacement
from sharekeeper.engine.shares import PodSnapshot, ShareResult, ShareSnapshot, deserved_shares
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.conditions import condition
from sharekeeper.model.nodes import node_annotations
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.quantities import to_quantity
from sharekeeper.pipeline.reclaiming import (
    BoundPods,
    PolicyReclaim,
    reclaim_rounds,
    reclaim_section,
)


@dataclass(frozen=True, slots=True)
class Publication:
    queues: Mapping[str, MutableObj]
    """Queue name -> status."""
    policies: Mapping[str, MutableObj]
    """SchedulerPolicy name -> status."""
    nodes: Mapping[str, Mapping[str, str]]
    """Node name -> the share loop's annotations (empty: remove ours)."""
    placements: Mapping[str, MutableObj]
    """Pending pod (``namespace/name``) -> where the proportional predicate lets it go; only
    for the ``pending`` pods asked about."""
    unknown_queues: tuple[str, ...]
    """Pods that name a queue that does not exist."""
    shares: ShareResult
    """The share engine's numbers, for metrics."""
    gates: GateDecisions = field(default_factory=lambda: GateDecisions((), {}))
    """Which pods held by the admission gate go now, and why the others wait."""
    reclaims: Mapping[PolicyName, PolicyReclaim] = field(default_factory=dict)
    """The reclaim plan of each policy whose ``spec.reclaim.mode`` is not Off."""


def publication(
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    pending: Iterable[PendingPod] = (),
    *,
    held: Iterable[PodSnapshot] = (),
    released: Collection[PodKey] = frozenset(),
    pods: BoundPods | None = None,
    now: float | None = None,
    evicting: Collection[PodKey] = frozenset(),
) -> Publication:
    """``pending``: the pods to run the proportional predicate for (``placements``); the
    operator passes none, since nothing it publishes reads them. ``held``: the pods the
    admission gate holds; ``released``: those released already whose release the caller has
    not seen yet (``engine.gates``). ``pods``: the store's bound pods by claim, for reclaim
    (none: no reclaim plan); ``now``: the round's time (default: the snapshot's);
    ``evicting``: pods whose eviction was sent and not seen yet (gone, for reclaim)."""
    held = list(held)
    shares = deserved_shares(snapshot)
    facts = admission_facts(snapshot, node_policies, shares)
    queues = {}
    for name, share in sorted(shares.queues.items()):
        status = queue_status(share)
        verdict = facts.queues.get(name)
        if verdict is not None and verdict.podgroup is not None:
            status["conditions"].append(enqueueable(verdict))
        queues[str(name)] = status
    gates = gate_decisions(snapshot, node_policies, shares, facts, held=held, released=released)
    reclaims = reclaim_rounds(
        snapshot, node_policies, shares, facts, gates, held=held, pods=pods,
        now=snapshot.now_seconds if now is None else now, evicting=evicting,
    )  # fmt: skip
    policies = {}
    for policy, policy_share in sorted(shares.policies.items()):
        status = policy_status(policy_share)
        if policy in facts.policies:
            status["overcommit"] = overcommit_section(facts.policies[policy])
        if policy in reclaims:
            status["reclaim"] = reclaim_section(reclaims[policy])
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
        gates=gates,
        reclaims=reclaims,
    )


def enqueueable(verdict: QueueAdmission) -> MutableObj:
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


def waiting_text(waiting: Waiting, namespace: str | None = None) -> str:
    """Why a held pod waits, for its Event and ``simulate``. ``namespace``: the held pod's.
    Whoever may read a pod's Events may read its namespace's, and no other: a pod of another
    namespace is never named (nor any pod, when ``namespace`` is not given)."""
    queue = f"queue {waiting.queue}"
    match waiting.reason:
        case "NoQueue":
            return "it names no queue: nothing admits it (remove the gate by hand)"
        case "QueueNotFound":
            return f"it names {queue}, which does not exist"
        case "NamespaceNotAdmitted":
            return f"{queue}'s spec.namespaces does not admit this pod's namespace"
        case "NotGoverned":
            return f"no SchedulerPolicy governs {queue}, so it has no share to admit into"
        case "QueueClosed":
            return f"{queue} is Closed"
        case "QueueNotLeaf":
            return f"{queue} has queues below it; pods belong in leaf queues"
        case "ResourceNotOffered":
            asked = listed(waiting.resources, "resources")
            offers = f"which no node of policy {waiting.policy} offers"
            if waiting.behind is None:
                return f"it requests {asked}, {offers}"
            return f"pod {waiting.behind} of its PodGroup requests {asked}, {offers}; it goes whole"
        case "GangIncomplete":
            present, needed = waiting.members
            return f"its PodGroup has {present} of its minMember {needed} pods; it goes whole"
        case "QuotaExceeded":
            bound = "realCapability" if waiting.borrow else "deserved share"
            where = queue if waiting.limiting is None else f"queue {waiting.limiting} above it"
            return f"no room in {where}'s {bound}: {shortfall_text(waiting.shortfalls)}"
        case "OvercommitHeadroomExceeded":
            return "the policy's overcommitted headroom is too small: " + shortfall_text(
                waiting.shortfalls
            )
        case "NoNodeFits":
            return f"no node has room for it: {shortfall_text(waiting.shortfalls)} on the best node"
        case "BehindOthers":
            behind = waiting.behind or ""
            if namespace is None:
                first = f"another pod in {queue}"
            elif behind.startswith(f"{namespace}/"):
                first = f"pod {behind} of {queue}"
            else:
                first = f"a pod of another namespace in {queue}"
            return f"it waits behind {first} (priority, then age)"


MAX_LISTED = 5
"""Resources named in one message; the rest are counted (a pod may ask for hundreds)."""


def listed(names: Sequence[str], noun: str) -> str:
    """``a, b and c``; past ``MAX_LISTED``: ``a, b, c, d, e and 495 more <noun>``."""
    if len(names) <= 1:
        return "".join(names)
    if len(names) <= MAX_LISTED:
        return f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{', '.join(names[:MAX_LISTED])} and {len(names) - MAX_LISTED} more {noun}"


def shortfall_text(shortfalls: tuple[Shortfall, ...]) -> str:
    text = "; ".join(
        f"{s.resource} {to_quantity(s.resource, s.requested)} requested, "
        f"{to_quantity(s.resource, s.available)} available"
        for s in shortfalls[:MAX_LISTED]
    )
    more = len(shortfalls) - MAX_LISTED
    return text + (f"; and {more} more resource{'s' if more > 1 else ''}" if more > 0 else "")


def placement_view(placement: PodPlacement) -> MutableObj:
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
