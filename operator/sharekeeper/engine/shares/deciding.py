"""Which bound decided each queue's deserved, per dimension: the answer to "why this number".

Every policy ends a queue's deserved at one of a few bounds, so the bound can be read back from
the numbers alone, whatever policy produced them:

- ``Request``: the queue deserves all it asks for (pending and running);
- ``Capability``: it asks for more than its realCapability (its capability, or the total less
  the other queues' guarantees), and got all of that;
- ``Guarantee``: its guarantee is above what it would otherwise get (even above its request);
- ``Deserved``: Capacity only, its ``spec.deserved`` (trimmed to realCapability);
- ``Level``: the shared water level: weight x level, what the total leaves for it.

Ties go to the bound earlier in that list (a queue whose request equals its guarantee is
``Request``: it got what it asked for). Complexity: O(Q x D) over the dense problem, and
O(Q log Q) to find the distinct rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from sharekeeper.engine.resources import Vectors
from sharekeeper.engine.shares.common import ShareProblem

Decider = Literal["Request", "Capability", "Guarantee", "Deserved", "Level"]
_NAMES: tuple[Decider, ...] = ("Request", "Capability", "Guarantee", "Deserved", "Level")


def decided_by(
    problem: ShareProblem, deserved: Vectors, *, capacity: bool, real: Vectors | None = None
) -> list[Mapping[str, str]]:
    """Per queue (rows of ``problem``), dimension -> the bound that decided its deserved;
    ``real``: the realCapability when it is not the flat one (a tree's)."""
    guarantee, request = problem.guarantee, problem.request
    real = problem.real_capability if real is None else real
    guaranteed = (guarantee > 0) & (deserved == guarantee)
    if capacity:
        # max(min(spec, realCapability), guarantee): the guarantee, else the trim, else spec.
        trimmed = np.minimum(problem.spec_deserved, real)
        choices = [
            guaranteed & (guarantee > trimmed),
            (deserved == real) & (problem.spec_deserved > real),
        ]
        codes = np.select(choices, [2, 1], default=3)
    else:
        choices = [
            (deserved > request) & guaranteed,
            deserved == request,
            deserved == real,
            guaranteed,
        ]
        codes = np.select(choices, [2, 0, 1, 2], default=4)
    return _rows_by_code(codes, problem.dimensions)


def _rows_by_code(codes: Vectors, dimensions: tuple[str, ...]) -> list[Mapping[str, str]]:
    """One mapping per row of ``codes``. Few rows differ (most queues end at the same bounds),
    so each distinct row is spelled once, and the queues that end alike share it (read-only, as
    ``NO_AMOUNTS``): a copy a queue was 10,000 dicts a round."""
    if not dimensions:
        return [{} for _ in range(codes.shape[0])]
    # Every code fits a byte: a row's bytes are its key, and numpy finds the distinct ones.
    packed = np.ascontiguousarray(codes, dtype=np.uint8)
    keys = packed.view(np.dtype((np.void, len(dimensions)))).ravel()
    distinct, row_of = np.unique(keys, return_inverse=True)
    spelled = [
        {dimension: _NAMES[code] for dimension, code in zip(dimensions, row, strict=True)}
        for row in distinct.view(np.uint8).reshape(-1, len(dimensions)).tolist()
    ]
    return [spelled[index] for index in row_of.tolist()]
