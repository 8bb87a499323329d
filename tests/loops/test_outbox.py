"""The outbox: the newest write per object, urgent ones first, nothing sent that a newer round
no longer wants, and a failed send reported so that a round wants it again."""

from __future__ import annotations

import asyncio

from sharekeeper.loops.outbox import Outbox


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
