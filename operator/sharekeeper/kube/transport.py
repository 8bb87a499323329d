"""The writes' and the watches' path to the API server: JSON straight onto one aiohttp session.

Every write the operator makes (``writing``: statuses, node annotations, the gate's releases,
evictions, resizes, taints, the Queue mirrors, Events) is a small JSON body whose answer is read
as plain JSON. At the small Kueue shape a phase makes about 25,000 of them (one release and
about one ``AdmissionWaiting`` Event per pod), and through lightkube and httpx each cost this
process 1.3 to 1.6 ms of CPU: typed models built and read, the URL parsed and merged, httpx's
authentication, redirect and stream layers around the connection. Sent here, with the URL
joined from the server's address and the headers made once, a write costs about half
(``benchmarks/README.md``, "The writes' client").

A watch's stream comes the same way (``lines``), read line by line as it arrives: aiohttp's
HTTP parser is C, where httpx's transport reads each chunk through httpcore, h11 and anyio's TLS
stream in Python; about a third less CPU an event. The lists stay on httpx's transport
(``clients``), which was cheaper on their large answers.

What httpx gave stays. The kubeconfig's authentication is lightkube's own (``user_auth``): its
flow is run for the headers once, and again when the API server answers 401, so a rotated token
file is read again and an exec plugin asked again, as lightkube's client would. A refusal raises
lightkube's ``ApiError`` (httpx's ``HTTPStatusError`` for an answer that is not JSON), a failed
connection httpx's transport errors: the ones the retry policy (``transient``) and every caller
know.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
import httpx2 as httpx  # lightkube's HTTP client: its errors are the ones callers know
from lightkube import ApiError

from sharekeeper.kube.transient import status_message
from sharekeeper.model import jsontext

MAX_CONNECTIONS = 100
"""As httpx's default pool."""
JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
UNAUTHORIZED = 401


class Credentials:
    """The headers an authentication flow (``httpx.Auth``) sets, made once and made again only
    when the API server refuses them."""

    def __init__(self, auth: httpx.Auth | None, server: str) -> None:
        self._auth = auth
        self._server = server
        self._headers: dict[str, str] | None = None
        self._renewing = asyncio.Lock()

    async def headers(self) -> dict[str, str]:
        if self._headers is None:
            async with self._renewing:
                if self._headers is None:
                    self._headers = await self._flow(refused=False) or {}
        return self._headers

    async def renewed(self, refused: Mapping[str, str]) -> dict[str, str] | None:
        """Headers to try instead of ``refused`` (answered 401), or None when the flow has none:
        a fixed token was refused, and that is the answer."""
        async with self._renewing:
            if self._headers is not None and self._headers != refused:
                return self._headers  # another request renewed them meanwhile
            renewed = await self._flow(refused=True)
            if renewed is not None:
                self._headers = renewed
            return renewed

    async def _flow(self, *, refused: bool) -> dict[str, str] | None:
        """The headers the flow's first request carries; after a refusal, those of the request
        it sends again once told of a 401, or None if it sends none."""
        if self._auth is None:
            return None if refused else {}
        probe = httpx.Request("GET", self._server)
        plain = set(probe.headers.keys())
        flow = self._auth.async_auth_flow(probe)
        try:
            request = await flow.__anext__()
            if refused:
                request = await flow.asend(httpx.Response(UNAUTHORIZED, request=request))
        except StopAsyncIteration:
            return None
        finally:
            await flow.aclose()
        return {name: value for name, value in request.headers.items() if name not in plain}


class JsonApi:
    """JSON requests to the API server at ``server`` over one aiohttp session (made in the
    running loop at the first request), with ``tls`` as the kubeconfig describes the server and
    the client certificate, and the headers ``credentials`` make."""

    def __init__(
        self,
        server: str,
        tls: ssl.SSLContext,
        credentials: Credentials,
        *,
        connect_seconds: float,
        read_seconds: float,
        field_manager: str,
    ) -> None:
        self._server = server.rstrip("/")
        self._tls = tls
        self._credentials = credentials
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_seconds, sock_read=read_seconds
        )
        self._writes_query = "?" + urlencode({"fieldManager": field_manager})
        self._session: aiohttp.ClientSession | None = None

    async def send(
        self, method: str, path: str, body: object = None, *, content_type: str = JSON
    ) -> Any:
        """The answer's JSON value (None for an empty answer). Creates and patches name us as
        their field manager; a 401 is tried once more with renewed credentials."""
        url = self._server + path + (self._writes_query if method in ("POST", "PATCH") else "")
        data = None if body is None else jsontext.canonical(body)
        answer = await self._answer(method, url, data, content_type, self._timeout)
        async with answer:
            payload = await _read(answer, url)
        if answer.status >= 400:
            raise refusal(method, url, answer.status, answer.headers, payload)
        return jsontext.parse(payload) if payload else None

    @contextlib.asynccontextmanager
    async def lines(
        self, path: str, params: Mapping[str, str], *, read_seconds: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A GET whose answer is read line by line as it comes (a watch), each line without its
        newline; ``read_seconds`` at most between bytes. A refusal raises before any line."""
        url = f"{self._server}{path}?{urlencode(params)}"
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout.sock_connect, sock_read=read_seconds
        )
        answer = await self._answer("GET", url, None, JSON, timeout)
        try:
            if answer.status >= 400:
                payload = await _read(answer, url)
                raise refusal("GET", url, answer.status, answer.headers, payload)
            yield _lines(answer, url)
        finally:
            answer.close()  # a watch left before its end: its connection is not reused

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _opened(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls, limit=MAX_CONNECTIONS),
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
            )
        return self._session

    async def _answer(
        self,
        method: str,
        url: str,
        data: bytes | None,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """The answer once its headers are in, its body still to be read; a 401 is tried once
        more with renewed credentials."""
        headers = await self._credentials.headers()
        answer = await self._open(
            method, url, data, headers, content_type=content_type, timeout=timeout
        )
        if answer.status == UNAUTHORIZED:
            renewed = await self._credentials.renewed(headers)
            if renewed is not None:
                answer.release()
                answer = await self._open(
                    method, url, data, renewed, content_type=content_type, timeout=timeout
                )
        return answer

    async def _open(
        self,
        method: str,
        url: str,
        data: bytes | None,
        credentials: Mapping[str, str],
        *,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        headers = {**credentials, "Accept": JSON}
        if data is not None:
            headers["Content-Type"] = content_type
        with _httpx_errors(method, url):
            return await self._opened().request(
                method, url, data=data, headers=headers, timeout=timeout, allow_redirects=False
            )


@contextlib.contextmanager
def _httpx_errors(method: str, url: str) -> Iterator[None]:
    """aiohttp's failures raised as the errors httpx's own transport raises (``as_httpx``)."""
    try:
        yield
    except (TimeoutError, aiohttp.ClientError) as error:
        raise as_httpx(error, httpx.Request(method, url)) from error


async def _read(answer: aiohttp.ClientResponse, url: str) -> bytes:
    with _httpx_errors(answer.method, url):
        return await answer.read()


async def _lines(answer: aiohttp.ClientResponse, url: str) -> AsyncIterator[bytes]:
    """The body's lines as their bytes come, whatever their length (aiohttp's own line reader
    refuses a line longer than its buffer, and a watch event can be a 1.5 MB object)."""
    started: list[bytes] = []  # the line the last chunk ended in the middle of
    with _httpx_errors("GET", url):
        async for chunk in answer.content.iter_any():
            *ended, rest = chunk.split(b"\n")
            if ended:
                if started:
                    started.append(ended[0])
                    ended[0] = b"".join(started)
                    started.clear()
                for line in ended:
                    yield line
            if rest:
                started.append(rest)
    if started:
        yield b"".join(started)


def refusal(
    method: str, url: str, status: int, headers: Mapping[str, str], payload: bytes
) -> httpx.HTTPStatusError:
    """The error a refusal raises, as lightkube's client raises it: its ``Status`` as
    ``ApiError``, whose text is the API server's message, or httpx's error with the body's text
    when the body is no Status (a proxy's error page)."""
    request = httpx.Request(method, url)
    response = httpx.Response(status, headers=headers, content=payload, request=request)
    if response.headers.get("Content-Type", "").partition(";")[0].strip() == JSON:
        with contextlib.suppress(ValueError):  # not JSON after all
            return ApiError(request=request, response=response)
    said = status_message(response) or response.reason_phrase
    return httpx.HTTPStatusError(said, request=request, response=response)


def as_httpx(error: BaseException, request: httpx.Request) -> httpx.TransportError:
    """The httpx error a failure of this kind raises through httpx's own transport."""
    message = str(error) or type(error).__name__
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message, request=request)
    if isinstance(error, TimeoutError):  # aiohttp's read timeouts are this too
        return httpx.ReadTimeout(message, request=request)
    if isinstance(error, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message, request=request)
    if isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(message, request=request)
    return httpx.ReadError(message, request=request)
