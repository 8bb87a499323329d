"""The typed client's requests carried by aiohttp instead of httpcore.

A weight change at the top of a 10,000-queue tree moves about 10,000 statuses, each one PATCH,
and the gate sends one PATCH per pod it releases. Through httpx's own transport (httpcore, h11,
anyio) a PATCH cost this process 1.7 to 2.2 ms of CPU; carried by aiohttp, whose HTTP parser is
C, about 1 to 1.4 ms (``benchmarks/README.md``, "The writes' client"). That CPU is taken from
the rounds, under the GIL, and on a small control plane from the API server.

httpx stays the interface: lightkube builds the request, runs the kubeconfig's authentication
(tokens re-read on a 401, exec plugins), and reads the answer; its errors are the ones the retry
policy (``transient``) and every caller know, since aiohttp's are raised as their httpx
counterparts here. An answer's body streams as it comes, as through httpx's own transport.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping

import aiohttp
import httpx2 as httpx

MAX_CONNECTIONS = 100
"""As httpx's default pool."""

_HOP_BY_HOP = frozenset({b"host", b"content-length", b"connection", b"transfer-encoding"})
"""Headers aiohttp writes itself, from the URL and the body."""
_NOT_FORWARDED = _HOP_BY_HOP | {b"accept-encoding"}
"""And the compressions httpx offers: answers come plain, and httpx decodes nothing twice."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp session (made in the running loop at the first request) with ``tls`` as the
    kubeconfig describes the server and the client certificate."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self._tls = tls
        self._session: aiohttp.ClientSession | None = None

    def _opened(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls, limit=MAX_CONNECTIONS),
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The answer once its headers are in; its body streams (a watch's for minutes), and
        httpx reads it whole for a request that does not stream."""
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() not in _NOT_FORWARDED
        ]
        body = await request.aread()
        try:
            answer = await self._opened().request(
                request.method,
                str(request.url),
                data=body or None,
                headers=headers,
                timeout=_timeout(request.extensions.get("timeout") or {}),
                allow_redirects=False,
            )
        except (TimeoutError, aiohttp.ClientError) as error:
            raise _as_httpx(error, request) from error
        body_stream = _Body(answer, request)
        return httpx.Response(answer.status, headers=list(answer.raw_headers), stream=body_stream)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _Body(httpx.AsyncByteStream):
    """An answer's body as aiohttp reads it, its failures as httpx's."""

    def __init__(self, answer: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._answer = answer
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._answer.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ClientError) as error:
            raise _as_httpx(error, self._request) from error

    async def aclose(self) -> None:
        # Read to its end, the connection goes back to the pool; else it is closed.
        self._answer.release()


def _timeout(limits: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
    """httpx's per-request limits: ``connect`` to open a connection, ``read`` between bytes of
    the answer, ``pool`` to wait for a free connection."""
    return aiohttp.ClientTimeout(
        total=None,
        connect=limits.get("pool"),
        sock_connect=limits.get("connect"),
        sock_read=limits.get("read"),
    )


def _as_httpx(error: BaseException, request: httpx.Request) -> httpx.TransportError:
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
