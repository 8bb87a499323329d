"""Telling a PodDisruptionBudget's refusal of an eviction apart, with the API server's own
answers (``pkg/registry/core/pod/storage/eviction.go`` of Kubernetes 1.34); and a refused
eviction never becomes a delete."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2 as httpx
import pytest
from lightkube import ApiError

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import Outcome, QosAction
from sharekeeper.publish.actions import KubeActuator
from sharekeeper.publish.retrying import Retrying, RetryPolicy

URL = "https://127.0.0.1/api/v1/namespaces/tenant/pods/greedy/eviction"
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


def refusal(body: dict[str, Any]) -> ApiError:
    request = httpx.Request("POST", URL)
    return ApiError(
        request=request, response=httpx.Response(body["code"], json=body, request=request)
    )


class Client:
    """Every request refused with ``body``; records what was asked."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.calls: list[str] = []

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("create")
        raise refusal(self.body)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("delete")

    async def patch(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("patch")


async def no_sleep(seconds: float) -> None:
    pass


def evict(body: dict[str, Any]) -> tuple[Outcome, str, list[str]]:
    client = Client(body)
    retrying = Retrying(RetryPolicy(), sleep=no_sleep, jitter=lambda: 0.0)
    actuator = KubeActuator(client, retrying)  # type: ignore[arg-type]
    action = QosAction(
        kind="evict", pod=PodKey("tenant", "greedy"), node="w1", metric="cpu_total_usage",
        resource="cpu", released=1500,
    )  # fmt: skip
    outcome, detail = asyncio.run(actuator.evict(action))
    return outcome, detail, client.calls


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
    assert "delete" not in calls, "a refused eviction never falls back to delete"


@pytest.mark.parametrize("body", [OVERLOADED, GONE])
def test_any_other_refusal_is_refused(body: dict[str, Any]) -> None:
    outcome, detail, calls = evict(body)
    assert outcome is Outcome.REFUSED
    assert detail == f"{body['code']}: {body['message']}"
    assert set(calls) == {"create"}
