"""One throttle step down, one restore step up."""

from __future__ import annotations

from sharekeeper.engine.qos import CpuThrottle, ThrottleState
from sharekeeper.engine.qos.throttling import restore_step, throttle_step

from .builders import pod

STEP = CpuThrottle(min_cpu_ratio=20, step_cpu_ratio=50)


def test_min_cpu_ratio_floor_is_limit_times_ratio_over_100() -> None:
    """Bug crane.md §12.2: Crane assigned limit * ratio (4 cores * 20 = 80 cores)."""
    limited = pod("p", cpu=500, limit=4_000, throttled=(4_000, 1_000))
    change = throttle_step(limited, STEP)
    assert change is not None
    assert change.cpu_limit_milli == 800  # 4000 * 20 / 100, not 500
    assert throttle_step(pod("p", cpu=500, limit=4_000, throttled=(4_000, 800)), STEP) is None


def test_never_below_the_request() -> None:
    change = throttle_step(pod("p", cpu=2_000, request=1_500, limit=2_000), STEP)
    assert change is not None
    assert change.cpu_limit_milli == 1_500
    assert change.released_milli == 500
    assert change.throttle == ThrottleState(2_000, 1_500)


def test_unlimited_pod_is_throttled_from_its_usage_and_remembers_it_was_unlimited() -> None:
    change = throttle_step(pod("p", cpu=3_000), STEP)
    assert change is not None
    assert (change.cpu_limit_milli, change.released_milli) == (1_500, 1_500)
    assert change.throttle == ThrottleState(None, 1_500)
    assert throttle_step(pod("p", cpu=None), STEP) is None


def test_restore_steps_up_to_the_original_limit_then_drops_the_annotation() -> None:
    change = restore_step(pod("p", cpu=100, throttled=(2_000, 1_000)), STEP, 8_000)
    assert change is not None
    assert (change.cpu_limit_milli, change.throttle) == (1_500, ThrottleState(2_000, 1_500))
    final = restore_step(pod("p", cpu=100, throttled=(2_000, 1_500)), STEP, 8_000)
    assert final is not None
    assert (final.cpu_limit_milli, final.throttle) == (2_000, None)


def test_restore_of_an_originally_unlimited_pod_lifts_the_limit_at_node_capacity() -> None:
    """Crane never gave an unlimited container its -1 quota back (crane.md §12.9)."""
    change = restore_step(pod("p", cpu=100, throttled=(None, 6_000)), STEP, 8_000)
    assert change is not None
    assert (change.cpu_limit_milli, change.throttle) == (None, None)
    assert restore_step(pod("p"), STEP, 8_000) is None  # not throttled: nothing to do


def test_a_pod_running_under_its_limit_steps_from_its_usage() -> None:
    """Found: 3.5 cores used of a 4-core limit, 10 % steps. A step from the limit (3.6) freed
    nothing, so the precise loop skipped the pod on every check; from the usage it frees 10 %."""
    busy = pod("p", cpu=3_500, limit=4_000)
    change = throttle_step(busy, CpuThrottle(min_cpu_ratio=10, step_cpu_ratio=10))
    assert change is not None
    assert (change.cpu_limit_milli, change.released_milli) == (3_150, 350)
    assert change.throttle == ThrottleState(4_000, 3_150)  # the original limit is remembered


def test_a_step_from_usage_still_respects_the_floor_and_never_raises_a_limit() -> None:
    ten = CpuThrottle(min_cpu_ratio=50, step_cpu_ratio=10)
    # 1 core used, floor 2000m (50 % of the original 4000m): the floor decides. The limit still
    # comes down to it, but that frees none of the core the pod uses.
    idle = throttle_step(pod("p", cpu=1_000, limit=4_000), ten)
    assert idle is not None
    assert (idle.cpu_limit_milli, idle.released_milli) == (2_000, 0)
    # Already at the floor: nothing lower to go to.
    assert throttle_step(pod("p", cpu=1_000, limit=4_000, throttled=(4_000, 2_000)), ten) is None
    # Using more than the limit (a sample above it): the step is from the limit.
    over = throttle_step(pod("p", cpu=5_000, limit=4_000), ten)
    assert over is not None
    assert over.cpu_limit_milli == 3_600
    # Usage unknown: from the limit, as before; it frees nothing the planner can count.
    blind = throttle_step(pod("p", cpu=None, limit=4_000), ten)
    assert blind is not None
    assert (blind.cpu_limit_milli, blind.released_milli) == (3_600, 0)
