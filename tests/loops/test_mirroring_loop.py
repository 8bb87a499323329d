"""The mirroring loop against a recording API server: when it acts at all, the writes it sends,
the ones it does not send twice, and the Events it posts once."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import pytest

from builders import policy
from sharekeeper.api.mirroring import QueueOrigin
from sharekeeper.cluster.store import ClusterStore, Listeners
from sharekeeper.loops.mirroring import Mirroring
from sharekeeper.model.objects import MutableObj
from sharekeeper.publish.diffing import merge_patch
from sharekeeper.settings import LoopSettings

FAST = LoopSettings(quiet_seconds=0.01, max_delay_seconds=0.05, error_backoff_seconds=0.05)


def refusal(code: int, message: str) -> httpx.HTTPStatusError:
    request = httpx.Request("PATCH", "https://127.0.0.1/apis")
    response = httpx.Response(code, json={"kind": "Status", "message": message}, request=request)
    return httpx.HTTPStatusError(message, request=request, response=response)


class ApiServer:
    """Keeps the Queues it is sent (adding the CRD's defaults, a uid and a resourceVersion) and
    records every write; ``refuse`` makes the next writes of a name fail."""

    def __init__(self, events: list[tuple[str, str, str]]) -> None:
        self.events = events
        self.queues: dict[str, MutableObj] = {}
        self.writes: list[tuple[str, str]] = []
        self.refuse: dict[str, httpx.HTTPStatusError] = {}
        self._versions = itertools.count(100)

    def _stamp(self, obj: MutableObj) -> MutableObj:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        obj["spec"] = {"priority": 0, "reclaimable": True, "state": "Open", **obj["spec"]}
        return obj

    def _check(self, name: str) -> None:
        if name in self.refuse:
            raise self.refuse[name]

    async def create_queue(self, body: MutableObj) -> MutableObj | None:
        name = body["metadata"]["name"]
        self.writes.append(("create", name))
        self._check(name)
        if name in self.queues:
            return None
        obj = self._stamp({**body, "metadata": {**body["metadata"], "uid": f"mirror-{name}"}})
        self.queues[name] = obj
        return obj

    async def patch_queue(self, name: str, body: MutableObj) -> MutableObj | None:
        self.writes.append(("patch", name))
        self._check(name)
        current = self.queues.get(name)
        if current is None or current["metadata"]["uid"] != body["metadata"]["uid"]:
            return None
        patched = _merge(current, body)
        self.queues[name] = self._stamp(patched)
        return self.queues[name]

    async def event(
        self, target: Mapping[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        assert warning
        self.events.append((target["name"], reason, message))

    async def delete_queue(self, name: str, uid: str) -> bool:
        self.writes.append(("delete", name))
        self._check(name)
        current = self.queues.get(name)
        if current is None or current["metadata"]["uid"] != uid:
            return False
        del self.queues[name]
        return True


def _merge(current: MutableObj, patch: MutableObj) -> MutableObj:
    """RFC 7386 applied: ``patch`` onto ``current``."""
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass
class Watch:
    listed: bool = True


@dataclass
class Setup:
    loop: Mirroring
    store: ClusterStore
    server: ApiServer
    events: list[tuple[str, str, str]]
    watch: Watch

    def volcano(self, *queues: MutableObj) -> None:
        """A complete list of Volcano Queues."""
        volcano = self.store.volcano_queues
        volcano.list_started()
        volcano.listed([dict(queue) for queue in queues])
        volcano.list_finished()

    def echo(self) -> None:
        """The watch shows the API server's Queues."""
        queues = self.store.queues
        for name in list(queues.origins):
            if name not in self.server.queues:
                queues.event("DELETED", {"metadata": {"name": name}})
        for obj in self.server.queues.values():
            queues.event("MODIFIED", obj)

    async def round(self) -> list[tuple[str, str]]:
        """One round; the writes it sent."""
        before = len(self.server.writes)
        await self.loop.mirror()
        return self.server.writes[before:]


def volcano_queue(name: str, uid: str | None = None, **spec: Any) -> MutableObj:
    return {"metadata": {"name": name, "uid": uid or f"uid-{name}"}, "spec": spec}


def setup(*, queue_source: str = "Volcano", listed: bool = True) -> Setup:
    loops: list[Mirroring] = []

    def origin_seen(name: str, old: QueueOrigin | None, new: QueueOrigin | None) -> None:
        loops[0].origin_seen(name, old, new)

    def mirror() -> None:
        loops[0].wake()

    store = ClusterStore(Listeners(origin=origin_seen, mirror=mirror))
    source = policy("volcano")
    source["spec"]["queueSource"] = queue_source
    store.load([source])
    events: list[tuple[str, str, str]] = []
    server = ApiServer(events)
    watch = Watch(listed)
    loop = Mirroring(server, store, watch, settings=FAST, clock=lambda: 0.0)
    loops.append(loop)
    return Setup(loop, store, server, events, watch)


def test_nothing_is_mirrored_without_a_volcano_policy_or_a_complete_list() -> None:
    async def scenario() -> None:
        for ready in (setup(queue_source="Sharekeeper"), setup(listed=False)):
            ready.volcano(volcano_queue("a"))
            assert await ready.loop.mirror() is None
            assert ready.server.writes == []

    asyncio.run(scenario())


def test_each_write_is_sent_once_before_and_after_its_echo() -> None:
    async def scenario() -> None:
        ready = setup()
        ready.volcano(volcano_queue("a", weight=2), volcano_queue("b"))
        assert await ready.round() == [("create", "a"), ("create", "b")]
        assert await ready.round() == []  # the watch has not shown them yet
        ready.echo()
        assert await ready.round() == []
        ready.volcano(volcano_queue("a", weight=3), volcano_queue("b"))
        assert await ready.round() == [("patch", "a")]
        assert await ready.round() == []
        ready.echo()
        assert ready.server.queues["a"]["spec"]["weight"] == 3
        ready.volcano(volcano_queue("b"))
        assert await ready.round() == [("delete", "a")]
        assert await ready.round() == []
        ready.echo()
        assert await ready.round() == []
        assert sorted(ready.server.queues) == ["b"]

    asyncio.run(scenario())


def test_a_hand_edit_wakes_the_loop_and_is_put_back_but_a_status_write_does_not() -> None:
    async def scenario() -> None:
        ready = setup()
        ready.volcano(volcano_queue("a", weight=2))
        await ready.round()
        ready.echo()
        ready.loop._woken.clear()
        status_written = dict(ready.server.queues["a"])
        status_written["metadata"] = {**status_written["metadata"], "resourceVersion": "900"}
        status_written["status"] = {"deserved": {"cpu": "1"}}
        ready.store.queues.event("MODIFIED", status_written)
        assert not ready.loop._woken.is_set()
        edited = {**status_written, "spec": {**status_written["spec"], "weight": 9}}
        edited["metadata"] = {**edited["metadata"], "resourceVersion": "901"}
        ready.store.queues.event("MODIFIED", edited)
        assert ready.loop._woken.is_set()
        ready.server.queues["a"] = edited
        assert await ready.round() == [("patch", "a")]
        assert ready.server.queues["a"]["spec"]["weight"] == 2

    asyncio.run(scenario())


def test_a_refused_write_is_not_sent_again_until_something_else_is_wanted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        ready = setup()
        ready.server.refuse["a"] = refusal(422, "spec.weight: Invalid value")
        ready.volcano(volcano_queue("a", weight=2))
        assert await ready.round() == [("create", "a")]
        assert await ready.round() == []
        ready.volcano(volcano_queue("a", weight=3))
        assert await ready.round() == [("create", "a")]
        del ready.server.refuse["a"]
        ready.volcano(volcano_queue("a", weight=4))
        assert await ready.round() == [("create", "a")]
        assert ready.server.queues["a"]["spec"]["weight"] == 4

    asyncio.run(scenario())
    assert "the API server refused to create it (422): spec.weight: Invalid value" in caplog.text


def test_a_write_that_failed_for_now_is_tried_again_by_a_later_round() -> None:
    async def scenario() -> None:
        ready = setup()
        ready.server.refuse["a"] = refusal(503, "unavailable")
        ready.volcano(volcano_queue("a"))
        ready.loop._woken.clear()
        assert await ready.round() == [("create", "a")]
        await asyncio.wait_for(ready.loop._woken.wait(), timeout=5)  # a round is scheduled
        del ready.server.refuse["a"]
        assert await ready.round() == [("create", "a")]

    asyncio.run(scenario())


def test_conflicts_and_refusals_are_told_on_the_volcano_queue_once() -> None:
    async def scenario() -> None:
        ready = setup()
        ready.store.queues.event(
            "ADDED", {"metadata": {"name": "made", "uid": "u1"}, "spec": {"weight": 1}}
        )
        ready.volcano(volcano_queue("made"), volcano_queue("bad", weight=0))
        assert await ready.round() == []
        assert sorted((name, reason) for name, reason, _ in ready.events) == [
            ("bad", "NotMirrored"), ("made", "MirrorConflict"),
        ]  # fmt: skip
        await ready.round()
        assert len(ready.events) == 2
        ready.volcano(volcano_queue("made"), volcano_queue("bad", weight=1))
        assert await ready.round() == [("create", "bad")]
        ready.volcano(volcano_queue("made"), volcano_queue("bad", weight=0))
        await ready.round()
        assert [reason for _, reason, _ in ready.events[2:]] == ["NotMirrored"]

    asyncio.run(scenario())


def test_the_loop_runs_its_rounds_when_woken() -> None:
    async def scenario() -> None:
        ready = setup()
        ready.volcano(volcano_queue("a"))
        running = asyncio.create_task(ready.loop.run())
        ready.loop.store_synced.set()
        try:
            for _ in range(200):
                if ready.server.queues:
                    break
                await asyncio.sleep(0.01)
            assert sorted(ready.server.queues) == ["a"]
            ready.echo()
            ready.volcano()
            for _ in range(200):
                if not ready.server.queues:
                    break
                await asyncio.sleep(0.01)
            assert ready.server.queues == {}
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    asyncio.run(scenario())


def test_merge_patches_of_the_stand_in_match_the_real_diff() -> None:
    """The stand-in applies merge patches as RFC 7386 says (checked against ``merge_patch``)."""
    current = {"a": 1, "b": {"c": 2, "d": 3}}
    desired = {"a": 1, "b": {"c": 5}, "e": 6}
    assert _merge(current, merge_patch(current, desired)) == desired
