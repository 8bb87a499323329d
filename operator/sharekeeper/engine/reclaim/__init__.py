"""Reclaim: deserved shares enforced by eviction — precise, loop-free, previewable.

A pod that has waited long enough, and whose queue (and every queue above it) stays within its
deserved share with it, may have pods of overused queues evicted so that it fits on one node:
the fewest and least valuable pods that make room, and never a pod whose queue would drop below
its deserved share or its guarantee, a protected pod, a pod of a non-reclaimable queue, or part
of a gang that must go whole. ``planning`` has the rules and their cost.

Entry points:

- ``plan_reclaim(inputs, memo=None) -> ReclaimPlan``: the round's decisions. The caller decides
  what to do with them (the mode Off | Preview | On is its business) and evicts through the
  Eviction API, never by deleting. A caller that plans round after round passes one
  ``ReclaimMemo`` to each, so that a round reads only what is new since the last.
- ``replan_inputs(inputs, accepted, refused) -> ReclaimInputs``: after a refused eviction, the
  inputs to plan again with (the next victim is then chosen by the same rules).
- ``spare_reason(inputs, reclaimer, pod) -> SpareReason | None``: for ``explain``, why a pod is
  not evicted for a waiting pod.

Does not belong: Kubernetes objects, API calls, clocks (the round's ``now`` is an input). Must
not import the other engines (the "Each engine stands alone" contract).
"""

from sharekeeper.engine.reclaim.planning import plan_reclaim, spare_reason
from sharekeeper.engine.reclaim.replanning import replan_inputs
from sharekeeper.engine.reclaim.state import ReclaimMemo
from sharekeeper.engine.reclaim.values import (
    Gang,
    GroupKey,
    NodeState,
    NotServed,
    NotServedReason,
    Overuse,
    QueueState,
    Reclaim,
    ReclaimInputs,
    ReclaimPlan,
    ReclaimSettings,
    Running,
    Spared,
    SpareReason,
    Victim,
    Waiting,
    Waits,
    running_by_queue,
)

__all__ = [
    "Gang",
    "GroupKey",
    "NodeState",
    "NotServed",
    "NotServedReason",
    "Overuse",
    "QueueState",
    "Reclaim",
    "ReclaimInputs",
    "ReclaimMemo",
    "ReclaimPlan",
    "ReclaimSettings",
    "Running",
    "SpareReason",
    "Spared",
    "Victim",
    "Waiting",
    "Waits",
    "plan_reclaim",
    "replan_inputs",
    "running_by_queue",
    "spare_reason",
]
