"""The lane: where the loops' heavy computations (the share round, the QoS check) take turns.

Each computes in a worker thread while the event loop keeps serving watches, writes and
probes. Two at once under the GIL would each take about as long as both together, so they take
turns: whichever came first runs at full speed.

While one computes, the cyclic garbage collector waits (``collector.hold_back``). A round at the
top size makes and drops millions of objects without cycles, which reference counting frees,
yet they start collections in the middle of it that walk the round's working set and whatever
the event loop made meanwhile: a young collection every few milliseconds and, once the store's
echoes have piled up in the oldest generation, full collections of 0.1 to 0.3 s
(benchmarks/README.md). The share round ends its turn by collecting what it kept and freezing
it (``collector.Refreezer``); the QoS check keeps little, which the next young collection sees.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from sharekeeper import collector


class Lane:
    """``async with lane:`` one computation at a time, the collector held back meanwhile."""

    def __init__(self) -> None:
        self._turn = asyncio.Lock()
        self._collecting = True
        """Whether the collector ran when the holder came in (it is put back so)."""

    async def __aenter__(self) -> None:
        await self._turn.acquire()
        self._collecting = collector.hold_back()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            collector.let_go(self._collecting)
        finally:
            self._turn.release()
