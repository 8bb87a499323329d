"""Capacity: Volcano's non-hierarchical ``capacity`` plugin (``pkg/scheduler/plugins/capacity``,
master ed72c7c8; ``reference/volcano.md`` §4.1).

``deserved = max(min(spec.deserved, realCapability), guarantee)``: static, not capped by request
(v1.12+), a dimension missing from ``spec.deserved`` is 0. Weight is not used.
Complexity: O(Q · D).
"""

from __future__ import annotations

import numpy as np

from sharekeeper.engine.resources import UNLIMITED, Vectors
from sharekeeper.engine.shares.common import ShareProblem
from sharekeeper.engine.shares.tree import TreeRows


def capacity_deserved(problem: ShareProblem) -> Vectors:
    trimmed = np.minimum(problem.spec_deserved, problem.real_capability)
    deserved: Vectors = np.maximum(trimmed, problem.guarantee)
    return deserved


def capacity_tree(problem: ShareProblem, tree: TreeRows) -> tuple[Vectors, Vectors]:
    """(deserved, realCapability) in Volcano's hierarchical mode (``reference/volcano.md``
    §4.3): the root is unbounded; a child without a capability in a dimension takes its
    parent's; ``realCapability = min(max(parent's realCapability - Σ guarantees of the
    parent's children, 0) + own guarantee, capability)``; ``deserved = max(spec.deserved,
    guarantee)``, not trimmed to realCapability. One pass per level."""
    guarantee = problem.guarantee
    capability = problem.capability.copy()
    real = np.full_like(capability, UNLIMITED)
    siblings = tree.sibling_sums(guarantee)
    for level in tree.levels:
        parents = tree.parent[level]
        under_root = (parents < 0)[:, np.newaxis]
        above = np.maximum(parents, 0)
        parent_capability = np.where(under_root, UNLIMITED, capability[above])
        parent_real = np.where(under_root, UNLIMITED, real[above])
        capability[level] = np.where(
            capability[level] >= UNLIMITED, parent_capability, capability[level]
        )
        free = np.where(
            parent_real >= UNLIMITED, UNLIMITED, np.maximum(parent_real - siblings[level], 0)
        )
        real[level] = np.minimum(np.minimum(free + guarantee[level], UNLIMITED), capability[level])
    deserved: Vectors = np.maximum(problem.spec_deserved, guarantee)
    return deserved, real
