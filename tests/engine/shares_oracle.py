"""The plain, exact, round-based water-filling that ``engine/shares/common.py`` is tested
against. Each round raises the common water level to the next event: a queue's share reaching
its floor (it starts to rise) or its cap (it leaves), or the total running out. Fractions, no
numpy, O(Q²): slow and obviously right."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction


def water_fill_by_rounds(
    total: int, weights: Sequence[Fraction], floors: Sequence[int], caps: Sequence[int]
) -> list[Fraction]:
    queues = range(len(weights))

    def value(q: int, level: Fraction) -> Fraction:
        return max(Fraction(floors[q]), min(weights[q] * level, Fraction(caps[q])))

    level = Fraction(0)
    while True:
        given = sum((value(q, level) for q in queues), Fraction(0))
        if given >= total:
            break
        rising = [q for q in queues if weights[q] > 0 and floors[q] <= weights[q] * level < caps[q]]
        events = [
            bound / weights[q]
            for q in queues
            if weights[q] > 0
            for bound in (Fraction(floors[q]), Fraction(caps[q]))
            if bound / weights[q] > level
        ]
        if not events:
            break  # every queue is saturated
        slope = sum((weights[q] for q in rising), Fraction(0))
        if slope and level + (total - given) / slope <= min(events):
            level += (total - given) / slope
            break
        level = min(events)
    return [value(q, level) for q in queues]


def largest_remainder(exact: Sequence[Fraction]) -> list[int]:
    """Floors, plus one unit for the largest fractional parts until the exact sum is reached
    (ties: lower index)."""
    rounded = [int(value) for value in exact]  # values are non-negative: int() floors
    missing = int(sum(exact, Fraction(0))) - sum(rounded)
    ranked = sorted(range(len(exact)), key=lambda q: (-(exact[q] - rounded[q]), q))
    for q in ranked[:missing]:
        rounded[q] += 1
    return rounded
