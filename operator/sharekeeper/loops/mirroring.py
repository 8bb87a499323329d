"""The mirroring loop: Volcano Queues -> one Queue each (``SchedulerPolicy.spec.queueSource:
Volcano``). It decides nothing itself: ``pipeline.mirroring.mirror_plan`` does, from the store;
this loop takes the store's picture, sends the writes the plan wants and posts its reports.

It acts only while a readable policy has ``queueSource: Volcano`` and the Volcano Queues are
listed (served and read completely: a missing or half-read list must never delete mirrors), and,
like the other loops, only on the leader. Rounds are debounced as the recompute loop's; each
compares every pair (a few comparisons each, 10,000 pairs in milliseconds) and writes only what
differs. A write is remembered until the watch shows it, so a round that starts before its
echo does not send it again; an answer that refuses a write (422, 403) is not sent again until
the plan wants something else for that Queue. Reports become Warning Events on the Volcano
Queue, once per distinct problem.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from sharekeeper.api.mirroring import VOLCANO_API_VERSION, QueueOrigin, queue_origin
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.kube.transient import http_status
from sharekeeper.kube.writing import Writes
from sharekeeper.loops.debouncing import debounced_rounds
from sharekeeper.loops.echoes import HOLD_SECONDS
from sharekeeper.loops.health import LoopHealth
from sharekeeper.pipeline.mirroring import (
    Create,
    Delete,
    MirrorPlan,
    MirrorWrite,
    Patch,
    Report,
    mirror_plan,
)
from sharekeeper.settings import LoopSettings

logger = logging.getLogger(__name__)

EVENTS_AT_ONCE = 16
DEFAULT_SETTINGS = LoopSettings()


class Source(Protocol):
    """The Volcano Queues' watch, as far as mirroring needs it."""

    @property
    def listed(self) -> bool: ...


class Mirroring:
    def __init__(
        self,
        writer: Writes,
        store: ClusterStore,
        source: Source,
        *,
        settings: LoopSettings = DEFAULT_SETTINGS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._writer = writer
        self._store = store
        self._source = source
        self._settings = settings
        self._clock = clock
        self._woken = asyncio.Event()
        self.store_synced = asyncio.Event()
        """Set by the owner once every initial list is in the store."""
        self._expected: dict[str, tuple[QueueOrigin | None, float]] = {}
        """Queue name -> what our last write left there (None: deleted), and when."""
        self._refused: dict[str, MirrorWrite] = {}
        self._reported: dict[str, Report] = {}
        self._mirroring = False
        self.rounds = 0
        self.health = LoopHealth("mirroring", lambda: self._settings.error_backoff_seconds)

    def wake(self) -> None:
        self._woken.set()

    def origin_seen(self, name: str, old: QueueOrigin | None, new: QueueOrigin | None) -> None:
        """The store's view of Queue ``name`` changed: the echo of our write (which only
        confirms it), a status write (no news to mirroring), or news."""
        expected = self._expected.get(name)
        if expected is not None and expected[0] == new:
            del self._expected[name]
            return
        if new is None or not new.same_but_version(old):
            self.wake()

    async def run(self) -> None:
        await self.store_synced.wait()
        # A new term trusts only what it reads: another leader may have written meanwhile.
        self._expected, self._refused, self._reported = {}, {}, {}
        self._woken.set()
        await debounced_rounds("mirroring", self._woken, self._settings, self.health, self.mirror)

    async def mirror(self) -> MirrorPlan | None:
        """One round: None when there is nothing to mirror from (no policy wants it, or the
        Volcano Queues are not listed: not installed, or not read yet)."""
        store = self._store
        wanted = store.mirroring_wanted()
        if not wanted and self._mirroring:
            logger.info(
                "no SchedulerPolicy has queueSource Volcano: mirroring stopped (the mirrors are "
                "left as they are)"
            )
            self._mirroring = False
        if not wanted or not self._source.listed:
            return None
        if not self._mirroring:
            logger.info("mirroring %d Volcano Queues", len(store.volcano_queues.records))
            self._mirroring = True
        plan = mirror_plan(dict(store.volcano_queues.records), self._queues_now())
        writes = [w for w in plan.writes if self._refused.get(w.name) != w]
        self._refused = {w.name: w for w in plan.writes if self._refused.get(w.name) == w}
        await asyncio.gather(*(self._write(write) for write in writes))
        await self._tell(plan.reports)
        self.rounds += 1
        if writes:
            logger.info("mirroring round %d: %d writes", self.rounds, len(writes))
        return plan

    def _queues_now(self) -> dict[str, QueueOrigin]:
        """The store's Queues, with what our writes left where the watch has not shown it
        yet (for ``HOLD_SECONDS`` at most: a write whose echo never comes is not trusted
        forever)."""
        queues = dict(self._store.queues.origins)
        now = self._clock()
        for name, (origin, since) in list(self._expected.items()):
            if now - since > HOLD_SECONDS:
                del self._expected[name]
            elif origin is None:
                queues.pop(name, None)
            else:
                queues[name] = origin
        return queues

    async def _write(self, write: MirrorWrite) -> None:
        try:
            if isinstance(write, Create):
                stored = await self._writer.create_queue(write.body)
                if stored is not None:
                    self._expect(write.name, queue_origin(stored))
            elif isinstance(write, Patch):
                stored = await self._writer.patch_queue(write.name, write.body)
                if stored is not None:
                    self._expect(write.name, queue_origin(stored))
            elif await self._writer.delete_queue(write.name, write.uid):
                self._expect(write.name, None)
        except Exception as error:
            code = http_status(error)
            if code is not None and 400 <= code < 500 and code not in (408, 429):
                # The API server's answer: sending it again changes nothing.
                self._refused[write.name] = write
                logger.warning(
                    "mirroring Queue %s: the API server refused to %s it (%d): %s",
                    write.name, _verb(write), code, error,
                )  # fmt: skip
                return
            logger.warning(
                "mirroring Queue %s: %s failed (%r); trying again in %.0fs",
                write.name, _verb(write), error, self._settings.error_backoff_seconds,
            )  # fmt: skip
            asyncio.get_running_loop().call_later(self._settings.error_backoff_seconds, self.wake)

    def _expect(self, name: str, origin: QueueOrigin | None) -> None:
        current = self._store.queues.origins.get(name)
        if current == origin:
            return  # the watch has shown it already
        self._expected[name] = (origin, self._clock())

    async def _tell(self, reports: Iterable[Report]) -> None:
        """A Warning Event per report not told yet (a report that went away and comes back is
        told again)."""
        wanted = {report.name: report for report in reports}
        new = [report for name, report in wanted.items() if self._reported.get(name) != report]
        self._reported = wanted
        slots = asyncio.Semaphore(EVENTS_AT_ONCE)

        async def post(report: Report) -> None:
            target = {
                "apiVersion": VOLCANO_API_VERSION, "kind": "Queue",
                "name": report.name, "uid": report.uid,
            }  # fmt: skip
            async with slots:
                await self._writer.event(target, report.reason, report.message, warning=True)

        await asyncio.gather(*(post(report) for report in new))


def _verb(write: MirrorWrite) -> str:
    return {Create: "create", Patch: "patch", Delete: "delete"}[type(write)]
