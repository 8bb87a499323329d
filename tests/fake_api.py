"""Stand-ins for the JSON path (``kube.transport.JsonApi``): scripted answers, refusals raised
as the transport raises them, and a watch's lines read through a faked plain client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import httpx2 as httpx

from sharekeeper.kube.transport import JSON, JsonApi, refusal
from sharekeeper.kube.watching import Streams
from sharekeeper.model import jsontext

URL = "https://127.0.0.1"


class Call(NamedTuple):
    method: str
    path: str
    body: Any
    content_type: str


def refused(code: int, body: dict[str, Any] | None = None, **headers: str) -> Exception:
    """The API server's refusal with ``body`` (a Status saying ``HTTP <code>`` by default), as
    the transport raises it."""
    status = body or {
        "kind": "Status", "status": "Failure", "code": code, "message": f"HTTP {code}",
    }  # fmt: skip
    answer_headers = {"Content-Type": JSON, **headers}
    return refusal("PATCH", URL, code, answer_headers, jsontext.canonical(status))


def plain_refusal(code: int, text: str) -> Exception:
    """A refusal whose body is no Status (a proxy's error page)."""
    return refusal("PATCH", URL, code, {"Content-Type": "text/html"}, text.encode())


@dataclass(eq=False)
class FakeApi:
    """Each request answered by ``answer(call)`` when given, else by the next scripted error,
    then with ``result``; every request is recorded in ``calls``."""

    errors: list[BaseException] = field(default_factory=list)
    result: Any = None
    answer: Callable[[Call], Any] | None = None
    calls: list[Call] = field(default_factory=list)

    async def send(
        self, method: str, path: str, body: object = None, *, content_type: str = JSON
    ) -> Any:
        call = Call(method, path, body, content_type)
        self.calls.append(call)
        if self.answer is not None:
            return self.answer(call)
        if self.errors:
            raise self.errors.pop(0)
        return self.result

    def as_api(self) -> JsonApi:
        return cast(JsonApi, self)


def streams_through(http: httpx.AsyncClient) -> Streams:
    """A watch's lines read through the plain client ``http`` (whose transport fakes the API
    server), refused as ``JsonApi.lines`` refuses: the streams of ``ListWatch`` in tests that
    script the API server's answers request by request. ``JsonApi.lines`` itself is tested on a
    loopback server (``tests/kube/test_transport.py``)."""

    @contextlib.asynccontextmanager
    async def lines(
        path: str, params: Mapping[str, str], *, read_seconds: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        timeout = httpx.Timeout(http.timeout.connect, read=read_seconds)
        async with http.stream("GET", path, params=dict(params), timeout=timeout) as answer:
            if answer.status_code >= 400:
                payload = await answer.aread()
                raise refusal("GET", path, answer.status_code, answer.headers, payload)
            yield (line.encode() async for line in answer.aiter_lines())

    return lines
