"""GuaranteeQuota: the seed design "Guarantee quota Plugin" (Volcano PR #2437, closed
unmerged; ``reference/volcano.md`` §7.1). Weight matters only for the Weight elastic order.

1. Every queue first gets its guarantee, reserved even when unused.
2. From the pool ``total - Σ guarantees``, queues keep what they already use above their
   guarantee (up to their demand): running work is not un-deserved by a reshuffle.
3. The rest of the pool goes up to each queue's demand (request within realCapability).

Steps 2 and 3 hand out the pool in ``elasticOrder``: ``Weight`` water-fills it by weight;
``Share`` serves the least-served queue first (lowest max over dimensions of given/demand),
greedily; ``Random`` serves queues greedily in an order drawn from the seed and the current
``reshuffleSeconds`` bucket, so the order (and status) changes at most once per bucket.

Unlike the PR, Σ guarantee > total does not crash (the pool is empty, every queue keeps its
guarantee; the caller reports it) and a queue using more than it may is not an error.
Invariants: ``guarantee <= deserved <= max(realCapability, guarantee)``; Σ deserved <= total
whenever Σ guarantee <= total. Complexity: O(D · Q log Q).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from sharekeeper.engine.resources import Vectors, column_sums, running_sums
from sharekeeper.engine.shares.common import ShareProblem, water_fill
from sharekeeper.engine.shares.snapshot import ElasticOrder


def guarantee_quota_deserved(
    problem: ShareProblem, order: ElasticOrder, random_order: Sequence[int]
) -> Vectors:
    """``random_order``: row indices in the order the Random elastic order serves them."""
    guarantee = problem.guarantee
    demand = np.maximum(problem.demand, guarantee)
    pool = np.maximum(problem.total - problem.total_guarantee, 0)
    # Step 2: what is in use above the guarantee.
    in_use = np.maximum(np.minimum(problem.allocated, demand) - guarantee, 0)
    kept = _handed_out(
        problem, pool, in_use, given=guarantee, demand=demand, order=order, random_rows=random_order
    )
    # Step 3: the rest of the demand.
    given = guarantee + kept
    extra = _handed_out(
        problem,
        pool - column_sums(kept),
        demand - given,
        given=given,
        demand=demand,
        order=order,
        random_rows=random_order,
    )
    result: Vectors = given + extra
    return result


def random_order(queues: Sequence[str], policy: str, seed: int, bucket: int) -> list[int]:
    """A shuffle of ``range(len(queues))`` that depends only on its arguments."""
    rows = list(range(len(queues)))
    random.Random(f"{policy}/{seed}/{bucket}").shuffle(rows)
    return rows


def _handed_out(
    problem: ShareProblem,
    pool: Vectors,
    wanted: Vectors,
    *,
    given: Vectors,
    demand: Vectors,
    order: ElasticOrder,
    random_rows: Sequence[int],
) -> Vectors:
    if order == "Weight":
        zeros = np.zeros_like(wanted)
        return water_fill(pool, problem.weights.astype(float), zeros, wanted)
    # As an index array once: a list of 10,000 rows was made an array again at each use.
    rows = (
        np.asarray(random_rows, dtype=np.int64)
        if order == "Random"
        else _least_served_first(given, demand)
    )
    return _greedy(pool, wanted, rows)


def _least_served_first(given: Vectors, demand: Vectors) -> Vectors:
    has_demand = demand > 0
    ratios = np.divide(given, demand, out=np.zeros(given.shape), where=has_demand)
    served = np.where(has_demand.any(axis=1), ratios.max(axis=1, initial=0.0), np.inf)
    # Stable on rows sorted by name: ties go to the alphabetically first queue.
    rows: Vectors = np.argsort(served, kind="stable")
    return rows


def _greedy(pool: Vectors, wanted: Vectors, rows: Vectors) -> Vectors:
    """Serve ``rows`` in order, each taking what it wants while the pool lasts (all
    dimensions at once): queue k gets ``min(wanted_k, max(pool - Σ_{j<k} wanted_j, 0))``."""
    ordered = wanted[rows]
    before = running_sums(ordered) - ordered
    taken = np.minimum(ordered, np.maximum(pool[np.newaxis, :] - before, 0))
    result = np.zeros_like(wanted)
    result[rows] = taken
    return result
