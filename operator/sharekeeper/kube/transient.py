"""The one transient-error policy: what is worth trying again, after how long, and one API write
carried through a transient failure (a few attempts, backing off with jitter). The watches use
the same backoff and Retry-After, but never give up (``watching``).

Transient: the API server is overloaded (429, after the Retry-After it sends; 503), failed inside
(500), a proxy in front of it failed (502, 504), or the connection did (a timeout, a reset, a
refused connection). Anything else (404, 409, 422, an admission webhook's refusal) is the
answer, returned to the caller at once; so is a code the caller names as an answer for its
request (an eviction's 429 is a PodDisruptionBudget saying no).

The attempts and their total time are bounded, so an object the API server keeps failing holds
one writer for seconds, never a round: the write is then given up, and the loop's next round
wants it again if it still should be written. The writes retried here are idempotent: merge
patches of absolute values, a resize to absolute limits, an eviction of one pod (of a pod
already being deleted, accepted again).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TypeVar

import httpx2 as httpx  # lightkube's HTTP client: its errors are lightkube's errors

from sharekeeper import telemetry
from sharekeeper.settings import RetryPolicy

T = TypeVar("T")

TRANSIENT_CODES = frozenset({429, 500, 502, 503, 504})


def http_status(error: BaseException) -> int | None:
    """The HTTP status of a refused request: lightkube's ``ApiError``, or httpx's error for a
    body that is not JSON (e.g. a proxy's 502 page); None when no answer came."""
    return error.response.status_code if isinstance(error, httpx.HTTPStatusError) else None


def transient_reason(error: BaseException) -> str | None:
    """Why trying again may succeed, as the metric's label (``http_503``, ``timeout``,
    ``transport``); None when the error is the answer."""
    code = http_status(error)
    if code is not None:
        return f"http_{code}" if code in TRANSIENT_CODES else None
    if isinstance(error, httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(error, httpx.TransportError):
        return "transport"
    return None


def status_message(response: httpx.Response) -> str:
    """What a refusal says: its Status' message (or reason), else the first 300 characters of
    its text (an aggregator's or a proxy's plain-text error)."""
    return status_detail(status_of(response))


def status_of(response: httpx.Response) -> dict[str, object]:
    """A refusal's body: the API server's Status, or ``{"message": <its first 300
    characters>}`` when it is not a JSON object (an aggregator's or a proxy's plain text)."""
    try:
        status = response.json()
    except ValueError:
        status = None
    return status if isinstance(status, dict) else {"message": response.text[:300]}


def status_detail(status: Mapping[str, object]) -> str:
    """A Status' message, else its reason."""
    return str(status.get("message") or status.get("reason") or "").strip()


def retry_after_seconds(error: BaseException) -> float | None:
    """The ``Retry-After`` of a refusal, if it sent one."""
    if not isinstance(error, httpx.HTTPStatusError):
        return None
    return retry_after(error.response.headers.get("Retry-After"))


def retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (it may be seconds or an HTTP date); None without."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


class Retrying:
    """Runs requests under a ``RetryPolicy``; the clock, the sleep and the jitter are
    injectable so that tests need not wait."""

    def __init__(
        self,
        policy: RetryPolicy = RetryPolicy(),
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._policy = policy
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter

    async def __call__(
        self,
        kind: str,
        request: Callable[[], Awaitable[T]],
        *,
        answers: Collection[int] = (),
    ) -> T:
        """``request()`` until it succeeds, fails for good, or the tries or the time run out;
        the last error is raised. ``kind`` labels the retries counted; ``answers`` are codes
        that are this request's answer although they are transient for others."""
        policy = self._policy
        started = self._clock()
        retry = 0
        while True:
            remaining = policy.deadline_seconds - (self._clock() - started)
            try:
                async with asyncio.timeout(remaining):
                    return await request()
            except Exception as error:
                reason = transient_reason(error)
                if reason is None or http_status(error) in answers:
                    raise
                retry += 1
                pause = retry_after_seconds(error)
                if pause is None:
                    pause = policy.backoff.delay(retry, self._jitter())
                elapsed = self._clock() - started
                if retry >= policy.attempts or elapsed + pause >= policy.deadline_seconds:
                    raise
                telemetry.WRITE_RETRIES.labels(kind, reason).inc()
            await self._sleep(pause)
