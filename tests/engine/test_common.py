"""Water-filling and rounding, against the exact round-based oracle."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from shares_oracle import largest_remainder, water_fill_by_rounds

from sharekeeper.engine.shares.common import (
    dominant_shares,
    first_ranked,
    hamilton,
    water_fill,
    water_fill_groups,
)

amounts = st.integers(min_value=0, max_value=10**6)
Column = tuple[int, list[int], list[int], list[int]]
"""A total, then per row: weight, floor, cap."""


@st.composite
def columns(draw: st.DrawFn) -> Column:
    size = draw(st.integers(min_value=1, max_value=12))
    weights = draw(st.lists(st.integers(0, 20), min_size=size, max_size=size))
    floors = draw(st.lists(st.integers(0, 1000) | st.just(0), min_size=size, max_size=size))
    caps = draw(st.lists(amounts | st.integers(0, 3000), min_size=size, max_size=size))
    total = draw(amounts | st.integers(0, 5000))
    return total, weights, floors, caps


def _fast(total: int, weights: list[int], floors: list[int], caps: list[int]) -> list[int]:
    column = water_fill(
        np.array([total], dtype=np.int64),
        np.array(weights, dtype=float),
        np.array(floors, dtype=np.int64)[:, None],
        np.array(caps, dtype=np.int64)[:, None],
    )
    return [int(value) for value in column[:, 0]]


@given(columns())
def test_fast_water_fill_matches_the_round_based_oracle(
    column: Column,
) -> None:
    total, weights, floors, caps = column
    exact = water_fill_by_rounds(total, [Fraction(w) for w in weights], floors, caps)
    expected = largest_remainder(exact)
    actual = _fast(total, weights, floors, caps)
    assert sum(actual) == sum(expected)
    assert all(abs(a - e) <= 1 for a, e in zip(actual, expected, strict=True))


def test_equal_weights_split_evenly_and_round_to_the_total() -> None:
    assert _fast(4000, [1, 1, 1], [0, 0, 0], [9000, 9000, 9000]) == [1334, 1333, 1333]


def test_unused_share_flows_to_the_queues_that_still_want() -> None:
    assert _fast(100, [1, 1, 2], [0, 0, 0], [10, 1000, 1000]) == [10, 30, 60]


def test_floor_is_a_floor_not_a_head_start() -> None:
    # Volcano adds later rounds on top of a lifted guarantee: 60 / 30 / 30 from 90.
    assert _fast(90, [1, 1, 1], [60, 0, 0], [90, 30, 30]) == [60, 15, 15]


def test_floors_above_the_total_are_kept() -> None:
    assert _fast(10, [1, 1], [8, 8], [100, 100]) == [8, 8]


@given(st.lists(st.tuples(columns(), columns()), min_size=1, max_size=9))
def test_groups_filled_together_match_each_group_filled_alone(
    groups: list[tuple[Column, Column]],
) -> None:
    # Groups of 1 to 12 rows, two dimensions each: several padded sizes in one call.
    sizes, totals, weights, floors, caps = [], [], [], [], []
    for (total, row_weights, row_floors, row_caps), (other, _, other_floors, other_caps) in groups:
        size = min(len(row_weights), len(other_floors))
        sizes.append(size)
        totals.append([total, other])
        weights += row_weights[:size]
        floors += [[row_floors[i], other_floors[i]] for i in range(size)]
        caps += [[row_caps[i], other_caps[i]] for i in range(size)]
    starts = np.cumsum([0, *sizes[:-1]])
    as_floats, as_ints = np.array(weights, dtype=float), np.array(totals, dtype=np.int64)
    floor_rows, cap_rows = np.array(floors, dtype=np.int64), np.array(caps, dtype=np.int64)
    together = water_fill_groups(as_ints, starts, as_floats, floor_rows, cap_rows)
    for group, (start, size) in enumerate(zip(starts.tolist(), sizes, strict=True)):
        rows = slice(start, start + size)
        alone = water_fill(as_ints[group], as_floats[rows], floor_rows[rows], cap_rows[rows])
        assert together[rows].tolist() == alone.tolist()


def test_amounts_beyond_float_precision_still_sum_to_the_total() -> None:
    # Bytes of a large cluster pass 2**53, where Σ floors and a total one unit above it are
    # the same float: that once put the level before the first breakpoint (NaN shares).
    floors = [2**53, 2**53 + 2, 2**52]
    total = sum(floors) + 1
    caps = [2**54, 2**54, 2**54]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shares = _fast(total, [1, 2, 1], floors, caps)
    assert sum(shares) == total
    assert all(f <= s <= c for s, f, c in zip(shares, floors, caps, strict=True))


def test_hamilton_keeps_bounds_and_sum() -> None:
    exact = np.array([[0.5, 0.5, 2.0]])
    lows = np.array([[0, 0, 2]], dtype=np.int64)
    highs = np.array([[1, 1, 2]], dtype=np.int64)
    assert hamilton(exact, np.array([3]), lows, highs).tolist() == [[1, 0, 2]]


RANKED = (0.0, -0.0, 0.5, -0.5, 0.25, 1e300, np.inf, -np.inf, np.nan)
"""Remainders as hamilton ranks them: ties, signed zeros, infinities and NaN."""


@given(st.integers(1, 4), st.integers(1, 9), st.data())
def test_the_members_moved_are_those_a_stable_sort_puts_first(
    rows: int, width: int, data: st.DataObject
) -> None:
    values = st.lists(st.sampled_from(RANKED), min_size=width, max_size=width)
    ranking = np.array(data.draw(st.lists(values, min_size=rows, max_size=rows)))
    counts = np.array(data.draw(st.lists(st.integers(0, width), min_size=rows, max_size=rows)))
    order = np.argsort(ranking, axis=1, kind="stable")
    expected = np.zeros(ranking.shape, dtype=bool)
    for row, count in enumerate(counts.tolist()):
        expected[row, order[row, :count]] = True
    assert (first_ranked(ranking, counts) == expected).all()


def test_share_is_the_dominant_ratio_over_deserved_dimensions() -> None:
    allocated = np.array([[1500, 1], [5, 0]], dtype=np.int64)
    deserved = np.array([[2000, 4], [0, 0]], dtype=np.int64)
    first, nothing_deserved = dominant_shares(allocated, deserved).tolist()
    assert first == 0.75
    assert np.isnan(nothing_deserved)
