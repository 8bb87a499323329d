"""The outbox: the newest write per object, urgent ones first, nothing sent that a newer round
no longer wants, and a failed send reported so that a round wants it again."""

from __future__ import annotations

import asyncio
import logging

import httpx2 as httpx
import pytest

from builders import node, pod, policy, queue
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.loops.outbox import Outbox
from sharekeeper.loops.recompute import Recompute
from sharekeeper.model.objects import MutableObj
from sharekeeper.publish.statuses import Kind
from sharekeeper.settings import LoopSettings


class Sender:
    def __init__(self, fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.sent: list[str] = []
        self.fail = fail
        self.failures = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def send(self, write: str) -> None:
        await self.gate.wait()
        if write in self.fail:
            raise RuntimeError(f"refused {write}")
        self.sent.append(write)

    def failed(self) -> None:
        self.failures += 1


def test_urgent_writes_go_first_and_each_object_once() -> None:
    async def scenario() -> list[str]:
        sender = Sender()
        outbox: Outbox[str, str] = Outbox(sender.send, sender.failed, workers=1)
        outbox.replace({"a": "a1", "b": "b1", "c": "c1", "z": "z1"}, urgent=frozenset({"z"}))
        await outbox.drained()
        await outbox.close()
        return sender.sent

    assert asyncio.run(scenario()) == ["z1", "a1", "b1", "c1"]


def test_a_newer_round_replaces_what_is_still_pending() -> None:
    async def scenario() -> list[str]:
        sender = Sender()
        sender.gate.clear()  # the first write stays in flight until the second round
        outbox: Outbox[str, str] = Outbox(sender.send, sender.failed, workers=1)
        outbox.replace({"a": "a1", "b": "b1", "c": "c1"})
        await asyncio.sleep(0)  # the worker takes a1 and waits at the gate
        # The newer round wants b changed differently, c no more (already right), d new.
        outbox.replace({"b": "b2", "d": "d2"})
        assert outbox.pending == 3  # a1 in flight, b2 and d2 waiting
        sender.gate.set()
        await outbox.drained()
        await outbox.close()
        return sender.sent

    assert asyncio.run(scenario()) == ["a1", "b2", "d2"]


def test_what_is_sent_first_goes_before_what_was_pending_and_once() -> None:
    async def scenario() -> list[str]:
        sender = Sender()
        sender.gate.clear()
        outbox: Outbox[str, str] = Outbox(sender.send, sender.failed, workers=1)
        outbox.replace({"a": "a1", "b": "b1"})  # the last round's, a1 taken and in flight
        await asyncio.sleep(0)
        outbox.send_first({"x": "x2", "y": "y2"})  # this round's, before it is done
        # The round done: b no more, c new; x and y were handed over already.
        outbox.replace({"c": "c2"}, first={"x", "y"})
        assert outbox.pending == 4  # a1 in flight, x2, y2 and c2 waiting
        sender.gate.set()
        await outbox.drained()
        await outbox.close()
        return sender.sent

    assert asyncio.run(scenario()) == ["a1", "x2", "y2", "c2"]


def test_a_failed_send_is_reported_and_does_not_stop_the_others() -> None:
    async def scenario() -> Sender:
        sender = Sender(fail={"b1"})
        outbox: Outbox[str, str] = Outbox(sender.send, sender.failed, workers=2)
        outbox.replace({"a": "a1", "b": "b1", "c": "c1"})
        await outbox.drained()
        await outbox.close()
        return sender

    sender = asyncio.run(scenario())
    assert sorted(sender.sent) == ["a1", "c1"]
    assert sender.failures == 1


class FailingOnceWriter:
    """Stores status and annotation patches; the first patch of ``fail`` raises, as a write
    whose retries ran out does."""

    def __init__(self, fail: tuple[str, str], times: int = 1) -> None:
        self.fail: tuple[str, str] | None = fail
        self.times = times
        self.patched: list[tuple[str, str]] = []
        self.stored: dict[tuple[str, str], MutableObj] = {}

    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
        self._maybe_fail(kind, name)
        self.patched.append((kind, name))
        self.stored[(kind, name)] = {**self.stored.get((kind, name), {}), **patch}
        return self.stored[(kind, name)]

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        self._maybe_fail("Node", name)
        self.patched.append(("Node", name))
        return {k: v for k, v in patch.items() if v is not None}

    def _maybe_fail(self, kind: str, name: str) -> None:
        if (kind, name) == self.fail:
            self.times -= 1
            if self.times == 0:
                self.fail = None
            request = httpx.Request("PATCH", f"https://127.0.0.1/{kind}/{name}")
            response = httpx.Response(503, text="overloaded", request=request)
            raise httpx.HTTPStatusError("503 after every retry", request=request, response=response)

    async def event(
        self, target: dict[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        pass


@pytest.mark.timeout(10)
def test_a_write_that_failed_is_sent_again_by_the_next_round_and_only_it() -> None:
    """Through the recompute loop: the other writes of the round land once; the failed one
    makes a round come back for it, which sends it, and nothing else, once."""
    store = ClusterStore()
    store.load(
        [
            node("n1", cpu="8", memory="16Gi"),
            pod("p1", "a", node="n1", cpu="2", memory="4Gi"),
            queue("a"), queue("b"), queue("c"), policy("all"),
        ]
    )  # fmt: skip
    writer = FailingOnceWriter(fail=("Queue", "b"))
    settings = LoopSettings(quiet_seconds=0.01, max_delay_seconds=0.05, error_backoff_seconds=0.05)
    loop = Recompute(writer, store, settings)

    async def scenario() -> None:
        loop.store_synced.set()
        running = asyncio.create_task(loop.run())
        while ("Queue", "b") not in writer.patched:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # several quiet periods: any further write would show
        await loop.written()
        running.cancel()

    asyncio.run(scenario())
    assert sorted(writer.patched) == [
        ("Node", "n1"), ("Queue", "a"), ("Queue", "b"), ("Queue", "c"), ("SchedulerPolicy", "all"),
    ]  # fmt: skip
    assert writer.patched[-1] == ("Queue", "b")


@pytest.mark.timeout(10)
def test_a_node_annotation_that_keeps_failing_is_said_once_and_written_when_it_can(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: every failed annotation write logged a traceback, every round, for as long as
    the node refused it."""
    store = ClusterStore()
    store.load([node("n1", cpu="8", memory="16Gi"), queue("a"), policy("all")])
    writer = FailingOnceWriter(fail=("Node", "n1"), times=3)
    settings = LoopSettings(quiet_seconds=0.01, max_delay_seconds=0.05, error_backoff_seconds=0.05)
    loop = Recompute(writer, store, settings)

    async def scenario() -> None:
        loop.store_synced.set()
        running = asyncio.create_task(loop.run())
        while ("Node", "n1") not in writer.patched:
            await asyncio.sleep(0.01)
        await loop.written()
        running.cancel()

    with caplog.at_level(logging.INFO, logger="sharekeeper.loops.recompute"):
        asyncio.run(scenario())
    failed = [r for r in caplog.records if "annotations not written" in r.getMessage()]
    assert len(failed) == 1, "three failures in a row, said once"
    assert not failed[0].exc_info, "an API server's answer needs no traceback"
    assert any("annotations written again" in r.getMessage() for r in caplog.records)
    assert writer.patched.count(("Node", "n1")) == 1
