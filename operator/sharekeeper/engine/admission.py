"""Admission facts per node, policy and queue: overcommit and GPU-proportional reservation.

Composes the overcommit and proportional engines with the share engine's result for one
snapshot, so the operator and ``simulate`` publish the same numbers:

- per governed node: the policy's effective factors and the node's overcommitted allocatable,
  and (when the policy turns it on) the CPU/memory kept idle for its idle accelerators;
- per policy: ``status.overcommit`` (factors, overcommitted total, used, inqueue, headroom);
- per queue with a pending PodGroup: whether the next would be admitted, and why not;
- on demand (``placements``), per pending pod without accelerators: the nodes the proportional
  predicate lets it onto.

A node selected by several policies belongs to the oldest (``governance``); one selected by
none gets nothing: its annotations are removed. Complexity: O(policies · nodes + PodGroups); no
pod is visited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from sharekeeper.engine import overcommit, proportional
from sharekeeper.engine.reclaim import ReclaimSettings
from sharekeeper.engine.resources import Amounts, sum_amounts
from sharekeeper.engine.shares import (
    GroupPods,
    PolicySnapshot,
    QueueShare,
    ShareResult,
    ShareSnapshot,
)
from sharekeeper.engine.shares.governance import governance
from sharekeeper.engine.shares.snapshot import PolicyName, QueueName

ReclaimMode = Literal["Off", "Preview", "On"]


RECLAIM_UNSET = ReclaimSettings(after_seconds=60.0, max_evictions=10)
"""What a NodePolicy built without the API model carries (tests, ``simulate`` defaults): the
API model's defaults, which decide for every SchedulerPolicy read."""


BIND_TIMEOUT_UNSET = 300.0
"""What a NodePolicy built without the API model carries: the API model's default."""


@dataclass(frozen=True, slots=True)
class ReclaimConfig:
    """``spec.reclaim`` of a SchedulerPolicy (the API model has the defaults)."""

    mode: ReclaimMode = "Off"
    settings: ReclaimSettings = RECLAIM_UNSET


@dataclass(frozen=True, slots=True)
class NodePolicy:
    """The node-level and admission settings of one SchedulerPolicy."""

    overcommit: overcommit.OvercommitSpec = field(default_factory=overcommit.OvercommitSpec)
    proportions: Mapping[str, proportional.Proportion] = field(default_factory=dict)
    """Per accelerator resource, what one idle unit keeps idle; empty when turned off."""
    borrow: bool = False
    """``admission.borrow``: held pods are admitted up to realCapability, not deserved."""
    bind_timeout_seconds: float = BIND_TIMEOUT_UNSET
    """``admission.bindTimeoutSeconds``: a released pod not bound this long after its release
    no longer holds its queue's room (``engine.gates``)."""
    reclaim: ReclaimConfig = ReclaimConfig()


@dataclass(frozen=True, slots=True)
class NodeAdmission:
    policy: PolicyName
    overcommit: overcommit.NodeOvercommit
    reservation: proportional.NodeReservation | None
    """None when the policy's reservation is off or the node has no configured resource."""


@dataclass(frozen=True, slots=True)
class AdmissionResult:
    nodes: Mapping[str, NodeAdmission]
    """Governed nodes only."""
    policies: Mapping[PolicyName, overcommit.OvercommitResult]
    queues: Mapping[QueueName, overcommit.QueueAdmission]
    """The verdict on each governed queue's next pending PodGroup; a queue with none pending
    has no entry."""


_NodeInputs = tuple[PolicyName, Amounts, Amounts, NodePolicy]
"""All a node's facts are computed from: its policy, its allocatable, what its pods use and
the policy's settings."""

_IDLE: Amounts = {}
"""What a node without pods uses (one object, so that its facts are known again)."""


class KnownNodes:
    """The facts of the caller's last round per node, with what they were computed from. A
    node whose inputs are the same gets the very same facts: the store hands on a node whose
    object did not change, and the ledger a node's sums whose pods did not, as the same
    objects, so comparing them mostly compares identities. At 5,000 nodes, computing every
    node's facts again was 50-100 ms of a round that changed none of them."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[_NodeInputs, NodeAdmission]] = {}


def admission_facts(
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    shares: ShareResult,
    known: KnownNodes | None = None,
) -> AdmissionResult:
    """``known``: the caller's last round's node facts, reused where the inputs are equal, and
    updated."""
    policies = [p for p in snapshot.policies if p.name in node_policies]
    owners = governance(policies, {n.name: n.labels for n in snapshot.nodes}, "node").owner
    used = snapshot.totals.node_used
    last = known.last if known is not None else {}
    now: dict[str, tuple[_NodeInputs, NodeAdmission]] = {}
    nodes: dict[str, NodeAdmission] = {}
    for node in snapshot.nodes:
        policy = owners.get(node.name)
        if policy is None:
            continue
        settings = node_policies[policy]
        inputs = (policy, node.allocatable, used.get(node.name, _IDLE), settings)
        before = last.get(node.name)
        if before is not None and before[0] == inputs:  # identical parts compare at once
            facts = before[1]
        else:
            facts = _node_admission(*inputs, name=node.name)
        nodes[node.name] = facts
        now[node.name] = (inputs, facts)
    if known is not None:
        known.last = now
    groups = _pod_groups(snapshot)
    statuses = {
        policy.name: _policy_overcommit(
            policy, node_policies[policy.name], nodes, used, groups=groups, shares=shares
        )
        for policy in policies
    }
    return AdmissionResult(
        nodes=nodes, policies=statuses, queues=_queue_admissions(shares, groups, statuses)
    )


def _node_admission(
    policy: PolicyName, allocatable: Amounts, used: Amounts, settings: NodePolicy, *, name: str
) -> NodeAdmission:
    return NodeAdmission(
        policy=policy,
        overcommit=overcommit.node_overcommit(allocatable, settings.overcommit),
        reservation=proportional.proportional_reservation(
            proportional.NodeUsage(name, allocatable, used), settings.proportions
        )
        if settings.proportions
        else None,
    )


def _pod_groups(snapshot: ShareSnapshot) -> list[overcommit.OvercommitPodGroup]:
    """The share engine's PodGroups, with the aggregates of their pods."""
    members = snapshot.totals.groups
    empty = GroupPods()
    return [
        overcommit.OvercommitPodGroup(
            name=f"{group.namespace}/{group.name}",
            queue=group.queue or "",
            phase=group.phase,
            min_member=group.min_member,
            min_resources=group.min_resources,
            allocated=(pods := members.get((group.namespace, group.name), empty)).allocated,
            allocated_pods=pods.allocated_pods,
            gated=pods.gated,
            created=datetime.fromtimestamp(group.created_seconds, UTC),
        )
        for group in snapshot.pod_groups
    ]


def _policy_overcommit(
    policy: PolicySnapshot,
    settings: NodePolicy,
    nodes: Mapping[str, NodeAdmission],
    used: Mapping[str, Amounts],
    *,
    groups: list[overcommit.OvercommitPodGroup],
    shares: ShareResult,
) -> overcommit.OvercommitResult:
    mine = [name for name, facts in nodes.items() if facts.policy == policy.name]
    share = shares.policies.get(policy.name)
    queues = {str(name) for name, q in shares.queues.items() if q.policy == policy.name}
    return overcommit.overcommit_status(
        overcommit.OvercommitSnapshot(
            spec=settings.overcommit,
            # The gross allocatable: ``used`` counts every bound pod, unmanaged ones too.
            total=share.allocatable if share is not None else {},
            used=sum_amounts(used.get(name, {}) for name in mine),
            podgroups=[group for group in groups if group.queue in queues],
            dimensions=share.dimensions if share is not None else None,
        )
    )


def _queue_admissions(
    shares: ShareResult,
    groups: list[overcommit.OvercommitPodGroup],
    statuses: Mapping[PolicyName, overcommit.OvercommitResult],
) -> dict[QueueName, overcommit.QueueAdmission]:
    """The verdict of each governed queue with a pending PodGroup, against its own policy's
    headroom. Only those: a queue with nothing pending has no verdict to read, and at 11,430
    queues in a tree, judging them all took 50-70 ms a round."""
    pending = sorted({QueueName(group.queue) for group in groups if group.phase == "Pending"})
    verdicts: dict[QueueName, overcommit.QueueAdmission] = {}
    for policy, status in statuses.items():
        views = queue_views(shares, policy, pending).values()
        found = overcommit.queue_admissions(views, groups, status.headroom)
        verdicts.update({QueueName(name): verdict for name, verdict in found.items()})
    return verdicts


def queue_views(
    shares: ShareResult, policy: PolicyName, wanted: Iterable[QueueName]
) -> dict[QueueName, overcommit.OvercommitQueue]:
    """The queues among ``wanted`` that ``policy`` governs, as the admission checks read them,
    each with the queues above it. Built from the top down, each view once: a queue's
    ancestors are its parent's view and the parent's own ancestors."""
    queues = shares.queues
    views: dict[QueueName, overcommit.OvercommitQueue] = {}
    mine = [name for name in wanted if (q := queues.get(name)) is not None and q.policy == policy]
    for name in mine:
        path: list[QueueName] = []
        above: QueueName | None = name
        # Up to a queue already built, the root, or a parent outside the policy; a cycle
        # ends the walk too (the share engine reports broken trees).
        while (
            above is not None
            and (above_share := queues.get(above)) is not None
            and above_share.policy == policy
            and above not in views
            and above not in path
        ):
            path.append(above)
            above = above_share.parent
        parent = views.get(above) if above is not None else None
        for queue in reversed(path):
            share = queues[queue]
            parent = views[queue] = overcommit.OvercommitQueue(
                name=queue,
                open=share.state == "Open",
                allocated=share.allocated,
                inqueue=share.inqueue,
                elastic=share.elastic,
                real_capability=share.real_capability,
                leaf=share.leaf,
                ancestors=(parent, *parent.ancestors) if parent is not None else (),
            )
    return {name: views[name] for name in mine}


def ancestors(name: QueueName, shares: Mapping[QueueName, QueueShare]) -> list[QueueName]:
    """The queues above ``name``, nearest first (the share engine checked the tree)."""
    found: list[QueueName] = []
    parent = shares[name].parent
    while parent is not None and parent in shares and len(found) < len(shares):
        found.append(parent)
        parent = shares[parent].parent
    return found


def placements(
    pending: Iterable[proportional.PendingPod],
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    facts: AdmissionResult,
) -> dict[str, proportional.PodPlacement]:
    """The proportional predicate for ``pending`` pods over the nodes of every policy that keeps
    reservations, each node judged by its own policy's proportions.

    O(pending pods x nodes): computed only where something reads it (``simulate``), never in the
    operator's rounds.
    """
    pods = list(pending)
    by_name = {str(node.name): node for node in snapshot.nodes}
    used = snapshot.totals.node_used
    found_by_pod: dict[str, proportional.PodPlacement] = {}
    for policy, settings in sorted(node_policies.items()):
        if not settings.proportions:
            continue
        views = [
            proportional.NodeUsage(name, by_name[name].allocatable, used.get(name, {}))
            for name, node_facts in sorted(facts.nodes.items())
            if node_facts.policy == policy
        ]
        found = proportional.proportional_placements(pods, views, settings.proportions)
        for pod, placement in found.items():
            before = found_by_pod.get(pod, proportional.PodPlacement((), {}))
            found_by_pod[pod] = proportional.PodPlacement(
                nodes=tuple(sorted({*before.nodes, *placement.nodes})),
                refused=dict(sorted({**before.refused, **placement.refused}.items())),
            )
    return dict(sorted(found_by_pod.items()))
