"""ProportionOptimize: the seed design "Proportion Optimize Plugin" (Volcano PR #2570, code
PR #2598, unmerged; ``reference/volcano.md`` §7.2). We follow the design's intent, not the PR's
bugs (weights never copied, ``PriorityType`` always Weight, aliasing, division by zero).

- ``guaranteeEnable: false``: guarantees are ignored everywhere (the caller zeroes them).
- Weight priority: water-filling by weight without the guarantee floor, then, per dimension,
  the queues still below their guarantee are topped up from what is left, smallest deficit
  first, each taking at most an equal split of what is left (so a large deficit cannot starve
  the small ones).
- Guarantee priority: first every queue whose weighted share of the total falls below its
  guarantee in some dimension gets the smallest weight that covers it (``raised_weights``),
  then water-filling with the guarantee floor, as Proportion.

Complexity: O(D · Q log Q), plus O(Q) per weight-raising round (at most Q rounds, usually 2).
"""

from __future__ import annotations

import numpy as np

from sharekeeper.engine.resources import Vectors, total_of
from sharekeeper.engine.shares.common import Floats, ShareProblem, water_fill
from sharekeeper.engine.shares.snapshot import PriorityType

MAX_WEIGHT = 65535
"""The Queue API's largest weight: an unreachable guarantee raises a weight up to this ratio."""


def proportion_optimize_deserved(problem: ShareProblem, priority: PriorityType) -> Vectors:
    if priority == "Guarantee":
        weights = raised_weights(problem)
        return water_fill(problem.total, weights, problem.guarantee, problem.demand)
    unfloored = water_fill(
        problem.total,
        problem.weights.astype(float),
        np.zeros_like(problem.guarantee),
        problem.demand,
    )
    return _topped_up(problem, unfloored)


def raised_weights(problem: ShareProblem) -> Floats:
    """The smallest weights ``w'_q >= w_q`` with ``w'_q / Σw' * total >= guarantee_q``.

    1. A queue needs the fraction ``r_q = max_d guarantee_qd / total_d`` of the total weight.
    2. With F the set of raised queues, ``Σw' = Σ_{q∉F} w_q / (1 - Σ_{q∈F} r_q)``, and ``w'_q =
       r_q · Σw'`` for q in F. Raising weights grows Σw', which may make more queues fall
       short: grow F until it is stable (monotone, so at most Q rounds).
    3. If the raised queues need the whole total (Σ r >= 1), no weights can satisfy them all;
       they then get ``r_q`` times ``MAX_WEIGHT`` times the other queues' weight.
    """
    weights = problem.weights.astype(float)
    total = problem.total.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fractions = np.where(total > 0, problem.guarantee / total, 0.0)
    needed = fractions.max(axis=1) if fractions.shape[1] else np.zeros_like(weights)
    raised = np.zeros(weights.shape, dtype=bool)
    total_weight = float(weights.sum())
    while True:
        now_raised = raised | (needed * total_weight > weights)
        if (now_raised == raised).all():
            return np.where(raised, needed * total_weight, weights)
        raised = now_raised
        unraised_weight = float(weights[~raised].sum())
        needed_sum = float(needed[raised].sum())
        if needed_sum >= 1:
            return np.where(raised, needed * MAX_WEIGHT * max(unraised_weight, 1.0), weights)
        total_weight = unraised_weight / (1 - needed_sum)


def _topped_up(problem: ShareProblem, deserved: Vectors) -> Vectors:
    result = deserved.copy()
    for d in range(problem.total.shape[0]):
        left = int(problem.total[d]) - total_of(result[:, d])
        deficits = problem.guarantee[:, d] - result[:, d]
        # Smallest deficit first; ties by queue name (rows are sorted by name).
        short = sorted(np.flatnonzero(deficits > 0).tolist(), key=lambda q: (deficits[q], q))
        for position, q in enumerate(short):
            granted = min(int(deficits[q]), max(left, 0) // (len(short) - position))
            result[q, d] += granted
            left -= granted
    return result
