"""Debounced rounds: a loop woken by many events runs a round once they have been quiet for a
moment, and after a failed round tries again after a pause."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from sharekeeper.loops.health import LoopHealth

logger = logging.getLogger(__name__)


class Timing(Protocol):
    @property
    def quiet_seconds(self) -> float: ...

    @property
    def max_delay_seconds(self) -> float: ...

    @property
    def error_backoff_seconds(self) -> float: ...


async def settle(woken: asyncio.Event, *, quiet_seconds: float, max_delay_seconds: float) -> None:
    """Until ``woken`` has not been set for ``quiet_seconds`` (or ``max_delay_seconds`` have
    passed, so that a steady stream of events cannot hold a round back for ever)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_delay_seconds
    while True:
        woken.clear()
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        try:
            await asyncio.wait_for(woken.wait(), timeout=min(quiet_seconds, remaining))
        except TimeoutError:
            return


async def debounced_rounds(
    name: str,
    woken: asyncio.Event,
    timing: Timing,
    health: LoopHealth,
    one_round: Callable[[], Awaitable[object]],
    *,
    on_failure: Callable[[], None] = lambda: None,
) -> None:
    """For ever: wait to be woken, settle, run ``one_round``; after a failure, log it, tell
    ``health`` and ``on_failure``, and run again after ``error_backoff_seconds``."""
    while True:
        await woken.wait()
        await settle(
            woken, quiet_seconds=timing.quiet_seconds, max_delay_seconds=timing.max_delay_seconds
        )
        health.started()
        try:
            await one_round()
        except Exception as error:
            logger.exception("%s failed; retrying in %.0fs", name, timing.error_backoff_seconds)
            health.failed(error)
            on_failure()
            await asyncio.sleep(timing.error_backoff_seconds)
            woken.set()
        else:
            health.succeeded()
