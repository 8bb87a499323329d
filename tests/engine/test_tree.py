"""Queue trees: the shape and its checks, and the two tree policies over dense problems."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sharekeeper.engine.resources import UNLIMITED
from sharekeeper.engine.shares.capacity import capacity_tree
from sharekeeper.engine.shares.common import ShareProblem, SpecRows
from sharekeeper.engine.shares.proportion import proportion_deserved, proportion_tree
from sharekeeper.engine.shares.tree import QueueTree, TreeRows, path_from_root, queue_tree


def tree_of(parents: Mapping[str, str | None], **others: str) -> QueueTree:
    """``others``: queues outside ``parents``, by the policy that governs them."""
    return queue_tree(
        parents, lambda name: "p" if name in parents else others.get(name), {*parents, *others}
    )


def test_levels_and_paths() -> None:
    tree = tree_of({"org": None, "team": "org", "project": "team", "other": "root"})
    assert tree.levels == (("org", "other"), ("team",), ("project",))
    assert path_from_root("project", tree.parent) == ["org", "team", "project"]
    assert tree.nested
    assert not tree.left_out


def test_a_missing_parent_leaves_out_the_queue_and_its_subtree() -> None:
    tree = tree_of({"team": "orgg", "project": "team", "fine": None})
    assert tree.left_out["team"] == "parent orgg does not exist"
    assert tree.left_out["project"] == (
        "under queue team, which is left out: parent orgg does not exist"
    )
    assert tree.levels == (("fine",),)


def test_a_parent_under_another_policy_or_none_is_named() -> None:
    tree = tree_of({"team": "org"}, org="gpu-policy")
    assert tree.left_out["team"] == "parent org is governed by SchedulerPolicy gpu-policy, not p"
    ungoverned = queue_tree({"team": "org"}, {"team": "p"}.get, {"team", "org"})
    assert ungoverned.left_out["team"] == "parent org is governed by no SchedulerPolicy, not p"


def test_a_cycle_leaves_out_its_members_and_what_hangs_below() -> None:
    tree = tree_of({"a": "b", "b": "c", "c": "a", "d": "a", "e": None})
    assert tree.left_out["a"] == "on a cycle of parents: a -> b -> c -> a"
    assert tree.left_out["c"].startswith("on a cycle of parents")
    assert tree.left_out["d"].startswith("under queue a, which is left out")
    assert tree.levels == (("e",),)


def test_a_queue_that_is_its_own_parent_is_a_cycle() -> None:
    tree = tree_of({"a": "a"})
    assert tree.left_out == {"a": "on a cycle of parents: a -> a"}


def problem(
    names: Sequence[str],
    total: Sequence[int],
    *,
    weights: Sequence[int] | None = None,
    guarantee: Sequence[Sequence[int]] | None = None,
    capability: Sequence[Sequence[int]] | None = None,
    deserved: Sequence[Sequence[int]] | None = None,
    request: Sequence[Sequence[int]] | None = None,
) -> ShareProblem:
    rows, columns = len(names), len(total)

    def matrix(values: Sequence[Sequence[int]] | None, missing: int = 0) -> np.ndarray:
        if values is None:
            return np.full((rows, columns), missing, dtype=np.int64)
        return np.array(values, dtype=np.int64).reshape(rows, columns)

    return ShareProblem(
        SpecRows(
            queues=tuple(names),
            dimensions=tuple(f"d{i}" for i in range(columns)),
            weights=np.array(weights or [1] * rows, dtype=np.int64),
            guarantee=matrix(guarantee),
            capability=matrix(capability, UNLIMITED),
            spec_deserved=matrix(deserved),
        ),
        total=np.array(total, dtype=np.int64),
        allocated=matrix(None),
        request=matrix(request),
    )


def test_proportion_splits_each_parent_among_its_children() -> None:
    # org (w3) and lab (w1) share 80; org's 60 goes 1:2 to its teams; a's projects split 1:1.
    names = ["a", "a1", "a2", "b", "lab", "org"]
    parents = {"org": None, "lab": None, "a": "org", "b": "org", "a1": "a", "a2": "a"}
    tree = tree_of(parents)
    rows = TreeRows.of(tree, names)
    p = problem(
        names,
        [80],
        weights=[1, 1, 1, 2, 1, 3],
        request=[[0], [100], [100], [100], [100], [0]],
    )
    deserved, _ = proportion_tree(p, rows)
    got = dict(zip(names, deserved[:, 0].tolist(), strict=True))
    assert got == {"org": 60, "lab": 20, "a": 20, "b": 40, "a1": 10, "a2": 10}


def test_proportion_tree_floors_caps_and_demand_roll_up() -> None:
    # b asks for 5 only: org's demand is a's 100 + b's 5; a guarantee below floors its parent.
    names = ["a", "b", "lab", "org"]
    parents = {"org": None, "lab": None, "a": "org", "b": "org"}
    rows = TreeRows.of(tree_of(parents), names)
    p = problem(
        names,
        [100],
        guarantee=[[70], [0], [0], [0]],
        request=[[100], [5], [100], [0]],
    )
    deserved, real = proportion_tree(p, rows)
    got = dict(zip(names, deserved[:, 0].tolist(), strict=True))
    # org is floored at a's 70, so lab's realCapability is 100 - 70: the level stops at 30.
    assert dict(zip(names, real[:, 0].tolist(), strict=True))["lab"] == 30
    assert got == {"org": 70, "lab": 30, "a": 70, "b": 0}  # a's guarantee fills org


@given(
    st.lists(
        st.tuples(st.integers(1, 5), st.integers(0, 40), st.integers(0, 30), st.integers(0, 60)),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 120),
)
def test_a_tree_of_depth_one_gives_the_flat_numbers(
    queues: list[tuple[int, int, int, int]], total: int
) -> None:
    names = [f"q{i}" for i in range(len(queues))]
    p = problem(
        names,
        [total],
        weights=[w for w, _, _, _ in queues],
        guarantee=[[g] for _, g, _, _ in queues],
        capability=[[max(c, g)] for _, g, c, _ in queues],
        request=[[r] for _, _, _, r in queues],
    )
    rows = TreeRows.of(tree_of(dict.fromkeys(names)), names)
    deserved, real = proportion_tree(p, rows)
    assert deserved.tolist() == proportion_deserved(p).tolist()
    assert real.tolist() == p.real_capability.tolist()


@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.integers(0, 20), st.integers(0, 50)), min_size=2, max_size=8
    ),
    st.lists(st.integers(0, 6), min_size=8, max_size=8),
    st.integers(0, 150),
)
def test_children_never_deserve_more_than_their_parent_when_guarantees_fit(
    queues: list[tuple[int, int, int]], parent_picks: list[int], total: int
) -> None:
    names = [f"q{i}" for i in range(len(queues))]
    # Each queue's parent is an earlier one (or the root): always a tree.
    parents = {
        name: (None if i == 0 or parent_picks[i] % (i + 1) == i else names[parent_picks[i] % i])
        for i, name in enumerate(names)
    }
    p = problem(
        names,
        [total],
        weights=[w for w, _, _ in queues],
        guarantee=[[g] for _, g, _ in queues],
        request=[[r] for _, _, r in queues],
    )
    tree = tree_of(parents)
    rows = TreeRows.of(tree, names)
    deserved, _ = proportion_tree(p, rows)
    children: dict[str | None, list[str]] = {}
    for level in tree.levels:
        for name in level:
            children.setdefault(tree.parent[name], []).append(name)
    floors = _floors(p.guarantee[:, 0].tolist(), names, children)
    if sum(floors[c] for c in children.get(None, [])) > total:
        return
    for parent, kids in children.items():
        if parent is None:
            continue
        if sum(floors[k] for k in kids) <= deserved[names.index(parent), 0]:
            assert (
                sum(deserved[names.index(k), 0] for k in kids) <= deserved[names.index(parent), 0]
            )


def _floors(
    guarantees: list[int], names: list[str], children: dict[str | None, list[str]]
) -> dict[str, int]:
    result: dict[str, int] = {}

    def floor(name: str) -> int:
        if name not in result:
            below = sum(floor(k) for k in children.get(name, []))
            result[name] = max(guarantees[names.index(name)], below)
        return result[name]

    for name in names:
        floor(name)
    return result


def test_capacity_tree_inherits_capability_and_is_unbounded_at_the_root() -> None:
    # Volcano case5: q5 caps memory only; q51 caps less memory; cpu is inherited: unbounded.
    names = ["q5", "q51"]
    rows = TreeRows.of(tree_of({"q5": None, "q51": "q5"}), names)
    p = problem(names, [8000, 8], capability=[[UNLIMITED, 4], [UNLIMITED, 2]])
    _, real = capacity_tree(p, rows)
    assert real.tolist() == [[UNLIMITED, 4], [UNLIMITED, 2]]


def test_capacity_tree_guarantees_of_siblings_come_off_the_parent() -> None:
    # Volcano case7: q71 and q72 guarantee 4 cpu each under q7 (capability 6): no failure.
    names = ["q7", "q71", "q72"]
    rows = TreeRows.of(tree_of({"q7": None, "q71": "q7", "q72": "q7"}), names)
    p = problem(
        names,
        [8000],
        guarantee=[[0], [4], [4]],
        capability=[[6], [6], [6]],
        deserved=[[0], [1], [0]],
    )
    deserved, real = capacity_tree(p, rows)
    assert real[:, 0].tolist() == [6, 4, 4]  # max(6 - 8, 0) + 4
    assert deserved[:, 0].tolist() == [0, 4, 4]  # raised to the guarantee, never trimmed
