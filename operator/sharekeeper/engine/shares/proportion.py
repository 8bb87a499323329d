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

from sharekeeper.engine.resources import Vectors
from sharekeeper.engine.shares.common import ShareProblem, water_fill


def proportion_deserved(problem: ShareProblem) -> Vectors:
    weights = problem.weights.astype(float)
    return water_fill(problem.total, weights, problem.guarantee, problem.demand)
