"""Whether a loop still does its job: what ``/healthz`` and the ``Stale`` condition report.

A loop that keeps failing (an exception every round) or hangs in one round is alive as a task
but useless; a liveness probe that only checks the task lets it freeze every status with a
stale ``Ready=True`` (found: one tenant pod of ``cpu: 10P`` did that). A loop is *stale* when
its rounds have failed, or one round has run, for ``STALE_ROUNDS`` times its interval; the
kubelet then restarts the operator, and the objects carry a ``Stale`` condition meanwhile.

A loop whose rounds succeed can still publish nothing: a status the API server refuses to store
(found: one tenant's pods made every queue's status too large, every write failed, and every
queue still said ``Ready=True``). ``StatusFailures`` tells such an object once, when its writes
have failed ``FAILING_WRITES`` times in a row, and ``/healthz`` fails once one has been failing
for ``FAILING_UNHEALTHY_SECONDS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sharekeeper import telemetry

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
    degraded: Callable[[], str | None] = field(default=lambda: None)
    """Why the loop's rounds succeed but what they decide does not land (statuses that cannot
    be written: ``StatusFailures.degraded``); None while it does."""

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


FAILING_WRITES = 3
"""Failed status writes of one object in a row that make it *failing*, and told (a Warning Event
``StatusNotWritten``, one log line, ``sharekeeper_status_not_written{kind}``). Each write has
already been tried up to 4 times over up to 10 s (``kube.transient``) and is wanted again
5 s after it failed, so three in a row is 15 to 45 s of the API server refusing this object: a
blip (an API server restart, a dropped connection) heals sooner, a refusal that will not heal by
itself (a status too large to store, a webhook refusing it, a permission removed) is told within
a minute. A round writes an object at most once, so these are also consecutive rounds."""
FAILING_UNHEALTHY_SECONDS = 300.0
"""How long an object may be failing before ``/healthz`` answers 500 (naming how many objects
and since when): long enough that an API server outage the watches ride out does not restart
the operator, short enough that a person, or the liveness probe's restarts, notice statuses
frozen with ``Ready=True`` (found: they stayed so, with /healthz 200, for as long as one
tenant's pods made every queue's status too large to store)."""


@dataclass(slots=True)
class Streak:
    """Status writes of one object failing in a row."""

    failures: int
    since: float
    """When the first of them failed (Unix seconds), as a person reads it."""
    started: float
    """The same moment on the monotonic clock."""
    message: str
    """What the API server (or the connection) said the last time."""
    told: bool = False
    """The object is failing (``FAILING_WRITES`` reached) and was told so."""


class StatusFailures:
    """Per object (kind, name), whether its status writes keep failing: told once when they
    start failing, once when one lands again, never once per round.

    ``failed``/``succeeded`` return the streak when something is to be told (the caller posts
    the Event and writes the log line); ``degraded`` is what ``/healthz`` reports."""

    def __init__(
        self,
        kinds: tuple[str, ...] = ("Queue", "SchedulerPolicy"),
        *,
        failing_writes: int = FAILING_WRITES,
        unhealthy_seconds: float = FAILING_UNHEALTHY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._kinds = kinds
        self._failing_writes = failing_writes
        self._unhealthy_seconds = unhealthy_seconds
        self._clock = clock
        self._wall_clock = wall_clock
        self._streaks: dict[tuple[str, str], Streak] = {}
        self._export()

    def failed(self, kind: str, name: str, message: str) -> Streak | None:
        """A write of ``kind`` ``name`` failed; the streak when the object starts failing now."""
        streak = self._streaks.get((kind, name))
        if streak is None:
            streak = Streak(0, self._wall_clock(), self._clock(), message)
            self._streaks[(kind, name)] = streak
        streak.failures += 1
        streak.message = message
        if streak.told or streak.failures < self._failing_writes:
            return None
        streak.told = True
        self._export()
        return streak

    def succeeded(self, kind: str, name: str) -> Streak | None:
        """A write landed (or found the object gone); the streak if it had been told failing."""
        streak = self._streaks.pop((kind, name), None)
        if streak is None or not streak.told:
            return None
        self._export()
        return streak

    def forget(self, kind: str, name: str) -> None:
        """The object is gone, or is a new one of the same name."""
        if self._streaks.pop((kind, name), None) is not None:
            self._export()

    def clear(self) -> None:
        """This replica no longer writes (it lost the lead, or stops)."""
        self._streaks.clear()
        self._export()

    def failing(self) -> dict[str, int]:
        """How many objects are failing, by kind (every kind of ours, 0 included)."""
        counts = dict.fromkeys(self._kinds, 0)
        for (kind, _), streak in self._streaks.items():
            if streak.told:
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def degraded(self) -> str | None:
        """Why ``/healthz`` should fail: some object has been failing for longer than
        ``FAILING_UNHEALTHY_SECONDS``; None otherwise."""
        told = [(key, streak) for key, streak in self._streaks.items() if streak.told]
        if not told:
            return None
        (kind, name), oldest = min(told, key=lambda item: item[1].started)
        lasted = self._clock() - oldest.started
        if lasted <= self._unhealthy_seconds:
            return None
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.failing().items() if count)
        since = datetime.fromtimestamp(oldest.since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f"{len(told)} status{'' if len(told) == 1 else 'es'} not written ({kinds}), the "
            f"first since {since} ({lasted:.0f}s); {kind} {name}: {oldest.message}"
        )

    def _export(self) -> None:
        for kind, count in self.failing().items():
            telemetry.STATUS_NOT_WRITTEN.labels(kind).set(count)
