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

from sharekeeper.engine.resources import Vectors, column_sums, total_of

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ShareProblem:
    """One policy's queues as dense matrices: rows = queues (sorted by name), columns =
    ``dimensions``. ``capability`` holds ``UNLIMITED`` where a queue sets no bound."""

    queues: tuple[str, ...]
    dimensions: tuple[str, ...]
    total: Vectors
    weights: Vectors
    guarantee: Vectors
    capability: Vectors
    spec_deserved: Vectors
    allocated: Vectors
    request: Vectors

    @property
    def total_guarantee(self) -> Vectors:
        return column_sums(self.guarantee)

    @property
    def real_capability(self) -> Vectors:
        """``min(max(total - Σ guarantees, 0) + own guarantee, capability)`` (Volcano §3.1)."""
        free = np.maximum(self.total - self.total_guarantee, 0)
        bounded: Vectors = np.minimum(free[np.newaxis, :] + self.guarantee, self.capability)
        return bounded

    @property
    def demand(self) -> Vectors:
        """What water-filling may give a queue at most: its request within its capability."""
        bounded: Vectors = np.minimum(self.real_capability, self.request)
        return bounded


def water_fill(total: Vectors, weights: Floats, floors: Vectors, caps: Vectors) -> Vectors:
    """Weighted water-filling of every dimension, rounded to whole units (steps 1-4)."""
    columns = [
        _fill_column(int(total[d]), weights, floors[:, d], caps[:, d])
        for d in range(total.shape[0])
    ]
    if not columns:
        return np.zeros((weights.shape[0], 0), dtype=np.int64)
    return np.stack(columns, axis=1)


def _fill_column(total: int, weights: Floats, floors: Vectors, caps: Vectors) -> Vectors:
    # A queue without weight never rises above its floor.
    highs = np.where(weights > 0, np.maximum(floors, caps), floors)
    # Step 2: the two ends need no level.
    floor_sum = total_of(floors)
    if floor_sum >= total:
        return floors.copy()
    if total_of(highs) <= total:
        return highs.copy()
    # Step 3: breakpoints of F, from the queues that can rise.
    rising = highs > floors
    rising_weights = weights[rising]
    starts = floors[rising] / rising_weights
    ends = caps[rising] / rising_weights
    positions = np.concatenate((starts, ends))
    slopes = np.concatenate((rising_weights, -rising_weights))
    order = np.argsort(positions, kind="stable")
    positions, slopes = positions[order], slopes[order]
    slope_after = np.cumsum(slopes)
    widths = np.diff(positions, prepend=0.0)
    slope_before = np.concatenate(([0.0], slope_after[:-1]))
    filled_at = float(floor_sum) + np.cumsum(slope_before * widths)
    # The first breakpoint where F reaches ``total`` ends the piece that holds the level.
    piece = min(int(np.searchsorted(filled_at, total, side="left")), positions.shape[0] - 1) - 1
    level = positions[piece] + (total - filled_at[piece]) / slope_after[piece]
    exact = np.maximum(floors, np.minimum(weights * level, caps))
    # Step 4: the exact shares sum to ``total``.
    return hamilton(exact, total, floors, highs)


def hamilton(exact: Floats, target: int, lows: Vectors, highs: Vectors) -> Vectors:
    """Whole units summing to ``target``, each within one unit of ``exact`` and within
    ``[lows, highs]``; the largest fractional parts round up (ties: lower index)."""
    rounded = np.clip(np.floor(exact).astype(np.int64), lows, highs)
    remainders = exact - rounded
    missing = target - total_of(rounded)
    if missing > 0:
        candidates = np.flatnonzero(rounded < highs)
        ranked = candidates[np.argsort(-remainders[candidates], kind="stable")]
        rounded[ranked[:missing]] += 1
    elif missing < 0:
        # Only floating-point error gets here: take the units back where they are least due.
        candidates = np.flatnonzero(rounded > lows)
        ranked = candidates[np.argsort(remainders[candidates], kind="stable")]
        rounded[ranked[:-missing]] -= 1
    return rounded


def dominant_shares(allocated: Vectors, deserved: Vectors) -> Floats:
    """Per row, ``max allocated/deserved`` over dimensions with some deserved (Volcano
    §3.3); NaN for a row that deserves nothing at all."""
    deserving = deserved > 0
    ratios = np.divide(allocated, deserved, out=np.zeros(allocated.shape), where=deserving)
    shares: Floats = np.where(deserving.any(axis=1), ratios.max(axis=1, initial=0.0), np.nan)
    return shares
