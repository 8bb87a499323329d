"""Whether a loop still does its job: what ``/healthz`` and the ``Stale`` condition report.

A loop that keeps failing (an exception every round) or hangs in one round is alive as a task
but useless; a liveness probe that only checks the task lets it freeze every status with a
stale ``Ready=True`` (found: one tenant pod of ``cpu: 10P`` did that). A loop is *stale* when
its rounds have failed, or one round has run, for ``STALE_ROUNDS`` times its interval; the
kubelet then restarts the operator, and the objects carry a ``Stale`` condition meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

STALE_ROUNDS = 6
"""How many intervals of failing (or of one round running) make a loop stale."""


@dataclass
class LoopHealth:
    name: str
    interval: Callable[[], float]
    """The loop's current interval in seconds (the QoS check's changes with its policies)."""
    clock: Callable[[], float] = time.monotonic
    last_success: float = field(default=0.0)
    """When a round last succeeded (or the loop started)."""
    running_since: float | None = None
    error: str | None = None
    """Why the last round failed; None after a success."""

    def __post_init__(self) -> None:
        self.last_success = self.clock()

    def started(self) -> None:
        self.running_since = self.clock()

    def succeeded(self) -> None:
        self.last_success = self.clock()
        self.running_since = None
        self.error = None

    def failed(self, error: BaseException) -> None:
        self.running_since = None
        self.error = f"{type(error).__name__}: {error}"[:1000]

    def stale(self) -> str | None:
        """Why the loop is stale, or None while it does its job."""
        limit = STALE_ROUNDS * self.interval()
        now = self.clock()
        if self.running_since is not None and now - self.running_since > limit:
            return f"{self.name}: one round has run for {now - self.running_since:.0f}s"
        if self.error is not None and now - self.last_success > limit:
            return (
                f"{self.name}: no round succeeded for {now - self.last_success:.0f}s; "
                f"last error: {self.error}"
            )
        return None
