"""Reclaim in a share round: the engine's inputs built from what the round already has, and its
plan per SchedulerPolicy whose ``spec.reclaim.mode`` is not Off (``statuses`` renders the plan
as ``status.reclaim``).

What the inputs come from:

- queues: the share result (deserved, allocated, guarantee, parent) and ``spec.reclaimable``;
- nodes: the policy's governed nodes, their allocatable and the ledger's per-node totals (Σ
  requests, and ``pods``: how many are bound);
- waiting: the pods the admission gate holds and keeps held this round for want of room
  within their deserved share (``_waits_for_room``), each having waited ``now`` - its
  creation; and the pods outside the gate that the scheduler finds Unschedulable (their
  ``PodScheduled`` condition), that name a queue (label, Volcano annotation or PodGroup) which
  admits their namespace and is an Open leaf of the policy, each having waited since the
  condition's ``lastTransitionTime``. Together, in the admission order
  (lowest queue share first, then priority, age, name), each with the nodes of its policy its
  own node selector, required node affinity and tolerations let it use (``_Eligible``, once
  per distinct constraints);
- running: the bound pods of the leaf queues that are overused (allocated > deserved in some
  dimension), read from the pod store's per-claim index: the cost is that of what is
  overused, never of every pod, and a queue's are read again only once they changed
  (``ReclaimRead``, carried from round to round). A terminating pod (an accepted eviction,
  ours or anyone's), and a pod whose eviction this operator sent and the watch has not shown
  yet (``evicting``), is gone for the engine: left out of the candidates and out of its
  queue's allocated and its node's used.

- the proportional reservation: with the policy's proportions, each node's reservation for its
  idle accelerators, from what it uses once the gone pods are gone (their accelerators are
  idle, so they keep their share idle too). A node's state is built again only once its
  object, sums, pod count or gone pods changed (``ReclaimRead`` too).

Not built yet: pods of a PodGroup are placed one by one.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Generic, Protocol, TypeVar

from sharekeeper.engine.admission import AdmissionResult, NodePolicy, ReclaimMode
from sharekeeper.engine.gates import GateDecisions, not_offered, queue_order
from sharekeeper.engine.gates import Waiting as GateWaiting
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.node_constraints import ANY_NODE, NodeConstraints
from sharekeeper.engine.proportional import NodeUsage, Proportion, proportional_reservation
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
    Waits,
    plan_reclaim,
)
from sharekeeper.engine.resources import NO_AMOUNTS, Amounts, add, exceeded_part
from sharekeeper.engine.shares import (
    PodSnapshot,
    QueueShare,
    ShareNode,
    ShareResult,
    ShareSnapshot,
)
from sharekeeper.engine.shares.accounting import pod_claim
from sharekeeper.engine.shares.snapshot import (
    DEFAULT_QUEUE,
    PODS,
    GroupKey,
    PolicyName,
    QueueName,
)
from sharekeeper.model.records import PodRecord, WaitingPodRecord

_T = TypeVar("_T")

WAITING_FOR_ROOM = frozenset({"OvercommitHeadroomExceeded", "NoNodeFits"})
"""Why a held pod waits when room elsewhere would let the gate release it. The others are not
helped by evicting anyone: no queue, a closed queue, an incomplete gang, a resource no node
offers, and QuotaExceeded, a queue that has its share by the gate's count (its pods not bound
yet count, outside the gate or released): such a pod waits for its own queue's pods, and room
made for it would go to them or to the victims' replacements, never to it."""


def _waits_for_room(why: GateWaiting, waiting: Mapping[PodKey, GateWaiting]) -> bool:
    """Whether the gate holds a pod only for want of room that evictions could make: one of
    ``WAITING_FOR_ROOM`` within its deserved share (not as a borrower), or behind such a pod
    of its queue (``waiting``: the gate's reasons by pod)."""
    if why.reason == "BehindOthers" and why.behind is not None:
        namespace, _, name = why.behind.partition("/")
        head = waiting.get(PodKey(namespace, name))
        if head is None:
            return False
        why = head
    return why.reason in WAITING_FOR_ROOM and not why.borrow


class BoundPods(Protocol):
    """The pod store's indexes reclaim reads (``cluster.store.PodStore``): the bound pods per
    claim and when they last changed, and the pods that wait to be scheduled."""

    def bound_claiming(self, claim: Hashable) -> list[PodRecord]: ...

    def bound_changed(self, claim: Hashable) -> int: ...

    def unscheduled(self) -> Mapping[PodKey, WaitingPodRecord]: ...


@dataclass(frozen=True, slots=True)
class _QueuePods:
    """An overused queue's bound pods as reclaim reads them."""

    candidates: tuple[Running, ...]
    gone: tuple[tuple[str, Amounts], ...]
    """Node and request of each of its pods that is gone for the engine (terminating, or being
    evicted)."""
    groups: frozenset[GroupKey]
    """The PodGroups its candidates name."""


class _Kept(Generic[_T]):
    """What a round built, by key, with what each was built from: the last round's, which this
    one reuses where it is built from the same, and this round's, for the next."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[object, ...], _T]] = {}
        self._now: dict[str, tuple[tuple[object, ...], _T]] = {}

    def last(self, key: str, source: tuple[object, ...]) -> _T | None:
        """What the last round built for ``key``, if from the same ``source`` (identical parts
        compare at once)."""
        found = self._last.get(key)
        return found[1] if found is not None and found[0] == source else None

    def keep(self, key: str, source: tuple[object, ...], built: _T) -> None:
        self._now[key] = (source, built)

    def round_done(self) -> None:
        """What this round built is what the next one may reuse; nothing else is kept."""
        self._last, self._now = self._now, {}


class ReclaimRead:
    """What reclaim's last round read and built from its inputs, for the next to reuse where
    they are the same (the share result is new every round, but its amounts mostly equal; the
    ledger hands on an unchanged node's sums as the same object). At the top size, read again
    every round: the bound pods of each overused queue (37,000 candidates of 5,000 queues, most
    of building the engine's inputs), and 5,000 nodes' states (each node's proportional
    reservation worked out again). The queues' states are made every round."""

    def __init__(self) -> None:
        self.queue_pods: _Kept[_QueuePods] = _Kept()
        self.nodes: _Kept[NodeState] = _Kept()

    def round_done(self) -> None:
        for kept in (self.queue_pods, self.nodes):
            kept.round_done()


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
    read: ReclaimRead | None = None,
) -> dict[PolicyName, PolicyReclaim]:
    """The plan of each policy whose reclaim mode is not Off (none without ``pods``);
    ``read``: what the caller's last round read and built (updated)."""
    wanted = {
        name: settings.reclaim
        for name, settings in node_policies.items()
        if settings.reclaim.mode != "Off" and name in shares.policies
    }
    if pods is None or not wanted:
        return {}
    waiting_by_policy = _waiting(
        snapshot, shares, facts, gates, held=held, unscheduled=pods.unscheduled(), now=now,
        policies=wanted.keys(),
    )  # fmt: skip
    read = ReclaimRead() if read is None else read
    rounds = {}
    for policy, config in sorted(wanted.items()):
        waiting = waiting_by_policy.get(policy)
        if not waiting:
            # Nothing to decide, so nothing is read: no queue's or node's state (~20 ms a
            # round at the top size), and what ``read`` keeps stays for the next waiting pod.
            idle = ReclaimInputs((), (), {}, (), (), frozenset(), config.settings)
            rounds[policy] = PolicyReclaim(policy, config.mode, idle, ReclaimPlan((), Waits(), 0))
            continue
        inputs = reclaim_inputs(
            policy, snapshot, shares, facts, waiting=waiting, pods=pods,
            settings=config.settings, evicting=evicting,
            proportions=node_policies[policy].proportions, read=read,
        )  # fmt: skip
        plan = plan_reclaim(inputs)
        rounds[policy] = PolicyReclaim(policy, config.mode, inputs, plan)
    if waiting_by_policy:
        read.round_done()
    return rounds


def _waiting(
    snapshot: ShareSnapshot,
    shares: ShareResult,
    facts: AdmissionResult,
    gates: GateDecisions,
    *,
    held: Iterable[PodSnapshot],
    unscheduled: Mapping[PodKey, WaitingPodRecord],
    now: float,
    policies: Collection[PolicyName],
) -> dict[PolicyName, list[Waiting]]:
    """The pods that wait for room under ``policies``, each with its place in the admission
    order (numbered across policies: only the order within one matters) and the nodes of its
    policy it could use: the held pods the gate keeps waiting for room, and the pods the
    scheduler finds Unschedulable (``_unschedulable``). A pod is listed once.

    O(waiting pods), one pass with a few look-ups each, then a sort: at the top size, 10,000
    of each kind wait. Each ``Waiting`` is made as its pod is found, and numbered once sorted."""
    ordered: list[tuple[tuple[float, int, float, str], Waiting, PolicyName]] = []
    listed: set[PodKey] = set()
    gate_waiting = gates.waiting
    per_policy: dict[PolicyName, tuple[Set[str], _Eligible]] = {}

    def found(
        queue: QueueName, share: QueueShare, pod: PodSnapshot, constraints: NodeConstraints,
        since: float,
    ) -> None:  # fmt: skip
        policy = share.policy
        assert policy is not None  # a governed queue's
        facts_of = per_policy.get(policy)
        if facts_of is None:
            nodes = [
                n for n in snapshot.nodes if (f := facts.nodes.get(n.name)) and f.policy == policy
            ]
            facts_of = per_policy[policy] = (shares.policies[policy].dimensions, _Eligible(nodes))
        dimensions, eligible = facts_of
        waiting = Waiting(
            pod.namespace,
            pod.name,
            queue,
            _within(pod.request, dimensions),
            max(now - since, 0.0),
            0,  # numbered once all are sorted
            eligible.nodes_for(constraints),
            pod.group_name,
        )
        ordered.append(((share.share, *queue_order(pod)), waiting, policy))

    # Most held pods wait for their own queue (QuotaExceeded): when none waits for room, the
    # held pods are not walked at all.
    if any(_waits_for_room(why, gate_waiting) for why in gate_waiting.values()):
        for pod in held:
            key = PodKey(pod.namespace, pod.name)
            why = gate_waiting.get(key)
            if why is None or key in listed or not _waits_for_room(why, gate_waiting):
                continue
            queue = QueueName(why.queue)
            share = shares.queues.get(queue)
            if share is None or share.policy is None or share.policy not in policies:
                continue
            record = unscheduled.get(key)
            constraints = record.constraints if record is not None else ANY_NODE
            found(queue, share, pod, constraints, pod.created_seconds)
            listed.add(key)
    for share, queue, record, since in _unschedulable(
        snapshot, shares, unscheduled.values(), policies
    ):
        pod = record.share
        if listed and PodKey(pod.namespace, pod.name) in listed:
            continue
        found(queue, share, pod, record.constraints, since)
    ordered.sort(key=itemgetter(0))
    by_policy: dict[PolicyName, list[Waiting]] = {}
    for index, (_, waiting, policy) in enumerate(ordered):
        waiting.order = index
        by_policy.setdefault(policy, []).append(waiting)
    return by_policy


def _unschedulable(
    snapshot: ShareSnapshot,
    shares: ShareResult,
    unscheduled: Iterable[WaitingPodRecord],
    policies: Collection[PolicyName],
) -> Iterator[tuple[QueueShare, QueueName, WaitingPodRecord, float]]:
    """The pods the scheduler finds Unschedulable (outside the admission gate) that name a
    queue, by label, Volcano annotation or PodGroup (``accounting.pod_claim``: a PodGroup that
    names none charges the default queue), and that room could help: the queue exists, admits
    the pod's namespace, is an Open leaf governed by one of ``policies``, and its nodes offer
    every resource the pod asks for. Each with its queue's share and name, and since when the
    scheduler finds it Unschedulable."""
    groups: dict[tuple[str, str], str | None] | None = None
    queues, refused, offered = shares.queues, shares.refused, _offered(shares, policies)
    for record in unscheduled:
        pod = record.share
        since = record.unschedulable_since
        if since is None or pod.admission == "held" or pod.node_name is not None or pod.terminal:
            continue
        claim = pod_claim(pod)
        if claim[0] == "named":
            queue = QueueName(claim[1])
        elif claim[0] == "grouped":
            if groups is None:
                groups = {(g.namespace, g.name): g.queue for g in snapshot.pod_groups}
            queue = QueueName(groups.get(claim[1]) or DEFAULT_QUEUE)
        else:
            continue
        share = queues.get(queue)
        if (
            share is None
            or share.state != "Open"
            or not share.leaf
            or share.policy not in offered
            or (refused and pod.namespace in refused.get(queue, NO_AMOUNTS))
        ):
            continue
        names = offered[share.policy]
        if not pod.request.keys() <= names and not_offered(pod.request, names):
            continue
        yield share, queue, record, since


def _offered(shares: ShareResult, policies: Collection[PolicyName]) -> dict[PolicyName, Set[str]]:
    """What the nodes of each of ``policies`` offer (``PolicyShare.offered``)."""
    return {name: shares.policies[name].offered for name in policies if name in shares.policies}


class _Eligible:
    """A policy's nodes, and which of them a pod's own constraints let it use: computed once per
    distinct constraints in a round (the replicas of one workload share theirs)."""

    def __init__(self, nodes: Sequence[ShareNode]) -> None:
        self.nodes = nodes
        self.tainted = [node for node in nodes if node.taints]
        self.found: dict[NodeConstraints, frozenset[str] | None] = {}
        self._by_label: dict[tuple[str, str], list[ShareNode]] | None = None

    def nodes_for(self, constraints: NodeConstraints) -> frozenset[str] | None:
        """The names of the nodes it may use; None: every node of the policy."""
        if constraints is ANY_NODE and not self.tainted:
            return None
        if constraints in self.found:
            return self.found[constraints]
        if not constraints.by_labels:
            # Only taints can refuse it: O(tainted nodes).
            refused = {
                node.name
                for node in self.tainted
                if not all(constraints.tolerates(taint) for taint in node.taints)
            }
            names = frozenset(n.name for n in self.nodes if n.name not in refused)
        else:
            names = frozenset(
                node.name
                for node in self._candidates(constraints)
                if constraints.allows(node.name, node.labels, node.taints)
            )
        found = self.found[constraints] = None if len(names) == len(self.nodes) else names
        return found

    def _candidates(self, constraints: NodeConstraints) -> Sequence[ShareNode]:
        """The nodes that carry its node selector's rarest label (all, without one)."""
        if not constraints.selector:
            return self.nodes
        if self._by_label is None:
            self._by_label = {}
            for node in self.nodes:
                for pair in node.labels.items():
                    self._by_label.setdefault(pair, []).append(node)
        by_label = self._by_label
        return min((by_label.get(pair, []) for pair in constraints.selector), key=len)


def _node_state(
    node: ShareNode, policy: PolicyName, used: Amounts, proportions: Mapping[str, Proportion]
) -> NodeState:
    """The node as the engine plans on it, keeping idle what its idle accelerators reserve."""
    reservation = (
        proportional_reservation(NodeUsage(node.name, node.allocatable, used), proportions)
        if proportions
        else None
    )
    return NodeState(
        name=node.name,
        policy=policy,
        allocatable=node.allocatable,
        used=used,
        reserved=dict(reservation.reserved) if reservation is not None else {},
        reserved_for=frozenset(r for r in proportions if r in node.allocatable)
        if reservation is not None
        else frozenset(),
    )


def reclaim_inputs(
    policy: PolicyName,
    snapshot: ShareSnapshot,
    shares: ShareResult,
    facts: AdmissionResult,
    *,
    waiting: Sequence[Waiting],
    pods: BoundPods,
    settings: ReclaimSettings,
    proportions: Mapping[str, Proportion],
    evicting: Collection[PodKey] = frozenset(),
    read: ReclaimRead,
) -> ReclaimInputs:
    """One policy's ``ReclaimInputs``. O(the policy's queues and nodes + the pods of its
    overused leaf queues whose pods ``read`` does not have as they are)."""
    dimensions = shares.policies[policy].dimensions
    specs = {queue.name: queue for queue in snapshot.queues}
    by_name = sorted(item for item in shares.queues.items() if item[1].policy == policy)
    governed = dict(by_name)
    overused = [name for name, share in by_name if share.leaf and _over(share)]
    running: dict[str, tuple[Running, ...]] = {}
    gone_by_queue: dict[str, dict[str, int]] = {}
    gone_by_node: dict[str, dict[str, int]] = {}
    groups_named: set[GroupKey] = set()
    # PodGroups by the queue they charge: once per round, and only when some queue is overused.
    groups_of: dict[str, list[GroupKey]] = {}
    for group in snapshot.pod_groups if overused else ():
        charged = group.queue or DEFAULT_QUEUE
        groups_of.setdefault(charged, []).append((group.namespace, group.name))
    # A candidate names its node with the node's own string, not the pod's copy of it: the
    # engine indexes the candidates by node, and a dict finds a key by identity before it
    # compares strings (68,000 candidates: ~19 ms with a string per pod, ~7 ms shared).
    node_names: dict[str, str] = {n.name: n.name for n in snapshot.nodes} if overused else {}
    for queue in overused:
        claims = _claims(queue, policy, snapshot, groups_of.get(queue, ()))
        refused = shares.refused.get(queue, {})
        # The counts before the pods: a change in between is read again next round.
        changed = tuple([(claim, pods.bound_changed(claim)) for claim in claims])
        pods_from = (changed, dimensions, refused, evicting)
        queue_pods = read.queue_pods.last(queue, pods_from) or _queue_pods(
            queue, _bound_pods(claims, pods), dimensions=dimensions, refused=refused,
            evicting=evicting, node_names=node_names,
        )  # fmt: skip
        read.queue_pods.keep(queue, pods_from, queue_pods)
        for on_node, request in queue_pods.gone:
            gone_by_queue[queue] = add(gone_by_queue.get(queue, {}), request)
            gone_by_node[on_node] = add(gone_by_node.get(on_node, {}), {**request, PODS: 1})
        if queue_pods.candidates:
            running[queue] = queue_pods.candidates
        groups_named.update(queue_pods.groups)
    # What is gone from a leaf is gone from every queue above it too.
    gone_above: dict[str, dict[str, int]] = {}
    for leaf, amounts in gone_by_queue.items():
        above: QueueName | None = QueueName(leaf)
        seen: set[str] = set()
        while above is not None and above in governed and above not in seen:
            seen.add(above)
            gone_above[above] = add(gone_above.get(above, {}), amounts)
            above = governed[above].parent
    # Made again every round, positionally, in the order of its fields: under Proportion most
    # rounds move every queue's share, and comparing what each was made from with the last
    # round's cost more than making all 10,000 (0.5 us each).
    queues = [
        QueueState(
            name,
            policy,
            share.parent,
            share.deserved,
            exceeded_part(share.allocated, gone)
            if (gone := gone_above.get(name))
            else share.allocated,
            share.guarantee,
            specs[name].reclaimable if name in specs else True,
        )
        for name, share in by_name
    ]
    used, counts = snapshot.totals.node_used, snapshot.totals.node_pods
    nodes: list[NodeState] = []
    for node in snapshot.nodes:
        admitted = facts.nodes.get(node.name)
        if admitted is None or admitted.policy != policy:
            continue
        gone = gone_by_node.get(node.name)
        node_from = (node, used.get(node.name), counts.get(node.name, 0), policy, proportions, gone)
        state = read.nodes.last(node.name, node_from)
        if state is None:
            # With ``pods``, their count: a node full by pod count has no room.
            in_use = {**used.get(node.name, {}), PODS: counts.get(node.name, 0)}
            in_use = exceeded_part(in_use, gone) if gone else in_use
            state = _node_state(node, policy, in_use, proportions)
        read.nodes.keep(node.name, node_from, state)
        nodes.append(state)
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
        queues=tuple(queues),
        nodes=tuple(nodes),
        running=running,
        gangs=gangs,
        waiting=tuple(waiting),
        excluded=frozenset(),
        settings=settings,
    )


def _claims(
    queue: str, policy: PolicyName, snapshot: ShareSnapshot, groups: Iterable[GroupKey]
) -> list[Hashable]:
    """The claims (``claim_key``) of the pods charged to ``queue``: those naming it, those of its
    PodGroups (``groups``) that name no queue themselves, and for the default queue the pods
    naming nothing whose scheduler the policy manages."""
    claims: list[Hashable] = [("named", queue)]
    claims += [("grouped", namespace, name) for namespace, name in groups]
    if queue == DEFAULT_QUEUE:
        spec = next((p for p in snapshot.policies if p.name == policy), None)
        names = sorted(spec.sharing.scheduler_names) if spec is not None else ()
        claims += [("unnamed", scheduler) for scheduler in names]
    return claims


def _bound_pods(claims: Sequence[Hashable], pods: BoundPods) -> list[PodRecord]:
    """The bound pods of ``claims``, by namespace and name."""
    first, *others = claims
    found = pods.bound_claiming(first)
    if not others:
        return found  # the common case, already in order
    for claim in others:
        found += pods.bound_claiming(claim)
    return sorted(found, key=attrgetter("share.namespace", "share.name"))


def _queue_pods(
    queue: str,
    records: Iterable[PodRecord],
    *,
    dimensions: Set[str],
    refused: Collection[str],
    evicting: Collection[PodKey],
    node_names: Mapping[str, str],
) -> _QueuePods:
    """``queue``'s bound pods (``records``) as the engine reads them: candidates, or gone."""
    candidates: list[Running] = []
    gone: list[tuple[str, Amounts]] = []
    groups: set[GroupKey] = set()
    for record in records:
        pod, view = record.share, record.qos
        if pod.namespace in refused or pod.node_name is None:
            continue
        request = _within(pod.request, dimensions)
        if (view is not None and view.terminating) or (
            evicting and PodKey(pod.namespace, pod.name) in evicting
        ):
            gone.append((pod.node_name, request))
            continue
        candidates.append(
            Running(
                namespace=pod.namespace,
                name=pod.name,
                uid=view.uid if view is not None else "",
                queue=queue,
                node=node_names.get(pod.node_name, pod.node_name),
                request=request,
                priority=view.priority if view is not None else 0,
                created_seconds=float(view.start_time or 0) if view is not None else 0.0,
                # A pod whose QoS fields cannot be read is never acted on, here as there.
                protected=view is None or protected(view),
                group=pod.group_name,
            )
        )
        if pod.group_name:
            groups.add((pod.namespace, pod.group_name))
    return _QueuePods(tuple(candidates), tuple(gone), frozenset(groups))


def _over(share: QueueShare) -> bool:
    """Whether the queue holds more than it deserves in a dimension (``pods`` aside). A plain
    loop: asked of every queue of the policy each round."""
    deserved = share.deserved
    for name, amount in share.allocated.items():
        if amount > deserved.get(name, 0) and name != PODS:
            return True
    return False


def _within(request: Amounts, dimensions: Set[str]) -> Amounts:
    """``request`` on ``dimensions`` only, without ``pods``: the same mapping when that leaves
    it whole, as it mostly does (a pod's request is never changed)."""
    if request.keys() <= dimensions and PODS not in request:
        return request
    return {name: amount for name, amount in request.items() if name in dimensions and name != PODS}
