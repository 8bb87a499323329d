"""CPU limit arithmetic for one pod: one throttle step down, one restore step up.

Pod-level: the limit is the pod's total CPU limit (the caller spreads it over containers).

A step down starts from what the pod *uses* when it uses less than its limit: the new limit is
``min(limit, usage) * (1 - step)``. Stepping from the limit alone never bites a pod running
under it (3.5 cores used of a 4-core limit, 10 % steps: 3.6 frees nothing, every check);
stepping from the usage frees ``step`` percent of it each time. A pod without a CPU limit, or
whose usage is unknown, steps from what is known (its usage; its limit). A pod never goes below
``max(request, originalLimit * minCPURatio / 100, 1m)``; the floor uses the *original* limit, so
repeated steps converge on it instead of sliding under it (crane.md §12.2 assigned
``limit * ratio`` without the /100, which un-throttled the pod). Restoring a pod that had no
limit lifts the throttle once the target reaches the node's CPU capacity (Crane never gave such
pods their freedom back, §12.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sharekeeper.engine.qos.inputs import CpuThrottle, QosPod, ThrottleState


@dataclass(frozen=True, slots=True)
class LimitChange:
    cpu_limit_milli: int | None
    """The new pod CPU limit; None when a restore gives back "no limit"."""
    throttle: ThrottleState | None
    """The annotation's new value; None when the pod is back to its original limit."""
    released_milli: int
    """Throttle: usage - new limit (≥ 0). Restore: headroom it may take, new limit - usage."""


def throttle_floor(pod: QosPod, params: CpuThrottle) -> int:
    """The lowest CPU limit a throttle may set: the request, ``minCPURatio`` percent of the
    original limit, and 1m, whichever is highest."""
    original = pod.throttle.original_limit_milli if pod.throttle else pod.cpu_limit_milli
    floor = max(pod.cpu_request_milli, 1)
    if original is not None:
        floor = max(floor, original * min(max(params.min_cpu_ratio, 0), 100) // 100)
    return floor


def throttle_step(pod: QosPod, params: CpuThrottle) -> LimitChange | None:
    """The next lower limit, or None when the pod cannot go lower (or nothing is known)."""
    original = pod.throttle.original_limit_milli if pod.throttle else pod.cpu_limit_milli
    current = pod.throttle.current_limit_milli if pod.throttle else pod.cpu_limit_milli
    usage = pod.cpu_usage_milli
    known = [amount for amount in (current, usage) if amount is not None]
    if not known:
        return None
    base = min(known)
    step = min(max(params.step_cpu_ratio, 0), 100)
    new = max(base * (100 - step) // 100, throttle_floor(pod, params))
    # Never a step up: below the current limit, or below the usage of an unlimited pod.
    if new >= (current if current is not None else base):
        return None
    released = max(0, (usage or 0) - new)
    return LimitChange(new, ThrottleState(original, new), released)


def restore_step(
    pod: QosPod, params: CpuThrottle, node_cpu_milli: int | None
) -> LimitChange | None:
    """The next higher limit of a throttled pod, capped at its original limit."""
    if pod.throttle is None:
        return None
    original, current = pod.throttle.original_limit_milli, pod.throttle.current_limit_milli
    cap = original if original is not None else node_cpu_milli
    new = current * (100 + min(max(params.step_cpu_ratio, 0), 100)) // 100
    usage = pod.cpu_usage_milli or 0
    if cap is None or new >= cap:
        # Back to where the pod was before we touched it: drop the annotation.
        headroom = max(0, (cap if cap is not None else new) - usage)
        return LimitChange(original, None, headroom)
    if new <= current:
        return None
    return LimitChange(new, ThrottleState(original, new), max(0, new - usage))


def split_cpu_limit(cpu_limits: Mapping[str, int], total_milli: int) -> dict[str, int]:
    """A pod-level CPU limit spread over the containers that have one (container -> current
    limit), in proportion to their current limits; the rounding remainder goes to the first,
    so the parts add up exactly."""
    whole = sum(cpu_limits.values())
    if not cpu_limits or whole == 0:
        return {}
    parts = {name: max(1, limit * total_milli // whole) for name, limit in cpu_limits.items()}
    first = next(iter(parts))
    parts[first] += total_milli - sum(parts.values())
    return parts
