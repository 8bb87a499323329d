"""Capacity: Volcano's non-hierarchical ``capacity`` plugin (``pkg/scheduler/plugins/capacity``,
master ed72c7c8; ``reference/volcano.md`` §4.1).

``deserved = max(min(spec.deserved, realCapability), guarantee)``: static, not capped by request
(v1.12+), a dimension missing from ``spec.deserved`` is 0. Weight is not used.
Complexity: O(Q · D).
"""

from __future__ import annotations

import numpy as np

from sharekeeper.engine.resources import Vectors
from sharekeeper.engine.shares.common import ShareProblem


def capacity_deserved(problem: ShareProblem) -> Vectors:
    trimmed = np.minimum(problem.spec_deserved, problem.real_capability)
    deserved: Vectors = np.maximum(trimmed, problem.guarantee)
    return deserved
