"""What every share policy builds on: the dense per-policy problem, the effective capability,
weighted water-filling with floors and caps, and largest-remainder rounding.

Water-filling (one dimension, queues q with weight w_q >= 0, floor f_q and cap c_q):

1. ``deserved_q(L) = max(f_q, min(w_q * L, c_q))`` is non-decreasing in the water level L, so
   ``F(L) = Σ deserved_q(L)`` is piecewise linear and non-decreasing.
2. If ``F(0) = Σ f_q >= total`` the floors are all there is; if ``F(∞) = Σ max(f_q, c_q) <=
   total`` every queue is saturated. Otherwise there is a smallest L with ``F(L) = total``.
3. F's slope only changes where some ``w_q * L`` crosses ``f_q`` (slope += w_q) or ``c_q``
   (slope -= w_q). Sorting those 2Q breakpoints and taking prefix sums gives F at every
   breakpoint; L then lies on one linear piece and is found by one division.

This is the fixed point of Volcano's round-based loop (``reference/volcano.md`` §3.2) taken
per dimension, with the guarantee as a floor rather than a head start (see
``docs/policies.md``). ``tests/engine/oracle.py`` keeps the round-based version, in exact
fractions, that this one is tested against. Complexity: O(Q log Q) per dimension.

Rounding (step 4): exact shares are rarely whole internal units. Each is floored, and the units
still missing from the exact total go to the largest fractional parts (Hamilton's method; ties
by queue name), so Σ published == Σ exact and no queue leaves ``[floor, max(floor, cap)]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sharekeeper.engine.resources import Vectors, column_sums
from sharekeeper.engine.shares.snapshot import QueueName

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SpecRows:
    """One policy's queues as dense rows, as far as their specs and the nodes decide them
    (``ShareProblem`` adds what the pods hold): rows = queues (sorted by name), columns =
    ``dimensions``. ``capability`` holds ``UNLIMITED`` where a queue sets no bound. Read-only
    arrays: a ``ShareMemo`` hands the same ones to later rounds."""

    queues: tuple[QueueName, ...]
    dimensions: tuple[str, ...]
    weights: Vectors
    guarantee: Vectors
    capability: Vectors
    spec_deserved: Vectors


@dataclass(frozen=True, slots=True)
class ShareProblem:
    """One policy's dense problem: its ``rows``, its nodes' ``total`` and what its queues hold
    and ask for, over the same rows and columns."""

    rows: SpecRows
    total: Vectors
    allocated: Vectors
    request: Vectors

    @property
    def queues(self) -> tuple[QueueName, ...]:
        return self.rows.queues

    @property
    def dimensions(self) -> tuple[str, ...]:
        return self.rows.dimensions

    @property
    def weights(self) -> Vectors:
        return self.rows.weights

    @property
    def guarantee(self) -> Vectors:
        return self.rows.guarantee

    @property
    def capability(self) -> Vectors:
        return self.rows.capability

    @property
    def spec_deserved(self) -> Vectors:
        return self.rows.spec_deserved

    @property
    def total_guarantee(self) -> Vectors:
        return column_sums(self.guarantee)

    @property
    def unguaranteed(self) -> Vectors:
        """``max(total - Σ guarantees, 0)``: the realCapability of a queue with neither a
        guarantee nor a capability below it (most queues)."""
        free: Vectors = np.maximum(self.total - self.total_guarantee, 0)
        return free

    @property
    def real_capability(self) -> Vectors:
        """``min(max(total - Σ guarantees, 0) + own guarantee, capability)`` (Volcano §3.1)."""
        free = self.unguaranteed
        bounded: Vectors = np.minimum(free[np.newaxis, :] + self.guarantee, self.capability)
        return bounded

    @property
    def demand(self) -> Vectors:
        """What water-filling may give a queue at most: its request within its capability."""
        bounded: Vectors = np.minimum(self.real_capability, self.request)
        return bounded


def water_fill(total: Vectors, weights: Floats, floors: Vectors, caps: Vectors) -> Vectors:
    """Weighted water-filling of every dimension, rounded to whole units (steps 1-4)."""
    return water_fill_groups(total[np.newaxis, :], np.zeros(1, np.int64), weights, floors, caps)


def water_fill_groups(
    totals: Vectors, starts: Vectors, weights: Floats, floors: Vectors, caps: Vectors
) -> Vectors:
    """``water_fill`` of many groups of rows at once: rows ``starts[g]`` up to the next start
    share ``totals[g]`` (one row per group, a column per dimension), each group and dimension
    on its own; the groups cover every row, in order (``starts[0]`` is 0). Every (group,
    dimension) becomes one row of a padded matrix, so that a tree level of thousands of parents
    costs a few numpy calls rather than a few per parent; groups are padded to the next power
    of two of their size, in one matrix per such size."""
    rows, dimensions = floors.shape
    if rows == 0 or dimensions == 0:
        return np.zeros((rows, dimensions), dtype=np.int64)
    sizes = np.diff(starts, append=rows)
    if (sizes == sizes[0]).all():  # every group as large (one group, or a regular tree level)
        return _fill_grid(totals, weights, floors, caps, width=int(sizes[0]))
    filled = np.zeros((rows, dimensions), dtype=np.int64)
    # Padding rows: weight 0, floor 0, cap 0 (they never rise and sum to nothing).
    weights = np.append(weights, 0.0)
    floors = np.vstack((floors, np.zeros((1, dimensions), dtype=np.int64)))
    caps = np.vstack((caps, np.zeros((1, dimensions), dtype=np.int64)))
    buckets = np.frexp(np.maximum(sizes, 1) - 1)[1]  # ceil(log2(size)), 0 for size 1
    for bucket in np.unique(buckets).tolist():
        groups = np.flatnonzero(buckets == bucket)
        width = int(sizes[groups].max())
        present = np.arange(width) < sizes[groups][:, np.newaxis]
        index = np.where(present, starts[groups][:, np.newaxis] + np.arange(width), rows)
        grid = _fill_grid(totals[groups], weights[index], floors[index], caps[index], width=width)
        filled[index[present]] = grid.reshape((*index.shape, dimensions))[present]
    return filled


def _fill_grid(
    totals: Vectors, weights: Floats, floors: Vectors, caps: Vectors, *, width: int
) -> Vectors:
    """Groups of ``width`` consecutive rows each (``totals``: one row per group): one problem
    per group and dimension."""
    groups, dimensions = totals.shape
    problems = groups * dimensions

    def by_problem(matrix: Vectors) -> Vectors:
        arranged: Vectors = matrix.reshape(groups, width, dimensions).transpose(0, 2, 1)
        return arranged.reshape(problems, width)

    filled = _fill(
        totals.reshape(problems),
        np.repeat(weights.reshape(groups, width), dimensions, axis=0),
        by_problem(floors),
        by_problem(caps),
    )
    arranged: Vectors = filled.reshape(groups, dimensions, width).transpose(0, 2, 1)
    return arranged.reshape(groups * width, dimensions)


def _fill(totals: Vectors, weights: Floats, floors: Vectors, caps: Vectors) -> Vectors:
    """Steps 1-4 for independent problems, one per row of the (problem x member) inputs."""
    # A queue without weight never rises above its floor.
    highs = np.where(weights > 0, np.maximum(floors, caps), floors)
    # Step 2: the two ends need no level.
    floor_sums = column_sums(floors.T)
    at_floors = floor_sums >= totals
    saturated = ~at_floors & (column_sums(highs.T) <= totals)
    filled = np.where(saturated[:, np.newaxis], highs, floors)
    solve = np.flatnonzero(~at_floors & ~saturated)
    if solve.size == len(totals):
        return _level(totals, weights, floors, caps, highs=highs, floor_sums=floor_sums)
    if solve.size:
        filled[solve] = _level(
            totals[solve],
            weights[solve],
            floors[solve],
            caps[solve],
            highs=highs[solve],
            floor_sums=floor_sums[solve],
        )
    return filled


def _level(
    totals: Vectors,
    weights: Floats,
    floors: Vectors,
    caps: Vectors,
    *,
    highs: Vectors,
    floor_sums: Vectors,
) -> Vectors:
    # Step 3: breakpoints of F, from the members that can rise; the others' are put last.
    rising = highs > floors
    unreached = np.full(floors.shape, np.inf)
    starts = np.divide(floors, weights, out=unreached.copy(), where=rising)
    ends = np.divide(caps, weights, out=unreached, where=rising)
    positions = np.concatenate((starts, ends), axis=1)
    slopes = np.concatenate(
        (np.where(rising, weights, 0.0), np.where(rising, -weights, 0.0)), axis=1
    )
    # Not a stable sort (four times faster): breakpoints at one position add nothing to F
    # between them, and whole-number weights sum exactly in any order (proportion_optimize's
    # raised weights may differ in their last bit: a share may then round the other way,
    # still within one unit of exact).
    order = np.argsort(positions, axis=1)
    positions = np.take_along_axis(positions, order, axis=1)
    slopes = np.take_along_axis(slopes, order, axis=1)
    slope_after = np.cumsum(slopes, axis=1)
    with np.errstate(invalid="ignore"):  # past the real breakpoints: inf - inf, 0 x inf
        widths = np.diff(positions, axis=1, prepend=0.0)
        slope_before = np.concatenate((np.zeros((len(totals), 1)), slope_after[:, :-1]), axis=1)
        filled_at = floor_sums.astype(float)[:, np.newaxis] + np.cumsum(
            slope_before * widths, axis=1
        )
    # The first breakpoint where F reaches its total ends the piece that holds the level. Above
    # 2**53 a float may not tell Σ floors from a total one unit above it: the level then lies
    # on the first piece (and rounding hands out the units), never before it.
    breakpoints = 2 * np.count_nonzero(rising, axis=1)
    real = np.arange(positions.shape[1]) < breakpoints[:, np.newaxis]
    below = np.count_nonzero((filled_at < totals[:, np.newaxis]) & real, axis=1)
    at = (np.arange(len(totals)), np.maximum(np.minimum(below, breakpoints - 1) - 1, 0))
    level = positions[at] + (totals - filled_at[at]) / slope_after[at]
    exact = np.maximum(floors, np.minimum(weights * level[:, np.newaxis], caps))
    # Step 4: the exact shares sum to each total.
    return hamilton(exact, totals, floors, highs)


def hamilton(exact: Floats, targets: Vectors, lows: Vectors, highs: Vectors) -> Vectors:
    """Per row, whole units summing to ``targets[row]``, each within one unit of ``exact`` (while
    floats hold whole units exactly) and within ``[lows, highs]``; the largest fractional parts
    round up (ties: lower index)."""
    rounded = np.clip(np.floor(exact).astype(np.int64), lows, highs)
    remainders = exact - rounded
    missing = targets - column_sums(rounded.T)
    if not missing.any():
        return rounded
    # Only floating-point error makes ``missing`` negative: the units go back where least due.
    short = missing > 0
    movable = np.where(short[:, np.newaxis], rounded < highs, rounded > lows)
    ranking = np.where(movable, np.where(short[:, np.newaxis], -remainders, remainders), np.inf)
    moving = np.minimum(np.abs(missing), np.count_nonzero(movable, axis=1))
    moved = first_ranked(ranking, moving)
    rounded += np.where(moved, np.sign(missing)[:, np.newaxis], 0)
    # Past 2**53 a float can be several units off: what is still missing then moves in the same
    # order, each member as far as its bound allows, so that the sum is still exact.
    left = targets - column_sums(rounded.T)
    uneven = np.flatnonzero(left)
    if uneven.size:
        ranked, rows = np.argsort(ranking[uneven], axis=1, kind="stable"), uneven[:, np.newaxis]
        wanted = np.abs(left[uneven])[:, np.newaxis]
        room = np.minimum(  # no more than is wanted, so that the running sum cannot overflow
            np.where(
                (left[uneven] > 0)[:, np.newaxis],
                highs[rows, ranked] - rounded[rows, ranked],
                rounded[rows, ranked] - lows[rows, ranked],
            ),
            wanted,
        )
        steps = np.clip(wanted - (np.cumsum(room, axis=1) - room), 0, room)
        rounded[rows, ranked] += np.sign(left[uneven])[:, np.newaxis] * steps
    return rounded


def first_ranked(ranking: Floats, counts: Vectors) -> npt.NDArray[np.bool_]:
    """Per row, the ``counts[row]`` members of lowest ``ranking`` (ties: lower index): the first
    ones a stable sort would put in order, found without one. A stable argsort of 10,000 queues'
    remainders took about 5 ms a round; a plain sort finds the last value taken (the threshold),
    and of the members at it, the lower indexes are taken."""
    if ranking.shape[1] == 0:
        return np.zeros(ranking.shape, dtype=np.bool_)
    # Sorted as a sort orders them: infinities after every number, NaN after those (whatever
    # the floats, the same members as the stable sort).
    biggest = np.finfo(np.float64).max
    keys = np.nan_to_num(ranking, nan=np.inf, posinf=biggest, neginf=-biggest)
    threshold = np.sort(keys, axis=1)[np.arange(len(keys)), np.maximum(counts - 1, 0)]
    below = keys < threshold[:, np.newaxis]
    tied = keys == threshold[:, np.newaxis]
    room = counts - np.count_nonzero(below, axis=1)
    chosen: npt.NDArray[np.bool_] = below | (
        tied & (np.cumsum(tied, axis=1) <= room[:, np.newaxis])
    )
    return chosen


def dominant_shares(allocated: Vectors, deserved: Vectors) -> Floats:
    """Per row, ``max allocated/deserved`` over dimensions with some deserved (Volcano
    §3.3); NaN for a row that deserves nothing at all."""
    deserving = deserved > 0
    ratios = np.divide(allocated, deserved, out=np.zeros(allocated.shape), where=deserving)
    shares: Floats = np.where(deserving.any(axis=1), ratios.max(axis=1, initial=0.0), np.nan)
    return shares
