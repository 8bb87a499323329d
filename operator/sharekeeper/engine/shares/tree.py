"""Queue trees: ``spec.parent`` read into a forest under an implicit root, checked, and walked
one level at a time over the dense problem's rows.

A queue's parent is the queue its ``parent`` names; none (or ``root``) puts it under the root.
A queue is left out of the tree, with the reason, when its parent does not exist, is governed
by another policy (or none), or when it is on a cycle; every queue below such a queue is left
out too, since its numbers would depend on it. Only the queues in the tree get numbers.

Complexity: ``queue_tree`` O(Q); the per-level helpers O(depth x Q x D) in numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sharekeeper.engine.resources import UNLIMITED, Vectors, sum_amounts
from sharekeeper.engine.shares.accounting import NO_USAGE, QueueUsage
from sharekeeper.engine.shares.snapshot import QueueName, Reason

ROOT = "root"
"""The name that stands for the implicit root in ``parent`` (Volcano's root queue)."""
TREE_POLICIES = ("Proportion", "Capacity")
"""The sharing policies that read ``parent``; the others share among all queues as one level."""


@dataclass(frozen=True, slots=True)
class QueueTree:
    parent: Mapping[str, str | None]
    """Every queue in the tree -> its parent (None: the root)."""
    levels: tuple[tuple[str, ...], ...]
    """The queues by depth: ``levels[0]`` are the root's children; names sorted per level."""
    left_out: Mapping[str, str]
    """Queue -> why it is not in the tree."""

    @property
    def nested(self) -> bool:
        """Whether any queue has a parent other than the root."""
        return len(self.levels) > 1


def path_from_root(name: str, parents: Mapping[str, str | None]) -> list[str]:
    """The queues from the top of ``name``'s tree down to it, by each queue's ``parent``
    (``[name]`` under the root); a parent that does not exist, or a cycle, ends the walk."""
    path = [name]
    parent = parents.get(name)
    while parent is not None and parent != ROOT and parent in parents and parent not in path:
        path.append(parent)
        parent = parents[parent]
    return path[::-1]


def queue_tree(
    parents: Mapping[str, str | None],
    governs: Callable[[str], str | None],
    exists: Container[str],
) -> QueueTree:
    """``parents``: every governed queue of one policy -> its ``spec.parent``; ``governs``: for
    any queue name, the policy that governs it (None: none); ``exists``: every Queue's name."""
    own = governs(next(iter(parents))) if parents else None
    left_out: dict[str, str] = {}
    parent: dict[str, str | None] = {}
    for name, named in parents.items():
        if named is None or named == ROOT:
            parent[name] = None
        elif named not in parents:
            owner = governs(named)
            if named not in exists:
                left_out[name] = f"parent {named} does not exist"
            elif owner is None:
                left_out[name] = f"parent {named} is governed by no SchedulerPolicy, not {own}"
            else:
                left_out[name] = f"parent {named} is governed by SchedulerPolicy {owner}, not {own}"
        else:
            parent[name] = named
    if not left_out:
        if all(named is None for named in parent.values()):
            # No queue below another (every round of a flat policy): one level, nothing to check.
            return QueueTree(parent, (tuple(sorted(parent)),) if parent else (), {})
        levels = _levels(parent)
        if sum(map(len, levels)) == len(parent):
            # Every queue is reached from the root (a valid tree, the common case): no cycle.
            return QueueTree(parent, levels, {})
    # Cycles: walk up from each queue, marking the walk; a walk that meets itself is a cycle.
    state: dict[str, int] = {}  # 1: on the current walk, 2: settled
    for start in sorted(parent):
        walk: list[str] = []
        at: str | None = start
        while at is not None and at in parent and state.get(at, 0) == 0:
            state[at] = 1
            walk.append(at)
            at = parent[at]
        if at is not None and state.get(at) == 1:
            cycle = walk[walk.index(at) :]
            text = " -> ".join([*cycle, at])
            for member in cycle:
                left_out[member] = f"on a cycle of parents: {text}"
        for member in walk:
            state[member] = 2
    # Below a queue left out: left out too. Parents first, by walking each chain once.
    resolved: dict[str, str | None] = {}  # queue -> the left-out ancestor, None when fine

    def blocker(name: str) -> str | None:
        chain = []
        at: str | None = name
        found: str | None = None
        while at is not None:
            if at in resolved:
                found = resolved[at]
                break
            if at in left_out:
                found = at
                break
            chain.append(at)
            at = parent.get(at)
        for member in chain:
            resolved[member] = found
        return found

    for name in sorted(parent):
        if name in left_out:
            continue
        above = blocker(name)
        if above is not None:
            left_out[name] = f"under queue {above}, which is left out: {left_out[above]}"
    kept = {name: p for name, p in parent.items() if name not in left_out}
    return QueueTree(kept, _levels(kept), left_out)


def _levels(parent: Mapping[str, str | None]) -> tuple[tuple[str, ...], ...]:
    """The queues by depth from the root, names sorted per level; a queue on a cycle, or
    below one, is in none."""
    children: dict[str | None, list[str]] = {}
    for name, p in parent.items():
        children.setdefault(p, []).append(name)
    levels: list[tuple[str, ...]] = []
    current = sorted(children.get(None, []))
    while current:
        levels.append(tuple(current))
        current = sorted(child for name in current for child in children.get(name, []))
    return tuple(levels)


@dataclass(frozen=True, slots=True)
class TreeRows:
    """A tree over the rows of a dense problem (queues sorted by name)."""

    parent: Vectors
    """Row -> its parent's row; -1 under the root."""
    levels: tuple[Vectors, ...]
    """Rows by depth, top first."""

    @classmethod
    def of(cls, tree: QueueTree, rows: Sequence[str]) -> TreeRows:
        index = {name: row for row, name in enumerate(rows)}
        parent = np.full(len(rows), -1, dtype=np.int64)
        for name, p in tree.parent.items():
            if p is not None:
                parent[index[name]] = index[p]
        levels = tuple(
            np.array([index[name] for name in level], dtype=np.int64) for level in tree.levels
        )
        return cls(parent, levels)

    def children_sums(self, level: Vectors, values: Vectors) -> tuple[Vectors, Vectors]:
        """The parents of the rows ``level``, and per parent row Σ ``values`` of those rows
        (saturated at ``UNLIMITED``; other rows 0)."""
        parents = self.parent[level]
        sums = np.zeros((len(self.parent), values.shape[1]), dtype=np.int64)
        np.add.at(sums, parents, values[level])
        np.minimum(sums, UNLIMITED, out=sums)
        return np.unique(parents), sums

    def floors(self, guarantee: Vectors) -> Vectors:
        """Each row's guarantee, raised to the sum of its children's floors: what must stay
        reserved for it and everything below it."""
        floors = guarantee.copy()
        for level in reversed(self.levels[1:]):
            inner, below = self.children_sums(level, floors)
            floors[inner] = np.maximum(floors[inner], below[inner])
        return floors

    def sibling_sums(self, values: Vectors) -> Vectors:
        """Per row, Σ ``values`` over the children of its parent (itself included)."""
        groups = self.parent + 1  # the root's children form group 0
        sums = np.zeros((len(self.parent) + 1, values.shape[1]), dtype=np.int64)
        np.add.at(sums, groups, values)
        np.minimum(sums, UNLIMITED, out=sums)
        result: Vectors = sums[groups]
        return result


def roll_up(tree: QueueTree, usage: Mapping[QueueName, QueueUsage]) -> dict[QueueName, QueueUsage]:
    """Each queue's usage plus everything below it: what an inner queue's status shows, and
    what its capability is checked against. O(Q x D); one new entry per inner queue, its own
    and its children's summed at once (adding one child at a time made one per child)."""
    rolled: dict[QueueName, QueueUsage] = dict(usage)
    for level in reversed(tree.levels[1:]):
        children: dict[QueueName, list[QueueUsage]] = {}
        for name in level:
            parent = tree.parent[name]
            below = rolled.get(QueueName(name))
            if parent is not None and below is not None:
                children.setdefault(QueueName(parent), []).append(below)
        for parent, entries in children.items():
            parts = [rolled.get(parent, NO_USAGE), *entries]
            rolled[parent] = QueueUsage(
                allocated=sum_amounts(part.allocated for part in parts),
                request=sum_amounts(part.request for part in parts),
                # Most queues have none of these: their empty mappings are not walked.
                inqueue=sum_amounts(part.inqueue for part in parts if part.inqueue),
                elastic=sum_amounts(part.elastic for part in parts if part.elastic),
                held=sum_amounts(part.held for part in parts if part.held),
                admitted_pods=sum(part.admitted_pods for part in parts),
            )
    return rolled


def inner_pods(pods: int) -> Reason:
    return Reason(
        "PodsInInnerQueue",
        f"{pods} pod{' names' if pods == 1 else 's name'} this queue, which has queues below it: "
        "they count in its numbers, but jobs belong in leaf queues (Volcano refuses them)",
    )
