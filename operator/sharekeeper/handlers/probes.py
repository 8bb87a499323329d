"""``/healthz`` and ``/readyz`` on the liveness port.

- ``/healthz`` (liveness): 200 with the loops' counters while every loop and watch task runs
  and no loop is stale (``loops.health``: failing, or stuck in one round, for several of its
  intervals); 500 naming the task that stopped or why the loop is stale, so the kubelet
  restarts a process that only pretends to work. Also 500 (``degraded``) while statuses have
  not been written for longer than ``loops.health.FAILING_UNHEALTHY_SECONDS``, naming how many
  and since when: rounds that succeed but publish nothing are no better.
- ``/readyz`` (readiness): 200 once every initial list is in the store and the admission
  webhook's process (if this replica serves one) listens; 503 before, with which lists are
  still missing and whether the webhook listens (the Service sends reviews to ready replicas
  only). A replica that is not ready has computed nothing yet. A resource that is not served
  (a deleted CRD) has nothing to list and does not hold readiness back: the body names it
  under ``notServed`` (a cluster without the CRD is not fixed by another replica).
  ``leader`` says whether this replica acts; one that waits for the Lease is ready too: it
  keeps its store current so that it can take over within one round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from aiohttp import web

from sharekeeper.kube.watching import ListWatch, all_synced
from sharekeeper.loops.health import LoopHealth


class Probes:
    def __init__(
        self,
        tasks: Sequence[asyncio.Task[None]],
        watches: Mapping[str, ListWatch],
        counters: Callable[[], Mapping[str, int]],
        loops: Sequence[LoopHealth] = (),
        leading: Callable[[], bool] = lambda: True,
        *,
        listening: Mapping[str, asyncio.Event] = MappingProxyType({}),
    ) -> None:
        self._tasks = tasks
        self._watches = watches
        self._counters = counters
        self._loops = loops
        self._leading = leading
        self._listening = listening
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/readyz", self._ready)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _health(self, _: web.Request) -> web.Response:
        stopped = [task.get_name() for task in self._tasks if task.done()]
        if stopped:
            return web.json_response({"stopped": stopped}, status=500)
        stale = [reason for loop in self._loops if (reason := loop.stale()) is not None]
        if stale:
            return web.json_response({"stale": stale}, status=500)
        degraded = [reason for loop in self._loops if (reason := loop.degraded()) is not None]
        if degraded:
            return web.json_response({"degraded": degraded, **self._counters()}, status=500)
        return web.json_response(dict(self._counters()))

    async def _ready(self, _: web.Request) -> web.Response:
        lists = {name: watch.synced.is_set() for name, watch in self._watches.items()}
        listening = {name: event.is_set() for name, event in self._listening.items()}
        ready = all_synced(self._watches.values()) and all(listening.values())
        # A resource not needed now (Volcano Queues without a queueSource Volcano policy) was
        # not looked for: not "not served".
        not_served = [
            name for name, watch in self._watches.items() if not watch.served and watch.wanted
        ]
        body: dict[str, Any] = {
            "ready": ready,
            "leader": self._leading(),
            "lists": lists,
            "notServed": not_served,
            "listening": listening,
        }
        return web.json_response(body, status=200 if ready else 503)
