"""The round's working state: queues' running allocations, nodes' free room, the candidates.

Built once per ``plan_reclaim`` call from the frozen inputs and changed only through
``evict`` and ``place``, so that each reclaimer sees what the ones before it took and freed.
Also the rules that spare a candidate (``queue_reason``, ``unit_violation``), shared by the
planner and ``spare_reason``.

Cost of building: O(queues + nodes · dimensions). A queue's path is walked, and its allocated
copied, only when the round first needs them; the candidates are indexed (by queue and by node,
O(candidates)) only when some pod needs victims, and a candidate's size and node vector are
computed when first needed. With a ``ReclaimMemo`` from the round before, the nodes' amounts and
the candidates by node are read again only where they are new objects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from itertools import chain

import numpy as np

from sharekeeper.engine.reclaim.screening import ScreenMemo
from sharekeeper.engine.reclaim.values import (
    PODS,
    GroupKey,
    NodeState,
    QueueState,
    ReclaimInputs,
    Running,
    SpareReason,
)
from sharekeeper.engine.resources import UNLIMITED, Vectors, dense

INFINITE_OVERUSE = float("inf")


@dataclass(slots=True, eq=False)
class Candidate:
    pod: Running
    node: int
    """Index in ``Round.nodes``."""
    request: Mapping[str, int]
    """Positive amounts only, without ``pods``."""
    gang: GroupKey | None
    static: SpareReason | None
    """Protected, refused, or on a node or of a queue the round does not know."""
    evicted: bool = False
    size: float = -1.0
    """Its largest share of its node's allocatable (the order's tie-break; -1: not yet
    computed, ``Round.within_tie``)."""
    vector: list[int] | None = None
    """What its eviction frees on its node, over ``Round.dimensions`` (``pods`` included)."""

    @property
    def tie(self) -> tuple[int, float]:
        """Within its queue, where it stands in the eviction order: lowest priority, then
        youngest. Pods of one queue and tie are told apart by size, then namespace/name."""
        return (self.pod.priority, -self.pod.created_seconds)


@dataclass(slots=True)
class GangState:
    members: list[Candidate]
    spare: int
    """Pods that may still go one by one (running above ``minMember``)."""


@dataclass(frozen=True, slots=True)
class Savepoint:
    """What ``Round.rollback`` restores: the round as it stood at ``Round.savepoint``."""

    charged: dict[str, dict[str, int]]
    free: Vectors
    free_held: Vectors
    evicted: int
    """How many candidates ``Round.evicted`` listed."""
    spares: dict[GroupKey, int]


@dataclass(frozen=True, slots=True)
class _ByNode:
    """The candidates of each node (by its place in ``Round.nodes``), as read from ``running``."""

    names: list[str]
    """The nodes' names, in their places."""
    running: Mapping[str, tuple[Running, ...]]
    pods: list[list[Running]]
    """Never changed once made: a later round's is made anew where its candidates differ."""


@dataclass(frozen=True, slots=True)
class _Holders:
    """Per node (by its place in ``Round.nodes``; the last slot: nodes the round does not
    know), how many pods ``running`` lists there that are neither protected nor ``excluded``."""

    names: list[str]
    excluded: frozenset[tuple[str, str]]
    running: Mapping[str, tuple[Running, ...]]
    counts: np.ndarray


@dataclass(frozen=True, slots=True)
class _Layout:
    """The round's nodes in the order it keeps them (by policy, then name) and what is read of
    them all at once: where each policy's are, the dimensions any of them has, and their amounts
    as dense rows (node x dimension, read-only) over those."""

    given: Sequence[NodeState]
    """The nodes as the inputs list them."""
    places: list[int]
    """Per node of ``given``, its place in ``nodes``."""
    nodes: list[NodeState]
    names: list[str]
    """The nodes' names, in their places: the same object while they are (a patch keeps it)."""
    index: dict[str, int]
    slices: dict[str, tuple[int, int]]
    dimensions: tuple[str, ...]
    column: dict[str, int]
    reserving: list[int]
    """The places of the nodes that reserve something."""
    allocatable: Vectors
    """With the pod count of a node that sets none ``UNLIMITED``."""
    used: Vectors
    reserved: Vectors


def _lay_out(given: Sequence[NodeState], last: _Layout | None) -> _Layout:
    """``given``'s ``_Layout``: ``last``'s with the rows of the nodes that are new objects read
    again, while fewer than half are and each has the name, policy and dimensions its place had
    (so the order, the slices and the dimensions hold); else read afresh. At the top size a
    round's 5,000 nodes were sorted, walked and densified afresh every round (~5 ms), a few
    hundred of them changed."""
    if last is not None and len(last.given) == len(given):
        changed = [
            at
            for at, (now, then) in enumerate(zip(given, last.given, strict=True))
            if now is not then
        ]
        if len(changed) * 2 <= len(given) and all(
            _same_shape(given[at], last.given[at]) for at in changed
        ):
            if not changed:
                return last
            nodes = list(last.nodes)
            rows = [last.places[at] for at in changed]
            for at, row in zip(changed, rows, strict=True):
                nodes[row] = given[at]
            dimensions = last.dimensions
            new = [nodes[row] for row in rows]
            return replace(
                last,
                given=given,
                nodes=nodes,
                allocatable=_patched(last.allocatable, rows, new, "allocatable", dimensions),
                used=_patched(last.used, rows, new, "used", dimensions),
                reserved=_patched(last.reserved, rows, new, "reserved", dimensions),
            )
    places = sorted(range(len(given)), key=lambda at: (given[at].policy, given[at].name))
    nodes = [given[at] for at in places]
    at_place = [0] * len(given)
    for row, at in enumerate(places):
        at_place[at] = row
    slices: dict[str, tuple[int, int]] = {}
    # One pass over the nodes for all this: their amounts are mostly out of the CPU's caches
    # when a round starts, and each pass over them pays for it again.
    names: set[str] = {PODS}
    unlimited: list[int] = []
    reserving: list[int] = []
    for row, node in enumerate(nodes):
        slices[node.policy] = (slices.get(node.policy, (row, row))[0], row + 1)
        names.update(node.allocatable, node.used, node.reserved)
        if PODS not in node.allocatable:
            unlimited.append(row)
        if node.reserved:
            reserving.append(row)
    dimensions = tuple(sorted(names))
    column = {name: at for at, name in enumerate(dimensions)}
    allocatable = dense([node.allocatable for node in nodes], dimensions)
    allocatable[unlimited, column[PODS]] = UNLIMITED
    allocatable.setflags(write=False)
    used, reserved = (
        _read_only(dense([getattr(node, kind) for node in nodes], dimensions))
        for kind in ("used", "reserved")
    )
    return _Layout(
        given, at_place, nodes, [node.name for node in nodes],
        {node.name: row for row, node in enumerate(nodes)}, slices,
        dimensions, column, reserving, allocatable, used, reserved,
    )  # fmt: skip


def _same_shape(now: NodeState, then: NodeState) -> bool:
    return (
        now.name == then.name
        and now.policy == then.policy
        and now.allocatable.keys() == then.allocatable.keys()
        and now.used.keys() == then.used.keys()
        and now.reserved.keys() == then.reserved.keys()
    )


def _patched(
    matrix: Vectors, rows: list[int], nodes: list[NodeState], kind: str, dimensions: Sequence[str]
) -> Vectors:
    """``matrix`` with ``rows`` read again from ``nodes``' amounts of ``kind``."""
    patched = matrix.copy()
    patched[rows] = dense([getattr(node, kind) for node in nodes], dimensions)
    if kind == "allocatable":
        pods = dimensions.index(PODS)
        unlimited = [
            row for row, node in zip(rows, nodes, strict=True) if PODS not in node.allocatable
        ]
        patched[unlimited, pods] = UNLIMITED
    return _read_only(patched)


def _read_only(matrix: Vectors) -> Vectors:
    matrix.setflags(write=False)
    return matrix


class ReclaimMemo:
    """What a round's set-up read that the next round may reuse: the nodes in order and their
    amounts as dense rows (``_Layout``), the candidates by node, how many on each node may go
    (``Round.holding``), and the waiting pods as the screen reads them. A caller that plans
    round after round hands one memo to each ``plan_reclaim`` of a policy, and keeps what did
    not change in its inputs as the very same objects (a node's ``NodeState``, a queue's tuple
    of candidates, a ``Waiting``): only the new ones are read again. The plan is the same with
    or without it.

    At the top size (5,000 nodes, 37,000 candidates) both were read afresh every round: about a
    tenth of the engine's time, spent on objects that mostly had not changed."""

    def __init__(self) -> None:
        self.layout: _Layout | None = None
        self.by_node: _ByNode | None = None
        self.holders: _Holders | None = None
        self.screen = ScreenMemo()
        """What the screens read of the waiting pods (``screening.ScreenMemo``)."""


def queue_path(by_name: Mapping[str, QueueState], name: str) -> tuple[str, ...]:
    """``name`` (one of ``by_name``) with the queues above it, nearest first; a cycle or an
    unknown parent ends the walk (the share engine reports broken trees)."""
    path = [name]
    parent = by_name[name].parent
    while parent is not None and parent in by_name and parent not in path:
        path.append(parent)
        parent = by_name[parent].parent
    return tuple(path)


def queue_paths(queues: Iterable[QueueState]) -> dict[str, tuple[str, ...]]:
    """Each queue's ``queue_path``."""
    by_name = {queue.name: queue for queue in queues}
    return {name: queue_path(by_name, name) for name in by_name}


class Round:
    """Queues, nodes and candidates of one round, with the room that changes as it goes.

    Node amounts are kept column-major (dimension x node), so that screening every node of a
    policy for one pod compares a few contiguous rows. Candidates come by queue (the inputs);
    they are indexed lazily by node when a chosen node's pods are first read, by PodGroup
    when a group is first met; a ``Candidate`` is made once per pod, on first use, and what a
    queue's pods may free once per queue (``freeable``)."""

    def __init__(self, inputs: ReclaimInputs, memo: ReclaimMemo | None = None) -> None:
        self.memo = memo
        self.queues: dict[str, QueueState] = {queue.name: queue for queue in inputs.queues}
        """As the round started (``allocated``: the round's changes are in ``charged``)."""
        self._paths: dict[str, tuple[str, ...]] = {}
        self.charged: dict[str, dict[str, int]] = {}
        """The allocated of the queues the round has changed, as it has left them."""
        self._over_at_start: dict[tuple[str, ...], dict[str, bool]] = {}
        """Per needed dimensions, ``over`` of the queues the round has not changed."""
        layout = _lay_out(inputs.nodes, memo.layout if memo is not None else None)
        if memo is not None:
            memo.layout = layout
        nodes = layout.nodes
        self.nodes: list[NodeState] = nodes
        self.node_names: list[str] = layout.names
        self.node_index: dict[str, int] = layout.index
        self.slices: dict[str, tuple[int, int]] = layout.slices
        self.dimensions: tuple[str, ...] = layout.dimensions
        self.column: dict[str, int] = layout.column
        allocatable, used, reserved = layout.allocatable, layout.used, layout.reserved
        self.capacity: Vectors = np.ascontiguousarray(allocatable.T)
        """Allocatable (dimension x node): a node too small for a pod even empty is never worth
        a walk."""
        self.capacity_held: Vectors = np.ascontiguousarray((allocatable - reserved).T)
        self.free: Vectors = np.ascontiguousarray((allocatable - used).T)
        """Room left on each node (negative when overfull)."""
        self.free_held: Vectors = np.ascontiguousarray((allocatable - used - reserved).T)
        """Room left for a pod held to the node's reservation."""
        self.reserving: dict[frozenset[str], np.ndarray] = {}
        """Nodes that keep something idle, by what they keep it for."""
        for i in layout.reserving:
            node = nodes[i]
            if node.reserved_for and any(node.reserved.values()):
                mask = self.reserving.setdefault(node.reserved_for, np.zeros(len(nodes), bool))
                mask[i] = True
        self.running = inputs.running
        self.excluded = inputs.excluded
        self.gang_specs = {(g.namespace, g.name): g for g in inputs.gangs}
        self.made: dict[tuple[str, str], Candidate] = {}
        self._by_node: _ByNode | None = None
        self._on_node: dict[int, list[Candidate]] = {}
        self._freeable: dict[tuple[str, tuple[str, ...]], tuple[Vectors, Vectors]] = {}
        self._by_gang: dict[GroupKey, list[Running]] | None = None
        self._holding: np.ndarray | None = None
        self.gangs: dict[GroupKey, GangState] = {}
        self.evicted: list[Candidate] = []
        """The candidates the round evicted, in order."""
        self.version = 0
        """Changes with every eviction and placement (what a cached failure was judged on), and
        with every rollback."""
        self.freed = 0
        """Changes with every eviction and rollback: until it does, room only shrinks."""
        self.moved: list[int] = []
        """The node of each eviction and placement since the last rollback, in order: what a
        view of the room kept since ``len(moved)`` was ``k`` reads again is ``moved[k:]``."""
        self.rollbacks = 0
        """Changes with every rollback, which may change any node's room."""
        self.queue_changed: dict[str, int] = {}
        """Per queue the round charged, ``version`` after the last time."""

    # --- the lazy index ------------------------------------------------------------------

    def candidate(self, pod: Running) -> Candidate:
        found = self.made.get(pod.key)
        if found is None:
            node_at = self.node_index.get(pod.node)
            queue = self.queues.get(pod.queue)
            static: SpareReason | None = None
            if pod.protected:
                static = SpareReason.PROTECTED
            elif pod.key in self.excluded:
                static = SpareReason.EVICTION_REFUSED
            elif node_at is None or queue is None or queue.policy != self.nodes[node_at].policy:
                static = SpareReason.OTHER_POLICY
            gang = (pod.namespace, pod.group) if pod.group else None
            request: Mapping[str, int] = pod.request
            if PODS in request or min(request.values(), default=1) <= 0:
                request = {n: a for n, a in request.items() if a > 0 and n != PODS}
            node = -1 if node_at is None else node_at
            found = self.made[pod.key] = Candidate(pod, node, request, gang, static)
        return found

    def freeable(self, queue: str, names: tuple[str, ...]) -> tuple[Vectors, Vectors]:
        """Per pod of ``queue`` (``queue_pods``): the node it may free room on (-1: none, it is
        protected, refused, gone, or on a node the round does not know), and what it frees
        there, over ``names`` then ``pods``. Read from the inputs once per queue and names,
        since most of these pods are never looked at again."""
        pods = self.queue_pods(queue)
        found = self._freeable.get((queue, names))
        if found is None:
            nodes = self.nodes_freed(pods)
            amounts = np.array(
                [[max(pod.request.get(d, 0), 0) for pod in pods] for d in names]
                + [[1] * len(pods)],
                dtype=np.int64,
            ).reshape(len(names) + 1, len(pods))
            found = self._freeable[(queue, names)] = (nodes, amounts)
        nodes, amounts = found
        if queue in self.charged:  # the round evicted from it, or placed into it
            made = self.made
            gone = [pod.key in made and made[pod.key].evicted for pod in pods]
            nodes = np.where(gone, -1, nodes)
        return nodes, amounts

    def holding(self) -> np.ndarray:
        """Per node: whether the inputs list a candidate there that is neither protected nor
        refused. A node without one can never be freed, whoever waits: once a round, in place
        of trying each such node for each reclaimer that screens them all (``bench_reclaim.py``'s
        concentrated round). O(candidates); with a memo, O(the candidates of the queues whose
        tuple of candidates is a new object)."""
        if self._holding is None:
            last = self.memo.holders if self.memo is not None else None
            holders = self._count_holders(last)
            if self.memo is not None:
                self.memo.holders = holders
            self._holding = holders.counts[:-1] > 0
        return self._holding

    def _count_holders(self, last: _Holders | None) -> _Holders:
        excluded, running = self.excluded, self.running
        names = self.node_names
        slots = len(names) + 1
        if last is not None and last.names == names and last.excluded == excluded:
            gone = [pods for queue, pods in last.running.items() if running.get(queue) is not pods]
            new = [pods for queue, pods in running.items() if last.running.get(queue) is not pods]
            if len(gone) + len(new) <= len(running):
                # -1 (nothing to free) counts in the last slot.
                counts = last.counts.copy()
                if gone:
                    np.subtract.at(counts, self.nodes_freed(chain.from_iterable(gone)), 1)
                if new:
                    np.add.at(counts, self.nodes_freed(chain.from_iterable(new)), 1)
                return _Holders(names, excluded, running, counts)
        listed = self.nodes_freed(chain.from_iterable(running.values()))
        return _Holders(names, excluded, running, np.bincount(listed % slots, minlength=slots))

    def nodes_freed(self, pods: Iterable[Running]) -> Vectors:
        """Per pod, the node its eviction may free room on: -1 when it is protected, refused,
        or on a node the round does not know."""
        index, excluded = self.node_index, self.excluded
        return np.fromiter(
            (
                -1
                if pod.protected or (excluded and pod.key in excluded)
                else index.get(pod.node, -1)
                for pod in pods
            ),
            np.int64,
        )

    def candidate_queues(self) -> Iterable[str]:
        """The queues the inputs list running pods of."""
        return self.running.keys()

    def queue_pods(self, queue: str) -> Sequence[Running]:
        """The running pods the inputs list for ``queue``."""
        return self.running.get(queue, ())

    def on_node(self, node: int) -> list[Candidate]:
        """The candidates of ``node``."""
        found = self._on_node.get(node)
        if found is None:
            if self._by_node is None:
                last = self.memo.by_node if self.memo is not None else None
                self._by_node = self._index_by_node(last)
                if self.memo is not None:
                    self.memo.by_node = self._by_node
            found = self._on_node[node] = [self.candidate(p) for p in self._by_node.pods[node]]
        return found

    def _index_by_node(self, last: _ByNode | None) -> _ByNode:
        """The candidates by node: ``last``'s, with the pods of the queues whose candidates are
        new objects taken out and put in again, while its nodes are the round's and fewer than
        half the queues' candidates changed; else read afresh. A node's candidates come in no
        particular order: the planner orders them itself."""
        names = self.node_names
        running = self.running
        if last is not None and last.names == names:
            gone = [pods for queue, pods in last.running.items() if running.get(queue) is not pods]
            new = [pods for queue, pods in running.items() if last.running.get(queue) is not pods]
            if len(gone) + len(new) <= len(running):
                index, by_node = self.node_index, list(last.pods)
                copied: set[int] = set()

                def of(node: str) -> list[Running] | None:
                    at = index.get(node)
                    if at is None:
                        return None
                    if at not in copied:
                        copied.add(at)
                        by_node[at] = list(by_node[at])
                    return by_node[at]

                for pods in gone:
                    for pod in pods:
                        if (listed := of(pod.node)) is not None:
                            listed.remove(pod)
                for pods in new:
                    for pod in pods:
                        if (listed := of(pod.node)) is not None:
                            listed.append(pod)
                return _ByNode(names, running, by_node)
        by_name: defaultdict[str, list[Running]] = defaultdict(list)
        for pods in running.values():
            for pod in pods:
                by_name[pod.node].append(pod)
        return _ByNode(names, running, [by_name.get(name, []) for name in names])

    def gang(self, key: GroupKey) -> GangState:
        found = self.gangs.get(key)
        if found is None:
            if self._by_gang is None:
                self._by_gang = {}
                for pods in self.running.values():
                    for pod in pods:
                        if pod.group:
                            self._by_gang.setdefault((pod.namespace, pod.group), []).append(pod)
            spec = self.gang_specs.get(key)
            spare = max(spec.running - spec.min_member, 0) if spec is not None else 0
            members = [self.candidate(p) for p in self._by_gang.get(key, ())]
            found = self.gangs[key] = GangState(members, spare)
        return found

    # --- queues --------------------------------------------------------------------------

    def path(self, queue: str) -> tuple[str, ...]:
        """``queue`` and the queues above it, nearest first (empty: a queue not among the
        inputs)."""
        found = self._paths.get(queue)
        if found is None:
            found = queue_path(self.queues, queue) if queue in self.queues else ()
            self._paths[queue] = found
        return found

    def allocated(self, queue: str) -> Mapping[str, int]:
        """``queue``'s allocated as the round has left it."""
        found = self.charged.get(queue)
        return self.queues[queue].allocated if found is None else found

    def over(self, queue: str, needed: tuple[str, ...]) -> bool:
        """Above its deserved, as the round has left it, in one of ``needed``."""
        if queue in self.charged:
            return self._over(self.charged[queue], queue, needed)
        # As the round started: the tree walks ask it of the same queues for every reclaimer.
        known = self._over_at_start.get(needed)
        if known is None:
            known = self._over_at_start[needed] = {}
        found = known.get(queue)
        if found is None:
            found = known[queue] = self._over(self.queues[queue].allocated, queue, needed)
        return found

    def _over(self, allocated: Mapping[str, int], queue: str, needed: tuple[str, ...]) -> bool:
        deserved = self.queues[queue].deserved
        return any(allocated.get(d, 0) > deserved.get(d, 0) for d in needed)

    # --- candidates ----------------------------------------------------------------------

    def within_tie(self, candidate: Candidate) -> tuple[float, str, str]:
        """The order among pods of one queue and tie: smallest first, then namespace/name."""
        if candidate.size < 0:
            candidate.size = self.size(candidate)
        return (candidate.size, candidate.pod.namespace, candidate.pod.name)

    def size(self, candidate: Candidate) -> float:
        if candidate.node < 0:
            return 0.0
        largest = 0.0
        for name, amount in candidate.request.items():
            at = self.column.get(name)
            if at is not None:
                capacity = int(self.capacity[at, candidate.node])
                if capacity > 0:
                    largest = max(largest, amount / capacity)
        return largest

    def vector(self, candidate: Candidate) -> list[int]:
        if candidate.vector is None:
            column = self.column
            values = [0] * len(self.dimensions)
            for name, amount in candidate.request.items():
                at = column.get(name)
                if at is not None:
                    values[at] = amount
            values[column[PODS]] = 1
            candidate.vector = values
        return candidate.vector

    # --- rules ---------------------------------------------------------------------------

    def branch(self, queue: str, reclaimer_path: Set[str]) -> tuple[str, ...]:
        """The victim's queue and those above it, up to (not including) the first queue the
        reclaimer's queue is under too: what an eviction takes from without giving back."""
        path = self.path(queue)
        for i, name in enumerate(path):
            if name in reclaimer_path:
                return path[:i]
        return path

    def queue_reason(
        self, queue: str, policy: str, needed: tuple[str, ...], branch: Sequence[str]
    ) -> SpareReason | None:
        """What spares every pod of ``queue`` for a reclaimer of ``policy`` (``needed``: the
        dimensions that matter): another policy, ``reclaimable: false`` on the branch, or no
        overuse in any of ``needed``."""
        found = self.queues.get(queue)
        if found is None or found.policy != policy:
            return SpareReason.OTHER_POLICY
        if any(not self.queues[name].reclaimable for name in branch):
            return SpareReason.NOT_RECLAIMABLE
        if not branch or not self.over(queue, needed):
            return SpareReason.QUEUE_NOT_OVERUSED
        return None

    def unit_violation(
        self,
        members: Sequence[Candidate],
        needed: Sequence[str],
        branches: Mapping[str, tuple[str, ...]],
        removed: Mapping[str, Mapping[str, int]],
    ) -> SpareReason | None:
        """Whether evicting ``members`` together, after ``removed`` (per queue) is already
        gone, would take a queue of their branches below its deserved in one of ``needed``
        (the dimensions that matter), or below its guarantee in any."""
        if len(members) == 1:
            taken: Mapping[str, Mapping[str, int]] = dict.fromkeys(
                branches[members[0].pod.queue], members[0].request
            )
        else:
            summed: dict[str, dict[str, int]] = {}
            for member in members:
                for name in branches[member.pod.queue]:
                    into = summed.setdefault(name, {})
                    for dim, amount in member.request.items():
                        into[dim] = into.get(dim, 0) + amount
            taken = summed
        for name, amounts in taken.items():
            allocated, state = self.allocated(name), self.queues[name]
            gone = removed.get(name, {})
            for dim in needed:
                amount = amounts.get(dim, 0)
                if amount and (
                    allocated.get(dim, 0) - gone.get(dim, 0) - amount < state.deserved.get(dim, 0)
                ):
                    return SpareReason.WOULD_GO_BELOW_DESERVED
            for dim, floor in state.guarantee.items():
                amount = amounts.get(dim, 0)
                left = allocated.get(dim, 0) - gone.get(dim, 0) - amount
                if amount and floor > 0 and left < floor:
                    return SpareReason.WOULD_GO_BELOW_GUARANTEE
        return None

    # --- changes -------------------------------------------------------------------------

    def _charge(self, queue: str) -> dict[str, int]:
        """``queue``'s allocated, to change."""
        found = self.charged.get(queue)
        if found is None:
            found = self.charged[queue] = dict(self.queues[queue].allocated)
        return found

    def evict(self, candidate: Candidate) -> None:
        for name in self.path(candidate.pod.queue):
            allocated = self._charge(name)
            for dim, amount in candidate.request.items():
                allocated[dim] = allocated.get(dim, 0) - amount
        row = np.array(self.vector(candidate), dtype=np.int64)
        self.free[:, candidate.node] += row
        node = self.nodes[candidate.node]
        if node.reserved_for and any(candidate.request.get(r, 0) for r in node.reserved_for):
            # Its accelerators become idle: the node keeps (at most) what it frees for them.
            for dim in node.reserved:
                row[self.column[dim]] = 0
        self.free_held[:, candidate.node] += row
        candidate.evicted = True
        self.evicted.append(candidate)
        self.moved.append(candidate.node)
        self.version += 1
        self.freed += 1
        self._stamp(candidate.pod.queue)

    def place(self, queue: str, request: Mapping[str, int], node: int) -> None:
        for name in self.path(queue):
            allocated = self._charge(name)
            for dim, amount in request.items():
                if dim != PODS:
                    allocated[dim] = allocated.get(dim, 0) + amount
        # Element by element: a pod asks for a few of the dimensions, and a whole column's
        # arithmetic costs numpy more than these few scalars.
        free, free_held, column = self.free, self.free_held, self.column
        for dim, amount in request.items():
            at = column.get(dim)
            if at is not None and dim != PODS:
                free[at, node] -= amount
                free_held[at, node] -= amount
        pods = column[PODS]
        free[pods, node] -= 1
        free_held[pods, node] -= 1
        self.moved.append(node)
        self.version += 1
        self._stamp(queue)

    def _stamp(self, queue: str) -> None:
        """``queue``'s path was charged at this ``version``."""
        version = self.version
        for name in self.path(queue):
            self.queue_changed[name] = version

    # --- tentative changes -----------------------------------------------------------------

    def savepoint(self) -> Savepoint:
        """The round as it stands, for ``rollback``: O(the queues charged so far + nodes x
        dimensions + the PodGroups met so far)."""
        return Savepoint(
            {name: dict(amounts) for name, amounts in self.charged.items()},
            self.free.copy(),
            self.free_held.copy(),
            len(self.evicted),
            {key: gang.spare for key, gang in self.gangs.items()},
        )

    def rollback(self, to: Savepoint) -> None:
        """Undo every eviction and placement since ``to`` was taken. ``version`` and ``freed``
        move on rather than back: what was cached on the undone state is stale."""
        self.charged = {name: dict(amounts) for name, amounts in to.charged.items()}
        self.free[:] = to.free
        self.free_held[:] = to.free_held
        for candidate in self.evicted[to.evicted :]:
            candidate.evicted = False
        del self.evicted[to.evicted :]
        for key in [key for key in self.gangs if key not in to.spares]:
            del self.gangs[key]  # met since: built again from the inputs when next needed
        for key, spare in to.spares.items():
            self.gangs[key].spare = spare
        self.moved = []
        self.rollbacks += 1
        self.version += 1
        self.freed += 1
