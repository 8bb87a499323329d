"""The lane: where the loops' heavy computations (the share round, the QoS check) take turns.

Each computes in a worker thread while the event loop keeps serving watches, writes and
probes. Two at once under the GIL would each take about as long as both together, so they take
turns: whichever came first runs at full speed.

While one computes, the cyclic garbage collector waits (``collector.hold_back``). A round at the
top size makes and drops millions of objects without cycles, which reference counting frees,
yet they start collections in the middle of it that walk the round's working set and whatever
the event loop made meanwhile: a young collection every few milliseconds and, once the store's
echoes have piled up in the oldest generation, full collections of 0.1 to 0.3 s
(benchmarks/README.md). The share round ends its turn by freezing what it kept
(``collector.Refreezer``); the QoS check keeps little, which the next young collection sees. The
collector's rare full pass takes a turn of its own between rounds.

The QoS check also reads every node's usage on the event loop before its turn (at 5,000 nodes
about a third of a second of parsing), which competes with a round's thread for the interpreter
as a second thread would. So a check that comes due while a share round is due (woken,
settling) or computing waits for that round first, a bounded time: the round is what someone is
waiting to see, and a check that starts a second later loses nothing; a stream of rounds holds
a check back by ``CHECK_DEFERRAL_SECONDS`` at most.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType

from sharekeeper import collector

CHECK_DEFERRAL_SECONDS = 2.0
"""The longest a QoS check waits for share rounds before it starts (a round at the top size
takes 1 to 1.5 s; the check's interval is 10 s by default)."""


class Lane:
    """``async with lane:`` one computation at a time, the collector held back meanwhile."""

    def __init__(self) -> None:
        self._turn = asyncio.Lock()
        self._collecting = True
        """Whether the collector ran when the holder came in (it is put back so)."""
        self._no_round = asyncio.Event()
        """Clear while a share round is due or computing."""
        self._no_round.set()

    def round_due(self) -> None:
        """The share round was woken: it will want the lane once events settle."""
        self._no_round.clear()

    def round_done(self) -> None:
        """No share round is due any more (the last one ended and nothing woke it since)."""
        self._no_round.set()

    async def after_rounds(self) -> None:
        """Until no share round is due or computing, ``CHECK_DEFERRAL_SECONDS`` at most."""
        if self._no_round.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._no_round.wait(), CHECK_DEFERRAL_SECONDS)

    async def between_rounds(self, work: Callable[[], None]) -> None:
        """``work`` in a turn of its own once no share round is due (``after_rounds``): a pause
        of the event loop that no round should wait behind."""
        await self.after_rounds()
        async with self:
            work()

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
