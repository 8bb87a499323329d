"""Which pods held by the admission gate may go now, and why the others wait.

The webhook puts a scheduling gate on new pods of the namespaces that opt in; every share round
decides, on the same snapshot as the shares, which held pods to release. A pod goes when:

- every resource it asks for is offered by some node of its queue's policy (else it waits with
  ``ResourceNotOffered`` for ever, and stops no other pod);
- its queue's in-use amount (its pods the gate does not hold and that have not finished:
  bound, or released and not bound yet) plus the pod's request fits in the queue's deserved
  (its realCapability when the policy's ``admission.borrow`` is on, after every queue has taken
  its deserved share: below) in every dimension the pod asks for, and likewise for every queue
  above it;
- the policy's overcommit headroom, less what released pods not bound yet will take, holds it;
- when the policy keeps CPU and memory idle for accelerators, an accelerator pod fits on some
  node of the policy as it is now, less the pods released before it in the same round;
- a pod of a PodGroup goes with every held pod of its group or not at all (a gang), and only
  once the group has ``minMember`` pods; with ``minResources``, only when what the minimum
  still lacks (beyond the group's running pods) fits in the headroom, as Volcano's enqueue.

Within a queue, pods go by priority, then creation time, then name, and the first that does not
fit in the queue's bound or the headroom stops its queue for the round: small pods never
overtake a large one for ever. A pod no node can hold does not stop the others (no amount of
waiting by them would make room for it). Queues are
served lowest share first, each up to its deserved share. Under the policy's
``admission.borrow``, what is left then goes up to realCapability to the queues' next pods
oldest first across queues (priority, creation time), one at a time, as Kueue's cohort admits
borrowing workloads: the longest wait gets the idle room, not the queue first in share order.
``GateDecisions.lines`` keeps each queue's waiting pods in its order (their positions, for the
Events and ``explain``).

A released pod that no scheduler has bound ``bindTimeoutSeconds`` (its policy's) after its
release stops holding its queue's room: it is left out of the in-use amount of its queue and of
every queue above it, and of what the headroom keeps for unbound pods, until it binds. The
round's clock is an input (``now``); ``GateDecisions.next_timeout_seconds`` says when the next
released pod times out, for the caller to run a round then.

Cost: O((held + released unbound pods) · log) plus, for an accelerator pod, a scan of the
policy's accelerator nodes; no other pod is visited.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Literal

from sharekeeper.engine.admission import AdmissionResult, NodePolicy
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.overcommit import shortfalls
from sharekeeper.engine.proportional import NodeUsage, idle_resources, is_unrestricted
from sharekeeper.engine.resources import (
    Amounts,
    Shortfall,
    add,
    exceeded_part,
    subtract,
    sum_amounts,
)
from sharekeeper.engine.shares import PodSnapshot, QueueShare, ShareResult, ShareSnapshot
from sharekeeper.engine.shares.accounting import pod_claim
from sharekeeper.engine.shares.snapshot import (
    PODS,
    GroupKey,
    PodGroupSnapshot,
    PolicyName,
    QueueName,
    group_queue,
)

WaitReason = Literal[
    "NoQueue",
    "QueueNotFound",
    "NamespaceNotAdmitted",
    "NotGoverned",
    "QueueClosed",
    "QueueNotLeaf",
    "ResourceNotOffered",
    "GangIncomplete",
    "QuotaExceeded",
    "OvercommitHeadroomExceeded",
    "NoNodeFits",
    "BehindOthers",
]


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why a held pod stays held this round."""

    reason: WaitReason
    queue: str
    shortfalls: tuple[Shortfall, ...] = ()
    """Where the pod (its gang, for a PodGroup) does not fit: QuotaExceeded,
    OvercommitHeadroomExceeded, NoNodeFits."""
    limiting: str | None = None
    """QuotaExceeded: the queue whose bound refuses (the pod's own, or one above it)."""
    borrow: bool = False
    """The pod does not fit its queue's deserved share and was tried against its realCapability
    (``admission.borrow``). QuotaExceeded: the bound that refuses is realCapability;
    OvercommitHeadroomExceeded and NoNodeFits: room would let it go as a borrower."""
    behind: str | None = None
    """BehindOthers: the pod (``namespace/name``) first in the queue's line, which waits;
    ResourceNotOffered, for the other pods of its PodGroup: the pod that asks for it."""
    members: tuple[int, int] = (0, 0)
    """GangIncomplete: the PodGroup's pods present, and its ``minMember``."""
    resources: tuple[str, ...] = ()
    """ResourceNotOffered: what the pod asks for that no node of ``policy`` offers, sorted."""
    policy: str | None = None
    """ResourceNotOffered: the queue's policy."""


@dataclass(frozen=True, slots=True)
class NotBound:
    """A released pod not bound ``timeout_seconds`` after its release: it no longer holds its
    queue's room."""

    queue: QueueName
    admitted_seconds: float
    """When it was released (Unix seconds)."""
    timeout_seconds: float
    """Its policy's ``bindTimeoutSeconds``."""


@dataclass(frozen=True, slots=True)
class GateDecisions:
    released: tuple[PodKey, ...]
    """In the order they were admitted."""
    waiting: Mapping[PodKey, Waiting]
    lines: Mapping[QueueName, tuple[PodKey, ...]]
    """Per queue, the pods it keeps waiting this round, in its admission order (priority, age,
    name; a PodGroup's pods together, at its first pod's place). Pods held for want of a queue
    that can admit anything (no queue, a closed one, a resource no node offers...) are in no
    line."""
    not_bound: Mapping[PodKey, NotBound]
    """Released pods past their bind timeout, left out of their queue's in-use amount."""
    next_timeout_seconds: float | None
    """Seconds until the next released pod not bound yet reaches its timeout; None: none will."""
    unbound: Mapping[PolicyName, Amounts]
    """Per policy, what the released pods no scheduler has bound yet, within their bind
    timeout, request (in the policy's dimensions; ``pods``: how many): the room they hold
    until they are bound. Policies with none are absent."""

    def positions(self, pods: Iterable[PodKey]) -> dict[PodKey, tuple[int, int]]:
        """Of ``pods``, those in a line: their place in it (1 first) and its length. O(the
        lines of their queues)."""
        places: dict[QueueName, dict[PodKey, int]] = {}
        found: dict[PodKey, tuple[int, int]] = {}
        for pod in pods:
            why = self.waiting.get(pod)
            if why is None or QueueName(why.queue) not in self.lines:
                continue
            queue = QueueName(why.queue)
            if queue not in places:
                places[queue] = {key: index for index, key in enumerate(self.lines[queue], 1)}
            place = places[queue].get(pod)
            if place is not None:
                found[pod] = (place, len(places[queue]))
        return found


@dataclass(slots=True)
class _Unit:
    """What is admitted at once: one pod, or the held pods of one PodGroup."""

    group: PodGroupSnapshot | None
    pods: list[PodSnapshot] = field(default_factory=list)
    keys: list[PodKey] = field(default_factory=list)
    """Of ``pods``, in the same order."""
    order: tuple[int, float, str] = (0, 0.0, "")

    @property
    def request(self) -> Amounts:
        if len(self.pods) == 1:
            return self.pods[0].request  # most units: read, never changed
        return sum_amounts(pod.request for pod in self.pods)

    @property
    def ordered_keys(self) -> list[PodKey]:
        """Its pods in the admission order (a PodGroup's by their own priority, age, name)."""
        if len(self.pods) == 1:
            return self.keys
        return [PodKey(p.namespace, p.name) for p in sorted(self.pods, key=queue_order)]


def queue_order(pod: PodSnapshot) -> tuple[int, float, str]:
    """A held pod's place in its queue: the effective priority (model.pods: system classes
    count only in kube-system), then creation time, then ``namespace/name``."""
    return (-pod.priority, pod.created_seconds, f"{pod.namespace}/{pod.name}")


@dataclass(slots=True)
class _Lane:
    """One queue's units in its admission order, and how far the round has served them."""

    queue: QueueName
    levels: tuple[QueueName, ...]
    """The queue and every queue above it, nearest first: whose bounds a unit must fit."""
    settings: NodePolicy
    units: list[_Unit]
    next: int = 0
    """The first unit not decided yet; past the end when the lane is through."""

    @property
    def through(self) -> bool:
        return self.next >= len(self.units)


@dataclass(slots=True)
class _Round:
    """The round's inputs, and what its releases have taken so far."""

    queues: Mapping[QueueName, QueueShare]
    facts: AdmissionResult
    snapshot: ShareSnapshot
    flying: Mapping[QueueName, Amounts]
    stuck: Mapping[QueueName, Amounts]
    """What released pods past their bind timeout request, in their queue and those above."""
    headroom: dict[PolicyName, Amounts]
    in_use: dict[QueueName, Amounts] = field(default_factory=dict)
    """Per queue looked at: request - held (its subtree's, for an inner queue), plus what
    flies to it, plus what this round released into it."""
    idle: dict[PolicyName, dict[str, Amounts]] = field(default_factory=dict)
    """Per policy that reserves for accelerators: its accelerator nodes' idle resources."""

    def used(self, queue: QueueName) -> Amounts:
        found = self.in_use.get(queue)
        if found is None:
            share = self.queues[queue]
            held = share.held
            # The held pods are in the request: what it asks for beyond them is in use.
            in_use = {name: amount - held.get(name, 0) for name, amount in share.request.items()}
            flying = self.flying.get(queue)
            if flying:
                in_use = add(in_use, flying)
            found = self.in_use[queue] = exceeded_part(in_use, self.stuck.get(queue, _NOTHING))
        return found


def gate_decisions(
    snapshot: ShareSnapshot,
    node_policies: Mapping[PolicyName, NodePolicy],
    shares: ShareResult,
    facts: AdmissionResult,
    *,
    held: Iterable[PodSnapshot],
    released: Collection[PodKey] = frozenset(),
    unbound: Iterable[PodSnapshot] = (),
    now: float | None = None,
) -> GateDecisions:
    """``released``: pods the operator has released whose release the store does not show yet;
    they are counted as admitted, never decided again. ``unbound``: the pods released that are
    not bound yet, timed out against their policy's ``bindTimeoutSeconds`` at ``now`` (the
    round's clock; default the snapshot's)."""
    groups = snapshot.groups
    queues = shares.queues
    not_bound, stuck, unbound_held, next_timeout = _timed_out(
        unbound, groups, shares, node_policies, snapshot.now_seconds if now is None else now
    )
    waiting: dict[PodKey, Waiting] = {}
    units: dict[QueueName, dict[object, _Unit]] = {}
    in_flight: dict[QueueName, list[Amounts]] = {}
    # PodGroups with a held pod no node of the policy could run, and that pod's wait.
    unrunnable: dict[GroupKey, tuple[PodKey, Waiting]] = {}
    for pod in held:
        key = PodKey(pod.namespace, pod.name)
        queue = _queue_of(pod, groups)
        if key in released:
            if queue is not None and queue in queues:
                in_flight.setdefault(queue, []).append(pod.request)
            continue
        problem = _queue_problem(pod, queue, shares)
        if problem is not None:
            waiting[key] = problem
            if problem.reason == "ResourceNotOffered" and pod.group_name:
                unrunnable.setdefault((pod.namespace, pod.group_name), (key, problem))
            continue
        assert queue is not None
        group = groups.get((pod.namespace, pod.group_name)) if pod.group_name else None
        unit_key: object = (pod.namespace, pod.group_name) if group is not None else key
        unit = units.setdefault(queue, {}).setdefault(unit_key, _Unit(group))
        unit.pods.append(pod)
        unit.keys.append(key)
        order = queue_order(pod)
        unit.order = order if len(unit.pods) == 1 else min(unit.order, order)
    if unrunnable:
        _hold_whole_gangs(units, unrunnable, waiting)
    if not units:  # the common round: nothing held that room could admit
        return GateDecisions(
            (), dict(sorted(waiting.items())), {}, not_bound, next_timeout, unbound_held
        )
    chains: dict[QueueName, tuple[QueueName, ...]] = {}
    state = _Round(
        queues,
        facts,
        snapshot,
        flying=_above(queues, in_flight, chains),
        stuck=_above(queues, stuck, chains),
        headroom=_headroom(queues, facts, in_flight, stuck),
    )
    lanes = [
        _Lane(
            queue,
            _levels(queue, queues, chains),
            _settings(queues[queue], node_policies),
            sorted(units[queue].values(), key=_by_order),
        )
        for queue in sorted(units, key=lambda name: (queues[name].share, name))
    ]
    released_now: list[PodKey] = []
    for lane in lanes:
        while not lane.through and _serve(state, lane, waiting, released_now, borrowing=False):
            continue
    _borrow(state, [lane for lane in lanes if lane.settings.borrow], waiting, released_now)
    lines: dict[QueueName, tuple[PodKey, ...]] = {}
    for lane in lanes:
        _hold_the_rest(lane, snapshot, waiting)
        line = tuple(key for unit in lane.units for key in unit.ordered_keys if key in waiting)
        if line:
            lines[lane.queue] = line
    return GateDecisions(
        tuple(released_now),
        dict(sorted(waiting.items())),
        lines,
        not_bound,
        next_timeout,
        unbound_held,
    )


def _levels(
    queue: QueueName,
    queues: Mapping[QueueName, QueueShare],
    chains: dict[QueueName, tuple[QueueName, ...]],
) -> tuple[QueueName, ...]:
    """``queue`` and the queues above it, nearest first; ``chains``: those found so far (the
    leaves of a tree share their parents')."""
    found = chains.get(queue)
    if found is None:
        found = chains[queue] = (queue,)  # so that a cycle, which the share engine refuses, ends
        parent = queues[queue].parent
        if parent is not None and parent in queues:
            found = chains[queue] = (queue, *_levels(parent, queues, chains))
    return found


def _settings(share: QueueShare, node_policies: Mapping[PolicyName, NodePolicy]) -> NodePolicy:
    return node_policies.get(share.policy, _NO_POLICY) if share.policy else _NO_POLICY


def _by_order(unit: _Unit) -> tuple[int, float, str]:
    return unit.order


def _serve(
    state: _Round,
    lane: _Lane,
    waiting: dict[PodKey, Waiting],
    released: list[PodKey],
    *,
    borrowing: bool,
) -> bool:
    """Decide the lane's next unit against its queue's deserved share (its realCapability when
    ``borrowing``). True, and the lane moves on, when it went or waits without stopping its
    queue (a gang not complete yet, a shape no node has free); False when it stops the queue."""
    unit = lane.units[lane.next]
    verdict = _incomplete(unit, state.snapshot, lane.queue)
    if verdict is None:
        verdict = _fits(state, unit, lane, borrowing=borrowing)
    if verdict is None:
        released.extend(unit.keys)
        for key in unit.keys:  # refused its deserved share, it went borrowing
            waiting.pop(key, None)
    else:
        waiting.update(dict.fromkeys(unit.keys, verdict))
        if verdict.reason not in ("GangIncomplete", "NoNodeFits"):
            return False
    lane.next += 1
    return True


def _borrow(
    state: _Round, lanes: list[_Lane], waiting: dict[PodKey, Waiting], released: list[PodKey]
) -> None:
    """``admission.borrow``: once every queue has taken what fits in its deserved share, the
    queues not through their line take what is left up to their realCapability, one unit at a
    time, the unit that comes first across them (priority, then creation time) first, as
    Kueue's cohort admits borrowing workloads: the pod that has waited longest gets the idle
    room, whichever queue it is in. A queue whose next unit does not fit stops there."""
    heads = [
        (lane.units[lane.next].order, index) for index, lane in enumerate(lanes) if not lane.through
    ]
    heapq.heapify(heads)
    while heads:
        _, index = heapq.heappop(heads)
        lane = lanes[index]
        if _serve(state, lane, waiting, released, borrowing=True) and not lane.through:
            heapq.heappush(heads, (lane.units[lane.next].order, index))


def _incomplete(unit: _Unit, snapshot: ShareSnapshot, queue: QueueName) -> Waiting | None:
    """A PodGroup waits until it has ``minMember`` pods."""
    if unit.group is None:
        return None
    present = snapshot.totals.groups.get((unit.group.namespace, unit.group.name))
    count = present.pods if present is not None else 0
    if count >= unit.group.min_member:
        return None
    return Waiting("GangIncomplete", queue, members=(count, unit.group.min_member))


def _hold_the_rest(lane: _Lane, snapshot: ShareSnapshot, waiting: dict[PodKey, Waiting]) -> None:
    """The units behind the one that stopped the lane wait behind it (or for their gang)."""
    if lane.next + 1 >= len(lane.units):
        return  # through, or stopped at its last unit
    behind = Waiting("BehindOthers", lane.queue, behind=lane.units[lane.next].order[2])
    for unit in lane.units[lane.next + 1 :]:
        verdict = _incomplete(unit, snapshot, lane.queue)
        waiting.update(dict.fromkeys(unit.keys, behind if verdict is None else verdict))


def _timed_out(
    unbound: Iterable[PodSnapshot],
    groups: Mapping[GroupKey, PodGroupSnapshot],
    shares: ShareResult,
    node_policies: Mapping[PolicyName, NodePolicy],
    now: float,
) -> tuple[
    dict[PodKey, NotBound],
    dict[QueueName, list[Amounts]],
    dict[PolicyName, dict[str, int]],
    float | None,
]:
    """The released pods not bound past their policy's bind timeout (sorted), their requests
    by the queue they are charged to, what the others request by policy
    (``GateDecisions.unbound``), and the seconds until the next one times out. A pod whose
    release time is unknown, or that no queue is charged for, is left as it is."""
    not_bound: dict[PodKey, NotBound] = {}
    stuck: dict[QueueName, list[Amounts]] = {}
    held: dict[PolicyName, dict[str, int]] = {}
    soonest: float | None = None
    for pod in unbound:
        queue = _queue_of(pod, groups)
        if pod.admitted_seconds <= 0 or queue is None:
            continue
        share = shares.queues.get(queue)
        if share is None or share.policy is None or pod.namespace in shares.refused.get(queue, {}):
            continue  # charged to no queue: it holds no room to give back
        timeout = node_policies.get(share.policy, _NO_POLICY).bind_timeout_seconds
        left = pod.admitted_seconds + timeout - now
        if left > 0:
            soonest = left if soonest is None else min(soonest, left)
            _hold(held, share.policy, pod.request, shares)
            continue
        not_bound[PodKey(pod.namespace, pod.name)] = NotBound(queue, pod.admitted_seconds, timeout)
        stuck.setdefault(queue, []).append(pod.request)
    return dict(sorted(not_bound.items())), stuck, held, soonest


def _hold(
    held: dict[PolicyName, dict[str, int]],
    policy: PolicyName,
    request: Amounts,
    shares: ShareResult,
) -> None:
    """Add one unbound pod's request to its policy's, in the policy's dimensions only: what a
    tenant writes in a pod names no new metric series."""
    into = held.setdefault(policy, {PODS: 0})
    into[PODS] += 1
    found = shares.policies.get(policy)
    kept = found.dimensions if found is not None else frozenset[str]()
    for name, amount in request.items():
        if name in kept and name != PODS:
            into[name] = into.get(name, 0) + amount


def _hold_whole_gangs(
    units: dict[QueueName, dict[object, _Unit]],
    unrunnable: Mapping[GroupKey, tuple[PodKey, Waiting]],
    waiting: dict[PodKey, Waiting],
) -> None:
    """A gang goes whole: while one of its held pods asks for what no node offers, the others
    wait with it (``behind`` names that pod) rather than go without it."""
    for queue, by_key in list(units.items()):
        for unit_key, unit in list(by_key.items()):
            group = unit.group
            found = unrunnable.get((group.namespace, group.name)) if group is not None else None
            if found is None:
                continue
            (namespace, name), problem = found
            waiting.update(dict.fromkeys(unit.keys, replace(problem, behind=f"{namespace}/{name}")))
            del by_key[unit_key]
        if not by_key:
            del units[queue]


def _queue_of(pod: PodSnapshot, groups: Mapping[GroupKey, PodGroupSnapshot]) -> QueueName | None:
    """The queue the pod is charged to by name (accounting's rule); None: it names none."""
    claim = pod_claim(pod)
    if claim[0] == "named":
        return QueueName(claim[1])
    if claim[0] == "grouped":
        return group_queue(groups.get(claim[1]))
    return None


def _queue_problem(
    pod: PodSnapshot, queue: QueueName | None, shares: ShareResult
) -> Waiting | None:
    """Why no amount of room would admit the pod into ``queue``."""
    if queue is None:
        return Waiting("NoQueue", "")
    share = shares.queues.get(queue)
    if share is None:
        return Waiting("QueueNotFound", queue)
    if pod.namespace in shares.refused.get(queue, {}):
        return Waiting("NamespaceNotAdmitted", queue)
    if share.policy is None:
        return Waiting("NotGoverned", queue)
    if share.state != "Open":
        return Waiting("QueueClosed", queue)
    if not share.leaf:
        return Waiting("QueueNotLeaf", queue)
    governing = shares.policies.get(share.policy)
    if governing is not None:
        missing = not_offered(pod.request, governing.offered)
        if missing:
            return Waiting("ResourceNotOffered", queue, resources=missing, policy=share.policy)
    return None


def not_offered(request: Amounts, offered: Set[str]) -> tuple[str, ...]:
    """What a pod asks for (``pods`` aside) that no node of its policy offers, sorted: it
    waits for ever (no node could run it), stops no other pod, and the name becomes no
    dimension anywhere (``shares.computing``). O(dimensions of the pod)."""
    if request.keys() <= offered:
        return ()  # the common case, compared in C
    return tuple(
        sorted(
            name
            for name, amount in request.items()
            if amount > 0 and name != PODS and name not in offered
        )
    )


_NOTHING: Amounts = {}
_NO_POLICY = NodePolicy()
"""The settings of a queue whose policy's are not known: the defaults."""


def _above(
    queues: Mapping[QueueName, QueueShare],
    requests: Mapping[QueueName, list[Amounts]],
    chains: dict[QueueName, tuple[QueueName, ...]],
) -> dict[QueueName, Amounts]:
    """The sum of ``requests`` of each queue, in it and in every queue above it (what pods
    released but not yet seen released take; what pods past their bind timeout give back)."""
    found: dict[QueueName, Amounts] = {}
    for queue, amounts in requests.items():
        for name in _levels(queue, queues, chains):
            found[name] = sum_amounts([found.get(name, {}), *amounts])
    return found


def _headroom(
    queues: Mapping[QueueName, QueueShare],
    facts: AdmissionResult,
    in_flight: Mapping[QueueName, list[Amounts]],
    stuck: Mapping[QueueName, list[Amounts]],
) -> dict[PolicyName, Amounts]:
    """Each policy's overcommit headroom less what its admitted pods not yet bound will take
    (``used`` counts bound pods only), those past their bind timeout left out."""
    taken: dict[PolicyName, dict[str, int]] = {policy: {} for policy in facts.policies}
    for name, share in queues.items():
        into = taken.get(share.policy) if share.policy is not None else None
        if into is None or not share.leaf:
            continue
        request, held, allocated = share.request, share.held, share.allocated
        pending = request.get(PODS, 0) - allocated.get(PODS, 0)
        if pending == held.get(PODS, 0) and name not in in_flight:
            continue  # every unbound pod of the queue is held: nothing admitted is unbound
        gone = sum_amounts(stuck.get(name, ()))
        # Per dimension of the request (held and bound pods are in it): never below 0.
        for resource, amount in request.items():
            unbound = amount - held.get(resource, 0) - allocated.get(resource, 0)
            unbound -= gone.get(resource, 0)
            if unbound > 0:
                into[resource] = into.get(resource, 0) + unbound
        for flying in in_flight.get(name, ()):
            for resource, amount in flying.items():
                into[resource] = into.get(resource, 0) + amount
    return {
        policy: subtract(status.headroom, taken[policy])
        for policy, status in facts.policies.items()
    }


def _fits(state: _Round, unit: _Unit, lane: _Lane, *, borrowing: bool) -> Waiting | None:
    """None, and the round's accounts charged, when the unit may go; else why it waits."""
    queues = state.queues
    queue, levels = lane.queue, lane.levels
    policy = queues[queue].policy
    assert policy is not None
    request = unit.request
    need = _gang_need(unit, request, state.snapshot)
    beyond = False  # borrowing, and past the deserved share of the queue or one above it
    for level in levels:
        share = queues[level]
        used = state.used(level)
        if borrowing and not beyond:
            beyond = bool(shortfalls(request, _left(share.deserved, used, request)))
        bound = share.real_capability if borrowing else share.deserved
        short = shortfalls(request, _left(bound, used, request))
        if short:
            limiting = None if level == queue else str(level)
            return Waiting("QuotaExceeded", queue, short, limiting=limiting, borrow=borrowing)
    headroom = state.headroom.get(policy)
    if headroom is not None:
        short = shortfalls(need, headroom)
        if short:
            return Waiting("OvercommitHeadroomExceeded", queue, short, borrow=beyond)
    placed = _place(state, unit, policy, lane.settings)
    if isinstance(placed, tuple):
        return Waiting("NoNodeFits", queue, placed, borrow=beyond)
    for node, pod_request in placed:
        idle = state.idle[policy]
        idle[node] = subtract(idle[node], pod_request)
    for level in levels:
        state.in_use[level] = add(state.used(level), request)
    if headroom is not None:
        state.headroom[policy] = subtract(headroom, request)
    return None


def _left(bound: Amounts, used: Amounts, request: Amounts) -> Amounts:
    """What ``bound`` leaves beyond ``used``, in the dimensions ``request`` asks for (the others
    cannot refuse it)."""
    return {name: bound.get(name, 0) - used.get(name, 0) for name in request}


def _gang_need(unit: _Unit, request: Amounts, snapshot: ShareSnapshot) -> Amounts:
    """What the unit must find in the overcommit headroom: its pods' requests, and for a
    PodGroup with ``minResources`` at least what of that minimum its running pods do not cover
    yet, as Volcano's enqueue asks of the headroom. (The queue's share is checked against the
    requests: a proportion share never exceeds what the pods request.) Only the pods'
    requests are charged once it goes."""
    group = unit.group
    if group is None or group.min_resources is None:
        return request
    members = snapshot.totals.groups.get((group.namespace, group.name))
    running = members.allocated if members is not None else {}
    missing = {name: amount - running.get(name, 0) for name, amount in group.min_resources.items()}
    return {name: max(request.get(name, 0), missing.get(name, 0)) for name in {*request, *missing}}


def _place(
    state: _Round, unit: _Unit, policy: PolicyName, settings: NodePolicy
) -> list[tuple[str, Amounts]] | tuple[Shortfall, ...]:
    """A node for each accelerator pod of the unit, first fit over the nodes as the round has
    left them; pods without accelerators need none (the scheduler and the proportional
    predicate place them). When a pod fits nowhere: its shortfalls against the largest idle
    amount of any node, per dimension."""
    if not settings.proportions:
        return []
    idle = state.idle.get(policy)
    if idle is None:
        idle = state.idle[policy] = _accelerator_nodes(state, policy, settings)
    taken: dict[str, Amounts] = {}
    placed: list[tuple[str, Amounts]] = []
    for pod in unit.pods:
        if not is_unrestricted(pod.request, settings.proportions):
            continue
        chosen = next(
            (
                node
                for node, free in idle.items()
                if not shortfalls(pod.request, subtract(free, taken.get(node, {})))
            ),
            None,
        )
        if chosen is None:
            best = {
                name: max((free.get(name, 0) for free in idle.values()), default=0)
                for name in pod.request
            }
            return shortfalls(pod.request, best)
        taken[chosen] = add(taken.get(chosen, {}), pod.request)
        placed.append((chosen, pod.request))
    return placed


def _accelerator_nodes(
    state: _Round, policy: PolicyName, settings: NodePolicy
) -> dict[str, Amounts]:
    """Idle resources of the policy's nodes that advertise an accelerator it reserves for."""
    used = state.snapshot.totals.node_used
    found: dict[str, Amounts] = {}
    for node in state.snapshot.nodes:
        node_facts = state.facts.nodes.get(node.name)
        if node_facts is None or node_facts.policy != policy:
            continue
        if not any(node.allocatable.get(resource, 0) > 0 for resource in settings.proportions):
            continue
        idle = idle_resources(NodeUsage(node.name, node.allocatable, used.get(node.name, {})))
        found[node.name] = {name: amount for name, amount in idle.items() if name != PODS}
    return found
