"""One reclaim round: for each waiting pod, in admission order (the order the caller lists
them in), the fewest and least valuable evictions that let it run on one node, within the
deserved shares.

For a waiting pod P of queue A (*requested*: the dimensions P asks for, ``pods`` aside):

1. P has waited at least ``after`` seconds by the round's ``now`` (else
   ``NotWaitedLongEnough``).
2. A's allocated + P's request ≤ A's deserved in every requested dimension, and likewise for
   every queue above A (else ``AboveShare``, naming the first queue that refuses). Checked
   first against the queues as the round started: a pod refused there waits this round, with
   that answer, even if the round evicts from its path before its turn (it is decided again
   next round, on the evictions' outcome); a pod not refused there is checked again against
   the round as it has left it, once the round charged or freed a queue of its path.
3. If P fits on a node of A's policy as the round has left it, it is served there with no
   victim (the first such node by name).
4. Who may give. A queue V *gives* to P when it has A's policy and every queue of its *branch*
   (V and the queues above it, up to but not including the first one A is under too) is
   reclaimable and above its deserved in a requested dimension. On a node, the dimensions
   that *matter* are the requested ones the node lacks room in (all requested ones when only
   a pod slot lacks). A pod of a giving queue may go when it is not protected nor refused, it
   frees a dimension that matters there, and after it (and the victims chosen before it) every
   queue of its branch stays at or above its deserved in each dimension that matters that it
   frees, and at or above its guarantee in every dimension. A PodGroup member goes alone while
   the group runs more than ``minMember`` pods; after that only the whole group goes, and a
   node tries whole groups only once its single pods do not suffice.
5. The eviction order: queues most overused first (max over requested dimensions of
   allocated/deserved, at the start of the round, then by name), then within a queue lowest
   priority, then youngest; pods of one queue, priority and age (a *tie*) by size (their
   largest share of their node's allocatable), then namespace/name.
6. The node. Candidate nodes: those of A's policy (and of P's ``nodes``) that could hold P
   once every pod there of a giving queue were gone, least room to make first (Σ over the
   requested dimensions and ``pods`` of missing/allocatable, then name). Each is tried in
   turn: its pods go in the eviction order, a tie at a time (the smallest that makes P fit if
   one does, else the largest that may go, and again), whole PodGroups last; then the set is
   made minimal (each victim, most valuable first, is spared if P still fits without it).
   Of the first ``NODES_COMPARED`` nodes that can be freed, the chosen one is the one whose
   most valuable victim comes earliest in the order (kube-scheduler's first criterion), then
   the one with fewer victims, then by name. Nothing is evicted that P does not need.
7. At most ``max_evictions`` pods go per round; a reclaimer whose set would pass the bound, and
   every later one that needs victims, waits (``RoundBound``). What each reclaimer takes and
   frees is charged before the next is decided.
8. The waiting pods of one PodGroup are decided together, at the place of the first of them in
   the order, each by the rules above, and kept only if every one is served: the admission
   gate releases a gang whole, so room made for part of it would run none of it. The first
   that is not served undoes what the others took and freed (``Round.rollback``), and they
   wait with ``GangNotWhole``.

A refused eviction: the caller stops, then plans again with the refused pod in
``ReclaimInputs.excluded`` and the accepted evictions applied (``replan_inputs``); the next
victim is then chosen by the same rules. The engine is one pure function of its inputs.

No loops: after a reclaim, A is at or below its deserved in every requested dimension and
stays so (only reclaims and free fits add to it, each within deserved); each victim's queue
is at or above its deserved in every dimension that mattered that it freed (there is at least
one). So the victim's replacement cannot reclaim from A in those dimensions: A is not above
its deserved there, and the replacement's own queue would go past its deserved. Each eviction
(a whole PodGroup counting once) lowers Σ over queues and dimensions of (allocated -
deserved)⁺ by what it frees in such a dimension, and nothing raises it, so a static workload
stops being evicted (``tests/engine/test_reclaim_properties.py``).

Cost per round, with W waiting pods, N nodes, Q queues, C candidates and D dimensions:
O(Q + N · D) to set up; O((W + Q · depth) · D) in numpy for rules 1 and 2 over every waiting
pod at once (``screening``), with no object made for a pod refused there (``Waits`` makes its
answer if it is read); per pod past them, O(N · D) in numpy for the free-fit screen (a pod of
a shape seen before starts where the last one stopped, until something is evicted); per pod
that needs victims, the giving queues are found by walking the queue tree, pruning subtrees
that cannot give (O(queues visited); a queue's place in the eviction order is worked out when
first looked at, never all ranked), the candidate nodes from their pods (O(their pods) in
numpy, each queue's read once, up to ``GIVERS_LISTED``; beyond, O(N · D) in numpy), then each
node tried costs O(its candidates · D) (read from an index per node, built once: O(C)). A pod
not served is remembered by its shape (queue, request, nodes) until the next eviction or
placement, so the other replicas of its workload cost a lookup each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain

import numpy as np

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim.screening import ABOVE_SHARE, TOO_SOON, screen
from sharekeeper.engine.reclaim.state import (
    INFINITE_OVERUSE,
    Candidate,
    ReclaimMemo,
    Round,
    queue_path,
)
from sharekeeper.engine.reclaim.values import (
    PODS,
    GroupKey,
    NotServed,
    NotServedReason,
    Overuse,
    QueueState,
    Reclaim,
    ReclaimInputs,
    ReclaimPlan,
    Spared,
    SpareReason,
    Victim,
    Waiting,
    Waits,
)
from sharekeeper.engine.resources import Amounts, Shortfall

_Place = tuple[float, str]
"""A giving queue's place in the eviction order: (-its overuse at the start of the round, its
name), so that the most overused comes first, then by name."""
_Position = tuple[_Place, int, float]
"""Where a pod stands in the eviction order: (its queue's ``_Place``, ``Candidate.tie``)."""
_AFTER_SINGLES: _Position = ((INFINITE_OVERUSE, ""), 0, 0.0)
"""The position of a whole PodGroup in the eviction order: after every single pod (a real
place's first member is at most 0)."""
NODES_COMPARED = 4
"""How many nodes that can be freed for a reclaimer are compared (the most promising)."""
NODES_SORTED_FIRST = 16
"""Nodes screened in numpy are ranked this many (and their ties) first (``_ascending``)."""
GIVERS_LISTED = 1024
"""Up to this many candidates that may give, their nodes are found from them; beyond, every
node with candidates is screened (in numpy)."""


@dataclass(frozen=True, slots=True, eq=False)
class _Ask:
    """What a waiting pod asks of a node, and where it may go: shared by the pods of one
    policy that request the same and may use the same nodes (a workload's replicas)."""

    policy: str
    request: dict[str, int]
    """Positive amounts, without ``pods``."""
    needed: tuple[str, ...]
    columns: list[int]
    """Node dimensions P must find room in: ``needed`` then ``pods``."""
    want: list[int]
    held: np.ndarray | None
    """Per node: whether P is held to the node's reservation (None: no node reserves)."""
    nodes: frozenset[str] | None
    """The nodes its own constraints let it use (``Waiting.nodes``)."""


@dataclass(slots=True)
class _Reclaimer:
    """A waiting pod that needs victims, with what is worked out for it while they are chosen."""

    pod: Waiting
    queue: str
    ask: _Ask
    path: frozenset[str]
    branches: dict[str, tuple[str, ...]]
    """Per queue, its branch (``Round.branch``): shared by the pods of P's queue."""
    gives: dict[str, bool] = field(default_factory=dict)
    """Per queue: whether it may give to P at all (``_Planner.gives``)."""
    giving: frozenset[str] | None = None
    """Every queue that may give to P, when ``_Planner.giving`` listed them all."""


@dataclass(slots=True, eq=False)
class _Unit:
    members: tuple[Candidate, ...]
    whole: GroupKey | None
    """The PodGroup that goes whole; None for a single pod."""
    position: _Position


@dataclass(slots=True)
class _Try:
    """A node's tentative victims for the reclaimer being decided."""

    node: int
    held: bool
    need: list[int]
    """Still missing, per ``_Reclaimer.columns``; P fits when nothing is positive."""
    matter: tuple[str, ...]
    """The dimensions that matter on this node: the requested ones it lacks room in (all
    requested ones when only a pod slot lacks). A victim must free one of them, and its
    queue stay at or above its deserved in those it frees."""
    units: list[_Unit] = field(default_factory=list)
    removed: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per queue of the victims' branches: what the tentative victims take from it."""
    spare_used: dict[GroupKey, int] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return all(missing <= 0 for missing in self.need)


@dataclass(slots=True)
class _Fitting:
    """The nodes of a policy that could hold a pod shape when ``Round.freed`` was ``freed``
    (offsets in the policy's slice, ascending), and how many of them have since been found
    full for it."""

    freed: int
    nodes: list[int]
    at: int = 0


@dataclass(frozen=True, slots=True)
class _Evaluated:
    """A node's evaluation for an ask (``_Planner._evaluate``), with what it read that the round
    changes: the node's room and candidates (as when ``Round.moved`` had ``seen`` entries,
    after ``rollbacks`` rollbacks), and the queues of the branches of the candidates it weighed
    (``queues``, each with its ``branches``), as they stood at ``version``."""

    attempt: _Try | None
    version: int
    seen: int
    rollbacks: int
    queues: tuple[str, ...]
    branches: tuple[tuple[str, ...], ...]


@dataclass(slots=True)
class _Screened:
    """The nodes of a policy an ask could use that could hold it empty and have a candidate
    (ascending: they hold for the round), and the room to make on each as the round stood when
    ``Round.moved`` had ``seen`` entries, after ``rollbacks`` rollbacks."""

    nodes: np.ndarray
    missing: np.ndarray
    rollbacks: int
    seen: int


@dataclass(frozen=True, slots=True)
class _Crowded:
    """The queues a walk of ``_giving`` found giving until their candidates passed
    ``GIVERS_LISTED``, each with the queues it walked down through to it, itself last, and its
    count of candidates. Another reclaimer's walk from beside the same queues above meets each
    of them again, unless one of those it walked through is the reclaimer's own queue (its walk
    skips that) or has been charged since (the round's changes may have ended its overuse); a
    queue's other gates (reclaimable, its place in the order, its candidates) hold for the
    round. So while the ones left still pass the bound, so would the walk: O(1) mostly, where
    the walk is O(queues visited). Queues are only added to the charged between rollbacks, and
    a rollback forgets every ``_Crowded``."""

    passed: list[tuple[tuple[str, ...], int]]

    def still(self, skipped: str, charged: Mapping[str, object]) -> bool:
        count = 0
        for walked, pods in self.passed:
            if skipped in walked or not charged.keys().isdisjoint(walked):
                continue
            count += pods
            if count > GIVERS_LISTED:
                return True
        return False


_Shape = tuple[str, tuple[tuple[str, int], ...], frozenset[str] | None]
"""A waiting pod's queue, request and nodes: what its outcome depends on besides the round."""


class _Places(dict[str, _Place | None]):
    """Per queue, its ``_Place`` in the eviction order for reclaimers of one policy that need
    some dimensions; None when it has no candidates, another policy, or exceeds its deserved
    in none of them at the start of the round. Worked out on first lookup (``places[queue]``):
    a round looks at a fraction of the queues, so they are never all ranked."""

    def __init__(self, state: Round, policy: str, needed: tuple[str, ...]) -> None:
        super().__init__()
        self.state = state
        self.policy = policy
        self.needed = needed

    def __missing__(self, name: str) -> _Place | None:
        queue = self.state.queues.get(name)
        place: _Place | None = None
        if queue is not None and queue.policy == self.policy and self.state.queue_pods(name):
            overuse = _overuse(queue.allocated, queue.deserved, self.needed)
            if overuse is not None:
                place = (-overuse, name)
        self[name] = place
        return place


class _Planner:
    def __init__(self, inputs: ReclaimInputs, memo: ReclaimMemo | None = None) -> None:
        self.inputs = inputs
        self.round = Round(inputs, memo)
        self.latest = inputs.now - inputs.settings.after_seconds
        """A pod that started waiting later has not waited long enough."""
        self.evictions = 0
        self.bounded = False
        """Whether the round's bound is reached: every later pod that needs victims waits."""
        self.places: dict[tuple[str, tuple[str, ...]], _Places] = {}
        self.failed: dict[_Shape, tuple[int, NotServed]] = {}
        """The last pod of each shape not served, and ``Round.version`` then: until the round
        changes (or reaches its bound), a pod of that shape is not served either, and why is
        the same."""
        self.asks: dict[tuple[object, ...], _Ask] = {}
        """Per policy, requested dimensions, request and nodes: ``_ask``."""
        self.fitting: dict[_Ask, _Fitting] = {}
        """Per ask: the policy's nodes that may hold it (``_free_fit``)."""
        self.screened: dict[_Ask, _Screened] = {}
        """Per ask: the nodes that could be freed for it (``_promising_anywhere``)."""
        self.evaluated: dict[tuple[_Ask, int], _Evaluated] = {}
        """Per ask and node: its last evaluation (``_evaluate``)."""
        self.branches: dict[str, dict[str, tuple[str, ...]]] = {}
        """Per reclaimer's queue: ``_Reclaimer.branches``."""
        self.trees: dict[str, dict[str | None, list[str]]] = {}
        self.crowded: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _Crowded] = {}
        """Per policy, needed dimensions and queues above a reclaimer's queue: the queues an
        earlier walk from beside them found giving past ``GIVERS_LISTED`` (``_giving``).
        Forgotten on a rollback, which may take a queue out of ``Round.charged``."""
        self.allowed: dict[frozenset[str], np.ndarray] = {}

    # --- the round -----------------------------------------------------------------------

    def plan(self) -> ReclaimPlan:
        reclaims: list[Reclaim] = []
        not_served: list[NotServed | Waiting] = []
        state = self.round
        last: Waiting | None = None
        shape: _Shape = ("", (), None)
        needed: tuple[str, ...] = ()
        ordered = self.inputs.waiting
        memo = self.round.memo.screen if self.round.memo is not None else None
        screened = screen(ordered, self.inputs.queues, self.inputs.rows, self.latest, memo)
        gangs: dict[GroupKey, list[tuple[Waiting, int]]] = {}
        for pod, found in zip(ordered, screened, strict=True):
            if pod.group is not None:
                gangs.setdefault((pod.namespace, pod.group), []).append((pod, found))
        for pod, found in zip(ordered, screened, strict=True):
            if pod.group is not None:
                members = gangs.pop((pod.namespace, pod.group), None)
                if members is not None:  # else decided with its first member
                    served, missed = self._decide_gang(members)
                    reclaims += served
                    not_served += missed
                continue
            if found == ABOVE_SHARE:
                not_served.append(pod)  # its answer is made if it is read (``Waits``)
                continue
            if found == TOO_SOON:
                not_served.append(_not_served(pod, NotServedReason.NOT_WAITED_LONG_ENOUGH))
                continue
            # The replicas of one workload ask the same: one decision each until a change. They
            # mostly come one after the other: the key is made again only for another shape
            # (nodes by identity: comparing two sets of thousands of names is what costs).
            if not (
                last is not None
                and pod.queue == last.queue
                and pod.request == last.request
                and pod.nodes is last.nodes
            ):
                shape = (pod.queue, tuple(pod.request.items()), pod.nodes)
                if last is None or pod.request != last.request:
                    needed = _needed(pod.request)
            last = pod
            known = self.failed.get(shape)
            if known is not None and known[0] == state.version:
                like = known[1]
                answer = NotServed(pod.key, pod.queue, like.reason, like.limiting, like.shortfalls)
                not_served.append(answer)
                continue
            decided = self._serve(pod, needed)  # not refused at the start: checked above
            if isinstance(decided, Reclaim):
                reclaims.append(decided)
            else:
                self.failed[shape] = (state.version, decided)
                not_served.append(decided)
        # The answers are made from the queues alone: the plan keeps nothing else of the round.
        waits = Waits(not_served, partial(_answer_at_start, state.queues))
        return ReclaimPlan(tuple(reclaims), waits, self.evictions)

    def _decide_gang(
        self, members: list[tuple[Waiting, int]]
    ) -> tuple[list[Reclaim], list[NotServed]]:
        """The waiting pods of one PodGroup (each with what the screen found of it), each
        decided as a pod alone, in order, and kept only if every one is served: the first that
        is not undoes the others' reclaims, and they wait with ``GangNotWhole``."""
        if any(found == TOO_SOON for _, found in members):
            return [], [
                _not_served(pod, NotServedReason.NOT_WAITED_LONG_ENOUGH)
                if found == TOO_SOON
                else _not_served(pod, NotServedReason.GANG_NOT_WHOLE)
                for pod, found in members
            ]
        savepoint, evictions = self.round.savepoint(), self.evictions
        served: list[Reclaim] = []
        for pod, found in members:
            decided = (
                _answer_at_start(self.round.queues, pod)
                if found == ABOVE_SHARE
                else self._serve(pod, _needed(pod.request))
            )
            if isinstance(decided, NotServed):
                self.round.rollback(savepoint)
                self.crowded.clear()
                self.evictions = evictions
                return [], [
                    decided if other is pod else _not_served(other, NotServedReason.GANG_NOT_WHOLE)
                    for other, _ in members
                ]
            served.append(decided)
        return served, []

    def _serve(self, pod: Waiting, needed: tuple[str, ...]) -> Reclaim | NotServed:
        """P's reclaim (charged to the round), or why it waits, for P the screen lets through
        (``screening``); ``needed``: ``_needed`` of its request."""
        # Not refused at the start: only what the round charged or freed on its path can refuse it.
        path = self.round.path(pod.queue)
        if not self.round.charged.keys().isdisjoint(path):
            refusal = _above_share(pod, needed, self.round.queues, path, self.round.allocated)
            if refusal is not None:
                return refusal
        ask = self._ask(pod, needed)
        if ask is None:
            return _not_served(pod, NotServedReason.NO_VICTIMS)
        free_fit = self._free_fit(ask)
        if free_fit is not None:
            self.round.place(pod.queue, ask.request, free_fit)
            return Reclaim(pod.key, pod.queue, self.round.nodes[free_fit].name, (), {}, ())
        bound = self.inputs.settings.max_evictions
        if self.bounded or self.evictions >= bound:
            return self._bounded(pod)
        reclaimer = self._reclaimer(pod, ask)
        found = self._victims(reclaimer)
        if found is None:
            return _not_served(pod, NotServedReason.NO_VICTIMS)
        attempt, units = found
        count = sum(len(unit.members) for unit in units)
        if self.evictions + count > bound:
            return self._bounded(pod)
        self.evictions += count
        return self._commit(reclaimer, attempt, units)

    def _bounded(self, pod: Waiting) -> NotServed:
        """RoundBound: for P, and from now on for every pod that needs victims."""
        if not self.bounded:
            self.bounded = True
            self.failed.clear()  # a pod that found no victims would now wait for the bound
        return _not_served(pod, NotServedReason.ROUND_BOUND)

    def reclaimer_of(self, pod: Waiting, needed: tuple[str, ...]) -> _Reclaimer | None:
        """None when no node of its policy offers what it requests."""
        ask = self._ask(pod, needed)
        return None if ask is None else self._reclaimer(pod, ask)

    def _reclaimer(self, pod: Waiting, ask: _Ask) -> _Reclaimer:
        path = frozenset(self.round.path(pod.queue))
        return _Reclaimer(pod, pod.queue, ask, path, self.branches.setdefault(pod.queue, {}))

    def _ask(self, pod: Waiting, needed: tuple[str, ...]) -> _Ask | None:
        """What P asks of a node: made once per policy, request and nodes a round, since most
        pods that wait are replicas that ask the same; None when no node of its policy offers
        what it requests. ``needed``: ``_needed`` of P's request."""
        state = self.round
        policy = state.queues[pod.queue].policy
        request = pod.request
        key = (policy, needed, tuple([request[d] for d in needed]), pod.nodes)
        found = self.asks.get(key)
        if found is None:
            if policy not in state.slices or any(d not in state.column for d in needed):
                return None
            held = None
            for reserved_for, mask in state.reserving.items():
                if reserved_for.isdisjoint(needed):
                    held = mask if held is None else held | mask
            found = self.asks[key] = _Ask(
                policy,
                {d: request[d] for d in needed},
                needed,
                [state.column[d] for d in (*needed, PODS)],
                [*(request[d] for d in needed), 1],
                held,
                pod.nodes,
            )
        return found

    def _screen(self, ask: _Ask) -> np.ndarray:
        """Over the policy's nodes: whether the room left holds the pod (and the pod may go
        there). O(nodes x its dimensions), in numpy."""
        lo, hi = self.round.slices[ask.policy]
        room, room_held, held = self.round.free, self.round.free_held, ask.held
        fits = np.ones(hi - lo, dtype=bool)
        for column, want in zip(ask.columns, ask.want, strict=True):
            row = room[column, lo:hi]
            if held is not None:
                row = np.where(held[lo:hi], room_held[column, lo:hi], row)
            fits &= row >= want
        if ask.nodes is not None:
            fits &= self._allowed(ask.nodes)[lo:hi]
        return fits

    def _fits_at(self, ask: _Ask, node: int) -> bool:
        held = ask.held is not None and bool(ask.held[node])
        room = (self.round.free_held if held else self.round.free)[:, node].tolist()
        return all(
            room[column] >= want for column, want in zip(ask.columns, ask.want, strict=True)
        ) and (ask.nodes is None or self.round.nodes[node].name in ask.nodes)

    def _free_fit(self, ask: _Ask) -> int | None:
        """The first node (by name) of the policy where P fits as the round left it. Until
        something is evicted room only shrinks: a node that could not hold a shape cannot later
        on, so the policy's nodes are screened once per shape (until something is freed) and
        the pods of that shape walk the nodes that passed, each from where the last stopped."""
        fitting = self.fitting.get(ask)
        if fitting is None or fitting.freed != self.round.freed:
            screened = self._screen(ask)
            fitting = self.fitting[ask] = _Fitting(
                self.round.freed, np.flatnonzero(screened).tolist()
            )
        lo = self.round.slices[ask.policy][0]
        nodes = fitting.nodes
        while fitting.at < len(nodes):
            if self._fits_at(ask, lo + nodes[fitting.at]):
                return lo + nodes[fitting.at]
            fitting.at += 1
        return None

    # --- choosing victims ----------------------------------------------------------------

    def _victims(self, reclaimer: _Reclaimer) -> tuple[_Try, list[_Unit]] | None:
        """The chosen node's tentative set, made minimal; None when no node can be freed."""
        found: list[tuple[_Position, int, str, _Try, list[_Unit]]] = []
        for node in self._promising(reclaimer):
            attempt = self._evaluate(reclaimer, node)
            if attempt is None:
                continue
            units = self._minimal(reclaimer, attempt)
            worst = max(unit.position for unit in units)
            count = sum(len(unit.members) for unit in units)
            found.append((worst, count, self.round.nodes[node].name, attempt, units))
            if len(found) == NODES_COMPARED:
                break
        if not found:
            return None
        _, _, _, attempt, units = min(found, key=lambda f: f[:3])
        return attempt, units

    def _promising(self, reclaimer: _Reclaimer) -> Iterable[int]:
        """The policy's nodes where P would fit if every candidate there that may give were
        gone, the least room to make first (Σ over its dimensions of what is missing / the
        node's allocatable, then by name).

        When few pods may give (``GIVERS_LISTED``), their nodes are summed one by one;
        otherwise every node that could hold P empty is a candidate, in numpy over the
        policy's nodes: O(nodes x dimensions), plus sorting the nodes that pass."""
        giving = self._giving(reclaimer)
        if giving is None:
            return self._promising_anywhere(reclaimer)
        reclaimer.giving = frozenset(giving)
        return self._promising_among(reclaimer, giving) if giving else []

    def _promising_among(self, reclaimer: _Reclaimer, giving: list[str]) -> list[int]:
        """The nodes of ``giving``'s pods where P would fit if they were gone, least room to
        make first."""
        state = self.round
        lo, hi = state.slices[reclaimer.ask.policy]
        columns = reclaimer.ask.columns
        names = tuple(state.dimensions[column] for column in columns[:-1])
        parts = [state.freeable(name, names) for name in giving]
        at = np.concatenate([nodes for nodes, _ in parts])
        inside = (at >= lo) & (at < hi)
        amounts = np.concatenate([amounts for _, amounts in parts], axis=1)[:, inside]
        nodes, of_node = np.unique(at[inside], return_inverse=True)
        if not nodes.size:
            return []
        freeable = np.zeros((len(columns), nodes.size), dtype=np.int64)
        np.add.at(freeable.T, of_node, amounts.T)
        room = state.free[columns][:, nodes]
        if reclaimer.ask.held is not None:
            room = np.where(reclaimer.ask.held[nodes], state.free_held[columns][:, nodes], room)
        want = np.array(reclaimer.ask.want, dtype=np.int64)[:, None]
        fits = np.all(room + freeable >= want, axis=0)
        if reclaimer.ask.nodes is not None:
            fits &= self._allowed(reclaimer.ask.nodes)[nodes]
        capacity = np.maximum(state.capacity[columns][:, nodes], 1)
        missing = (np.maximum(want - room, 0) / capacity).sum(axis=0)
        nodes, missing = nodes[fits], missing[fits]
        ranked = np.lexsort((nodes, missing))
        return [int(node) for node in nodes[ranked]]

    def _promising_anywhere(self, reclaimer: _Reclaimer) -> Iterator[int]:
        """Every node of the policy that could hold P empty and has a candidate, least room to
        make first. Those nodes are the same all round; the room to make on them is read again
        only where the round evicted or placed since the last reclaimer of the same ask
        (``_Screened``), mostly the one node that reclaimer freed."""
        state, ask = self.round, reclaimer.ask
        found = self.screened.get(ask)
        if found is None or found.rollbacks != state.rollbacks:
            lo, hi = state.slices[ask.policy]
            fits = state.holding()[lo:hi].copy()
            for column, want in zip(ask.columns, ask.want, strict=True):
                capacity = state.capacity[column, lo:hi]
                if ask.held is not None:
                    capacity = np.where(
                        ask.held[lo:hi], state.capacity_held[column, lo:hi], capacity
                    )
                fits &= capacity >= want
            if ask.nodes is not None:
                fits &= self._allowed(ask.nodes)[lo:hi]
            nodes = lo + np.flatnonzero(fits)
            found = self.screened[ask] = _Screened(
                nodes, self._to_make(ask, nodes), state.rollbacks, len(state.moved)
            )
        elif found.nodes.size and found.seen < len(state.moved):
            moved = np.unique(np.array(state.moved[found.seen :], dtype=np.int64))
            at = np.minimum(np.searchsorted(found.nodes, moved), len(found.nodes) - 1)
            screened = found.nodes[at] == moved
            if screened.any():
                found.missing = found.missing.copy()  # a generator of an earlier call reads it
                found.missing[at[screened]] = self._to_make(ask, moved[screened])
            found.seen = len(state.moved)
        nodes = found.nodes
        for place in _ascending(found.missing):
            yield int(nodes[place])

    def _to_make(self, ask: _Ask, nodes: np.ndarray) -> np.ndarray:
        """Per node of ``nodes``: the room to make there for ``ask`` as the round has left it,
        Σ over its columns of what is missing / the node's allocatable."""
        state = self.round
        missing = np.zeros(len(nodes), dtype=np.float64)
        for column, want in zip(ask.columns, ask.want, strict=True):
            room = state.free[column, nodes]
            if ask.held is not None:
                room = np.where(ask.held[nodes], state.free_held[column, nodes], room)
            short = np.maximum(want - room, 0)
            missing += short / np.maximum(state.capacity[column, nodes], 1)
        return missing

    def _giving(self, reclaimer: _Reclaimer) -> list[str] | None:
        """The queues with candidates that may give to P (``gives``), or None once their
        candidates pass ``GIVERS_LISTED``.

        Walks the tree of the policy's queues with candidates (and those above them), from the
        queues beside P's queue and beside each queue above it, down through queues still
        overused and reclaimable only: a queue that may not give keeps its whole subtree out.
        O(queues visited); O(1) mostly when an earlier walk from beside the same queues above
        passed the bound (``_Crowded``)."""
        state = self.round
        path = state.path(reclaimer.queue)
        key = (reclaimer.ask.policy, reclaimer.ask.needed, path[1:])
        crowded = self.crowded.get(key)
        if crowded is not None and crowded.still(path[0], state.charged):
            return None
        tree = self._tree(reclaimer.ask.policy)
        places = self.order(reclaimer.ask.policy, reclaimer.ask.needed)
        # Each giving queue met, with the queues walked down to it (itself last) and its count
        # of candidates.
        passed: list[tuple[tuple[str, ...], int]] = []
        count = 0
        for i, skip in enumerate(path):
            parent = path[i + 1] if i + 1 < len(path) else None
            # Children are walked through, not copied: at the top they are every overused
            # queue, and the walk mostly stops after a few hundred (``GIVERS_LISTED``).
            stack: list[tuple[Iterator[str], tuple[str, ...]]] = [
                (reversed(tree.get(parent, ())), ())
            ]
            while stack:
                children, above = stack[-1]
                name = next(children, None)
                if name is None:
                    stack.pop()
                    continue
                if name == skip:  # P's own branch
                    continue
                if not state.queues[name].reclaimable or not state.over(name, reclaimer.ask.needed):
                    continue
                walked = (*above, name)
                if places[name] is not None:
                    pods = len(state.queue_pods(name))
                    passed.append((walked, pods))
                    count += pods
                    if count > GIVERS_LISTED:
                        self.crowded[key] = _Crowded(passed)
                        return None
                children_of = tree.get(name)
                if children_of:
                    stack.append((reversed(children_of), walked))
        return [walked[-1] for walked, _ in passed]

    def _tree(self, policy: str) -> dict[str | None, list[str]]:
        """Parent (None: the top) -> children, over the policy's queues with candidates and
        those above them, in the order the candidates' queues first come. Once per policy per
        round: O(queues with candidates), most of which stop at a parent already met."""
        found = self.trees.get(policy)
        if found is None:
            queues = self.round.queues
            found = {}
            seen: set[str] = set()
            for leaf in self.round.candidate_queues():
                queue = queues.get(leaf)
                if queue is None or queue.policy != policy:
                    continue
                # Up to the first queue met before; as in queue_path, the walk ends at a queue
                # whose parent is unknown or already on this walk (a cycle): it goes at the top.
                walk: list[str] = []
                name = leaf
                while name not in seen:
                    seen.add(name)
                    walk.append(name)
                    parent = queue.parent
                    if parent is None or parent not in queues or parent in walk:
                        found.setdefault(None, []).append(name)
                        break
                    found.setdefault(parent, []).append(name)
                    name, queue = parent, queues[parent]
            self.trees[policy] = found
        return found

    def gives(self, reclaimer: _Reclaimer, queue: str) -> bool:
        """Whether ``queue`` may give to P at all: of P's policy, and it and every queue of its
        branch reclaimable and above its deserved in a dimension P requests."""
        if reclaimer.giving is not None:
            return queue in reclaimer.giving
        found = reclaimer.gives.get(queue)
        if found is None:
            state = self.round
            branch = self._branch(reclaimer, queue)
            own = state.queues.get(queue)
            found = reclaimer.gives[queue] = (
                own is not None
                and own.policy == reclaimer.ask.policy
                and bool(branch)
                and all(
                    state.queues[name].reclaimable and state.over(name, reclaimer.ask.needed)
                    for name in branch
                )
            )
        return found

    def _allowed(self, allowed: frozenset[str]) -> np.ndarray:
        mask = self.allowed.get(allowed)
        if mask is None:
            names = self.round.nodes
            mask = np.fromiter((node.name in allowed for node in names), bool, len(names))
            self.allowed[allowed] = mask
        return mask

    def order(self, policy: str, needed: tuple[str, ...]) -> _Places:
        """Each queue's place in the eviction order for reclaimers of ``policy`` that need
        ``needed`` (``_Places``)."""
        key = (policy, needed)
        found = self.places.get(key)
        if found is None:
            found = self.places[key] = _Places(self.round, policy, needed)
        return found

    def _branch(self, reclaimer: _Reclaimer, queue: str) -> tuple[str, ...]:
        found = reclaimer.branches.get(queue)
        if found is None:
            found = reclaimer.branches[queue] = self.round.branch(queue, reclaimer.path)
        return found

    def new_try(self, reclaimer: _Reclaimer, node: int) -> _Try:
        held = reclaimer.ask.held is not None and bool(reclaimer.ask.held[node])
        room = (self.round.free_held if held else self.round.free)[reclaimer.ask.columns, node]
        need = [
            want - int(free) for want, free in zip(reclaimer.ask.want, room.tolist(), strict=True)
        ]
        lacking = tuple(d for d, n in zip(reclaimer.ask.needed, need, strict=False) if n > 0)
        return _Try(node, held, need, lacking or reclaimer.ask.needed)

    def _frees(self, reclaimer: _Reclaimer, attempt: _Try, candidate: Candidate) -> list[int]:
        """What evicting ``candidate`` frees of what P needs on ``attempt``'s node."""
        vector = self.round.vector(candidate)
        frees = [vector[c] for c in reclaimer.ask.columns]
        if attempt.held:
            node = self.round.nodes[attempt.node]
            if any(candidate.request.get(r, 0) for r in node.reserved_for):
                # Its idle accelerators would claim it back: count none of what they reserve.
                for i, d in enumerate(reclaimer.ask.needed):
                    if d in node.reserved:
                        frees[i] = 0
        return frees

    def _helps(self, reclaimer: _Reclaimer, attempt: _Try, candidate: Candidate) -> bool:
        frees = self._frees(reclaimer, attempt, candidate)
        return any(f > 0 and n > 0 for f, n in zip(frees, attempt.need, strict=True))

    def _add(self, reclaimer: _Reclaimer, attempt: _Try, unit: _Unit) -> None:
        for member in unit.members:
            if member.node == attempt.node:
                frees = self._frees(reclaimer, attempt, member)
                attempt.need = [n - f for n, f in zip(attempt.need, frees, strict=True)]
            for name in self._branch(reclaimer, member.pod.queue):
                into = attempt.removed.setdefault(name, {})
                for dim, amount in member.request.items():
                    into[dim] = into.get(dim, 0) + amount
        if unit.whole is None and unit.members[0].gang is not None:
            gang = unit.members[0].gang
            attempt.spare_used[gang] = attempt.spare_used.get(gang, 0) + 1
        attempt.units.append(unit)

    def _spare_left(self, attempt: _Try, gang: GroupKey) -> int:
        return self.round.gang(gang).spare - attempt.spare_used.get(gang, 0)

    def _evaluate(self, reclaimer: _Reclaimer, node: int) -> _Try | None:
        """``node``'s tentative set for P, or None if its candidates cannot make room.

        Its candidates go in the eviction order one tie at a time (``_take_from_tie``); members
        of PodGroups at ``minMember`` are put aside, and whole groups are tried after every
        single pod, in the order their first member came. O(its candidates x dimensions).

        The evaluation for an earlier reclaimer of the same ask stands while the round changed
        neither the node nor a queue of the branches it weighed, and those branches are P's
        too: most reclaimers compare the nodes the one before them compared, of which it took
        one. Not kept when a PodGroup's member was weighed (its group's other members count)."""
        state = self.round
        key = (reclaimer.ask, node)
        kept = self.evaluated.get(key)
        if (
            kept is not None
            and kept.rollbacks == state.rollbacks
            and node not in state.moved[kept.seen :]
            and all(
                self._branch(reclaimer, queue) == branch
                for queue, branch in zip(kept.queues, kept.branches, strict=True)
            )
            and all(
                state.queue_changed.get(name, -1) <= kept.version
                for branch in kept.branches
                for name in branch
            )
        ):
            return kept.attempt
        attempt, weighed = self._evaluate_afresh(reclaimer, node)
        if weighed is not None:
            queues = tuple(weighed)
            branches = tuple(self._branch(reclaimer, queue) for queue in queues)
            self.evaluated[key] = _Evaluated(
                attempt, state.version, len(state.moved), state.rollbacks, queues, branches
            )
        return attempt

    def _evaluate_afresh(
        self, reclaimer: _Reclaimer, node: int
    ) -> tuple[_Try | None, dict[str, None] | None]:
        """``_evaluate``'s set, and the queues of the candidates it weighed whether they give
        (None: it weighed a PodGroup's member)."""
        state = self.round
        attempt = self.new_try(reclaimer, node)
        places = self.order(reclaimer.ask.policy, reclaimer.ask.needed)
        ties: dict[_Position, list[Candidate]] = {}
        weighed: dict[str, None] | None = {}
        for candidate in state.on_node(node):
            if candidate.evicted or candidate.static is not None:
                continue
            place = places[candidate.pod.queue]
            if place is None or not _shares(candidate, attempt.matter):
                continue
            if weighed is not None:
                weighed[candidate.pod.queue] = None
            if not self.gives(reclaimer, candidate.pod.queue):
                continue
            if candidate.gang is not None:
                weighed = None
            ties.setdefault((place, *candidate.tie), []).append(candidate)
        deferred: dict[GroupKey, None] = {}
        for position in sorted(ties):
            pods = sorted(ties[position], key=state.within_tie)
            name = pods[0].pod.queue
            branches = {name: self._branch(reclaimer, name)}
            if self._take_from_tie(
                reclaimer, attempt, pods, branches=branches, position=position, deferred=deferred
            ):
                return attempt, weighed
        for gang in deferred:
            if self._whole(reclaimer, gang, attempt):
                return attempt, weighed
        return None, weighed

    def _take_from_tie(
        self,
        reclaimer: _Reclaimer,
        attempt: _Try,
        pods: list[Candidate],
        *,
        branches: Mapping[str, tuple[str, ...]],
        position: _Position,
        deferred: dict[GroupKey, None],
    ) -> bool:
        """Add pods of one tie on ``attempt``'s node until P fits: the smallest one that makes
        it fit if there is one, else the largest that may go, and again. Whether P fits."""
        state = self.round
        pool = list(pods)  # smallest first
        while pool:
            usable: list[tuple[Candidate, list[int]]] = []
            for candidate in pool:
                if not _shares(candidate, attempt.matter):
                    continue
                frees = self._frees(reclaimer, attempt, candidate)
                if not any(f > 0 and n > 0 for f, n in zip(frees, attempt.need, strict=True)):
                    continue
                gang = candidate.gang
                if gang is not None and self._spare_left(attempt, gang) <= 0:
                    deferred.setdefault(gang)
                    continue
                if state.unit_violation([candidate], attempt.matter, branches, attempt.removed):
                    continue
                usable.append((candidate, frees))
            if not usable:
                return False
            chosen = next(
                (
                    candidate
                    for candidate, frees in usable
                    if all(n - f <= 0 for n, f in zip(attempt.need, frees, strict=True))
                ),
                None,
            )
            if chosen is None:
                largest = min(usable, key=lambda found: _largest_first(state.within_tie(found[0])))
                chosen = largest[0]
            self._add(reclaimer, attempt, _Unit((chosen,), None, position))
            if attempt.fits:
                return True
            pool.remove(chosen)
        return False

    def _whole(self, reclaimer: _Reclaimer, gang: GroupKey, attempt: _Try) -> bool:
        """Add a whole PodGroup to ``attempt`` if it may go and frees something P lacks there;
        whether P then fits."""
        state = self.round
        members = tuple(m for m in state.gang(gang).members if not m.evicted)
        if self._gang_reason(reclaimer, members, attempt.matter) is not None:
            return False
        here = [m for m in members if m.node == attempt.node and _shares(m, attempt.matter)]
        if not any(self._helps(reclaimer, attempt, m) for m in here):
            return False
        branches = {m.pod.queue: self._branch(reclaimer, m.pod.queue) for m in members}
        if state.unit_violation(members, attempt.matter, branches, attempt.removed):
            return False
        self._add(reclaimer, attempt, _Unit(members, gang, _AFTER_SINGLES))
        return attempt.fits

    def _gang_reason(
        self, reclaimer: _Reclaimer, members: Sequence[Candidate], matter: tuple[str, ...]
    ) -> SpareReason | None:
        """A member that may not go spares the whole group."""
        state = self.round
        for member in members:
            if member.static is not None:
                return member.static
            queue = member.pod.queue
            branch = self._branch(reclaimer, queue)
            reason = state.queue_reason(queue, reclaimer.ask.policy, matter, branch)
            if reason is not None:
                return reason
        return None

    # --- the minimal set -----------------------------------------------------------------

    def _minimal(self, reclaimer: _Reclaimer, attempt: _Try) -> list[_Unit]:
        """Spare each victim P can do without, the most valuable (latest in the order) first.
        What is missing adds up: without a unit, it is what is missing with it plus what the
        unit frees on the node, so each unit is weighed once, not the rest replayed for it."""
        units = list(attempt.units)
        need = attempt.need
        for unit in reversed(attempt.units):
            if len(units) == 1:
                break
            without = need
            for member in unit.members:
                if member.node == attempt.node:
                    frees = self._frees(reclaimer, attempt, member)
                    without = [n + f for n, f in zip(without, frees, strict=True)]
            if all(missing <= 0 for missing in without):
                units.remove(unit)
                need = without
        return units

    # --- committing ----------------------------------------------------------------------

    def _commit(self, reclaimer: _Reclaimer, attempt: _Try, units: Sequence[_Unit]) -> Reclaim:
        state = self.round
        node = attempt.node
        spared = self._spared(reclaimer, node, units)
        victims: list[Victim] = []
        frees: dict[str, int] = {}
        for unit in units:
            for member in sorted(unit.members, key=lambda m: (*m.tie, *state.within_tie(m))):
                victims.append(self._victim(attempt.matter, member, unit))
                for dim, amount in member.request.items():
                    frees[dim] = frees.get(dim, 0) + amount
                frees[PODS] = frees.get(PODS, 0) + 1
                state.evict(member)
            if unit.whole is not None:
                state.gang(unit.whole).spare = 0
            elif unit.members[0].gang is not None:
                state.gang(unit.members[0].gang).spare -= 1
        state.place(reclaimer.queue, reclaimer.ask.request, node)
        pod = reclaimer.pod
        return Reclaim(
            pod.key,
            pod.queue,
            state.nodes[node].name,
            tuple(victims),
            dict(sorted(frees.items())),
            spared,
        )

    def _victim(self, matter: Sequence[str], member: Candidate, unit: _Unit) -> Victim:
        allocated = self.round.allocated(member.pod.queue)
        deserved = self.round.queues[member.pod.queue].deserved
        overuse = tuple(
            Overuse(d, allocated.get(d, 0), deserved.get(d, 0))
            for d in matter
            if member.request.get(d, 0) > 0
        )
        pod = member.pod
        return Victim(
            pod.key,
            pod.uid,
            pod.queue,
            pod.node,
            dict(sorted(member.request.items())),
            pod.priority,
            overuse,
            pod.group if unit.whole is not None else None,
        )

    def _spared(
        self, reclaimer: _Reclaimer, node: int, units: Sequence[_Unit]
    ) -> tuple[Spared, ...]:
        """The node's pods that stay although the order reached them (or that no order ever
        reaches), and why; judged on the round as it stood before this reclaimer."""
        state = self.round
        chosen = {id(m) for unit in units for m in unit.members}
        last = max(unit.position for unit in units)
        places = self.order(reclaimer.ask.policy, reclaimer.ask.needed)
        attempt = self.new_try(reclaimer, node)
        found: list[Spared] = []
        for candidate in state.on_node(node):
            if id(candidate) in chosen or candidate.evicted:
                continue
            reason = self.candidate_reason(reclaimer, candidate, attempt)
            if reason is None:
                place = places[candidate.pod.queue]
                if place is not None and (place, *candidate.tie) > last:
                    continue  # the order never reached it
                reason = SpareReason.NOT_NEEDED
            found.append(Spared(candidate.pod.key, reason))
        return tuple(sorted(found, key=lambda s: s.pod))

    def candidate_reason(
        self, reclaimer: _Reclaimer, candidate: Candidate, attempt: _Try
    ) -> SpareReason | None:
        """The rule that spares ``candidate`` on its own (None: it may go)."""
        if candidate.static is not None:
            return candidate.static
        queue = candidate.pod.queue
        branch = self._branch(reclaimer, queue)
        reason = self.round.queue_reason(queue, reclaimer.ask.policy, attempt.matter, branch)
        if reason is not None:
            return reason
        if not _shares(candidate, attempt.matter):
            return SpareReason.NOT_NEEDED
        violation = self.round.unit_violation(
            [candidate], attempt.matter, {queue: branch}, attempt.removed
        )
        if violation is not None:
            return violation
        gang = candidate.gang
        if gang is not None and self._spare_left(attempt, gang) <= 0:
            members = tuple(m for m in self.round.gang(gang).members if not m.evicted)
            whole = self._gang_reason(reclaimer, members, attempt.matter)
            branches = {m.pod.queue: self._branch(reclaimer, m.pod.queue) for m in members}
            if whole is None:
                whole = self.round.unit_violation(
                    members, attempt.matter, branches, attempt.removed
                )
            if whole is not None:
                return SpareReason.GANG_WHOLE
        return None


def plan_reclaim(inputs: ReclaimInputs, memo: ReclaimMemo | None = None) -> ReclaimPlan:
    """The round's reclaims, in admission order, and why the other waiting pods wait. ``memo``:
    what the last round of the same caller read (``ReclaimMemo``; updated), for speed only."""
    return _Planner(inputs, memo).plan()


def spare_reason(inputs: ReclaimInputs, reclaimer: PodKey, pod: PodKey) -> SpareReason | None:
    """Why ``pod`` may not be evicted for the waiting pod ``reclaimer``, on the round's inputs
    as they are (before any reclaim of the round); None when it may (whether a plan needs it is
    ``ReclaimPlan.victims``). For ``explain``: O(inputs)."""
    planner = _Planner(inputs)
    waiting = next((w for w in inputs.waiting if w.key == reclaimer), None)
    running = next((r for r in chain.from_iterable(inputs.running.values()) if r.key == pod), None)
    if waiting is None or running is None:
        raise KeyError(reclaimer if waiting is None else pod)
    candidate = planner.round.candidate(running)
    if candidate.static is not None:
        return candidate.static
    if waiting.queue not in planner.round.queues:
        return SpareReason.OTHER_POLICY
    context = planner.reclaimer_of(waiting, _needed(waiting.request))
    if context is None:
        return SpareReason.OTHER_POLICY
    return planner.candidate_reason(context, candidate, planner.new_try(context, candidate.node))


def _answer_at_start(queues: Mapping[str, QueueState], pod: Waiting) -> NotServed:
    """P's ``AboveShare`` as the round started (``screening.screen``), from the
    round's ``queues`` as they came."""
    path = queue_path(queues, pod.queue) if pod.queue in queues else ()
    refusal = _above_share(
        pod, _needed(pod.request), queues, path, lambda name: queues[name].allocated
    )
    assert refusal is not None, "asked only of a pod refused at the start"
    return refusal


def _above_share(
    pod: Waiting,
    needed: tuple[str, ...],
    queues: Mapping[str, QueueState],
    path: Sequence[str],
    allocated_of: Callable[[str], Amounts],
) -> NotServed | None:
    """AboveShare when P would take its queue, or one above it (``path``, nearest first), past
    its deserved, by ``allocated_of`` each queue; an unknown queue refuses everything."""
    request = pod.request
    if pod.queue not in queues:
        shortfalls = tuple(Shortfall(d, request[d], 0) for d in needed)
        return NotServed(pod.key, pod.queue, NotServedReason.ABOVE_SHARE, pod.queue, shortfalls)
    for name in path:
        allocated, deserved = allocated_of(name), queues[name].deserved
        for dimension in needed:
            if allocated.get(dimension, 0) + request[dimension] > deserved.get(dimension, 0):
                # Refused: its shortfalls are made now, and only now (most queues take it).
                short = tuple(
                    Shortfall(d, request[d], deserved.get(d, 0) - allocated.get(d, 0))
                    for d in needed
                    if allocated.get(d, 0) + request[d] > deserved.get(d, 0)
                )
                return NotServed(pod.key, pod.queue, NotServedReason.ABOVE_SHARE, name, short)
    return None


def _needed(request: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(sorted(d for d, amount in request.items() if amount > 0 and d != PODS))


def _shares(candidate: Candidate, needed: Sequence[str]) -> bool:
    """Whether evicting it frees anything of what the reclaimer requests."""
    return any(d in candidate.request for d in needed)


def _overuse(
    allocated: Mapping[str, int], deserved: Mapping[str, int], needed: Sequence[str]
) -> float | None:
    """max over ``needed`` of allocated/deserved (deserved 0 with something allocated: ∞);
    None when allocated exceeds deserved in none of ``needed``."""
    worst, over = 0.0, False
    for d in needed:
        used, share = allocated.get(d, 0), deserved.get(d, 0)
        over = over or used > share
        if share > 0:
            worst = max(worst, used / share)
        elif used > 0:
            return INFINITE_OVERUSE
    return worst if over else None


def _ascending(values: np.ndarray) -> Iterator[int]:
    """The indices of ``values``, smallest value first, ties in index order (a stable argsort).
    The ``NODES_SORTED_FIRST`` smallest (and their ties) are sorted first, apart from the rest,
    since the caller mostly stops within them: O(n) instead of O(n log n)."""
    if values.size <= NODES_SORTED_FIRST:
        yield from np.argsort(values, kind="stable").tolist()
        return
    bound = np.partition(values, NODES_SORTED_FIRST - 1)[NODES_SORTED_FIRST - 1]
    for part in (np.flatnonzero(values <= bound), np.flatnonzero(values > bound)):
        yield from part[np.argsort(values[part], kind="stable")].tolist()


def _largest_first(order: tuple[float, str, str]) -> tuple[float, str, str]:
    size, namespace, name = order
    return (-size, namespace, name)


def _not_served(pod: Waiting, reason: NotServedReason) -> NotServed:
    return NotServed(pod.key, pod.queue, reason, None, ())
