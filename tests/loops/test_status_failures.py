"""A status that cannot be written is told: once, after a few rounds, and to ``/healthz``.

Found (issue "Tenant-proof", attack 4): every queue's status grew too large to store, every
write failed, ``observedGeneration`` froze, yet every queue still said ``Ready=True``,
``/healthz`` answered 200 and the log took 343 KB of tracebacks in a minute."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import urllib.error
import urllib.request
from typing import Any

import httpx2 as httpx
import pytest
from lightkube import ApiError
from prometheus_client import REGISTRY

from builders import node, pod, policy, queue
from sharekeeper.api.policy import policy_spec
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.handlers.probes import Probes
from sharekeeper.kube.writing import failure_text
from sharekeeper.loops.health import (
    FAILING_UNHEALTHY_SECONDS,
    FAILING_WRITES,
    LoopHealth,
    StatusFailures,
)
from sharekeeper.loops.recompute import Recompute
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.records import OwnRecord
from sharekeeper.publish.statuses import Kind

TOO_LARGE = "etcdserver: request is too large"


def api_error(code: int, message: str) -> ApiError:
    request = httpx.Request("PATCH", "https://127.0.0.1/apis/x/queues/a/status")
    body = {"kind": "Status", "status": "Failure", "message": message, "code": code}
    return ApiError(request=request, response=httpx.Response(code, json=body, request=request))


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def not_written(kind: str) -> float:
    value = REGISTRY.get_sample_value("sharekeeper_status_not_written", {"kind": kind})
    return value if value is not None else -1.0


# --- the tracker ------------------------------------------------------------------------------


def test_an_object_is_failing_after_n_writes_in_a_row_and_told_once() -> None:
    clock = Clock(50.0)
    failures = StatusFailures(clock=clock, wall_clock=lambda: 1_767_225_600.0)
    for i in range(FAILING_WRITES - 1):
        assert failures.failed("Queue", "a", f"try {i}") is None
    streak = failures.failed("Queue", "a", "too large")
    assert streak is not None
    assert (streak.failures, streak.message, streak.since) == (
        FAILING_WRITES,
        "too large",
        1.767225600e9,
    )
    assert [failures.failed("Queue", "a", "still") for _ in range(3)] == [None] * 3
    assert failures.failing() == {"Queue": 1, "SchedulerPolicy": 0}
    assert not_written("Queue") == 1
    recovered = failures.succeeded("Queue", "a")
    assert recovered is not None
    assert recovered.failures == FAILING_WRITES + 3
    assert failures.succeeded("Queue", "a") is None  # told once
    assert failures.failing() == {"Queue": 0, "SchedulerPolicy": 0}
    assert not_written("Queue") == 0


def test_a_success_between_failures_starts_the_count_again() -> None:
    failures = StatusFailures()
    for _ in range(FAILING_WRITES - 1):
        assert failures.failed("SchedulerPolicy", "p", "HTTP 500: boom") is None
    assert failures.succeeded("SchedulerPolicy", "p") is None  # never told failing: no news
    for _ in range(FAILING_WRITES - 1):
        assert failures.failed("SchedulerPolicy", "p", "HTTP 500: boom") is None
    assert failures.failing() == {"Queue": 0, "SchedulerPolicy": 0}


def test_healthz_degrades_only_once_a_failure_has_lasted_past_the_bound() -> None:
    clock = Clock(1000.0)
    failures = StatusFailures(clock=clock, wall_clock=lambda: 1_767_225_600.0)
    for name in ("a", "b"):
        for _ in range(FAILING_WRITES):
            failures.failed("Queue", name, f"HTTP 413: {TOO_LARGE}")
    failures.failed("SchedulerPolicy", "p", "x")  # not failing yet: not counted
    assert failures.degraded() is None
    clock.now += FAILING_UNHEALTHY_SECONDS + 1
    assert failures.degraded() == (
        "2 statuses not written (2 Queue), the first since 2026-01-01T00:00:00Z (301s); "
        f"Queue a: HTTP 413: {TOO_LARGE}"
    )
    failures.forget("Queue", "a")  # deleted
    failures.succeeded("Queue", "b")
    assert failures.degraded() is None


def test_healthz_answers_500_naming_how_many_and_since_when() -> None:
    clock = Clock(1000.0)
    failures = StatusFailures(clock=clock, wall_clock=lambda: 1_767_225_600.0)
    loop = LoopHealth("recompute", lambda: 5.0, degraded=failures.degraded)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def get() -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    async def scenario() -> list[tuple[int, dict[str, Any]]]:
        probes = Probes([], {}, lambda: {"recomputeRounds": 7}, [loop])
        await probes.start("127.0.0.1", port)
        for _ in range(FAILING_WRITES):
            failures.failed("Queue", "a", f"HTTP 413: {TOO_LARGE}")
        answers = [await asyncio.to_thread(get)]  # failing, not for long yet
        clock.now += FAILING_UNHEALTHY_SECONDS + 1
        answers.append(await asyncio.to_thread(get))
        failures.succeeded("Queue", "a")
        answers.append(await asyncio.to_thread(get))
        await probes.stop()
        return answers

    early, degraded, recovered = asyncio.run(scenario())
    assert early == (200, {"recomputeRounds": 7})
    assert degraded[0] == 500
    assert degraded[1]["recomputeRounds"] == 7
    (reason,) = degraded[1]["degraded"]
    assert reason.startswith("1 status not written (1 Queue), the first since 2026-01-01T00:00:00Z")
    assert recovered == (200, {"recomputeRounds": 7})


def test_failure_text_is_the_api_servers_answer_on_one_line() -> None:
    assert failure_text(api_error(413, TOO_LARGE)) == f"HTTP 413: {TOO_LARGE}"
    assert failure_text(httpx.ConnectError("All connection\n attempts failed")) == (
        "ConnectError: All connection attempts failed"
    )
    assert len(failure_text(api_error(422, "x" * 5000))) == 500


# --- the recompute loop -----------------------------------------------------------------------


class RefusingWriter:
    """Stores what it is sent, except the statuses of ``refused`` objects: those fail as the
    API server answers a status too large to store."""

    def __init__(self, refused: set[tuple[str, str]], error: Exception | None = None) -> None:
        self.refused = refused
        self.error = error or api_error(413, TOO_LARGE)
        self.tried: list[tuple[str, str]] = []
        self.stored: dict[tuple[str, str], MutableObj] = {}
        self.events: list[tuple[str, str, str, str]] = []

    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
        self.tried.append((kind, name))
        if (kind, name) in self.refused:
            raise self.error
        merged = {**self.stored.get((kind, name), {}), **patch}
        self.stored[(kind, name)] = {k: v for k, v in merged.items() if v is not None}
        return self.stored[(kind, name)]

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        return {k: v for k, v in patch.items() if v is not None}

    async def event(
        self, target: dict[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        if target["kind"] != "Pod":
            self.events.append((target["kind"], target["name"], reason, message))

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        return True


def loop_over(writer: RefusingWriter) -> Recompute:
    store = ClusterStore()
    store.load([node("n1", cpu="8", memory="16Gi"), pod("p1", "a", node="n1", cpu="2")])
    for name in ("a", "b"):
        obj = queue(name)
        store.queues.records[name] = OwnRecord(name, f"uid-{name}", 1, queue_snapshot(obj), {})
    spec = policy_spec(policy("all"))
    store.policies.records["all"] = OwnRecord("all", "uid-all", 1, spec, {})
    return Recompute(writer, store, clock=lambda: 1_767_225_600.0)


async def rounds(loop: Recompute, count: int) -> None:
    for _ in range(count):
        await loop.recompute()
        await loop.written()
        await asyncio.sleep(0)  # the spawned Events
        await asyncio.sleep(0)


def test_a_refused_status_is_told_once_after_n_rounds_and_once_when_it_lands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = RefusingWriter({("Queue", "a")})
    loop = loop_over(writer)
    caplog.set_level(logging.DEBUG, logger="sharekeeper")

    async def scenario() -> None:
        await rounds(loop, FAILING_WRITES - 1)
        assert writer.tried.count(("Queue", "a")) == FAILING_WRITES - 1  # wanted every round
        assert writer.events == []
        assert loop.status_failures.failing()["Queue"] == 0
        await rounds(loop, 1)
        assert [e[:3] for e in writer.events] == [("Queue", "a", "StatusNotWritten")]
        assert f"HTTP 413: {TOO_LARGE}" in writer.events[0][3]
        assert "since 2026-01-01T00:00:00Z" in writer.events[0][3]
        assert not_written("Queue") == 1
        await rounds(loop, 4)
        assert writer.tried.count(("Queue", "a")) == FAILING_WRITES + 4
        assert len(writer.events) == 1  # once, not once per round
        assert loop.health.degraded() is None  # not for long enough yet
        # The others are written all along.
        assert writer.stored[("Queue", "b")]["observedGeneration"] == 1
        assert ("SchedulerPolicy", "all") in writer.stored
        writer.refused.clear()
        await rounds(loop, 2)
        assert writer.stored[("Queue", "a")]["deserved"]["cpu"] == "2"
        assert not_written("Queue") == 0

    asyncio.run(scenario())
    mine = [r for r in caplog.records if r.name.startswith("sharekeeper")]
    warnings = [r for r in mine if r.levelno >= logging.WARNING]
    assert [r.getMessage()[:60] for r in warnings] == [
        f"Queue a: status not written {FAILING_WRITES} times in a row since 2026-01-01T00:00:00Z"[
            :60
        ]
    ]
    assert not any(r.exc_info for r in mine)  # no traceback, ever
    recovered = [r.getMessage() for r in mine if "written again" in r.getMessage()]
    assert recovered == [f"Queue a: status written again, after {FAILING_WRITES + 4} failed writes"]


def test_a_failure_that_is_no_answer_of_the_api_server_gets_its_traceback_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = RefusingWriter({("SchedulerPolicy", "all")}, error=TypeError("a bug"))
    loop = loop_over(writer)
    caplog.set_level(logging.WARNING, logger="sharekeeper")
    asyncio.run(rounds(loop, FAILING_WRITES + 2))
    warnings = [r for r in caplog.records if r.name.startswith("sharekeeper")]
    assert len(warnings) == 1
    assert warnings[0].exc_info
    assert "TypeError: a bug" in warnings[0].getMessage()
    assert not_written("SchedulerPolicy") == 1
    loop.forget("SchedulerPolicy", "all")  # deleted: nothing is failing any more
    assert not_written("SchedulerPolicy") == 0
