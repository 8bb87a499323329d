"""Reclaim in a share round: the engine's inputs built from what the round already has, and its
plan per SchedulerPolicy whose ``spec.reclaim.mode`` is not Off (``statuses`` renders the plan
as ``status.reclaim``).

What the inputs come from:

- queues: the share result (deserved, allocated, guarantee, parent) and ``spec.reclaimable``;
- nodes: the policy's governed nodes, their allocatable and the ledger's per-node totals (Σ
  requests, and ``pods``: how many are bound);
- waiting: the pods the admission gate holds and keeps held this round for want of room
  (``QuotaExceeded``, ``OvercommitHeadroomExceeded``, ``NoNodeFits``, ``BehindOthers``), in
  the admission order (lowest queue share first, then priority, age, name), each having
  waited ``now`` - its creation;
- running: the bound pods of the leaf queues that are overused (allocated > deserved in some
  dimension), read from the pod store's per-claim index: the cost is that of what is
  overused, never of every pod. A terminating pod (an accepted eviction, ours or anyone's),
  and a pod whose eviction this operator sent and the watch has not shown yet (``evicting``),
  is gone for the engine: left out of the candidates and out of its queue's allocated and its
  node's used.

Not built yet: the proportional reservation on accelerator nodes (``NodeState.reserved`` is
empty: a reclaimer is placed as if nodes kept nothing idle for accelerators), and a held
pod's node selector, affinity and tolerations (``Waiting.nodes`` is None: any node of its
policy). Pods of a PodGroup are placed one by one.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sharekeeper.engine.admission import AdmissionResult, NodePolicy, ReclaimMode
from sharekeeper.engine.gates import GateDecisions
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos.candidates import protected
from sharekeeper.engine.reclaim import (
    Gang,
    NodeState,
    QueueState,
    ReclaimInputs,
    ReclaimPlan,
    ReclaimSettings,
    Running,
    Waiting,
    plan_reclaim,
)
from sharekeeper.engine.resources import Amounts, add, exceeded_part
from sharekeeper.engine.shares import PodSnapshot, ShareResult, ShareSnapshot
from sharekeeper.engine.shares.snapshot import DEFAULT_QUEUE, PODS, PolicyName, QueueName
from sharekeeper.model.records import PodRecord

WAITING_FOR_ROOM = frozenset(
    {"QuotaExceeded", "OvercommitHeadroomExceeded", "NoNodeFits", "BehindOthers"}
)
"""Why a held pod waits when room elsewhere could let it go; the others (no queue, a closed
queue, an incomplete gang, a resource no node offers...) are not helped by evicting anyone."""


class BoundPods(Protocol):
    """The pod store's per-claim index (``cluster.store.PodStore``)."""

    def bound_claiming(self, claim: Hashable) -> list[PodRecord]: ...


@dataclass(frozen=True, slots=True)
class PolicyReclaim:
    """One policy's reclaim round."""

    policy: PolicyName
    mode: ReclaimMode
    inputs: ReclaimInputs
    plan: ReclaimPlan


def reclaim_rounds(
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    shares: ShareResult,
    facts: AdmissionResult,
    gates: GateDecisions,
    *,
    held: Iterable[PodSnapshot],
    pods: BoundPods | None,
    now: float,
    evicting: Collection[PodKey] = frozenset(),
) -> dict[PolicyName, PolicyReclaim]:
    """The plan of each policy whose reclaim mode is not Off (none without ``pods``)."""
    wanted = {
        name: settings.reclaim
        for name, settings in node_policies.items()
        if settings.reclaim.mode != "Off" and name in shares.policies
    }
    if pods is None or not wanted:
        return {}
    waiting_by_policy = _waiting(shares, gates, held, now, wanted.keys())
    rounds = {}
    for policy, config in sorted(wanted.items()):
        inputs = reclaim_inputs(
            policy, snapshot, shares, facts, waiting=waiting_by_policy.get(policy, ()),
            pods=pods, settings=config.settings, evicting=evicting,
        )  # fmt: skip
        rounds[policy] = PolicyReclaim(policy, config.mode, inputs, plan_reclaim(inputs))
    return rounds


def _waiting(
    shares: ShareResult,
    gates: GateDecisions,
    held: Iterable[PodSnapshot],
    now: float,
    policies: Collection[PolicyName],
) -> dict[PolicyName, list[Waiting]]:
    """The held pods that wait for room under ``policies``, each with its place in the
    admission order (numbered across policies: only the order within one matters)."""
    ordered = []
    for pod in held:
        key = PodKey(pod.namespace, pod.name)
        why = gates.waiting.get(key)
        if why is None or why.reason not in WAITING_FOR_ROOM:
            continue
        share = shares.queues.get(QueueName(why.queue))
        if share is None or share.policy is None or share.policy not in policies:
            continue
        order = (share.share, -pod.priority, pod.created_seconds, f"{pod.namespace}/{pod.name}")
        ordered.append((order, pod, why.queue, share.policy))
    ordered.sort(key=lambda entry: entry[0])
    by_policy: dict[PolicyName, list[Waiting]] = {}
    for index, (_, pod, queue, policy) in enumerate(ordered):
        dimensions = shares.policies[policy].dimensions
        by_policy.setdefault(policy, []).append(
            Waiting(
                namespace=pod.namespace,
                name=pod.name,
                queue=queue,
                request=_within(pod.request, dimensions),
                waited_seconds=max(now - pod.created_seconds, 0.0),
                order=index,
                nodes=None,
            )
        )
    return by_policy


def reclaim_inputs(
    policy: PolicyName,
    snapshot: ShareSnapshot,
    shares: ShareResult,
    facts: AdmissionResult,
    *,
    waiting: Sequence[Waiting],
    pods: BoundPods,
    settings: ReclaimSettings,
    evicting: Collection[PodKey] = frozenset(),
) -> ReclaimInputs:
    """One policy's ``ReclaimInputs``. O(the policy's queues and nodes + the pods of its
    overused leaf queues)."""
    dimensions = shares.policies[policy].dimensions
    specs = {queue.name: queue for queue in snapshot.queues}
    governed = {name: share for name, share in shares.queues.items() if share.policy == policy}
    overused = [
        name
        for name, share in sorted(governed.items())
        if share.leaf and _over(share.allocated, share.deserved)
    ] if waiting else []  # fmt: skip
    running: list[Running] = []
    gone_by_queue: dict[str, dict[str, int]] = {}
    gone_by_node: dict[str, dict[str, int]] = {}
    groups_named: set[tuple[str, str]] = set()
    # PodGroups by the queue they charge: once per round, and only when some queue is overused.
    groups_of: dict[str, list[tuple[str, str]]] = {}
    for group in snapshot.pod_groups if overused else ():
        charged = group.queue or DEFAULT_QUEUE
        groups_of.setdefault(charged, []).append((group.namespace, group.name))
    for queue in overused:
        refused = shares.refused.get(queue, {})
        for record in _bound_pods(queue, policy, snapshot, pods, groups_of.get(queue, ())):
            pod, view = record.share, record.qos
            if pod.namespace in refused or pod.node_name is None:
                continue
            request = _within(pod.request, dimensions)
            key = (pod.namespace, pod.name)
            if (view is not None and view.terminating) or key in evicting:
                gone_by_queue[queue] = add(gone_by_queue.get(queue, {}), request)
                gone_by_node[pod.node_name] = add(
                    gone_by_node.get(pod.node_name, {}), {**request, PODS: 1}
                )
                continue
            running.append(
                Running(
                    namespace=pod.namespace,
                    name=pod.name,
                    uid=view.uid if view is not None else "",
                    queue=queue,
                    node=pod.node_name,
                    request=request,
                    priority=view.priority if view is not None else 0,
                    created_seconds=float(view.start_time or 0) if view is not None else 0.0,
                    # A pod whose QoS fields cannot be read is never acted on, here as there.
                    protected=view is None or protected(view),
                    group=pod.group_name,
                )
            )
            if pod.group_name:
                groups_named.add((pod.namespace, pod.group_name))
    # What is gone from a leaf is gone from every queue above it too.
    gone_above: dict[str, dict[str, int]] = {}
    for leaf, amounts in gone_by_queue.items():
        above: QueueName | None = QueueName(leaf)
        seen: set[str] = set()
        while above is not None and above in governed and above not in seen:
            seen.add(above)
            gone_above[above] = add(gone_above.get(above, {}), amounts)
            above = governed[above].parent
    queues = tuple(
        QueueState(
            name=name,
            policy=policy,
            parent=share.parent,
            deserved=share.deserved,
            allocated=exceeded_part(share.allocated, gone_above.get(name, {})),
            guarantee=share.guarantee,
            reclaimable=specs[name].reclaimable if name in specs else True,
        )
        for name, share in sorted(governed.items())
    )
    used, counts = snapshot.totals.node_used, snapshot.totals.node_pods
    nodes = tuple(
        NodeState(
            name=node.name,
            policy=policy,
            allocatable=node.allocatable,
            # With ``pods``, their count: a node full by pod count has no room.
            used=exceeded_part(
                {**used.get(node.name, {}), PODS: counts.get(node.name, 0)},
                gone_by_node.get(node.name, {}),
            ),
            # The proportional reservation is not read yet: nodes keep nothing idle here.
            reserved={},
            reserved_for=frozenset(),
        )
        for node in snapshot.nodes
        if (admitted := facts.nodes.get(node.name)) is not None and admitted.policy == policy
    )
    groups = {(g.namespace, g.name): g for g in snapshot.pod_groups} if groups_named else {}
    gangs = tuple(
        Gang(
            namespace=namespace,
            name=name,
            running=members.allocated_pods if members is not None else 0,
            min_member=groups[(namespace, name)].min_member,
        )
        for namespace, name in sorted(groups_named)
        if (namespace, name) in groups
        and (members := snapshot.totals.groups.get((namespace, name))) is not None
    )
    return ReclaimInputs(
        queues=queues,
        nodes=nodes,
        running=tuple(running),
        gangs=gangs,
        waiting=tuple(waiting),
        excluded=frozenset(),
        settings=settings,
    )


def _bound_pods(
    queue: str,
    policy: PolicyName,
    snapshot: ShareSnapshot,
    pods: BoundPods,
    groups: Iterable[tuple[str, str]],
) -> list[PodRecord]:
    """The bound pods charged to ``queue``: those naming it, those of its PodGroups
    (``groups``) that name no queue themselves, and for the default queue the pods naming
    nothing whose scheduler the policy manages."""
    found = list(pods.bound_claiming(("named", queue)))
    for namespace, name in groups:
        found += pods.bound_claiming(("grouped", namespace, name))
    if queue == DEFAULT_QUEUE:
        spec = next((p for p in snapshot.policies if p.name == policy), None)
        for scheduler in sorted(spec.sharing.scheduler_names) if spec is not None else ():
            found += pods.bound_claiming(("unnamed", scheduler))
    return sorted(found, key=lambda record: (record.share.namespace, record.share.name))


def _over(allocated: Amounts, deserved: Amounts) -> bool:
    return any(amount > deserved.get(name, 0) for name, amount in allocated.items() if name != PODS)


def _within(request: Amounts, dimensions: Collection[str]) -> dict[str, int]:
    return {name: amount for name, amount in request.items() if name in dimensions and name != PODS}
