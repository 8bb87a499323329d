"""The Event recorder against a fake Events API: what it creates, patches and holds back."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import REGISTRY

from fake_api import Call, FakeApi, refused
from sharekeeper.kube.events import EventRecorder
from sharekeeper.kube.transport import JSON, MERGE_PATCH
from sharekeeper.kube.writing import KubeWriter
from sharekeeper.settings import EventLimits

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
POD = {"apiVersion": "v1", "kind": "Pod", "name": "batch-1", "namespace": "team", "uid": "u1"}
NODE = {"apiVersion": "v1", "kind": "Node", "name": "worker-1"}
REFUSED = "evict team/batch-1 on worker-1 for cpu_total_usage: 429: disruption budget"


@dataclass(eq=False)
class FakeEventsApi:
    """Events by (namespace, name) behind the Events API's paths; a patch of an Event it does
    not hold is a 404."""

    events: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    patches: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    refuse_with: int | None = None

    def answer(self, call: Call) -> Any:
        parts = call.path.split("/")  # "", "api", "v1", "namespaces", <ns>, "events"[, <name>]
        assert parts[:4] == ["", "api", "v1", "namespaces"]
        assert parts[5] == "events"
        namespace = parts[4]
        if call.method == "POST":
            assert len(parts) == 6
            assert call.content_type == JSON
            name = f"{call.body['metadata']['generateName']}{len(self.calls)}"
            self.calls.append(("create", name))
            if self.refuse_with is not None:
                raise refused(self.refuse_with)
            assert call.body["metadata"]["namespace"] == namespace
            self.events[namespace, name] = dict(call.body)
            return {"metadata": {"name": name, "namespace": namespace}}
        assert call.method == "PATCH"
        assert len(parts) == 7
        name = parts[6]
        self.calls.append(("patch", name))
        self.patches.append((call.body, call.content_type))
        if (namespace, name) not in self.events:
            raise refused(404)
        self.events[namespace, name].update(call.body)
        return self.events[namespace, name]

    def api(self) -> FakeApi:
        return FakeApi(answer=self.answer)

    def only_event(self) -> dict[str, Any]:
        (event,) = self.events.values()
        return event


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def recorder(api: FakeEventsApi, clock: Clock, **limits: Any) -> EventRecorder:
    return EventRecorder(api.api().as_api(), EventLimits(**limits), clock=clock)


def post(events: EventRecorder, *posts: tuple[dict[str, str], str]) -> None:
    """Each (target, message) in turn, as reason ``EvictedRefused``."""

    async def posting() -> None:
        for target, message in posts:
            await events.post(target, "EvictedRefused", message, warning=True)

    asyncio.run(posting())


def writes(outcome: str) -> float:
    labels = {"kind": "Event", "outcome": outcome}
    return REGISTRY.get_sample_value("sharekeeper_writes_total", labels) or 0.0


def test_the_first_event_is_created_with_what_kubectl_describe_shows() -> None:
    api, clock = FakeEventsApi(), Clock()
    post(recorder(api, clock), (POD, REFUSED))
    event = api.only_event()
    assert event["metadata"] == {"generateName": "batch-1.", "namespace": "team"}
    assert event["involvedObject"] == {
        "apiVersion": "v1", "kind": "Pod", "name": "batch-1", "namespace": "team", "uid": "u1",
    }  # fmt: skip
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning", "EvictedRefused", REFUSED,
    )  # fmt: skip
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["source"] == {"component": "sharekeeper"}


def test_events_on_cluster_scoped_objects_go_to_the_default_namespace() -> None:
    api, clock = FakeEventsApi(), Clock()
    post(recorder(api, clock), (NODE, REFUSED))
    assert list(api.events) == [("default", "worker-1.0")]
    assert "namespace" not in api.only_event()["involvedObject"]


def test_a_repeat_is_one_create_and_a_merge_patch_of_count_and_last_timestamp() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock)
    post(events, (POD, REFUSED))
    clock.now += 10
    post(events, (POD, REFUSED))
    assert api.calls == [("create", "batch-1.0"), ("patch", "batch-1.0")]
    assert api.patches == [({"count": 2, "lastTimestamp": "2026-01-01T00:00:10Z"}, MERGE_PATCH)]
    event = api.only_event()
    assert (event["count"], event["firstTimestamp"]) == (2, "2026-01-01T00:00:00Z")


def test_another_message_type_reason_or_uid_is_another_event() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock)
    recreated = {**POD, "uid": "u2"}  # same name, another object
    post(events, (POD, REFUSED), (POD, REFUSED + " again"), (recreated, REFUSED))
    asyncio.run(events.post(POD, "EvictedRefused", REFUSED, warning=False))
    asyncio.run(events.post(POD, "Evicted", REFUSED, warning=True))
    assert [verb for verb, _ in api.calls] == ["create"] * 5


def test_a_repeat_after_the_window_is_a_new_event() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock)
    post(events, (POD, REFUSED))
    clock.now += 600
    post(events, (POD, REFUSED))  # within 10 minutes of the last write
    clock.now += 601
    post(events, (POD, REFUSED))
    assert [verb for verb, _ in api.calls] == ["create", "patch", "create"]


def test_a_repeat_of_an_event_that_expired_is_created_anew() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock)
    post(events, (POD, REFUSED))
    api.events.clear()  # the API server's event TTL (1 h by default) ran out
    post(events, (POD, REFUSED), (POD, REFUSED))
    assert api.calls == [
        ("create", "batch-1.0"), ("patch", "batch-1.0"), ("create", "batch-1.2"),
        ("patch", "batch-1.2"),
    ]  # fmt: skip
    assert api.only_event()["count"] == 2


def test_only_the_most_recent_events_are_remembered() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock, remembered=2)
    post(events, (POD, "a"), (POD, "b"), (POD, "c"))  # "a" is forgotten
    post(events, (POD, "c"), (POD, "a"))
    assert [verb for verb, _ in api.calls] == ["create", "create", "create", "patch", "create"]


def test_an_object_gets_a_burst_of_writes_then_one_per_refill() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock, burst=3, refill_seconds=300)
    suppressed = writes("suppressed")
    post(events, *[(POD, REFUSED)] * 10)
    assert [verb for verb, _ in api.calls] == ["create", "patch", "patch"]
    assert writes("suppressed") - suppressed == 7
    post(events, (NODE, REFUSED))  # every object has a budget of its own
    assert api.calls[-1] == ("create", "worker-1.3")

    clock.now += 300
    post(events, (POD, REFUSED), (POD, REFUSED))
    assert [verb for verb, _ in api.calls[4:]] == ["patch"]
    assert api.patches[-1][0]["count"] == 11  # the repeats held back still count


def test_a_refusal_at_every_qos_check_for_a_day_is_one_event_and_few_writes() -> None:
    api, clock = FakeEventsApi(), Clock()
    events = recorder(api, clock)
    checks = 24 * 360  # every 10 s

    async def checking() -> None:
        for _ in range(checks):
            await events.post(POD, "EvictedRefused", REFUSED, warning=True)
            clock.now += 10

    asyncio.run(checking())
    assert [verb for verb, _ in api.calls].count("create") == 1
    assert len(api.calls) <= 25 + 24 * 12 + 1  # the burst, then one every 5 minutes
    assert api.only_event()["count"] > checks - 30  # all but the last few held back


def test_a_failure_is_logged_and_counted_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = FakeEventsApi(refuse_with=403), Clock()
    errors = writes("error")
    with caplog.at_level(logging.WARNING):
        post(recorder(api, clock), (POD, REFUSED))
    assert writes("error") - errors == 1
    assert "could not post event EvictedRefused on batch-1" in caplog.text


def test_every_event_of_the_writer_shares_one_recorder() -> None:
    """The loops' Events all go through the one writer: a repeat from another caller is
    counted into the same Event, not created again."""
    api = FakeEventsApi()
    writer = KubeWriter(api.api().as_api())

    async def posting() -> None:
        for _ in range(2):  # the QoS check, then the recompute loop, say
            await writer.event(POD, "EvictedRefused", REFUSED, warning=True)

    asyncio.run(posting())
    assert [call for call, _ in api.calls] == ["create", "patch"]
    assert api.only_event()["count"] == 2
