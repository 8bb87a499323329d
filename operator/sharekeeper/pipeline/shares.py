"""Everything Sharekeeper publishes for one snapshot, as Kubernetes-shaped values.

The running operator and ``sharekeeper simulate`` both call ``publication``: what simulate
prints is what the operator writes, by construction. It reads in one direction: the engines
run once on the snapshot (shares, then admission facts, the gate's decisions and reclaim,
each reading what came before), and their results are rendered once: Queue and
SchedulerPolicy status by ``statuses``, node annotations by ``model.nodes``. The gate's
decisions and the reclaim plans are handed on as computed, for the caller to act on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from sharekeeper.engine.admission import (
    AdmissionResult,
    KnownNodes,
    NodeAdmission,
    NodePolicy,
    admission_facts,
    placements,
)
from sharekeeper.engine.gates import GateDecisions, gate_decisions
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.proportional import PendingPod, PodPlacement
from sharekeeper.engine.shares import (
    PodSnapshot,
    ShareMemo,
    ShareResult,
    ShareSnapshot,
    deserved_shares,
)
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.nodes import Spellings, node_annotations
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.quantities import to_quantity
from sharekeeper.pipeline.reclaiming import BoundPods, PolicyReclaim, ReclaimRead, reclaim_rounds
from sharekeeper.pipeline.statuses import (
    RenderedQueues,
    queue_statuses,
    scheduler_policy_statuses,
)
from sharekeeper.publish.diffing import Unchanged


@dataclass(slots=True)
class Carried:
    """What a caller's rounds hand on, each to the next, so that only what has new inputs is
    computed, rendered and diffed again: the Queue statuses rendered, each node's admission
    facts and annotations, and the objects whose diff found nothing to write. Make a new one
    when what was written may no longer be what the objects hold (a new leadership term)."""

    queues: RenderedQueues = field(default_factory=RenderedQueues)
    nodes: KnownNodes = field(default_factory=KnownNodes)
    annotations: dict[str, tuple[NodeAdmission | None, Mapping[str, str]]] = field(
        default_factory=dict
    )
    """Per node, its facts and the annotations rendered from them."""
    statuses: Unchanged = field(default_factory=Unchanged)
    """Queues (``publish.statuses.queue_writes``)."""
    node_writes: Unchanged = field(default_factory=Unchanged)
    """Nodes (``publish.annotations.annotation_writes``)."""
    reclaim: ReclaimRead = field(default_factory=ReclaimRead)
    """Reclaim's reading of the overused queues' bound pods, and the nodes' states."""
    shares: ShareMemo = field(default_factory=ShareMemo)
    """What the share engine read from the policies', queues' and nodes' specs, and what it
    made of the queues whose pods and numbers did not change."""


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
    gates: GateDecisions
    """Which pods held by the admission gate go now, and why the others wait."""
    reclaims: Mapping[PolicyName, PolicyReclaim]
    """The reclaim plan of each policy whose ``spec.reclaim.mode`` is not Off."""


def publication(
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    pending: Iterable[PendingPod] = (),
    *,
    held: Iterable[PodSnapshot] = (),
    released: Collection[PodKey] = frozenset(),
    unbound: Iterable[PodSnapshot] = (),
    pods: BoundPods | None = None,
    now: float | None = None,
    evicting: Collection[PodKey] = frozenset(),
    carried: Carried | None = None,
    first: tuple[Collection[str], Callable[[Mapping[str, MutableObj]], None]] | None = None,
) -> Publication:
    """``pending``: the pods to run the proportional predicate for (``placements``); the
    operator passes none, since nothing it publishes reads them. ``held``: the pods the
    admission gate holds; ``released``: those released already whose release the caller has
    not seen yet (``engine.gates``); ``unbound``: the released pods no scheduler has bound yet,
    timed out at ``now`` against ``bindTimeoutSeconds``. ``pods``: the store's bound pods by
    claim, for reclaim (none: no reclaim plan); ``now``: the round's time (default: the
    snapshot's); ``evicting``: pods whose eviction was sent and not seen yet (gone, for
    reclaim); ``carried``: what the caller's last round computed and rendered, reused where
    the inputs are the same (and updated); ``first``: some queues' names and what to call with
    their statuses as soon as the engines are done, before every other queue is rendered (the
    operator sends them while it renders the rest)."""
    held = list(held)
    now = snapshot.now_seconds if now is None else now
    shares = deserved_shares(snapshot, carried.shares if carried else None)
    facts = admission_facts(snapshot, node_policies, shares, carried.nodes if carried else None)
    gates = gate_decisions(
        snapshot, node_policies, shares, facts, held=held, released=released, unbound=unbound,
        now=now,
    )  # fmt: skip
    reclaims = reclaim_rounds(
        snapshot, node_policies, shares, facts, gates, held=held, pods=pods, now=now,
        evicting=evicting, read=carried.reclaim if carried else None,
    )  # fmt: skip
    if first is not None:
        names, call = first
        call(queue_statuses(shares, facts, gates, only=names))
    placed = placements(pending, snapshot, node_policies, facts)
    return Publication(
        queues=queue_statuses(shares, facts, gates, carried.queues if carried else None),
        policies=scheduler_policy_statuses(shares, facts, reclaims),
        nodes=_annotations(snapshot, facts, carried),
        placements={pod: placement_view(placement) for pod, placement in placed.items()},
        unknown_queues=tuple(r.message for r in shares.reasons if r.kind == "UnknownQueue"),
        shares=shares,
        gates=gates,
        reclaims=reclaims,
    )


def _annotations(
    snapshot: ShareSnapshot, facts: AdmissionResult, carried: Carried | None
) -> dict[str, Mapping[str, str]]:
    """Each node's annotations; those of a node whose facts are the very same object as in the
    carried round are the same object too (at 5,000 nodes, rendering them all again was
    30-50 ms a round)."""
    last = carried.annotations if carried is not None else {}
    now: dict[str, tuple[NodeAdmission | None, Mapping[str, str]]] = {}
    spelled: Spellings = {}
    for node in snapshot.nodes:
        node_facts = facts.nodes.get(node.name)
        before = last.get(node.name)
        if before is not None and before[0] is node_facts:
            now[node.name] = before
        else:
            now[node.name] = (node_facts, node_annotations(node_facts, spelled))
    if carried is not None:
        carried.annotations = now
    return {name: annotations for name, (_, annotations) in now.items()}


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
