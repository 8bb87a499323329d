"""Debouncing: a loop woken by many events runs once they have been quiet for a moment."""

from __future__ import annotations

import asyncio


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
