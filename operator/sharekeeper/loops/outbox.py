"""The latest write per object, sent by a few workers while the next round already computes.

At 10,000 queues one weight change moves every queue's deserved share: 10,000 status patches,
about a minute at the rate one API server takes them. A round that waited for its writes would
hold every later change back that long. Instead a round hands its writes to the outbox and is
done; the outbox keeps one pending write per object, the newest (a round replaces everything
still unsent, so a write a newer round no longer wants is dropped, never sent late), and sends
the urgent ones first (an object whose spec a person just changed).

A write already being sent completes; the next round diffs against what it stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

from sharekeeper import telemetry

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
W = TypeVar("W")


class Outbox(Generic[K, W]):
    """``send`` writes one; ``failed`` is told when a send raised (the owner schedules a round
    that wants the write again, if still needed). Workers start with the first writes."""

    def __init__(
        self,
        send: Callable[[W], Awaitable[None]],
        failed: Callable[[], None],
        *,
        workers: int = 16,
    ) -> None:
        self._send = send
        self._failed = failed
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._urgent: dict[K, W] = {}
        self._normal: dict[K, W] = {}
        self._in_flight = 0
        self._work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def replace(
        self,
        writes: Mapping[K, W],
        urgent: frozenset[K] = frozenset(),
        *,
        first: Collection[K] = frozenset(),
    ) -> None:
        """The writes still wanted, all of them: anything pending but not in ``writes`` goes,
        except what ``send_first`` handed over for ``first`` (the same round's), if still
        pending."""
        handed = {key: write for key, write in self._urgent.items() if key in first}
        self._urgent = handed | {key: write for key, write in writes.items() if key in urgent}
        self._normal = {key: write for key, write in writes.items() if key not in urgent}
        self._start(writes)

    def send_first(self, writes: Mapping[K, W]) -> None:
        """Writes to send before anything pending, added to it (a round's most awaited ones,
        handed over before the round is done)."""
        self._urgent = dict(writes) | {k: w for k, w in self._urgent.items() if k not in writes}
        self._start(writes)

    def _start(self, writes: Mapping[K, W]) -> None:
        if writes and not self._tasks:
            self._tasks = [asyncio.create_task(self._worker()) for _ in range(self._workers)]
        self._changed()

    @property
    def pending(self) -> int:
        return len(self._urgent) + len(self._normal) + self._in_flight

    async def drained(self) -> None:
        """Until nothing is pending or being sent."""
        await self._idle.wait()

    async def close(self) -> None:
        """Stop the workers; what is pending is not sent."""
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
                self._changed()
                return write
        return None

    def _changed(self) -> None:
        telemetry.PENDING_WRITES.set(self.pending)
        if self._urgent or self._normal:
            self._work.set()
            self._idle.clear()
        else:
            self._work.clear()
            if self._in_flight == 0:
                self._idle.set()
