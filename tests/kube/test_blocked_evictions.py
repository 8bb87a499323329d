"""Telling a PodDisruptionBudget's refusal of an eviction apart, with the API server's own
answers (``pkg/registry/core/pod/storage/eviction.go`` of Kubernetes 1.34); and a refused
eviction never becomes a delete."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fake_api import Call, FakeApi, refused
from sharekeeper.engine.qos import Outcome
from sharekeeper.kube.transient import Retrying
from sharekeeper.kube.writing import KubeWriter
from sharekeeper.loops.qos import EVICTION_OUTCOMES
from sharekeeper.settings import RetryPolicy

EVICTION = "/api/v1/namespaces/tenant/pods/greedy/eviction"
NO_DISRUPTION = {
    "kind": "Status", "status": "Failure", "reason": "TooManyRequests", "code": 429,
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "details": {"causes": [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget keep-me needs 1 healthy pods and has 1 currently",
    }]},
}  # fmt: skip
NOT_PROCESSED = {
    **NO_DISRUPTION,
    "details": {"causes": [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget keep-me is still being processed by the server.",
    }], "retryAfterSeconds": 10},
}  # fmt: skip
TWO_BUDGETS = {
    "kind": "Status", "status": "Failure", "code": 500,
    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
    "does not support.",
}  # fmt: skip
OVERLOADED = {
    "kind": "Status", "status": "Failure", "reason": "TooManyRequests", "code": 429,
    "message": "Too many requests, please try again later.",
    "details": {"retryAfterSeconds": 1},
}  # fmt: skip
GONE = {
    "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
    "message": 'pods "greedy" not found',
}  # fmt: skip


async def no_sleep(seconds: float) -> None:
    pass


def evict(body: dict[str, Any]) -> tuple[Outcome, str, list[str]]:
    """Every request refused with ``body``; what the QoS check makes of it, and the requests
    made (method and path)."""

    def answer(call: Call) -> Any:
        raise refused(body["code"], body)

    api = FakeApi(answer=answer)
    retrying = Retrying(RetryPolicy(), sleep=no_sleep, jitter=lambda: 0.0)
    writer = KubeWriter(api.as_api(), retrying=retrying)
    outcome, detail = asyncio.run(writer.evict_pod("tenant", "greedy"))
    return EVICTION_OUTCOMES[outcome], detail, [f"{c.method} {c.path}" for c in api.calls]


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (NO_DISRUPTION, "keep-me needs 1 healthy pods and has 1 currently"),
        (NOT_PROCESSED, "keep-me is still being processed"),
        (TWO_BUDGETS, "more than one PodDisruptionBudget"),
    ],
)
def test_a_budgets_refusal_is_blocked_with_the_api_servers_message(
    body: dict[str, Any], names: str
) -> None:
    outcome, detail, calls = evict(body)
    assert outcome is Outcome.BLOCKED
    assert detail.startswith(f"{body['code']}: ")
    assert names in detail
    assert set(calls) == {f"POST {EVICTION}"}, "a refused eviction never falls back to delete"


@pytest.mark.parametrize("body", [OVERLOADED, GONE])
def test_any_other_refusal_is_refused(body: dict[str, Any]) -> None:
    outcome, detail, calls = evict(body)
    assert outcome is Outcome.REFUSED
    assert detail == f"{body['code']}: {body['message']}"
    assert set(calls) == {f"POST {EVICTION}"}
