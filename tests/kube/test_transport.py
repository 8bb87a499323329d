"""The writes' JSON path: requests as the API server expects them, the kubeconfig's
authentication renewed on a 401, and answers and failures as the retry policy knows them,
against a small HTTP server on the loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from aiohttp import web
from lightkube import ApiError
from lightkube.config.client_adapter import BearerAuth, BearerTokenFileAuth

from sharekeeper.kube.transient import http_status, retry_after_seconds, transient_reason
from sharekeeper.kube.transport import MERGE_PATCH, Credentials, JsonApi
from sharekeeper.kube.writing import failure_text

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


def api(server: str, auth: httpx.Auth | None = None, *, read: float = 5.0) -> JsonApi:
    return JsonApi(
        server, ssl.create_default_context(), Credentials(auth, server),
        connect_seconds=5.0, read_seconds=read, field_manager="sharekeeper",
    )  # fmt: skip


async def send_once(
    server: str, *request: Any, auth: httpx.Auth | None = None, **options: Any
) -> Any:
    client = api(server, auth, read=options.pop("read", 5.0))
    try:
        return await client.send(*request, **options)
    finally:
        await client.close()


def rotating_token(token: Path, seen: list[str], accepted: Callable[[], web.Response]) -> Handler:
    """A server that accepts only the token "new" (answering ``accepted()``) and, at each
    refusal, rotates the token file to it, as the kubelet rotates a service account's;
    ``seen`` gets every request's Authorization."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer new":
            token.write_text("new\n")
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return accepted()

    return handler


def refusal_of(handler: Handler, *request: Any) -> BaseException:
    async def exchange(base_url: str) -> BaseException:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await send_once(base_url, *request)
        return refused.value

    error: BaseException = asyncio.run(serving(handler, exchange))
    return error


def test_a_write_arrives_as_the_api_server_expects_it_and_its_answer_is_read() -> None:
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=await request.read(),
        )
        return web.json_response({"status": {"share": "0.5"}}, status=201)

    async def exchange(base_url: str) -> Any:
        body = {"status": {"share": "0.5"}}
        return await send_once(
            base_url, "PATCH", "/apis/g/v1/queues/q/status", body,
            content_type=MERGE_PATCH, auth=BearerAuth("t"),
        )  # fmt: skip

    assert asyncio.run(serving(handler, exchange)) == {"status": {"share": "0.5"}}
    assert seen["method"] == "PATCH"
    assert seen["path"] == "/apis/g/v1/queues/q/status"
    assert seen["query"] == {"fieldManager": "sharekeeper"}
    assert json.loads(seen["body"]) == {"status": {"share": "0.5"}}
    headers = seen["headers"]
    assert headers["Content-Type"] == MERGE_PATCH
    assert headers["Accept"] == "application/json"
    assert headers["Authorization"] == "Bearer t"
    assert headers["Content-Length"] == str(len(seen["body"]))
    assert "Accept-Encoding" not in headers  # answers come plain


def test_a_delete_names_no_field_manager_and_an_empty_answer_is_none() -> None:
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(method=request.method, query=dict(request.query), body=await request.read())
        return web.Response(status=200)

    options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "u1"}}
    answer = asyncio.run(
        serving(handler, lambda base: send_once(base, "DELETE", "/apis/g/v1/queues/q", options))
    )
    assert answer is None
    assert (seen["method"], seen["query"]) == ("DELETE", {})
    assert json.loads(seen["body"]) == options


def test_a_refusal_is_lightkube_s_api_error_with_its_code_and_retry_after() -> None:
    """As the API server sends it: lightkube reads a Status only from "application/json"."""

    async def handler(request: web.Request) -> web.Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                "message": "too many requests", "reason": "TooManyRequests"}  # fmt: skip
        headers = {"Content-Type": "application/json", "Retry-After": "3"}
        return web.Response(body=json.dumps(body).encode(), status=429, headers=headers)

    error = refusal_of(handler, "POST", "/api/v1/namespaces/team/pods/x/eviction", {})
    assert isinstance(error, ApiError)
    assert error.status.code == 429
    assert http_status(error) == 429
    assert transient_reason(error) == "http_429"
    assert retry_after_seconds(error) == 3.0
    assert failure_text(error) == "HTTP 429: too many requests"


def test_a_refusal_that_is_no_status_is_httpx_s_error_with_the_page_s_text() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="<html>bad gateway</html>", status=502, content_type="text/html")

    error = refusal_of(handler, "PATCH", "/api/v1/nodes/n1", {"metadata": {}})
    assert not isinstance(error, ApiError)
    assert transient_reason(error) == "http_502"
    assert failure_text(error) == "HTTP 502: <html>bad gateway</html>"


def test_a_token_file_is_read_again_after_a_401_and_the_write_sent_again(tmp_path: Path) -> None:
    """A rotated service-account token: the first write's token is refused, the file holds a
    new one, and the same write goes again with it; later writes carry the new one at once."""
    token = tmp_path / "token"
    token.write_text("old\n")
    seen: list[str] = []
    handler = rotating_token(token, seen, lambda: web.json_response({"metadata": {"name": "x"}}))

    async def exchange(base_url: str) -> list[Any]:
        client = api(base_url, BearerTokenFileAuth(str(token)))
        try:
            return [await client.send("PATCH", f"/api/v1/nodes/n{i}", {}) for i in range(2)]
        finally:
            await client.close()

    answers = asyncio.run(serving(handler, exchange))
    assert answers == [{"metadata": {"name": "x"}}] * 2
    assert seen == ["Bearer old", "Bearer new", "Bearer new"]


def test_a_fixed_token_refused_is_the_answer_and_is_sent_once() -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        body = {"kind": "Status", "status": "Failure", "code": 401, "message": "Unauthorized"}
        return web.json_response(body, status=401)

    async def exchange(base_url: str) -> BaseException:
        with pytest.raises(ApiError) as refused:
            await send_once(base_url, "PATCH", "/api/v1/nodes/n1", {}, auth=BearerAuth("t"))
        return refused.value

    error = asyncio.run(serving(handler, exchange))
    assert http_status(error) == 401
    assert transient_reason(error) is None
    assert seen == ["Bearer t"]


def test_a_refused_connection_is_httpx_s_connect_error_and_worth_trying_again() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(httpx.ConnectError) as refused:
            asyncio.run(send_once(f"http://127.0.0.1:{port}", "PATCH", "/api/v1/nodes/n1", {}))
    assert transient_reason(refused.value) == "transport"


def test_an_answer_slower_than_the_read_timeout_is_httpx_s_read_timeout() -> None:
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(1)
        return web.json_response({})

    async def exchange(base_url: str) -> None:
        await send_once(base_url, "PATCH", "/slow", {}, read=0.2)

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

    with pytest.raises(httpx.TransportError) as cut:
        asyncio.run(serving(handler, lambda base: send_once(base, "PATCH", "/cut", {})))
    assert transient_reason(cut.value) == "transport"


def test_a_watch_s_lines_arrive_as_sent_whole_and_one_left_early_frees_the_api() -> None:
    """Each line as the server sends it, not at the end; a line split over chunks, or longer
    than aiohttp's own line reader takes (64 KiB), whole; a stream given up before its end
    does not hold the next request back."""
    sent_second = asyncio.Event()
    long_line = json.dumps({"type": "ADDED", "object": {"data": "x" * 200_000}}).encode()

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/plain":
            return web.json_response({"ok": True})
        assert request.query["watch"] == "true"
        answer = web.StreamResponse()
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        await answer.write(b'{"type":"ADDED"}\n{"type":')
        await asyncio.sleep(0.3)
        await answer.write(b'"MODIFIED"}\n' + long_line[:70_000])
        await asyncio.sleep(0.3)
        await answer.write(long_line[70_000:] + b"\n")
        sent_second.set()
        await asyncio.sleep(30)  # a watch stays open: the client leaves first
        return answer

    async def exchange(base_url: str) -> tuple[list[tuple[bytes, bool]], Any]:
        client = api(base_url)
        lines = []
        try:
            async with client.lines("/watch", {"watch": "true"}, read_seconds=5) as stream:
                async for line in stream:
                    lines.append((line, sent_second.is_set()))
                    if len(lines) == 3:
                        break
            plain = await asyncio.wait_for(client.send("GET", "/plain"), timeout=5)
            return lines, plain
        finally:
            await client.close()

    lines, plain = asyncio.run(serving(handler, exchange))
    # The first line was read before the server sent the second.
    assert lines[:2] == [(b'{"type":"ADDED"}', False), (b'{"type":"MODIFIED"}', False)]
    assert lines[2] == (long_line, True)
    assert plain == {"ok": True}


def test_a_watch_refused_raises_before_any_line_with_the_api_server_s_status() -> None:
    async def handler(request: web.Request) -> web.Response:
        body = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired",
                "message": "too old resource version: 5 (900)"}  # fmt: skip
        return web.json_response(body, status=410)

    async def exchange(base_url: str) -> BaseException:
        client = api(base_url)
        try:
            with pytest.raises(ApiError) as refused:
                async with client.lines("/api/v1/pods", {"watch": "true"}, read_seconds=5):
                    pytest.fail("no lines from a refusal")
            return refused.value
        finally:
            await client.close()

    error = asyncio.run(serving(handler, exchange))
    assert http_status(error) == 410
    assert isinstance(error, ApiError)
    assert error.status.reason == "Expired"


def test_a_watch_with_a_rotated_token_is_opened_again_with_the_new_one(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    seen: list[str] = []
    handler = rotating_token(token, seen, lambda: web.Response(body=b'{"type":"BOOKMARK"}\n'))

    async def exchange(base_url: str) -> list[bytes]:
        client = api(base_url, BearerTokenFileAuth(str(token)))
        try:
            async with client.lines("/watch", {"watch": "true"}, read_seconds=5) as stream:
                return [line async for line in stream]
        finally:
            await client.close()

    assert asyncio.run(serving(handler, exchange)) == [b'{"type":"BOOKMARK"}']
    assert seen == ["Bearer old", "Bearer new"]
