"""Retrying one write through transient failures: which errors are tried again, how long it
waits, when it gives up; and the writers that use it, against fake clients."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx2 as httpx
import pytest
from lightkube import ApiError
from prometheus_client import REGISTRY

from fake_api import Call, FakeApi, plain_refusal, refused
from sharekeeper.kube.transient import Retrying
from sharekeeper.kube.transport import MERGE_PATCH, STRATEGIC_PATCH
from sharekeeper.kube.writing import KubeWriter, failure_text
from sharekeeper.model.pods import release_patch
from sharekeeper.model.qos import TAINT
from sharekeeper.settings import RetryPolicy

T = TypeVar("T")
URL = "https://127.0.0.1/apis/scheduling.sharekeeper.io/v1alpha1/queues/q/status"


def api_error(code: int, **headers: str) -> ApiError:
    request = httpx.Request("PATCH", URL)
    body = {"kind": "Status", "status": "Failure", "code": code, "message": f"HTTP {code}"}
    response = httpx.Response(code, json=body, headers=headers, request=request)
    return ApiError(request=request, response=response)


def plain_error(code: int) -> httpx.HTTPStatusError:
    """A refusal whose body is not JSON (a proxy's error page): lightkube passes httpx's on."""
    request = httpx.Request("PATCH", URL)
    response = httpx.Response(code, text="<html>bad gateway</html>", request=request)
    return httpx.HTTPStatusError("bad gateway", request=request, response=response)


class FakeTime:
    """A clock that only the sleeps (and ``work``) move."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def retrying(self, policy: RetryPolicy | None = None) -> Retrying:
        """The default policy unless ``policy``, on this clock, without jitter."""
        return Retrying(
            policy or RetryPolicy(), clock=self.clock, sleep=self.sleep, jitter=lambda: 0.0
        )


class Script:
    """A request that raises the scripted errors in turn, then returns ``"done"``; ``seconds``
    of fake time pass in each try."""

    def __init__(self, time: FakeTime, *errors: BaseException, seconds: float = 0.0) -> None:
        self.time = time
        self.errors = list(errors)
        self.seconds = seconds
        self.tries = 0

    async def __call__(self) -> str:
        self.tries += 1
        self.time.now += self.seconds
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def retries(kind: str, reason: str) -> float:
    labels = {"kind": kind, "reason": reason}
    return REGISTRY.get_sample_value("sharekeeper_write_retries_total", labels) or 0.0


def run(call: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(call())


def test_transient_failures_are_tried_again_with_growing_pauses() -> None:
    time = FakeTime()
    request = Script(
        time, api_error(503), plain_error(502), httpx.ConnectError("refused"), api_error(500)
    )
    before = retries("T1", "http_503"), retries("T1", "transport")
    retrying = time.retrying(RetryPolicy(attempts=5))

    assert run(lambda: retrying("T1", request)) == "done"
    assert request.tries == 5
    # Half the exponential ceiling with no jitter: 0.25 s doubling, capped at 2 s.
    assert time.sleeps == [0.125, 0.25, 0.5, 1.0]
    assert retries("T1", "http_503") == before[0] + 1
    assert retries("T1", "transport") == before[1] + 1
    assert retries("T1", "http_502") >= 1


def test_jitter_spreads_a_pause_between_half_and_all_of_its_ceiling() -> None:
    policy = RetryPolicy(first_delay_seconds=1.0, max_delay_seconds=3.0)
    assert [policy.backoff.delay(retry, 0.0) for retry in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, 1.5]
    assert policy.backoff.delay(2, 0.999) == pytest.approx(2.0, abs=0.01)


def test_after_the_last_try_the_last_error_is_raised() -> None:
    time = FakeTime()
    last = httpx.ReadTimeout("no answer")
    request = Script(time, api_error(503), api_error(503), api_error(504), last)
    before = retries("T2", "timeout")
    with pytest.raises(httpx.ReadTimeout) as raised:
        run(lambda: time.retrying()("T2", request))
    assert raised.value is last
    assert request.tries == 4  # the default: four tries in all
    assert len(time.sleeps) == 3
    assert retries("T2", "timeout") == before  # the last failure was not retried


@pytest.mark.parametrize("code", [400, 403, 404, 409, 422])
def test_an_answer_is_raised_at_once(code: int) -> None:
    time = FakeTime()
    request = Script(time, api_error(code))
    with pytest.raises(ApiError):
        run(lambda: time.retrying()("T3", request))
    assert request.tries == 1
    assert time.sleeps == []


def test_a_code_the_caller_names_as_its_answer_is_not_retried() -> None:
    time = FakeTime()
    request = Script(time, api_error(429))
    with pytest.raises(ApiError):
        run(lambda: time.retrying()("Eviction", request, answers=(429,)))
    assert request.tries == 1


def test_too_many_requests_waits_as_long_as_the_server_asks() -> None:
    time = FakeTime()
    request = Script(time, api_error(429, **{"Retry-After": "3"}))
    assert run(lambda: time.retrying()("T4", request)) == "done"
    assert time.sleeps == [3.0]


def test_no_pause_is_taken_that_would_end_past_the_time_bound() -> None:
    """Each try takes 4 s of the 10 s bound: the third starts at 8.4 s (and would be cut at
    10 s); there is no fourth."""
    time = FakeTime()
    request = Script(time, api_error(503), api_error(503), api_error(503), seconds=4.0)
    with pytest.raises(ApiError):
        run(lambda: time.retrying()("T5", request))
    assert request.tries == 3
    assert time.sleeps == [0.125, 0.25]

    long_wait = Script(time, api_error(429, **{"Retry-After": "60"}))
    with pytest.raises(ApiError):
        run(lambda: time.retrying()("T5", long_wait))
    assert long_wait.tries == 1


def test_a_try_that_hangs_is_cut_at_the_time_bound() -> None:
    async def hangs() -> None:
        await asyncio.Event().wait()

    retrying = Retrying(RetryPolicy(deadline_seconds=0.05))
    with pytest.raises(TimeoutError):
        run(lambda: retrying("T6", hangs))


# --- the writers ----------------------------------------------------------------------------


def fast() -> Retrying:
    return FakeTime().retrying()


def writer(api: FakeApi) -> KubeWriter:
    return KubeWriter(api.as_api(), retrying=fast())


def test_a_status_patch_lands_after_a_transient_failure_and_a_gone_object_is_none() -> None:
    stored = {"status": {"deserved": {"cpu": "2"}}}
    api = FakeApi([refused(503)], result=stored)
    assert run(lambda: writer(api).patch_status("Queue", "q", {"deserved": {"cpu": "2"}})) == {
        "deserved": {"cpu": "2"}
    }
    path = "/apis/scheduling.sharekeeper.io/v1alpha1/queues/q/status"
    sent = Call("PATCH", path, {"status": {"deserved": {"cpu": "2"}}}, MERGE_PATCH)
    assert api.calls == [sent, sent]

    gone = FakeApi([refused(404)])
    assert run(lambda: writer(gone).patch_node_annotations("n1", {"sharekeeper.io/x": "1"})) is None
    assert [(c.method, c.path) for c in gone.calls] == [("PATCH", "/api/v1/nodes/n1")]


def test_a_release_is_a_strategic_patch_of_the_pod_and_a_gone_pod_is_false() -> None:
    api = FakeApi(result={"metadata": {"name": "train-0"}})
    assert run(lambda: writer(api).release_pod("team", "train-0", "2026-01-01T00:00:00Z"))
    (call,) = api.calls
    assert (call.method, call.path) == ("PATCH", "/api/v1/namespaces/team/pods/train-0")
    assert call.content_type == STRATEGIC_PATCH
    assert call.body == release_patch("2026-01-01T00:00:00Z")
    assert not run(lambda: writer(FakeApi([refused(404)])).release_pod("team", "x", "t"))


def test_an_eviction_refused_by_a_disruption_budget_is_reported_at_once() -> None:
    api = FakeApi([refused(429)])
    outcome, detail = run(lambda: writer(api).evict_pod("team", "batch-1"))
    assert outcome == "refused"
    assert detail.startswith("429")
    assert len(api.calls) == 1


def test_an_eviction_that_met_a_server_error_is_tried_again() -> None:
    api = FakeApi([refused(500), httpx.ReadTimeout("no answer")])
    evicting = writer(api).evict_pod("team", "batch-1", grace_period_seconds=30)
    assert run(lambda: evicting) == ("accepted", "evicted")
    assert len(api.calls) == 3
    call = api.calls[-1]
    assert (call.method, call.path) == ("POST", "/api/v1/namespaces/team/pods/batch-1/eviction")
    assert call.body == {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "batch-1", "namespace": "team"},
        "deleteOptions": {"gracePeriodSeconds": 30},
    }  # fmt: skip


def test_a_taint_write_on_a_node_that_changed_is_not_retried() -> None:
    api = FakeApi([refused(409)])
    run(lambda: writer(api).set_taints("n1", [TAINT], resource_version="41"))
    (call,) = api.calls
    assert (call.path, call.content_type) == ("/api/v1/nodes/n1", MERGE_PATCH)
    assert call.body["metadata"] == {"resourceVersion": "41"}


def test_a_refused_mirror_write_says_what_the_api_server_said() -> None:
    """A Status answer is lightkube's ``ApiError``, its text the API server's message; a page
    that is no Status is httpx's error, with its text."""
    said = "spec.weight: Invalid value: 0: must be at least 1"
    body = {"kind": "Status", "status": "Failure", "code": 422, "message": said}
    with pytest.raises(ApiError) as refusal:
        run(lambda: writer(FakeApi([refused(422, body)])).create_queue({"metadata": {}}))
    assert failure_text(refusal.value) == f"HTTP 422: {said}"

    api = FakeApi([plain_refusal(502, "<html>bad gateway</html>")] * 9)
    with pytest.raises(httpx.HTTPStatusError) as failed:
        run(lambda: writer(api).patch_queue("q", {"spec": {"weight": 2}}))
    assert failure_text(failed.value) == "HTTP 502: <html>bad gateway</html>"
    assert len(api.calls) > 1  # a proxy's 502 is tried again


def writes(kind: str, outcome: str) -> float:
    labels = {"kind": kind, "outcome": outcome}
    return REGISTRY.get_sample_value("sharekeeper_writes_total", labels) or 0.0


def test_every_write_is_counted_by_how_it_ended() -> None:
    """Typed patches and the mirrors' plain requests count alike: done, gone (404), conflict
    (409, a precondition or a taken name) and error, each under its own kind."""
    before = {
        (kind, outcome): writes(kind, outcome)
        for kind in ("Queue", "QueueMirror")
        for outcome in ("ok", "gone", "error", "created", "patched", "conflict")
    }

    def moved(kind: str, outcome: str) -> float:
        return writes(kind, outcome) - before[kind, outcome]

    run(lambda: writer(FakeApi(result={"status": {}})).patch_status("Queue", "q", {}))
    assert run(lambda: writer(FakeApi([refused(404)])).patch_status("Queue", "q", {})) is None
    with pytest.raises(ApiError):
        run(lambda: writer(FakeApi([refused(422)])).patch_status("Queue", "q", {}))
    assert (moved("Queue", "ok"), moved("Queue", "gone"), moved("Queue", "error")) == (1, 1, 1)

    answers: list[Any] = [{"metadata": {"name": "q"}}, refused(409), {"metadata": {}}, refused(404)]

    def answer(call: Call) -> Any:
        given = answers.pop(0)
        if isinstance(given, Exception):
            raise given
        return given

    mirror = writer(FakeApi(answer=answer))
    assert run(lambda: mirror.create_queue({"metadata": {"name": "q"}})) is not None
    assert run(lambda: mirror.create_queue({"metadata": {"name": "q"}})) is None
    assert run(lambda: mirror.patch_queue("q", {"spec": {"weight": 2}})) is not None
    assert run(lambda: mirror.delete_queue("q", "uid-1")) is False
    counted = [moved("QueueMirror", o) for o in ("created", "conflict", "patched", "gone", "error")]
    assert counted == [1, 1, 1, 1, 0]
