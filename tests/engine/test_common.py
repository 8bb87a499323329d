"""Water-filling and rounding, against the exact round-based oracle."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from shares_oracle import largest_remainder, water_fill_by_rounds

from sharekeeper.engine.shares.common import dominant_shares, hamilton, water_fill

amounts = st.integers(min_value=0, max_value=10**6)


@st.composite
def columns(draw: st.DrawFn) -> tuple[int, list[int], list[int], list[int]]:
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
    column: tuple[int, list[int], list[int], list[int]],
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


def test_hamilton_keeps_bounds_and_sum() -> None:
    exact = np.array([0.5, 0.5, 2.0])
    lows = np.array([0, 0, 2], dtype=np.int64)
    highs = np.array([1, 1, 2], dtype=np.int64)
    assert hamilton(exact, 3, lows, highs).tolist() == [1, 0, 2]


def test_share_is_the_dominant_ratio_over_deserved_dimensions() -> None:
    allocated = np.array([[1500, 1], [5, 0]], dtype=np.int64)
    deserved = np.array([[2000, 4], [0, 0]], dtype=np.int64)
    first, nothing_deserved = dominant_shares(allocated, deserved).tolist()
    assert first == 0.75
    assert np.isnan(nothing_deserved)
