"""The webhook reads admission reviews of pods bigger than aiohttp's default body limit (1 MiB,
which answered 413 and, with ``failurePolicy: Ignore``, let such pods through ungated)."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from typing import Any

import aiohttp
import kopf
import pytest

from sharekeeper.handlers.admission import REVIEW_LIMIT, WebhookServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def post_review(server: kopf.WebhookServer, body: bytes) -> tuple[int, Any]:
    """POST ``body`` to a served handler; the HTTP status and what the handler was given."""
    seen: list[Any] = []

    async def handle(request: Any, **_: Any) -> dict[str, Any]:
        seen.append(request)
        return {"response": {"allowed": True}}

    async for config in server(handle):
        async with (
            aiohttp.ClientSession() as session,
            session.post(config["url"].rstrip("/") + "/gate", data=io.BytesIO(body)) as response,
        ):
            return response.status, seen[0] if seen else None
    raise AssertionError("the server yielded no configuration")


def review(size: int) -> bytes:
    """An AdmissionReview of about ``size`` bytes: a pod with one big environment variable."""
    pod = {"metadata": {"name": "big"}, "spec": {"containers": [{"name": "main", "env": [
        {"name": "PAD", "value": "x" * size}]}]}}  # fmt: skip
    return json.dumps({"request": {"uid": "1", "object": pod}}).encode()


@pytest.mark.parametrize(
    ("server_class", "status"),
    [(kopf.WebhookServer, 413), (WebhookServer, 200)],
    ids=["kopf-default", "ours"],
)
def test_a_review_of_a_pod_over_one_mib_is_read(
    server_class: type[kopf.WebhookServer], status: int
) -> None:
    server = server_class(addr="127.0.0.1", port=free_port(), host="127.0.0.1", insecure=True)
    got, seen = asyncio.run(post_review(server, review(3 * 1024 * 1024 - 4096)))
    assert got == status
    if status == 200:
        assert seen["request"]["object"]["metadata"]["name"] == "big"


def test_a_review_above_the_limit_is_still_refused() -> None:
    server = WebhookServer(addr="127.0.0.1", port=free_port(), host="127.0.0.1", insecure=True)
    got, seen = asyncio.run(post_review(server, review(REVIEW_LIMIT)))
    assert (got, seen) == (413, None)
