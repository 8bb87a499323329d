"""The cyclic garbage collector in a process that holds millions of long-lived objects.

CPython's collector walks every tracked container of a generation each time it collects that
generation, and a full collection walks them all. What the operator keeps (the store: 150,000
pods, 10,000 queues; the per-queue state its first round makes: the render memo and the last
written statuses) lives as long as the process and holds no cycles that become garbage, yet
every full collection walked it: 350 to 550 ms each at the top size, one or two a round with
held pods (benchmarks/README.md, the profiles). So it is frozen out of the collector's way once
made, and young collections take larger batches, so that a round's short-lived objects are gone
before they would be promoted and count towards a full collection.

What the rounds keep after that (each written status as the watch brings it back, the render
memo) is long-lived too, and piles up in the oldest generation again: every full collection
walked it, one almost every share round at the top size (~0.3 s each), to find about a hundred
objects of garbage a weight change. So each round ends by freezing what is alive (``Refreezer``),
without collecting the young generations first: a round makes no garbage cycles (at the top
size, after a weight change, that collection found none and took 110 to 150 ms a round).

The event loop does make garbage cycles meanwhile (its tasks and futures, the requests it
serves), and those a freeze catches young wait, frozen, for a full pass. How many depends on
the rate of events, not on the cluster's size: when kopf's admission handlers answered the
webhook, each review left a ``Body`` and a ``Patch`` whose views refer back to what they view,
holding the pod's whole JSON; under a stream of admissions (50 queues, 2,000 Jobs) a minute
froze 60,000 to 113,000 garbage objects beside 115,000 to 140,000 alive, and at 1,000 queues the
operator's memory grew by 0.2 to 0.4 MiB a second while full passes were hourly
(benchmarks/README.md). So a full pass falls by what is held, not by
the clock: once the interpreter's allocated memory blocks (``sys.getallocatedblocks``, a walk
of its pools: 1 to 2 ms at the top size) exceed those in use after the last full pass by
``FULL_PASS_GROWTH``, and never sooner than ``FULL_PASS_SPACING`` after it. Frozen garbage is
then bounded by a share of what lives plus what a minute makes, whatever the rate; a cluster
that grows costs one full pass per such share of growth.

A full pass walks everything the process holds (about a million tracked objects at the top size:
0.8 to 1.5 s as the machine goes), so it is not made in the round that finds it due, whose
writes someone waits for, but in a turn of the lane of its own once no round is due
(``Lane.between_rounds``), after that round's writes went to the outbox.

While the loops compute (a share round, a QoS check: ``loops.lane``) the collector is held back
altogether: what they make and drop has no cycles, and collections in the middle of a round
would walk its working set again and again.

Every collection is timed into ``sharekeeper_gc_pause_seconds`` by generation: what a full
collection costs, and how often it falls, is what tells whether the freezes keep up.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Mapping

from sharekeeper import telemetry

FULL_PASS_GROWTH = 0.25
"""``Refreezer`` collects everything once the memory blocks in use exceed those in use after its
last full pass by this share."""
FULL_PASS_SPACING = 60.0
"""Seconds between two full passes at least (one costs 0.35 to 0.55 s at the top size)."""
YOUNG_OBJECTS = 10_000
"""Allocations (net of frees) of tracked objects between two young collections; CPython's
default is 700. Garbage cycles wait that much longer to be found: a few MiB at most."""


class _PauseClock:
    """A ``gc.callbacks`` entry: each collection's time, by the oldest generation collected."""

    def __init__(self) -> None:
        self._started = 0.0
        self._series = [telemetry.GC_PAUSE_SECONDS.labels(str(g)) for g in range(3)]

    def __call__(self, phase: str, info: Mapping[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._series[info["generation"]].observe(time.perf_counter() - self._started)


PAUSES = _PauseClock()


def tune() -> None:
    """Young collections every ``YOUNG_OBJECTS``; the older generations' ratios unchanged; every
    collection timed (``PAUSES``)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, oldest)
    if PAUSES not in gc.callbacks:
        gc.callbacks.append(PAUSES)


def settle() -> None:
    """Collect, then freeze whatever is alive: the collector never walks it again (reference
    counting still frees it). Called where what is alive is long-lived state without garbage
    cycles: after the initial lists, and after the first round."""
    gc.collect()
    gc.freeze()


def hold_back() -> bool:
    """No collection until ``let_go``; whether the collector was on (what ``let_go`` restores).
    Reference counting still frees whatever has no cycle; cycles wait until then."""
    collecting = gc.isenabled()
    gc.disable()
    return collecting


def let_go(collecting: bool) -> None:
    """The collector back as ``hold_back`` found it."""
    if collecting:
        gc.enable()


class Refreezer:
    """Called after each share round: everything alive frozen, nothing walked. Once the memory
    blocks in use grew by ``growth`` since the last full pass (and ``spacing`` seconds passed),
    it says a full pass is due, which its owner makes with ``full_pass`` when nothing waits for
    the event loop: everything unfrozen and ``settle``d (a full walk, as at start-up), which
    frees the garbage cycles frozen since. The first call measures the blocks in use."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        blocks: Callable[[], int] = sys.getallocatedblocks,
        growth: float = FULL_PASS_GROWTH,
        spacing: float = FULL_PASS_SPACING,
    ) -> None:
        self._clock = clock
        self._blocks = blocks
        self._growth = growth
        self._spacing = spacing
        self._last_full = clock()
        self._limit: float | None = None
        """Memory blocks in use beyond which a full pass is due: ``growth`` more than after the
        last full pass (or at the first call)."""

    def __call__(self) -> bool:
        """Freeze what is alive; whether a full pass is due."""
        gc.freeze()
        if self._limit is None:
            self._limit = self._blocks() * (1 + self._growth)
            return False
        return self._clock() - self._last_full >= self._spacing and self._blocks() > self._limit

    def full_pass(self) -> None:
        """Collect everything, frozen or not, and freeze what lives."""
        gc.unfreeze()
        settle()
        self._last_full = self._clock()
        self._limit = self._blocks() * (1 + self._growth)
