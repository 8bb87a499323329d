"""The start-up barrier (``runtime._synced``): the loops start once every initial list is in, and
the cyclic garbage collector stays off while the lists are read, never longer."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from sharekeeper import runtime


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    yield
    gc.enable()
    gc.unfreeze()


def parts(watches: int = 2) -> tuple[list[Any], list[Any], asyncio.Event, Any]:
    listed = [SimpleNamespace(synced=asyncio.Event()) for _ in range(watches)]
    loops = [SimpleNamespace(store_synced=asyncio.Event())]
    volcano = SimpleNamespace(reconsider=lambda: None)
    return listed, loops, asyncio.Event(), volcano


def test_the_collector_is_off_while_the_lists_are_read_and_frozen_out_of_after() -> None:
    asyncio.run(lists_read())


async def lists_read() -> None:
    watches, loops, policies_listed, volcano = parts()
    barrier = asyncio.create_task(runtime._synced(watches, loops, policies_listed, volcano))
    await asyncio.sleep(0)
    assert not gc.isenabled()
    policies_listed.set()
    watches[0].synced.set()
    await asyncio.sleep(0.01)
    assert not gc.isenabled()
    assert not loops[0].store_synced.is_set()
    watches[1].synced.set()
    await barrier
    assert gc.isenabled()
    assert loops[0].store_synced.is_set()
    assert gc.get_freeze_count() > 0


def test_a_list_that_never_completes_leaves_the_collector_off_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "COLLECTOR_OFF_AT_MOST_SECONDS", 0.05)
    asyncio.run(list_never_completes())


async def list_never_completes() -> None:
    watches, loops, policies_listed, volcano = parts()
    barrier = asyncio.create_task(runtime._synced(watches, loops, policies_listed, volcano))
    await asyncio.sleep(0.01)
    assert not gc.isenabled()
    await asyncio.sleep(0.1)
    assert gc.isenabled()
    assert not barrier.done()
    barrier.cancel()
    with pytest.raises(asyncio.CancelledError):
        await barrier


def test_stopping_before_the_lists_are_in_turns_the_collector_back_on() -> None:
    asyncio.run(stopped_early())


async def stopped_early() -> None:
    watches, loops, policies_listed, volcano = parts()
    barrier = asyncio.create_task(runtime._synced(watches, loops, policies_listed, volcano))
    await asyncio.sleep(0)
    assert not gc.isenabled()
    barrier.cancel()
    with pytest.raises(asyncio.CancelledError):
        await barrier
    assert gc.isenabled()
    assert not loops[0].store_synced.is_set()
