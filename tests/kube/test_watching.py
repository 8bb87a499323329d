"""The list-then-watch against a scripted fake API server: what ends up in the store, and when.

Each test scripts the server's answers in order, each keyed by the request it must answer. The
watch runs until the script is used up; the server then holds the next request open (a watch
that never ends), and the watch is cancelled. Sleeps are recorded, not slept; jitter is 1.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import httpx2 as httpx
import pytest
from prometheus_client import REGISTRY

from fake_api import streams_through
from sharekeeper.kube.clients import connect
from sharekeeper.kube.kinds import PODGROUPS, QUEUES, Resource
from sharekeeper.kube.watching import ListWatch, all_synced
from sharekeeper.model.objects import MutableObj
from sharekeeper.settings import WatchSettings

Reply = httpx.Response | Exception

PODS = Resource("Pod", "", "v1", "pods", namespaced=True)
SETTINGS = WatchSettings(page_size=2)


# --- what the API server says ---


def request_key(path: str, **params: str) -> str:
    """A request as the script names it: its path and its query, in a fixed order."""
    query = "&".join(f"{name}={value}" for name, value in sorted(params.items()))
    return f"{path}?{query}" if query else path


def list_request(resource: Resource = PODS, **params: str) -> str:
    return request_key(resource.path, limit=str(SETTINGS.page_size), **params)


def page_after(token: str, resource: Resource = PODS) -> str:
    return list_request(resource, **{"continue": token})


def watch_request(rv: str, resource: Resource = PODS, **params: str) -> str:
    return request_key(
        resource.path,
        watch="true",
        resourceVersion=rv,
        allowWatchBookmarks="true",
        timeoutSeconds=str(SETTINGS.watch_timeout_seconds),
        **params,
    )


DISCOVERY = request_key("/apis/scheduling.volcano.sh/v1beta1")
OUR_DISCOVERY = request_key("/apis/scheduling.sharekeeper.io/v1alpha1")


def pod(name: str, rv: str) -> MutableObj:
    return {"metadata": {"name": name, "namespace": "team", "resourceVersion": rv}}


def page(items: list[MutableObj], rv: str, continue_token: str | None = None) -> httpx.Response:
    metadata = {"resourceVersion": rv, **({"continue": continue_token} if continue_token else {})}
    return httpx.Response(200, json={"kind": "List", "metadata": metadata, "items": items})


def status(code: int, reason: str, *, retry_after: str | None = None) -> httpx.Response:
    body = {"kind": "Status", "status": "Failure", "code": code, "reason": reason}
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(code, json=body, headers=headers)


def discovery(*plurals: str) -> httpx.Response:
    resources = [{"name": plural, "namespaced": True} for plural in plurals]
    return httpx.Response(200, json={"kind": "APIResourceList", "resources": resources})


def event(kind: str, obj: MutableObj) -> MutableObj:
    return {"type": kind, "object": obj}


def bookmark(rv: str) -> MutableObj:
    return event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": rv}})


def error_event(code: int, reason: str) -> MutableObj:
    return event("ERROR", {"kind": "Status", "status": "Failure", "code": code, "reason": reason})


class EventStream(httpx.AsyncByteStream):
    """A watch body: one JSON event a line (each split over two chunks, as TCP may deliver it),
    then the end, a dropped connection, or nothing more until closed."""

    def __init__(self, events: list[MutableObj], ending: Literal["end", "drop", "hold"]) -> None:
        self.events = events
        self.ending = ending
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for item in self.events:
            line = json.dumps(item).encode() + b"\n"
            yield line[:10]
            yield line[10:]
        if self.ending == "drop":
            raise httpx.ReadError("connection reset by peer")
        if self.ending == "hold":
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


def stream(*events: MutableObj, ending: Literal["end", "drop"] = "end") -> httpx.Response:
    return httpx.Response(200, stream=EventStream(list(events), ending))


class FakeApiServer:
    """Answers requests from the script, in order; when it is used up, holds the next one open."""

    def __init__(self, script: list[tuple[str, Reply]]) -> None:
        self.script = list(script)
        self.requests: list[str] = []
        self.unexpected: list[str] = []
        self.done = asyncio.Event()
        self.held_open: EventStream | None = None
        self.read_timeouts: list[float | None] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        key = request_key(request.url.path, **dict(request.url.params.multi_items()))
        self.requests.append(key)
        self.read_timeouts.append(request.extensions["timeout"]["read"])
        if self.script and self.script[0][0] == key:
            reply = self.script.pop(0)[1]
            if isinstance(reply, Exception):
                raise reply
            return reply
        if self.script:
            self.unexpected.append(key)
        self.done.set()
        self.held_open = EventStream([], "hold")
        return httpx.Response(200, stream=self.held_open)


class StoreSink:
    """A store as the real one keeps it: objects by name; a list removes what it did not deliver.
    ``calls`` records what it was told; ``synced_seen`` the watch's ``synced`` at each list call."""

    def __init__(self) -> None:
        self.store: dict[str, MutableObj] = {}
        self.calls: list[str] = []
        self.synced_seen: list[bool] = []
        self.watch: ListWatch | None = None
        self._listed: set[str] = set()

    def list_started(self) -> None:
        self.calls.append("list_started")
        self._listed = set()

    def listed(self, objects: list[MutableObj]) -> None:
        names = [obj["metadata"]["name"] for obj in objects]
        self.calls.append("listed " + ",".join(names))
        self._see_synced()
        for name, obj in zip(names, objects, strict=True):
            self.store[name] = obj
        self._listed.update(names)

    def list_finished(self) -> None:
        self.calls.append("list_finished")
        self._see_synced()
        self.store = {name: obj for name, obj in self.store.items() if name in self._listed}

    def event(self, kind: str, obj: MutableObj) -> None:
        name = obj["metadata"]["name"]
        self.calls.append(f"{kind} {name}")
        if kind == "DELETED":
            self.store.pop(name, None)
        else:
            self.store[name] = obj

    def _see_synced(self) -> None:
        assert self.watch is not None
        self.synced_seen.append(self.watch.synced.is_set())

    def versions(self) -> dict[str, str]:
        return {name: obj["metadata"]["resourceVersion"] for name, obj in self.store.items()}


@dataclass
class Run:
    watch: ListWatch
    sink: StoreSink
    server: FakeApiServer
    sleeps: list[float]


def run(
    resource: Resource,
    script: list[tuple[str, Reply]],
    *,
    sink: StoreSink | None = None,
    jitter: Callable[[], float] = lambda: 1.0,
) -> Run:
    """Runs a ListWatch against the script until the script is used up, then cancels it."""
    sink = sink or StoreSink()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await asyncio.sleep(0)

    async def main() -> Run:
        server = FakeApiServer(script)
        transport = httpx.MockTransport(server.handle)
        async with httpx.AsyncClient(transport=transport, base_url="https://127.0.0.1") as http:
            watch = ListWatch(
                http, resource, sink, SETTINGS, streams=streams_through(http), sleep=sleep,
                jitter=jitter,
            )  # fmt: skip
            sink.watch = watch
            running = asyncio.create_task(watch.run())
            script_done = asyncio.create_task(server.done.wait())
            await asyncio.wait({running, script_done}, return_when=asyncio.FIRST_COMPLETED)
            running.cancel()
            script_done.cancel()
            await asyncio.wait({running, script_done})
            if not running.cancelled():
                pytest.fail(f"run() ended by itself: {running.exception()!r}")
        if server.unexpected:
            pytest.fail(f"asked for {server.unexpected[0]}, scripted: {server.script[0][0]}")
        return Run(watch, sink, server, sleeps)

    return asyncio.run(main())


def metric(name: str, resource: str, **labels: str) -> float:
    """``sharekeeper_watch_<name>`` of one resource, 0 if never set."""
    return (
        REGISTRY.get_sample_value(f"sharekeeper_watch_{name}", {"resource": resource, **labels})
        or 0.0
    )


# --- LIST ---


def test_a_list_follows_continue_tokens_and_the_watch_starts_at_its_resource_version() -> None:
    resource = replace(PODS, label="pods-paged")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5"), pod("b", "6")], "10", continue_token="p2")),
            (page_after("p2"), page([pod("c", "7")], "10")),
            (watch_request("10"), stream(event("ADDED", pod("d", "11")))),
        ],
    )
    assert result.sink.calls == [
        *("list_started", "listed a,b", "listed c", "list_finished"),
        "ADDED d",
    ]
    assert result.sink.versions() == {"a": "5", "b": "6", "c": "7", "d": "11"}
    assert result.server.requests[-1] == watch_request("11")
    assert result.sleeps == []
    assert metric("lists_total", "pods-paged") == 1


def test_the_field_selector_goes_on_the_list_and_the_watch() -> None:
    selector = "status.phase!=Succeeded,status.phase!=Failed"
    result = run(
        replace(PODS, field_selector=selector),
        [
            (list_request(fieldSelector=selector), page([pod("a", "5")], "10")),
            (watch_request("10", fieldSelector=selector), stream()),
        ],
    )
    assert result.server.requests[-1] == watch_request("10", fieldSelector=selector)


def test_a_watch_waits_for_data_longer_than_the_server_keeps_it_open() -> None:
    result = run(PODS, [(list_request(), page([], "10"))])
    list_timeout, watch_timeout = result.server.read_timeouts
    assert list_timeout == 5.0  # the client's own
    assert watch_timeout is not None
    assert watch_timeout > SETTINGS.watch_timeout_seconds + 30


def test_synced_is_set_only_once_the_first_list_is_complete() -> None:
    resource = replace(PODS, label="pods-synced")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5")], "10", continue_token="p2")),
            (page_after("p2"), page([pod("b", "6")], "10")),
        ],
    )
    # Seen at listed a, listed b, list_finished: all before the list was complete.
    assert result.sink.synced_seen == [False, False, False]
    assert result.watch.synced.is_set()
    assert metric("synced", "pods-synced") == 1


def test_a_failed_page_is_asked_for_again_with_the_same_continue_token() -> None:
    result = run(
        PODS,
        [
            (list_request(), page([pod("a", "5")], "10", continue_token="p2")),
            (page_after("p2"), status(500, "InternalError")),
            (page_after("p2"), httpx.ConnectError("connection refused")),
            (page_after("p2"), page([pod("b", "6")], "10")),
        ],
    )
    assert result.sink.calls == ["list_started", "listed a", "listed b", "list_finished"]
    assert result.sleeps == [0.5, 1.0]
    assert result.server.requests[-1] == watch_request("10")


def test_a_410_while_paging_starts_the_list_over() -> None:
    resource = replace(PODS, label="pods-paging-expired")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5"), pod("b", "6")], "10", continue_token="p2")),
            (page_after("p2"), status(410, "Expired")),
            (list_request(), page([pod("a", "5"), pod("c", "12")], "20", continue_token="q2")),
            (page_after("q2"), page([pod("d", "13")], "20")),
        ],
    )
    assert result.sink.calls == [
        *("list_started", "listed a,b"),
        *("list_started", "listed a,c", "listed d", "list_finished"),
    ]
    assert sorted(result.sink.store) == ["a", "c", "d"]  # b was deleted while we paged
    assert result.server.requests[-1] == watch_request("20")
    assert result.sleeps == []
    assert metric("relists_total", resource.name, reason="expired") == 1


# --- WATCH ---


def test_bookmarks_move_the_resource_version_and_never_reach_the_store() -> None:
    resource = replace(PODS, label="pods-bookmarks")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), stream(bookmark("12"), event("ADDED", pod("d", "13")))),
            (watch_request("13"), stream(bookmark("20"))),
        ],
    )
    assert result.sink.calls == ["list_started", "listed a", "list_finished", "ADDED d"]
    assert result.server.requests[-1] == watch_request("20")
    assert metric("events_total", resource.name, type="BOOKMARK") == 2
    assert metric("events_total", resource.name, type="ADDED") == 1


def test_a_watch_that_ends_is_restarted_at_once_from_its_last_version_without_a_relist() -> None:
    resource = replace(PODS, label="pods-timeout")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), stream(event("MODIFIED", pod("a", "11")))),
            (watch_request("11"), stream()),
            (watch_request("11"), stream(event("DELETED", pod("a", "12")))),
        ],
    )
    assert result.sink.calls == [
        *("list_started", "listed a", "list_finished"),
        *("MODIFIED a", "DELETED a"),
    ]
    assert result.sink.store == {}
    assert result.sleeps == []
    assert result.server.requests[-1] == watch_request("12")
    assert metric("restarts_total", resource.name, reason="timeout") == 3
    assert metric("lists_total", resource.name) == 1


def test_a_dropped_connection_resumes_from_the_last_version_without_a_relist() -> None:
    resource = replace(PODS, label="pods-dropped")
    added = event("ADDED", pod("d", "11"))
    modified = event("MODIFIED", pod("d", "12"))
    deleted = event("DELETED", pod("d", "13"))
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), stream(added, modified, ending="drop")),
            (watch_request("12"), httpx.ConnectError("connection refused")),
            (watch_request("12"), stream(deleted, ending="drop")),
        ],
    )
    assert result.sink.calls == [
        *("list_started", "listed a", "list_finished"),
        *("ADDED d", "MODIFIED d", "DELETED d"),
    ]
    # The third drop follows an event, a success: its backoff starts again from the beginning.
    assert result.sleeps == [0.5, 1.0, 0.5]
    assert result.server.requests[-1] == watch_request("13")
    assert metric("lists_total", resource.name) == 1
    assert metric("restarts_total", resource.name, reason="transport") == 3


@pytest.mark.parametrize(
    ("code", "reason"), [(410, "Expired"), (410, "Gone"), (410, ""), (0, "Expired")]
)
def test_an_expired_error_event_relists_and_drops_what_was_deleted_meanwhile(
    code: int, reason: str
) -> None:
    resource = replace(PODS, label=f"pods-error-410-{code}-{reason}")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5"), pod("b", "6")], "10")),
            (
                watch_request("10"),
                stream(event("MODIFIED", pod("a", "11")), error_event(code, reason)),
            ),
            (list_request(), page([pod("a", "15")], "20")),  # b was deleted meanwhile
        ],
    )
    assert result.sink.versions() == {"a": "15"}
    assert result.sink.calls.count("list_started") == 2
    assert result.sleeps == []
    assert result.server.requests[-1] == watch_request("20")
    assert metric("relists_total", resource.name, reason="expired") == 1


def test_a_410_answer_to_a_resumed_watch_relists_and_drops_what_was_deleted_meanwhile() -> None:
    resource = replace(PODS, label="pods-http-410")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5"), pod("b", "6")], "10")),
            (watch_request("10"), stream(event("MODIFIED", pod("a", "11")), ending="drop")),
            (watch_request("11"), status(410, "Expired")),
            (list_request(), page([pod("a", "11")], "30")),
        ],
    )
    assert result.sink.versions() == {"a": "11"}
    assert result.sleeps == [0.5]  # after the drop; none after the 410
    assert result.server.requests[-1] == watch_request("30")
    assert metric("relists_total", resource.name, reason="expired") == 1


def test_another_error_event_restarts_the_watch_after_a_backoff_without_a_relist() -> None:
    resource = replace(PODS, label="pods-error-500")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), stream(error_event(500, "InternalError"))),
        ],
    )
    assert result.sleeps == [0.5]
    assert result.server.requests[-1] == watch_request("10")
    assert result.sink.calls == ["list_started", "listed a", "list_finished"]
    assert metric("restarts_total", resource.name, reason="error") == 1


def test_a_failing_store_is_resynced_by_a_relist_and_the_watch_goes_on() -> None:
    class FailingOnce(StoreSink):
        failed = False

        def event(self, kind: str, obj: MutableObj) -> None:
            if not self.failed:
                self.failed = True
                raise KeyError("spec")
            super().event(kind, obj)

    resource = replace(PODS, label="pods-failing-store")
    result = run(
        resource,
        [
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), stream(event("ADDED", pod("b", "11")))),
            (list_request(), page([pod("a", "5"), pod("b", "11")], "20")),
        ],
        sink=FailingOnce(),
    )
    assert sorted(result.sink.store) == ["a", "b"]
    assert result.sleeps == [0.5]
    assert result.server.requests[-1] == watch_request("20")
    assert metric("relists_total", resource.name, reason="error") == 1


# --- retries ---


def test_retries_back_off_exponentially_up_to_the_maximum_and_honour_retry_after() -> None:
    result = run(
        PODS,
        [
            (list_request(), status(500, "InternalError")),
            (list_request(), status(500, "InternalError")),
            (list_request(), status(429, "TooManyRequests", retry_after="7")),
            (list_request(), status(429, "TooManyRequests")),
            (list_request(), status(503, "ServiceUnavailable")),
            (list_request(), httpx.ConnectError("connection refused")),
            (list_request(), status(500, "InternalError")),
            (list_request(), status(429, "TooManyRequests", retry_after="120")),
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), status(503, "ServiceUnavailable")),
        ],
    )
    # 0.5 * 2**attempt, capped at 30; Retry-After instead when given (capped too); after the
    # successful list the count starts over.
    assert result.sleeps == [0.5, 1.0, 7.0, 4.0, 8.0, 16.0, 30.0, 30.0, 0.5]
    assert result.sink.calls == ["list_started", "listed a", "list_finished"]
    assert result.server.requests[-1] == watch_request("10")


def test_the_backoff_is_fully_jittered() -> None:
    result = run(
        PODS,
        [
            (list_request(), status(500, "InternalError")),
            (list_request(), status(500, "InternalError")),
            (list_request(), status(500, "InternalError")),
        ],
        jitter=lambda: 0.25,
    )
    assert result.sleeps == [0.125, 0.25, 0.5]


def test_one_warning_per_failure_streak_and_info_on_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sharekeeper.kube.watching")
    run(
        PODS,
        [
            (list_request(), status(500, "InternalError")),
            (list_request(), status(500, "InternalError")),
            (list_request(), status(500, "InternalError")),
            (list_request(), page([pod("a", "5")], "10")),
            (watch_request("10"), httpx.ConnectError("connection refused")),
            (watch_request("10"), httpx.ConnectError("connection refused")),
        ],
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert warnings[0].startswith("pods: ")
    assert "http_500" in warnings[0]
    assert "transport" in warnings[1]
    recovered = [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]
    assert recovered == ["pods: recovered after 3 failed attempts"]


def test_a_permission_error_is_logged_as_such_and_retried_at_the_maximum_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result = run(
        PODS,
        [
            (list_request(), status(403, "Forbidden")),
            (list_request(), status(403, "Forbidden")),
            (list_request(), status(401, "Unauthorized")),
            (list_request(), page([pod("a", "5")], "10")),
        ],
    )
    assert result.sleeps == [30.0, 30.0, 30.0]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2  # one per streak: 403, then 401
    assert all("pods" in error and "lacks permission" in error for error in errors)
    assert result.watch.synced.is_set()


# --- optional resources ---


def test_an_optional_resource_that_is_not_served_is_synced_and_never_listed() -> None:
    result = run(
        replace(PODGROUPS, label="podgroups-absent"),
        [
            (DISCOVERY, status(404, "NotFound")),
            (DISCOVERY, discovery("queues")),  # the group exists, but without podgroups
        ],
    )
    assert not result.watch.served
    assert result.watch.synced.is_set()
    assert result.sink.calls == []
    assert result.sleeps == [30.0, 30.0]
    assert result.server.requests == [DISCOVERY, DISCOVERY, DISCOVERY]
    assert metric("served", "podgroups-absent") == 0
    assert metric("synced", "podgroups-absent") == 1


def test_an_optional_resource_that_appears_is_listed_and_watched() -> None:
    resource = replace(PODGROUPS, label="podgroups-appearing")
    storage_initializing = status(429, "storage is (re)initializing", retry_after="1")
    result = run(
        resource,
        [
            (DISCOVERY, status(404, "NotFound")),
            (DISCOVERY, discovery("podgroups", "podgroups/status", "queues")),
            (list_request(resource), storage_initializing),
            (list_request(resource), status(429, "storage is (re)initializing", retry_after="1")),
            (list_request(resource), page([pod("pg1", "5")], "10")),
            (watch_request("10", resource), stream(event("ADDED", pod("pg2", "11")))),
        ],
    )
    assert result.watch.served
    assert sorted(result.sink.store) == ["pg1", "pg2"]
    assert result.sleeps == [30.0, 1.0, 1.0]
    assert result.server.requests[-1] == watch_request("11", resource)
    assert metric("served", resource.name) == 1


def test_an_optional_resource_that_goes_away_empties_the_store_and_is_polled_again() -> None:
    resource = replace(PODGROUPS, label="podgroups-deleted")
    result = run(
        resource,
        [
            (DISCOVERY, discovery("podgroups")),
            (list_request(resource), page([pod("pg1", "5"), pod("pg2", "6")], "10")),
            (watch_request("10", resource), stream(event("MODIFIED", pod("pg1", "11")))),
            (watch_request("11", resource), status(404, "NotFound")),
            (DISCOVERY, status(404, "NotFound")),
        ],
    )
    assert result.sink.store == {}
    assert result.sink.calls[-2:] == ["list_started", "list_finished"]
    assert not result.watch.served
    assert result.watch.synced.is_set()
    assert result.sleeps == [30.0, 30.0]  # after the 404, and after discovery said so again
    assert result.server.requests[-1] == DISCOVERY
    assert metric("served", resource.name) == 0


def test_our_crd_deleted_and_installed_again_is_one_warning_and_is_listed_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sharekeeper.kube.watching")
    resource = replace(QUEUES, label="queues-reinstalled")
    result = run(
        resource,
        [
            (OUR_DISCOVERY, discovery("queues", "schedulerpolicies")),
            (list_request(resource), page([pod("q1", "5")], "10")),
            (watch_request("10", resource), status(404, "NotFound")),
            (OUR_DISCOVERY, discovery("schedulerpolicies")),
            (OUR_DISCOVERY, discovery("schedulerpolicies")),
            (OUR_DISCOVERY, discovery("queues", "schedulerpolicies")),
            (list_request(resource), page([pod("q2", "20")], "21")),
            (watch_request("21", resource), stream(event("ADDED", pod("q3", "22")))),
        ],
    )
    assert result.sink.calls == [
        "list_started", "listed q1", "list_finished",
        "list_started", "list_finished",  # gone with its CRD
        "list_started", "listed q2", "list_finished", "ADDED q3",
    ]  # fmt: skip
    assert sorted(result.sink.store) == ["q2", "q3"]
    assert result.watch.served
    assert metric("served", resource.name) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "queues-reinstalled: no longer served (its CRD was deleted); emptying its store, "
        "checking every 30s"
    ]
    assert "queues-reinstalled: now served, listing it" in caplog.messages


def test_our_crd_missing_at_start_is_a_warning_and_synced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    resource = replace(QUEUES, label="queues-missing")
    result = run(resource, [(OUR_DISCOVERY, status(404, "NotFound"))])
    assert result.watch.synced.is_set()
    assert not result.watch.served
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "queues-missing: not served" in caplog.text


def test_volcano_not_installed_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sharekeeper.kube.watching")
    run(replace(PODGROUPS, label="podgroups-quiet"), [(DISCOVERY, status(404, "NotFound"))])
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_a_404_for_a_resource_that_is_not_optional_is_retried() -> None:
    result = run(
        PODS,
        [(list_request(), status(404, "NotFound")), (list_request(), page([], "10"))],
    )
    assert result.sleeps == [0.5]
    assert result.watch.served
    assert result.server.requests[-1] == watch_request("10")


# --- the rest of the interface ---


def test_cancelling_closes_the_open_watch() -> None:
    result = run(PODS, [(list_request(), page([pod("a", "5")], "10"))])
    assert result.server.requests[-1] == watch_request("10")
    assert result.server.held_open is not None
    assert result.server.held_open.closed


def test_resource_paths() -> None:
    assert PODS.path == "/api/v1/pods"
    assert PODGROUPS.path == "/apis/scheduling.volcano.sh/v1beta1/podgroups"


def test_all_synced_waits_for_every_watch() -> None:
    async def check() -> None:
        async with httpx.AsyncClient(base_url="https://127.0.0.1") as http:
            streams = streams_through(http)
            first = ListWatch(http, PODS, StoreSink(), streams=streams)
            second = ListWatch(http, PODS, StoreSink(), streams=streams)
            assert all_synced([])
            assert not all_synced([first, second])
            first.synced.set()
            assert not all_synced([first, second])
            second.synced.set()
            assert all_synced([first, second])

    asyncio.run(check())


@pytest.mark.skipif(
    Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists(),
    reason="in a pod, the in-cluster configuration comes first",
)
def test_http_client_is_configured_from_the_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}},
                ],
                "users": [{"name": "u", "user": {"token": "secret"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))

    async def check() -> None:
        clients = connect()
        async with clients.http as http:
            assert str(http.base_url) == "https://10.0.0.1:6443"
            assert http.timeout.connect == 10.0
            request = http.build_request("GET", "/api/v1/pods")
            assert http.auth is not None
            authorized = next(http.auth.sync_auth_flow(request))
            assert authorized.headers["Authorization"] == "Bearer secret"
        await clients.typed.close()

    asyncio.run(check())
