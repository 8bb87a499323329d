"""Proportion: Volcano's ``proportion`` plugin (``pkg/scheduler/plugins/proportion``, master
ed72c7c8; ``reference/volcano.md`` §3.1-3.2).

Per dimension, the total is water-filled by weight; a queue never gets more than its request
within its effective capability, and never less than its guarantee (even above its request or
capability: an unused guarantee stays reserved). Dimensions a queue does not request end at 0.

Invariants: ``deserved >= guarantee``; ``deserved <= max(realCapability, guarantee)``;
``Σ deserved <= total`` whenever ``Σ guarantee <= total``.
Complexity: O(D · Q log Q).
"""

from __future__ import annotations

import numpy as np

from sharekeeper.engine.resources import UNLIMITED, Vectors
from sharekeeper.engine.shares.common import ShareProblem, water_fill, water_fill_groups
from sharekeeper.engine.shares.tree import TreeRows


def proportion_deserved(problem: ShareProblem) -> Vectors:
    weights = problem.weights.astype(float)
    return water_fill(problem.total, weights, problem.guarantee, problem.demand)


def proportion_tree(problem: ShareProblem, tree: TreeRows) -> tuple[Vectors, Vectors]:
    """(deserved, realCapability) over a queue tree: the total is water-filled among the
    root's children as in the flat policy; each inner queue's deserved is then water-filled
    among its children the same way (all the parents of a level in one call). A queue's floor
    is the larger of its guarantee and its children's floors; ``realCapability`` is the flat
    one with the parent's realCapability in place of the total and floors in place of
    guarantees; a queue's cap is its demand: the request within realCapability for a leaf, the
    children's demands within realCapability for an inner queue. Four passes over the levels
    (floors up, realCapability down, demand up, deserved down). With no queue below another,
    every number equals ``proportion_deserved``'s."""
    floors = tree.floors(problem.guarantee)
    siblings = tree.sibling_sums(floors)
    real = np.zeros_like(floors)
    for level in tree.levels:
        parents = tree.parent[level]
        parent_real = np.where(
            (parents < 0)[:, np.newaxis], problem.total[np.newaxis, :], real[np.maximum(parents, 0)]
        )
        free = np.maximum(parent_real - siblings[level], 0)
        real[level] = np.minimum(
            np.minimum(free + floors[level], UNLIMITED), problem.capability[level]
        )
    demand = np.minimum(problem.request, real)
    for level in reversed(tree.levels[1:]):
        inner, below = tree.children_sums(level, demand)
        demand[inner] = np.minimum(below[inner], real[inner])
    weights = problem.weights.astype(float)
    deserved = np.zeros_like(real)
    if tree.levels:
        top = tree.levels[0]
        deserved[top] = water_fill(problem.total, weights[top], floors[top], demand[top])
    for level in tree.levels[1:]:
        parents = tree.parent[level]
        order = np.argsort(parents, kind="stable")  # rows stay sorted by name within a parent
        rows, grouped = level[order], parents[order]
        starts = np.flatnonzero(np.diff(grouped, prepend=-2))
        deserved[rows] = water_fill_groups(
            deserved[grouped[starts]], starts, weights[rows], floors[rows], demand[rows]
        )
    return deserved, real
