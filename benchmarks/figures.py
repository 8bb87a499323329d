"""Arithmetic the benchmarks share: how a percentile of measured samples is taken."""

from __future__ import annotations

import math
from collections.abc import Sequence


def nearest_rank(samples: Sequence[float], fraction: float) -> float:
    """The smallest sample with at least ``fraction`` of all samples at or below it."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]
