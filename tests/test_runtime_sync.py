"""The start-up barrier (``runtime._synced``): the loops start once every initial list is in, the
cyclic garbage collector stays off while the lists are read, never longer, and what the lists
and then the first round leave is frozen out of its way."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace

import pytest

from sharekeeper import runtime

pytestmark = pytest.mark.usefixtures("collector_restored")


class Barrier:
    """``runtime._synced`` started on two watches that have not listed yet."""

    def __init__(self) -> None:
        self.watches = [SimpleNamespace(synced=asyncio.Event()) for _ in range(2)]
        self.loop = SimpleNamespace(store_synced=asyncio.Event())
        self.policies_listed = asyncio.Event()
        self.first_round = asyncio.Event()
        volcano = SimpleNamespace(reconsider=lambda: None)
        self.task = asyncio.create_task(
            runtime._synced(
                self.watches, [self.loop], self.policies_listed, volcano, self.first_round
            )
        )

    async def stop(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


def test_the_collector_is_off_while_the_lists_are_read_and_frozen_out_of_after() -> None:
    asyncio.run(lists_read())


async def lists_read() -> None:
    barrier = Barrier()
    await asyncio.sleep(0)
    assert not gc.isenabled()
    barrier.policies_listed.set()
    barrier.watches[0].synced.set()
    await asyncio.sleep(0.01)
    assert not gc.isenabled()
    assert not barrier.loop.store_synced.is_set()
    barrier.watches[1].synced.set()
    await asyncio.sleep(0.01)
    assert gc.isenabled()
    assert barrier.loop.store_synced.is_set()
    assert gc.get_freeze_count() > 0
    # What the first round keeps (each queue's series and rendered status) is frozen too.
    kept = [[index] for index in range(10)]
    assert not barrier.task.done()
    assert any(obj is kept[0] for obj in gc.get_objects()), "not frozen before the round"
    barrier.first_round.set()
    await barrier.task
    walked = gc.get_objects()  # what the collector walks: frozen objects are not in it
    assert not any(obj is piece for obj in walked for piece in kept)


def test_a_list_that_never_completes_leaves_the_collector_off_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "COLLECTOR_OFF_AT_MOST_SECONDS", 0.05)
    asyncio.run(list_never_completes())


async def list_never_completes() -> None:
    barrier = Barrier()
    await asyncio.sleep(0.01)
    assert not gc.isenabled()
    await asyncio.sleep(0.1)
    assert gc.isenabled()
    assert not barrier.task.done()
    await barrier.stop()


def test_stopping_before_the_lists_are_in_turns_the_collector_back_on() -> None:
    asyncio.run(stopped_early())


async def stopped_early() -> None:
    barrier = Barrier()
    await asyncio.sleep(0)
    assert not gc.isenabled()
    await barrier.stop()
    assert gc.isenabled()
    assert not barrier.loop.store_synced.is_set()
