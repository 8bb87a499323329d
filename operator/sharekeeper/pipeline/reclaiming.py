"""Reclaim in a share round: the engine's inputs built from what the round already has, and its
plan per SchedulerPolicy whose ``spec.reclaim.mode`` is not Off (``statuses`` renders the plan
as ``status.reclaim``).

What the inputs come from:

- queues: the share result (deserved, allocated, guarantee, parent) and ``spec.reclaimable``;
- nodes: the policy's governed nodes, their allocatable and the ledger's per-node totals (Σ
  requests, and ``pods``: how many are bound);
- waiting: the pods the admission gate holds and keeps held this round for want of room
  within their deserved share (``_waits_for_room``), each waiting since its creation; and the
  pods outside the gate that the scheduler finds Unschedulable (their ``PodScheduled``
  condition), that name a queue (label, Volcano annotation or PodGroup) which admits their
  namespace and is an Open leaf of the policy, each waiting since the condition's
  ``lastTransitionTime``. Together, in the admission order (lowest queue share first, then
  priority, age, name), each with the nodes of its policy its own node selector, required node
  affinity and tolerations let it use (``_Eligible``, once per distinct constraints). The
  Unschedulable pods are read from the pod store's per-claim index, a claim's again only once
  its pods, its queue or its policy's nodes changed (``ReclaimRead``), and while no claim's
  pods changed a round only looks up each claim's queue share (``_ClaimsRead``);
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

from bisect import bisect_left
from collections.abc import (
    Callable,
    Collection,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
    Set,
)
from dataclasses import dataclass, replace
from itertools import compress
from operator import attrgetter, itemgetter
from typing import Generic, NamedTuple, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from sharekeeper.engine.admission import AdmissionResult, NodeAdmission, NodePolicy, ReclaimMode
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
    ReclaimMemo,
    ReclaimPlan,
    ReclaimSettings,
    Running,
    Waiting,
    Waits,
    plan_reclaim,
)
from sharekeeper.engine.resources import (
    NO_AMOUNTS,
    Amounts,
    QueueRows,
    add,
    exceeded_part,
)
from sharekeeper.engine.shares import (
    PodSnapshot,
    QueueShare,
    ShareNode,
    ShareResult,
    ShareSnapshot,
)
from sharekeeper.engine.shares.snapshot import (
    DEFAULT_QUEUE,
    PODS,
    GroupKey,
    PodGroupSnapshot,
    PolicyName,
    QueueName,
    group_queue,
)
from sharekeeper.model.records import PodRecord, WaitingPodRecord

_K = TypeVar("_K", bound=Hashable)
_T = TypeVar("_T")

WAITING_FOR_ROOM = frozenset({"OvercommitHeadroomExceeded", "NoNodeFits"})
"""Why a held pod waits when room elsewhere would let the gate release it. The others are not
helped by evicting anyone: no queue, a closed queue, an incomplete gang, a resource no node
offers, and QuotaExceeded, a queue that has its share by the gate's count (its pods not bound
yet count, outside the gate or released): such a pod waits for its own queue's pods, and room
made for it would go to them or to the victims' replacements, never to it."""


_FOR_ROOM_OR_BEHIND = WAITING_FOR_ROOM | {"BehindOthers"}
"""The reasons ``_waits_for_room`` may answer yes to: most held pods wait QuotaExceeded."""


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

    def bound_claiming(self, claim: tuple[str, ...]) -> list[PodRecord]: ...

    def bound_changed(self, claim: tuple[str, ...]) -> int: ...

    def bound_claims(self) -> Mapping[tuple[str, ...], int]: ...

    def unscheduled(self) -> Mapping[PodKey, WaitingPodRecord]: ...

    def unscheduled_claims(self) -> Mapping[tuple[str, ...], int]: ...

    def unscheduled_claiming(self, claim: tuple[str, ...]) -> list[WaitingPodRecord]: ...


@dataclass(frozen=True, slots=True)
class _QueuePods:
    """An overused queue's bound pods as reclaim reads them."""

    candidates: tuple[Running, ...]
    gone: tuple[tuple[str, Amounts], ...]
    """Node and request of each of its pods that is gone for the engine (terminating, or being
    evicted)."""
    groups: frozenset[GroupKey]
    """The PodGroups its candidates name."""


class _Kept(Generic[_K, _T]):
    """What a round built, by key, with what each was built from: the last round's, which this
    one reuses where it is built from the same, and this round's, for the next."""

    def __init__(self) -> None:
        self._last: dict[_K, tuple[tuple[object, ...], _T]] = {}
        self._now: dict[_K, tuple[tuple[object, ...], _T]] = {}

    def reused(self, key: _K, source: tuple[object, ...]) -> _T | None:
        """What the last round built for ``key``, if from the same ``source`` (identical parts
        compare at once): kept for the next round too. None: build it, and ``keep`` it."""
        found = self._last.get(key)
        if found is not None and found[0] == source:
            self._now[key] = found
            return found[1]
        return None

    def source(self, key: _K) -> tuple[object, ...] | None:
        """What the last round built ``key``'s from (None: it built none)."""
        found = self._last.get(key)
        return None if found is None else found[0]

    def keep(self, key: _K, source: tuple[object, ...], built: _T) -> None:
        self._now[key] = (source, built)

    def round_done(self) -> None:
        """What this round built is what the next one may reuse; nothing else is kept."""
        self._last, self._now = self._now, {}

    def carry(self) -> None:
        """Keep all the last round built for the next: this round was built from the same."""
        self._now = self._last


class ReclaimRead:
    """What reclaim's last round read and built from its inputs, for the next to reuse where
    they are the same (the share result is new every round, but its amounts mostly equal; the
    ledger hands on an unchanged node's sums as the same object, the pod store an unchanged
    pod's record). At the top size, read again every round: the bound pods of each overused
    queue (37,000 candidates of 5,000 queues, most of building the engine's inputs), 5,000
    nodes' states (each node's proportional reservation worked out again), and 10,000 waiting
    pods' ``Waiting``s and places in their queues. Walked again only when something changed:
    the claims with waiting pods (``claims``) and the overused queues' claims (``touched``).
    The queues' states are made every round."""

    def __init__(self) -> None:
        self.queue_pods: _Kept[str, _QueuePods] = _Kept()
        self.nodes: dict[PolicyName, _NodesRead] = {}
        """Per policy, its nodes' states as last built."""
        self.waiting: _Kept[tuple[str, ...], _Ranked] = _Kept()
        """Per claim (``claim_key``), its Unschedulable pods that may reclaim, as the engine
        reads them."""
        self.claims: _ClaimsRead | None = None
        """The claims with Unschedulable pods as last walked (``_unschedulable``)."""
        self.eligible: dict[PolicyName, _Eligible] = {}
        """Per policy, its nodes and which of them pods' constraints let them use: kept while
        the policy's nodes are the same."""
        self.plans: dict[PolicyName, ReclaimMemo] = {}
        """Per policy, what the engine's last round read of its nodes and candidates."""
        self.bound: Mapping[tuple[str, ...], int] | None = None
        """The store's claims with bound pods and their counts when ``queue_pods`` was built."""
        self._groups: tuple[PodGroupSnapshot, ...] = ()
        """The PodGroups then (a grouped claim's queue is its PodGroup's)."""
        self._touched: tuple[Mapping[tuple[str, ...], int], tuple[PodGroupSnapshot, ...]] | None
        self._touched = None
        """This round's claims and counts and PodGroups, once ``touched`` has been asked:
        ``bound`` and ``_groups`` when the round is done."""
        self._touched_queues: set[str] | None = None

    def touched(self, pods: BoundPods, snapshot: ShareSnapshot) -> set[str] | None:
        """The queues charged by a claim whose bound pods changed since ``queue_pods`` was
        built; None: every queue, for want of a last round, or PodGroups that changed (a
        claim's queue may have). The store's counts are copied once a round, before any
        policy's pods are read: a change after the copy shows next round, whichever policy
        read first. O(claims), in C while none changed."""
        if self._touched is not None:
            return self._touched_queues
        bound, last = pods.bound_claims(), self.bound
        found: set[str] | None = None
        if last is not None and self._groups == snapshot.pod_groups:
            found = set()
            if last != bound:
                changed = [claim for claim, count in bound.items() if last.get(claim) != count]
                changed += last.keys() - bound.keys()
                # A pod naming no queue may be the default queue's.
                found.update(_claimed(claim, snapshot) or DEFAULT_QUEUE for claim in changed)
        self._touched, self._touched_queues = (bound, snapshot.pod_groups), found
        return found

    def round_done(self) -> None:
        for kept in (self.queue_pods, self.waiting):
            kept.round_done()
        if self._touched is not None:
            self.bound, self._groups = self._touched
        self._touched = self._touched_queues = None

    def policies_left(self, reclaiming: Collection[PolicyName]) -> None:
        """Forget what was kept per policy for those no longer ``reclaiming``."""
        for per_policy in (self.eligible, self.plans, self.nodes):
            for gone in per_policy.keys() - set(reclaiming):
                del per_policy[gone]


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
    read = ReclaimRead() if read is None else read
    read.policies_left(wanted.keys())
    if pods is None or not wanted:
        return {}
    waiting_by_policy = _waiting(
        snapshot, shares, facts, gates, held=held, pods=pods, policies=wanted.keys(), read=read
    )  # fmt: skip
    rounds = {}
    for policy, config in sorted(wanted.items()):
        waiting = waiting_by_policy.get(policy)
        if not waiting:
            # Nothing to decide, so nothing is read: no queue's or node's state (~20 ms a
            # round at the top size), and what ``read`` keeps stays for the next waiting pod.
            idle = ReclaimInputs((), (), {}, (), (), frozenset(), config.settings, now, None)
            rounds[policy] = PolicyReclaim(policy, config.mode, idle, ReclaimPlan((), Waits(), 0))
            continue
        inputs = reclaim_inputs(
            policy, snapshot, shares, facts, waiting=waiting, pods=pods,
            settings=config.settings, now=now, evicting=evicting,
            proportions=node_policies[policy].proportions, read=read,
        )  # fmt: skip
        plan = plan_reclaim(inputs, read.plans.setdefault(policy, ReclaimMemo()))
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
    pods: BoundPods,
    policies: Collection[PolicyName],
    read: ReclaimRead,
) -> dict[PolicyName, list[Waiting]]:
    """The pods that wait for room under ``policies``, in each policy's admission order (their
    queue's share, then their place in it), each with the nodes of its policy it could use: the
    held pods the gate keeps waiting for room, and the pods the scheduler finds Unschedulable
    (``_unschedulable``).

    O(the claims with waiting pods) a round, plus the pods of those whose pods changed: walking
    each of the top size's 10,000 Unschedulable pods every round, making each its ``Waiting``
    again, was about a quarter of reclaim's part of the round. The held pods are walked only
    when one waits for room."""
    per_policy: dict[PolicyName, _ReadWith] = {}

    def facts_of(policy: PolicyName) -> _ReadWith:
        found = per_policy.get(policy)
        if found is None:
            summary = shares.policies[policy]
            eligible = _eligible(policy, snapshot, facts, read)
            found = per_policy[policy] = _ReadWith(summary.dimensions, eligible, summary.offered)
        return found

    # Most held pods wait for their own queue (QuotaExceeded): when none waits for room, the
    # held pods are not walked at all. A held pod is never among the Unschedulable ones.
    gate_waiting = gates.waiting
    for_room = {
        key
        for key, why in gate_waiting.items()
        if why.reason in _FOR_ROOM_OR_BEHIND and _waits_for_room(why, gate_waiting)
    }
    held_runs: dict[PolicyName, list[tuple[float, _Ranked]]] = {}
    if for_room:
        unscheduled = pods.unscheduled()
        by_queue: dict[QueueName, _Ranked] = {}
        for pod in held:
            # A plain tuple finds its PodKey (a named tuple hashes and compares as one).
            if (pod.namespace, pod.name) not in for_room:
                continue
            key = PodKey(pod.namespace, pod.name)
            for_room.discard(key)  # listed once
            queue = QueueName(gate_waiting[key].queue)
            share = shares.queues.get(queue)
            if share is None or share.policy is None or share.policy not in policies:
                continue
            record = unscheduled.get(key)
            constraints = record.constraints if record is not None else ANY_NODE
            made = _made(pod, queue, pod.created_seconds, constraints, facts_of(share.policy))
            by_queue.setdefault(queue, []).append(made)
        for queue, ranked in by_queue.items():
            share = shares.queues[queue]
            assert share.policy is not None  # checked above
            ranked.sort(key=itemgetter(0))
            held_runs.setdefault(share.policy, []).append((share.share, ranked))
    unscheduled_runs, found = _unschedulable(
        snapshot, shares, pods, policies, facts_of=facts_of, read=read
    )  # fmt: skip
    for read_with in per_policy.values():
        read_with.eligible.round_done(found)
    return {
        policy: _in_order(*unscheduled_runs.get(policy, (_NO_ORDER, [])), held_runs.get(policy, []))
        for policy in unscheduled_runs.keys() | held_runs.keys()
    }


_Ranked = list[tuple[tuple[int, float, str], Waiting]]
"""Waiting pods of one queue, each with its place in it (``gates.queue_order``), in that
order."""


class _ReadWith(NamedTuple):
    """What a policy's waiting pods are read with: the dimensions its amounts are kept in,
    which of its nodes pods' constraints allow, and what its nodes offer."""

    dimensions: Set[str]
    eligible: _Eligible
    offered: Set[str]


def _made(
    pod: PodSnapshot, queue: QueueName, since: float, constraints: NodeConstraints, with_: _ReadWith
) -> tuple[tuple[int, float, str], Waiting]:
    """The pod as the engine reads it, with its place in its queue."""
    nodes = with_.eligible.nodes_for(constraints)
    request = _within(pod.request, with_.dimensions)
    waiting = Waiting(pod.namespace, pod.name, queue, request, since, nodes, pod.group_name)
    return queue_order(pod), waiting


@dataclass(frozen=True, slots=True, eq=False)
class _Order:
    """One policy's Unschedulable pods that may reclaim, claim by claim, with each pod's rank
    by its place (``gates.queue_order``) among them all: made when the claims are walked, kept
    while they are the same (``_ClaimsRead``), so that a round orders them by their queues'
    shares and these ranks in numpy rather than by comparing places."""

    pods: list[Waiting]
    counts: list[int]
    """Per claim with pods, how many."""
    ranks: npt.NDArray[np.float64]
    places: list[tuple[int, float, str]]
    """Every pod's place, in rank order."""

    @staticmethod
    def of(runs: Sequence[_Ranked]) -> _Order:
        flat = [item for ranked in runs for item in ranked]
        by_place = sorted(range(len(flat)), key=lambda i: flat[i][0])
        ranks = np.empty(len(flat), np.float64)
        ranks[by_place] = np.arange(len(flat), dtype=np.float64)
        ranks.setflags(write=False)
        places = [flat[i][0] for i in by_place]
        return _Order([pod for _, pod in flat], [len(ranked) for ranked in runs], ranks, places)


_NO_ORDER = _Order([], [], np.empty(0, np.float64), [])


def _in_order(
    order: _Order, shares: Sequence[float], held: Sequence[tuple[float, _Ranked]]
) -> list[Waiting]:
    """One policy's waiting pods in the admission order, the lowest share first, pods of queues
    of the same share by their places: the Unschedulable ones of ``order``, each claim's with
    its queue's share (``shares``, claim by claim), and the ``held`` ones (runs of the gate's,
    each with its queue's share), ranked among the others by their places."""
    pods, ranks = order.pods, order.ranks
    of_pods = np.repeat(np.asarray(shares, np.float64), order.counts)
    if held:
        # A held pod ranks just before the first Unschedulable one placed after it; held ones
        # of one such rank come by their places (the sort is stable; a place names its pod).
        extra = sorted(
            ((share, place, pod) for share, ranked in held for place, pod in ranked),
            key=itemgetter(1),
        )
        pods = [pod for _, _, pod in extra] + pods
        at = [bisect_left(order.places, place) - 0.5 for _, place, _ in extra]
        ranks = np.concatenate([np.array(at, np.float64), ranks])
        of_pods = np.concatenate([np.array([share for share, _, _ in extra]), of_pods])
    return [pods[i] for i in np.lexsort((ranks, of_pods)).tolist()]


def _eligible(
    policy: PolicyName, snapshot: ShareSnapshot, facts: AdmissionResult, read: ReclaimRead
) -> _Eligible:
    """``policy``'s ``_Eligible``: the last round's while its nodes are the same objects."""
    nodes = [n for n in snapshot.nodes if (f := facts.nodes.get(n.name)) and f.policy == policy]
    last = read.eligible.get(policy)
    if last is None or last.nodes != nodes:
        last = read.eligible[policy] = _Eligible(nodes)
    return last


def _unschedulable(
    snapshot: ShareSnapshot,
    shares: ShareResult,
    pods: BoundPods,
    policies: Collection[PolicyName],
    *,
    facts_of: Callable[[PolicyName], _ReadWith],
    read: ReclaimRead,
) -> tuple[dict[PolicyName, tuple[_Order, list[float]]], int]:
    """The pods the scheduler finds Unschedulable (outside the admission gate) that name a
    queue, by label, Volcano annotation or PodGroup (a PodGroup that names none charges the
    default queue), and that room could help: the queue exists, is an Open leaf governed by one
    of ``policies``, admits the pod's namespace, and its nodes offer every resource the pod asks
    for. Per policy, by claim (``claim_key``, an ``_Order``), with the shares of the claims'
    queues, and how many pods in all; a claim's pods are read again only when they, or what
    they were read with, changed (``read.waiting``), and the claims are walked again only when
    one of them did (``read.claims``)."""
    queues, refused = shares.queues, shares.refused
    counts = pods.unscheduled_claims()
    last = read.claims
    if (
        last is not None
        and last.counts == counts
        and last.refused == refused
        and last.groups == snapshot.pod_groups
        and all(
            policy in policies and facts_of(policy) == read_with
            for policy, read_with in last.read_with.items()
        )
    ):
        again = _shares_of(last.claims, queues, policies)
        if again is not None:
            read.waiting.carry()
            return _with_shares(last.orders, again)
    kept = read.waiting
    claims: dict[PolicyName | None, list[tuple[QueueName, _Ranked]]] = {}
    read_with_of: dict[PolicyName, _ReadWith] = {}
    # The counts before the pods: a claim whose pods change in between is read again next round.
    for claim, changed in counts.items():
        queue = _claimed(claim, snapshot)
        if queue is None:
            continue
        share = queues.get(queue)
        policy = _reclaiming(share, policies)
        if policy is None:
            claims.setdefault(None, []).append((queue, []))
            continue
        read_with = read_with_of[policy] = facts_of(policy)
        refusing = refused.get(queue, NO_AMOUNTS) if refused else NO_AMOUNTS
        source = (changed, queue, read_with, refusing)
        ranked = kept.reused(claim, source)
        if ranked is None:
            ranked = _ranked(pods.unscheduled_claiming(claim), queue, read_with, refusing)
            kept.keep(claim, source, ranked)
        claims.setdefault(policy, []).append((queue, ranked))
    orders = {
        policy: _Order.of([ranked for _, ranked in entries if ranked])
        for policy, entries in claims.items()
        if policy is not None
    }
    read.claims = _ClaimsRead(counts, read_with_of, refused, snapshot.pod_groups, claims, orders)
    now = _shares_of(claims, queues, policies)
    assert now is not None  # each claim's policy is the one just read
    return _with_shares(orders, now)


def _with_shares(
    orders: Mapping[PolicyName, _Order], shares: Mapping[PolicyName, list[float]]
) -> tuple[dict[PolicyName, tuple[_Order, list[float]]], int]:
    """Each policy's ``_Order`` with its claims' queue shares this round, and how many pods
    the orders hold in all."""
    with_shares = {policy: (orders[policy], of_claims) for policy, of_claims in shares.items()}
    return with_shares, sum(len(order.pods) for order in orders.values())


def _claimed(claim: tuple[str, ...], snapshot: ShareSnapshot) -> QueueName | None:
    """The queue a claim (``claim_key``) names: its own, or its PodGroup's (``group_queue``);
    None for pods that name none (the default queue's only if the policy manages their
    scheduler)."""
    if claim[0] == "named":
        return QueueName(claim[1])
    if claim[0] == "grouped":
        return group_queue(snapshot.groups.get((claim[1], claim[2])))
    return None


def _reclaiming(share: QueueShare | None, policies: Collection[PolicyName]) -> PolicyName | None:
    """The policy whose reclaim a queue's waiting pods may ask for: an Open leaf's, among
    ``policies``."""
    if share is None or share.state != "Open" or not share.leaf:
        return None
    policy = share.policy
    return policy if policy is not None and policy in policies else None


def _shares_of(
    claims: Mapping[PolicyName | None, Sequence[tuple[QueueName, _Ranked]]],
    queues: Mapping[QueueName, QueueShare],
    policies: Collection[PolicyName],
) -> dict[PolicyName, list[float]] | None:
    """Per policy, the shares this round of the queues of its ``claims`` with pods (each the
    claim's queue and pods, by the policy they were read for), claim by claim; None when a
    queue's policy is not the one its pods were read for (or it no longer may reclaim, or now
    may)."""
    runs: dict[PolicyName, list[float]] = {}
    for policy, entries in claims.items():
        if policy is None:
            if any(_reclaiming(queues.get(queue), policies) for queue, _ in entries):
                return None
            continue
        if policy not in policies:
            return None
        run: list[float] = []
        for queue, ranked in entries:
            share = queues.get(queue)
            # ``_reclaiming``, inline: asked of every claim a round.
            if share is None or share.policy != policy or share.state != "Open" or not share.leaf:
                return None
            if ranked:
                run.append(share.share)
        if run:
            runs[policy] = run
    return runs


@dataclass(frozen=True, slots=True)
class _ClaimsRead:
    """What ``_unschedulable`` last read, kept while what it reads from stays the same: the
    store's claims with waiting pods and their counts, what each policy's pods are read with,
    the namespaces queues refuse, the PodGroups (a grouped claim's queue). Then a round only
    looks up each claim's queue share (at the top size ~5 ms, against ~15 ms to check every
    claim's pods against what they were read from)."""

    counts: Mapping[tuple[str, ...], int]
    read_with: Mapping[PolicyName, _ReadWith]
    refused: Mapping[QueueName, Mapping[str, int]]
    groups: tuple[PodGroupSnapshot, ...]
    claims: Mapping[PolicyName | None, Sequence[tuple[QueueName, _Ranked]]]
    """Per policy its pods were read for (None: not read, their queue may not reclaim), each
    claim naming a queue: the queue, its pods that may reclaim."""
    orders: Mapping[PolicyName, _Order]
    """Per policy, its claims' pods (those with any) as ``_in_order`` reads them."""


def _ranked(
    records: Iterable[WaitingPodRecord],
    queue: QueueName,
    read_with: _ReadWith,
    refusing: Collection[str],
) -> _Ranked:
    """The Unschedulable pods of ``records`` (of one claim, charged to ``queue``) outside the
    gate whose namespace ``queue`` admits (not in ``refusing``) and whose resources its
    policy's nodes all offer, as the engine reads them, each with its place in its queue, in
    that order."""
    offered = read_with.offered
    ranked: _Ranked = []
    for record in records:
        pod = record.share
        since = record.unschedulable_since
        if since is None or pod.admission == "held" or pod.node_name is not None or pod.terminal:
            continue
        if pod.namespace in refusing:
            continue
        if not pod.request.keys() <= offered and not_offered(pod.request, offered):
            continue
        ranked.append(_made(pod, queue, since, record.constraints, read_with))
    ranked.sort(key=itemgetter(0))
    return ranked


class _Eligible:
    """A policy's nodes, and which of them a pod's own constraints let it use: computed once per
    distinct constraints in a round (the replicas of one workload share theirs)."""

    def __init__(self, nodes: Sequence[ShareNode]) -> None:
        self.nodes = nodes
        self.tainted = [node for node in nodes if node.taints]
        self.found: dict[NodeConstraints, frozenset[str] | None] = {}
        self._by_label: dict[tuple[str, str], list[ShareNode]] | None = None

    def round_done(self, waiting: int) -> None:
        """What it found is kept for the next round's new waiting pods, unless that is more
        than twice as many constraints as ``waiting`` pods wait now: pods that come and go
        with constraints of their own must not grow it without end."""
        if len(self.found) > 2 * waiting:
            self.found.clear()

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


@dataclass(frozen=True, slots=True)
class _NodesRead:
    """A policy's nodes' states as a round built them, and what from: the nodes, the ledger's
    per-node sums and pod counts, the admission's facts and the gone pods by node."""

    nodes: tuple[ShareNode, ...]
    used: Mapping[str, Amounts]
    counts: Mapping[str, int]
    admitted: Mapping[str, NodeAdmission]
    proportions: Mapping[str, Proportion]
    gone: Mapping[str, Amounts]
    states: tuple[NodeState, ...]
    """The policy's nodes', in the snapshot's order."""
    governed: tuple[ShareNode, ...]
    """The node of each of ``states``."""
    at: Mapping[str, int]
    """A node's place in ``states``."""


def _node_states(
    policy: PolicyName,
    snapshot: ShareSnapshot,
    admitted: Mapping[str, NodeAdmission],
    *,
    proportions: Mapping[str, Proportion],
    gone: Mapping[str, Amounts],
    last: _NodesRead | None,
) -> _NodesRead:
    """The states of the nodes ``admitted`` under the policy, each built again only when its
    node, sums, pod count, admission or gone pods are not ``last``'s (the ledger and the
    admission hand on an unchanged node's as the very same objects). Which changed is found
    by comprehensions over the mappings; while the nodes are the same and none changed policy,
    ``last``'s states are copied and patched there, else walked node by node. Comparing each
    of 5,000 nodes' inputs in a loop cost ~11 ms a round."""
    used, counts = snapshot.totals.node_used, snapshot.totals.node_pods
    changed: set[str] | None = None
    if last is not None and last.proportions == proportions:
        changed = _moved(used, last.used) | _moved(admitted, last.admitted)
        changed.update(name for name, count in counts.items() if last.counts.get(name) != count)
        changed.update(last.counts.keys() - counts.keys())
        changed.update(n for n in gone.keys() | last.gone.keys() if gone.get(n) != last.gone.get(n))
    if (
        last is not None
        and changed is not None
        and last.nodes == snapshot.nodes
        and all(_governs(admitted, name, policy) == (name in last.at) for name in changed)
    ):
        patched = list(last.states)
        for name in changed:
            if (place := last.at.get(name)) is not None:
                node = last.governed[place]
                patched[place] = _node_state(
                    node, policy, _in_use(node, used, counts, gone), proportions
                )
        states, governed, at = tuple(patched), last.governed, last.at
    else:
        built: list[NodeState] = []
        nodes: list[ShareNode] = []
        places: dict[str, int] = {}
        for node in snapshot.nodes:
            if not _governs(admitted, node.name, policy):
                continue
            state = None
            if last is not None and changed is not None and node.name not in changed:
                place = last.at.get(node.name)
                if place is not None and last.governed[place] is node:
                    state = last.states[place]
            if state is None:
                state = _node_state(node, policy, _in_use(node, used, counts, gone), proportions)
            places[node.name] = len(built)
            built.append(state)
            nodes.append(node)
        states, governed, at = tuple(built), tuple(nodes), places
    return _NodesRead(
        snapshot.nodes, used, counts, admitted, proportions, gone, states, governed, at
    )


def _moved(now: Mapping[str, _T], before: Mapping[str, _T]) -> set[str]:
    """The keys whose value in ``now`` is not the very object ``before`` has, or that ``now``
    has no more."""
    found = {name for name, value in now.items() if before.get(name) is not value}
    found.update(before.keys() - now.keys())
    return found


def _governs(admitted: Mapping[str, NodeAdmission], name: str, policy: PolicyName) -> bool:
    return (facts := admitted.get(name)) is not None and facts.policy == policy


def _in_use(
    node: ShareNode,
    used: Mapping[str, Amounts],
    counts: Mapping[str, int],
    gone: Mapping[str, Amounts],
) -> Amounts:
    """What runs on ``node`` as the engine plans: its sums and, as ``pods``, their count (a
    node full by pod count has no room), less its gone pods."""
    in_use = {**used.get(node.name, {}), PODS: counts.get(node.name, 0)}
    lost = gone.get(node.name)
    return exceeded_part(in_use, lost) if lost else in_use


def reclaim_inputs(
    policy: PolicyName,
    snapshot: ShareSnapshot,
    shares: ShareResult,
    facts: AdmissionResult,
    *,
    waiting: Sequence[Waiting],
    pods: BoundPods,
    settings: ReclaimSettings,
    now: float,
    proportions: Mapping[str, Proportion],
    evicting: Collection[PodKey] = frozenset(),
    read: ReclaimRead,
) -> ReclaimInputs:
    """One policy's ``ReclaimInputs``. O(the policy's queues and nodes + the pods of its
    overused leaf queues whose pods ``read`` does not have as they are)."""
    dimensions = shares.policies[policy].dimensions
    kept_back = {queue.name for queue in snapshot.queues if not queue.reclaimable}
    by_name = sorted(item for item in shares.queues.items() if item[1].policy == policy)
    governed = dict(by_name)
    overused = _overused(governed, shares.policies[policy].rows)
    running: dict[str, tuple[Running, ...]] = {}
    gone_by_queue: dict[str, dict[str, int]] = {}
    gone_by_node: dict[str, dict[str, int]] = {}
    groups_named: set[GroupKey] = set()
    # PodGroups by the queue they charge: once per round, and only when some queue is overused.
    groups_of: dict[str, list[GroupKey]] = {}
    for group in snapshot.pod_groups if overused else ():
        groups_of.setdefault(group_queue(group), []).append((group.namespace, group.name))
    # A candidate names its node with the node's own string, not the pod's copy of it: the
    # engine indexes the candidates by node, and a dict finds a key by identity before it
    # compares strings (68,000 candidates: ~19 ms with a string per pod, ~7 ms shared).
    node_names: dict[str, str] = {n.name: n.name for n in snapshot.nodes} if overused else {}
    # The counts before the pods: a change in between is read again next round.
    touched = read.touched(pods, snapshot) if overused else None
    kept = read.queue_pods
    for queue in overused:
        refused = shares.refused.get(queue, {})
        queue_pods = None
        # A queue none of whose claims changed: its pods are as read, if from the same.
        if touched is not None and queue not in touched and (last := kept.source(queue)):
            queue_pods = kept.reused(queue, (last[0], dimensions, refused, evicting))
        if queue_pods is None:
            claims = _claims(queue, policy, snapshot, groups_of.get(queue, ()))
            changed = tuple([(claim, pods.bound_changed(claim)) for claim in claims])
            pods_from = (changed, dimensions, refused, evicting)
            queue_pods = kept.reused(queue, pods_from)
            if queue_pods is None:
                queue_pods = _queue_pods(
                    queue, _bound_pods(claims, pods), dimensions=dimensions, refused=refused,
                    evicting=evicting, node_names=node_names,
                )  # fmt: skip
                kept.keep(queue, pods_from, queue_pods)
        for on_node, request in queue_pods.gone:
            gone_by_queue[queue] = add(gone_by_queue.get(queue, {}), request)
            gone_by_node[on_node] = add(gone_by_node.get(on_node, {}), {**request, PODS: 1})
        if queue_pods.candidates:
            running[queue] = queue_pods.candidates
        if queue_pods.groups:
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
            name not in kept_back,
        )
        for name, share in by_name
    ]
    nodes = read.nodes[policy] = _node_states(
        policy, snapshot, facts.nodes, proportions=proportions, gone=gone_by_node,
        last=read.nodes.get(policy),
    )  # fmt: skip
    groups = snapshot.groups
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
        nodes=nodes.states,
        running=running,
        gangs=gangs,
        waiting=tuple(waiting),
        excluded=frozenset(),
        settings=settings,
        now=now,
        rows=_rows(shares.policies[policy].rows, by_name, gone_above),
    )


def _rows(
    computed: QueueRows | None,
    by_name: Sequence[tuple[QueueName, QueueShare]],
    gone: Mapping[str, Amounts],
) -> QueueRows | None:
    """The share engine's dense rows as the queues' states read: what is gone taken off their
    allocated, as ``exceeded_part`` does. None (the engine reads the states instead) when its
    rows are not the states' queues in their order (queues a broken tree leaves out)."""
    if computed is None or computed.queues != tuple(map(itemgetter(0), by_name)):
        return None
    if not gone:
        return computed
    allocated = computed.allocated.copy()
    column = {name: at for at, name in enumerate(computed.dimensions)}
    for name, amounts in gone.items():
        row = computed.index[name]
        for dimension, amount in amounts.items():
            if (at := column.get(dimension)) is not None:
                allocated[row, at] = max(int(allocated[row, at]) - amount, 0)
    return replace(computed, allocated=allocated)


def _claims(
    queue: str, policy: PolicyName, snapshot: ShareSnapshot, groups: Iterable[GroupKey]
) -> list[tuple[str, ...]]:
    """The claims (``claim_key``) of the pods charged to ``queue``: those naming it, those of its
    PodGroups (``groups``) that name no queue themselves, and for the default queue the pods
    naming nothing whose scheduler the policy manages."""
    claims: list[tuple[str, ...]] = [("named", queue)]
    claims += [("grouped", namespace, name) for namespace, name in groups]
    if queue == DEFAULT_QUEUE:
        spec = next((p for p in snapshot.policies if p.name == policy), None)
        names = sorted(spec.sharing.scheduler_names) if spec is not None else ()
        claims += [("unnamed", scheduler) for scheduler in names]
    return claims


def _bound_pods(claims: Sequence[tuple[str, ...]], pods: BoundPods) -> list[PodRecord]:
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


def _overused(governed: Mapping[QueueName, QueueShare], rows: QueueRows | None) -> list[QueueName]:
    """The leaf queues of ``governed`` that hold more than they deserve in a dimension other
    than their count of pods, by name: compared in numpy on the share engine's ``rows`` (the
    queues' mappings densified first without them), among those it finds overused (not one a
    broken tree leaves out). At 10,000 queues ~5 ms less than mapping by mapping."""
    if rows is None:
        # Only where something is allocated can it exceed what is deserved.
        names = tuple(sorted({name for share in governed.values() for name in share.allocated}))
        rows = QueueRows.read(
            tuple(governed),
            [share.deserved for share in governed.values()],
            [share.allocated for share in governed.values()],
            names,
        )
    columns = [at for at, name in enumerate(rows.dimensions) if name != PODS]
    exceeds: npt.NDArray[np.bool_] = rows.allocated[:, columns] > rows.deserved[:, columns]
    over: list[bool] = np.logical_or.reduce(exceeds, axis=1).tolist()
    return [
        queue
        for name in compress(rows.queues, over)
        if (share := governed[queue := QueueName(name)]).leaf and share.overused
    ]


def _within(request: Amounts, dimensions: Set[str]) -> Amounts:
    """``request`` on ``dimensions`` only, without ``pods``: the same mapping when that leaves
    it whole, as it mostly does (a pod's request is never changed)."""
    if request.keys() <= dimensions and PODS not in request:
        return request
    return {name: amount for name, amount in request.items() if name in dimensions and name != PODS}
