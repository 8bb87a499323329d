"""The latest write per object, sent by a few workers while the next round already computes.

At 10,000 queues one weight change moves every queue's deserved share: 10,000 status patches,
about a minute at the rate one API server takes them. A round that waited for its writes would
hold every later change back that long. Instead a round hands its writes to the outbox and is
done; the outbox keeps one pending write per object, the newest (a round replaces everything
still unsent, so a write a newer round no longer wants is dropped, never sent late), and sends
the urgent ones first (an object whose spec a person just changed).

A write the owner calls paced (a queue whose numbers alone moved) waits until ``interval``
seconds after the last write sent to its object. At 1,000 queues with pods finishing every
second nearly every queue's allocated moves each round, and writing each round's numbers was
three quarters of the API requests of a saturated run; paced, an object gets at most one such
write per interval, with the newest numbers, and sends nothing extra when it is quiet (its first
write goes at once).

A write already being sent completes; the next round diffs against what it stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Generic, TypeVar

from sharekeeper import telemetry

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
W = TypeVar("W")


class Outbox(Generic[K, W]):
    """``send`` writes one; ``failed`` is told when a send raised (the owner schedules a round
    that wants the write again, if still needed). Workers start with the first writes.
    ``interval``: the seconds a paced write waits after the last write sent to its object."""

    def __init__(
        self,
        send: Callable[[W], Awaitable[None]],
        failed: Callable[[], None],
        *,
        workers: int = 16,
        interval: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._failed = failed
        self._workers = workers
        self._interval = interval
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []
        self._urgent: dict[K, W] = {}
        self._normal: dict[K, W] = {}
        self._later: dict[K, tuple[float, W]] = {}
        """Paced writes and when they are due."""
        self._sent_at: dict[K, float] = {}
        """When a write to each object was last taken to be sent, within the last interval."""
        self._due_timer: asyncio.TimerHandle | None = None
        self._in_flight = 0
        self._work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def replace(
        self,
        writes: Mapping[K, W],
        urgent: frozenset[K] = frozenset(),
        paced: frozenset[K] = frozenset(),
    ) -> None:
        """The writes still wanted, all of them: anything pending but not in ``writes`` goes.
        A ``paced`` write waits until its object's interval is over (urgent wins)."""
        now = self._clock()
        since = now - self._interval
        self._sent_at = {key: at for key, at in self._sent_at.items() if at > since}
        self._urgent, self._normal, self._later = {}, {}, {}
        for key, write in writes.items():
            if key in urgent:
                self._urgent[key] = write
            elif key in paced and key in self._sent_at:
                self._later[key] = (self._sent_at[key] + self._interval, write)
            else:
                self._normal[key] = write
        if writes and not self._tasks:
            self._tasks = [asyncio.create_task(self._worker()) for _ in range(self._workers)]
        self._time_later()
        self._changed()

    @property
    def pending(self) -> int:
        return len(self._urgent) + len(self._normal) + len(self._later) + self._in_flight

    async def drained(self) -> None:
        """Until nothing is pending or being sent."""
        await self._idle.wait()

    async def close(self) -> None:
        """Stop the workers; what is pending is not sent."""
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _worker(self) -> None:
        while True:
            await self._work.wait()
            write = self._next()
            if write is None:
                continue
            self._in_flight += 1
            try:
                await self._send(write)
            except Exception:
                logger.exception("a write failed; the next round retries what is still wanted")
                self._failed()
            finally:
                self._in_flight -= 1
                self._changed()

    def _next(self) -> W | None:
        for pending in (self._urgent, self._normal):
            if pending:
                key = next(iter(pending))
                write = pending.pop(key)
                self._sent_at[key] = self._clock()
                self._changed()
                return write
        return None

    def _time_later(self) -> None:
        """Paced writes now due join the others; a timer for the next one due."""
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        if not self._later:
            return
        now = self._clock()
        for key, (due, write) in list(self._later.items()):
            if due <= now:
                del self._later[key]
                self._normal[key] = write
        if self._later:
            soonest = min(due for due, _ in self._later.values())
            self._due_timer = asyncio.get_running_loop().call_later(soonest - now, self._when_due)

    def _when_due(self) -> None:
        self._due_timer = None
        self._time_later()
        self._changed()

    def _changed(self) -> None:
        telemetry.PENDING_WRITES.set(self.pending)
        if self._urgent or self._normal:
            self._work.set()
            self._idle.clear()
        else:
            self._work.clear()
            if self._in_flight == 0 and not self._later:
                self._idle.set()
            else:
                self._idle.clear()
