"""The typed client's transport: requests carried by aiohttp, answers and failures as httpx's
own transport gives them, against a small HTTP server on the loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2 as httpx
import pytest
from aiohttp import web
from lightkube import ApiError, AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.core_v1 import Namespace

from sharekeeper.kube.transient import http_status, retry_after_seconds, transient_reason
from sharekeeper.kube.transport import AiohttpTransport

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serving(handler: Handler, exchange: Callable[[str], Awaitable[Any]]) -> Any:
    """``exchange(base_url)`` while ``handler`` answers every request on a loopback port."""
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handler)
    runner = web.AppRunner(app, handler_cancellation=True)  # a client that leaves ends it
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await exchange(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


def client(base_url: str, *, read: float = 5.0) -> httpx.AsyncClient:
    timeout = httpx.Timeout(5.0, read=read)
    transport = AiohttpTransport(ssl.create_default_context())
    return httpx.AsyncClient(base_url=base_url, transport=transport, timeout=timeout)


def test_a_request_arrives_as_httpx_built_it_and_its_answer_comes_back_whole() -> None:
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=await request.read(),
        )
        return web.json_response({"status": {"share": "0.5"}}, status=201, headers={"X-Seen": "1"})

    async def exchange(base_url: str) -> httpx.Response:
        async with client(base_url) as http:
            return await http.patch(
                "/apis/g/v1/queues/q/status",
                params={"fieldManager": "sharekeeper"},
                content=b'{"status":{"share":"0.5"}}',
                headers={
                    "Content-Type": "application/merge-patch+json",
                    "Authorization": "Bearer t",
                },
            )

    answer = asyncio.run(serving(handler, exchange))
    assert (answer.status_code, answer.json(), answer.headers["x-seen"]) == (
        201, {"status": {"share": "0.5"}}, "1",
    )  # fmt: skip
    assert seen["method"] == "PATCH"
    assert seen["path"] == "/apis/g/v1/queues/q/status"
    assert seen["query"] == {"fieldManager": "sharekeeper"}
    assert seen["body"] == b'{"status":{"share":"0.5"}}'
    assert seen["headers"]["Content-Type"] == "application/merge-patch+json"
    assert seen["headers"]["Authorization"] == "Bearer t"
    assert seen["headers"]["Content-Length"] == str(len(seen["body"]))
    # Answers come plain: httpx is not offered a compression it would then decode itself.
    assert "Accept-Encoding" not in seen["headers"]


def test_lightkube_sees_a_refusal_with_its_code_and_retry_after() -> None:
    """The typed client on this transport: an API server's 429 reaches the retry policy as it
    does through httpx's own transport (``transient``)."""

    async def handler(request: web.Request) -> web.Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                "message": "too many requests", "reason": "TooManyRequests"}  # fmt: skip
        # As the API server sends it: lightkube reads a Status only from "application/json".
        headers = {"Content-Type": "application/json", "Retry-After": "3"}
        return web.Response(body=json.dumps(body).encode(), status=429, headers=headers)

    async def exchange(base_url: str) -> BaseException:
        config = KubeConfig.from_dict({
            "clusters": [{"name": "c", "cluster": {"server": base_url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }).get()  # fmt: skip
        typed = AsyncClient(config, transport=AiohttpTransport(ssl.create_default_context()))
        try:
            with pytest.raises(ApiError) as refused:
                await typed.get(Namespace, "default")
            return refused.value
        finally:
            await typed.close()

    error = asyncio.run(serving(handler, exchange))
    assert http_status(error) == 429
    assert transient_reason(error) == "http_429"
    assert retry_after_seconds(error) == 3.0


def test_a_refused_connection_is_httpx_s_connect_error_and_worth_trying_again() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused

        async def exchange() -> None:
            async with client(f"http://127.0.0.1:{port}") as http:
                await http.get("/healthz")

        with pytest.raises(httpx.ConnectError) as refused:
            asyncio.run(exchange())
    assert transient_reason(refused.value) == "transport"


def test_an_answer_slower_than_the_read_timeout_is_httpx_s_read_timeout() -> None:
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(1)
        return web.json_response({})

    async def exchange(base_url: str) -> None:
        async with client(base_url, read=0.2) as http:
            await http.get("/slow")

    with pytest.raises(httpx.ReadTimeout) as slow:
        asyncio.run(serving(handler, exchange))
    assert transient_reason(slow.value) == "timeout"


def test_a_connection_closed_mid_answer_is_a_transport_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse(headers={"Content-Length": "100"})
        await answer.prepare(request)
        await answer.write(json.dumps({"partial": True}).encode())
        assert request.transport is not None
        request.transport.close()
        return answer

    async def exchange(base_url: str) -> None:
        async with client(base_url) as http:
            await http.get("/cut")

    with pytest.raises(httpx.TransportError) as cut:
        asyncio.run(serving(handler, exchange))
    assert transient_reason(cut.value) == "transport"


def test_a_streamed_answer_arrives_line_by_line_and_one_left_early_frees_the_client() -> None:
    """As a watch reads its events: each line as the server sends it, not at the end; a
    stream given up before its end does not hold the next request back."""
    sent_second = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/plain":
            return web.json_response({"ok": True})
        answer = web.StreamResponse()
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        await answer.write(b'{"type":"ADDED"}\n')
        await asyncio.sleep(0.3)
        await answer.write(b'{"type":"MODIFIED"}\n')
        sent_second.set()
        await asyncio.sleep(30)  # a watch stays open: the client leaves first
        return answer

    async def exchange(base_url: str) -> tuple[list[tuple[str, bool]], Any]:
        lines = []
        async with client(base_url) as http:
            async with http.stream("GET", "/watch") as answer:
                async for line in answer.aiter_lines():
                    lines.append((line, sent_second.is_set()))
                    if len(lines) == 2:
                        break
            plain = await asyncio.wait_for(http.get("/plain"), timeout=5)
            return lines, plain.json()

    lines, plain = asyncio.run(serving(handler, exchange))
    # The first line was read before the server sent the second.
    assert lines == [('{"type":"ADDED"}', False), ('{"type":"MODIFIED"}', True)]
    assert plain == {"ok": True}
