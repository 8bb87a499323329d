"""A watch that runs only while it is wanted (Volcano Queues, while a SchedulerPolicy has
``queueSource: Volcano``): nothing is asked of the API server before, the store is emptied
when it stops being wanted, and an open watch ends at once then."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import httpx2 as httpx
import pytest
from test_watching import (
    SETTINGS,
    FakeApiServer,
    Reply,
    StoreSink,
    discovery,
    list_request,
    page,
    request_key,
    stream,
    watch_request,
)

from fake_api import streams_through
from sharekeeper.kube.kinds import VOLCANO_QUEUES
from sharekeeper.kube.watching import ListWatch

DISCOVERY = request_key(VOLCANO_QUEUES.group_path)


def queue(name: str, rv: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{check} stayed false")


def scenario(
    script: list[tuple[str, Reply]],
    steps: Callable[[ListWatch, StoreSink, FakeApiServer, list[bool | None]], Awaitable[None]],
) -> None:
    async def main() -> None:
        server = FakeApiServer(script)
        sink = StoreSink()
        wanted: list[bool | None] = [None]

        async def sleep(_: float) -> None:
            await asyncio.sleep(0)

        transport = httpx.MockTransport(server.handle)
        async with httpx.AsyncClient(transport=transport, base_url="https://127.0.0.1") as http:
            watch = ListWatch(
                http,
                VOLCANO_QUEUES,
                sink,
                SETTINGS,
                streams=streams_through(http),
                sleep=sleep,
                wanted=lambda: wanted[0],
            )
            sink.watch = watch
            running = asyncio.create_task(watch.run())
            try:
                await steps(watch, sink, server, wanted)
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)

    asyncio.run(main())


def test_nothing_is_asked_while_not_known_then_not_wanted() -> None:
    async def steps(
        watch: ListWatch, sink: StoreSink, server: FakeApiServer, wanted: list[bool | None]
    ) -> None:
        await asyncio.sleep(0.01)
        assert not watch.synced.is_set()  # not known yet: nothing to say
        assert sink.calls == []
        wanted[0] = False
        watch.reconsider()
        await until(watch.synced.is_set)  # nothing to wait for
        assert not watch.wanted
        assert not watch.listed
        assert server.requests == []

    scenario([], steps)


def test_once_wanted_it_lists_and_watches_and_once_unwanted_it_stops_and_empties() -> None:
    script: list[tuple[str, Reply]] = [
        (DISCOVERY, discovery("queues")),
        (list_request(VOLCANO_QUEUES), page([queue("a", "5")], "10")),
    ]

    async def steps(
        watch: ListWatch, sink: StoreSink, server: FakeApiServer, wanted: list[bool | None]
    ) -> None:
        wanted[0] = True
        watch.reconsider()
        await until(lambda: server.held_open is not None)  # listed, watching
        assert watch.listed
        assert sink.store.keys() == {"a"}
        held = server.held_open
        assert held is not None
        wanted[0] = False
        watch.reconsider()
        await until(lambda: held.closed)  # the open watch ended at once
        await until(lambda: not sink.store)
        assert not watch.listed
        # Wanted again: discovery first, then a fresh list.
        server.held_open = None
        server.done.clear()
        server.script += [
            (DISCOVERY, discovery("queues")),
            (list_request(VOLCANO_QUEUES), page([queue("b", "15")], "20")),
            (watch_request("20", VOLCANO_QUEUES), stream()),
        ]
        wanted[0] = True
        watch.reconsider()
        await until(lambda: sink.store.keys() == {"b"})
        assert watch.listed
        assert server.unexpected == []

    scenario(script, steps)


def test_wanted_where_the_crd_is_missing_says_so_once_and_lists_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script: list[tuple[str, Reply]] = [
        (DISCOVERY, httpx.Response(404, json={"kind": "Status", "code": 404})),
        (DISCOVERY, httpx.Response(404, json={"kind": "Status", "code": 404})),
    ]

    async def steps(
        watch: ListWatch, sink: StoreSink, server: FakeApiServer, wanted: list[bool | None]
    ) -> None:
        wanted[0] = False
        watch.reconsider()
        await until(watch.synced.is_set)
        caplog.clear()
        wanted[0] = True
        watch.reconsider()
        await until(lambda: len(server.requests) >= 2)
        assert not watch.served
        assert not watch.listed
        assert sink.store == {}

    with caplog.at_level(logging.INFO, logger="sharekeeper.kube.watching"):
        scenario(script, steps)
    said = [r.getMessage() for r in caplog.records if "not served" in r.getMessage()]
    assert said == [
        "queues.scheduling.volcano.sh: not served (its CRD is not installed); checking every 30s"
    ]
