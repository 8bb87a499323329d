"""Batched, paced rounds: a loop woken by many events runs one round for all that came within
a short batch window, leaves at least as much time between two rounds as the last one took,
and after a failed round tries again after a pause.

Why not wait for the events to go quiet: while jobs arrive and pods finish, pod events never
stop for long, so a round that waits for a quiet gap waits for its upper bound every time (2 s
was ours, measured beside Kueue: every release of held pods into freed room came that much
later). A fixed window after the first event coalesces a burst as well, and the pause keeps a
steady stream from taking more than half of the process's time for rounds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from sharekeeper.loops.health import LoopHealth

logger = logging.getLogger(__name__)


class Timing(Protocol):
    @property
    def batch_seconds(self) -> float: ...

    @property
    def pause_ratio(self) -> float: ...

    @property
    def error_backoff_seconds(self) -> float: ...


def next_start(woken_at: float, last_end: float, last_seconds: float, timing: Timing) -> float:
    """When a round woken at ``woken_at`` starts: after the batch window, and no sooner than
    ``pause_ratio`` times the last round's duration after it ended."""
    return max(woken_at + timing.batch_seconds, last_end + timing.pause_ratio * last_seconds)


async def paced_rounds(
    name: str,
    woken: asyncio.Event,
    timing: Timing,
    health: LoopHealth,
    one_round: Callable[[], Awaitable[object]],
    *,
    on_failure: Callable[[], None] = lambda: None,
) -> None:
    """For ever: wait to be woken, wait for ``next_start``, run ``one_round`` (what wakes the
    loop meanwhile wakes the next one); after a failure, log it, tell ``health`` and
    ``on_failure``, and run again after ``error_backoff_seconds``."""
    loop = asyncio.get_running_loop()
    last_end = last_seconds = 0.0
    while True:
        await woken.wait()
        start = next_start(loop.time(), last_end, last_seconds, timing)
        await asyncio.sleep(max(0.0, start - loop.time()))
        woken.clear()
        health.started()
        began = loop.time()
        try:
            await one_round()
        except Exception as error:
            last_end, last_seconds = loop.time(), loop.time() - began
            logger.exception("%s failed; retrying in %.0fs", name, timing.error_backoff_seconds)
            health.failed(error)
            on_failure()
            await asyncio.sleep(timing.error_backoff_seconds)
            woken.set()
        else:
            last_end, last_seconds = loop.time(), loop.time() - began
            health.succeeded()
