"""When a loop counts as stale: what fails ``/healthz``."""

from __future__ import annotations

from sharekeeper.loops.health import STALE_ROUNDS, LoopHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_loop_that_keeps_failing_becomes_stale_after_its_rounds_and_recovers() -> None:
    clock = Clock()
    health = LoopHealth("qos", lambda: 10.0, clock)
    health.started()
    health.failed(ValueError("bad sample"))
    clock.now += STALE_ROUNDS * 10.0 - 1
    assert health.stale() is None  # failing, but not for long enough
    clock.now += 2
    reason = health.stale()
    assert reason is not None
    assert reason.startswith("qos: no round succeeded for 61s")
    assert "ValueError: bad sample" in reason
    health.started()
    health.succeeded()
    assert health.stale() is None


def test_a_round_that_never_ends_is_stale() -> None:
    clock = Clock()
    health = LoopHealth("recompute", lambda: 5.0, clock)
    health.started()
    clock.now += STALE_ROUNDS * 5.0 + 1
    assert health.stale() == "recompute: one round has run for 31s"


def test_an_idle_loop_is_not_stale() -> None:
    """The recompute loop runs only when something changed: a quiet hour is health."""
    clock = Clock()
    health = LoopHealth("recompute", lambda: 5.0, clock)
    clock.now += 3600
    assert health.stale() is None
