"""Our own list-then-watch: keeps one store (a ``Sink``) in step with one kind in the API server.

Belongs here: the HTTP conversation for one resource. A paginated LIST, then a WATCH with
bookmarks resumed from the last resourceVersion; a relist when that version is too old (410);
retries with backoff that never give up; discovery polling for an optional kind (a CRD, ours or
Volcano's PodGroups, which may be installed or deleted at any time). The lists go through httpx's
transport, cheaper on their large answers; a watch's stream is read through aiohttp's
(``transport.JsonApi.lines``), about a third less CPU an event. Objects reach the sink as the
plain dicts ``json.loads`` would make (parsed by ``model.jsontext``): at 150,000 pods the cost per
object is its parse and one sink call, so no lightkube models here.

Does not belong: what an object means or how it is kept (the stores in ``cluster.store``), which
kinds are watched and when the operator counts as ready (the wiring, with ``all_synced``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2 as httpx  # lightkube's HTTP client

from sharekeeper import telemetry
from sharekeeper.kube.kinds import Resource
from sharekeeper.kube.transient import retry_after, status_detail, status_of
from sharekeeper.model import jsontext
from sharekeeper.model.objects import MutableObj
from sharekeeper.settings import WatchSettings

logger = logging.getLogger(__name__)


OBJECT_EVENTS = ("ADDED", "MODIFIED", "DELETED")


class Streams(Protocol):
    """Opens a watch: its answer's lines as they come (``transport.JsonApi.lines``); a refusal
    raises httpx's ``HTTPStatusError`` before any line, a failed connection its
    ``TransportError``."""

    def __call__(
        self, path: str, params: Mapping[str, str], *, read_seconds: float
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


# The server ends each watch at timeoutSeconds; silence this much longer means a dead connection.
WATCH_READ_MARGIN_SECONDS = 60.0


class Sink(Protocol):
    """Where a watch delivers objects (the store of one kind). Called on the event loop."""

    def list_started(self) -> None:
        """A LIST begins: remember which objects it delivers from now on."""
        ...

    def listed(self, objects: list[dict[str, Any]]) -> None:
        """One page of a LIST: upsert each object."""
        ...

    def list_finished(self) -> None:
        """The LIST is complete: remove every object not listed since ``list_started``."""
        ...

    def event(self, kind: str, obj: dict[str, Any]) -> None:
        """One watch event: ``kind`` is "ADDED", "MODIFIED" or "DELETED"."""
        ...


def all_synced(watches: Iterable[ListWatch]) -> bool:
    """Whether every watch has delivered its first complete list (readiness)."""
    return all(watch.synced.is_set() for watch in watches)


class _Expired(Exception):
    """410 Gone: the resourceVersion or continue token is older than the server keeps."""


class _NotServed(Exception):
    """404 for an optional resource: its CRD is gone."""


class _Failure(Exception):
    """Anything else: retried after a backoff. ``reason`` is the metric label and the streak's
    identity in the logs: "transport", "error" (an ERROR event), "http_<code>", "unexpected"."""

    def __init__(
        self,
        reason: str,
        detail: str,
        *,
        code: int | None = None,
        retry_after: float | None = None,
        traceback: bool = False,
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.code = code
        self.retry_after = retry_after
        self.traceback = traceback


@dataclass(slots=True)
class _Listing:
    """A LIST in progress: a failed page is asked for again, the pages before it are kept."""

    continue_token: str | None = None
    resource_version: str | None = None  # of the first page: all pages are one snapshot


class ListWatch:
    """Keeps ``sink`` in step with ``resource``: list, watch, relist when needed; never gives up.

    ``synced`` is set once the first complete list reached the sink (for an optional resource
    that is not served, as soon as discovery says so: there is nothing to wait for). ``served``
    is False while an optional resource is not served. ``listed`` says whether the sink holds
    a complete list now (kept current by the watch).

    ``wanted`` (optional) says whether the resource is needed now: True, False, or None while
    that is not known yet. While it is not True nothing is listed or watched; when it turns
    False the sink is emptied once (and ``synced`` set: there is nothing to wait for). Call
    ``reconsider()`` when its answer may have changed: a watch no longer wanted stops at once.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        resource: Resource,
        sink: Sink,
        settings: WatchSettings = WatchSettings(),
        *,
        streams: Streams,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        wanted: Callable[[], bool | None] | None = None,
    ) -> None:
        self._http = http
        self._streams = streams
        self._resource = resource
        self._sink = sink
        self._settings = settings
        self._sleep = sleep
        self._jitter = jitter
        self.synced = asyncio.Event()
        self.served = not resource.optional
        self.listed = False
        self._wanted = wanted
        self._reconsidered = asyncio.Event()
        self._resting = False
        self._looked = False  # discovery answered since the watch was last wanted
        self._resource_version: str | None = None  # where the next watch starts; None: list first
        self._listing: _Listing | None = None
        self._attempt = 0  # failures since the last success
        self._failing: str | None = None  # reason of the current failure streak, logged once
        self._watch_read_seconds = settings.watch_timeout_seconds + WATCH_READ_MARGIN_SECONDS
        selector = resource.field_selector
        self._selector = {"fieldSelector": selector} if selector else {}
        self._event_counters = {
            kind: telemetry.WATCH_EVENTS.labels(resource.name, kind)
            for kind in (*OBJECT_EVENTS, "BOOKMARK", "ERROR")
        }
        telemetry.WATCH_SYNCED.labels(resource.name).set(0)
        if resource.optional:
            telemetry.WATCH_SERVED.labels(resource.name).set(0)

    @property
    def wanted(self) -> bool:
        """Whether the resource is listed and watched now (always, without ``wanted``)."""
        return self._wanted is None or self._wanted() is True

    def reconsider(self) -> None:
        """``wanted`` may answer differently now."""
        self._reconsidered.set()

    async def run(self) -> None:
        """List and watch until cancelled; never raises anything but CancelledError."""
        while True:
            try:
                if self._wanted is None:
                    await self._step()
                elif not await self._step_while_wanted():
                    await self._rest()
            except _Expired:
                logger.info("%s: resourceVersion too old (410), relisting", self._resource.name)
                self._start_over("expired")
            except _NotServed:
                await self._no_longer_served()
            except _Failure as failure:
                await self._back_off(failure)
            except Exception as error:
                # A malformed answer or a failing sink: the store may have missed an event.
                self._start_over("error")
                await self._back_off(_Failure("unexpected", repr(error), traceback=True))

    async def _step_while_wanted(self) -> bool:
        """One step, cancelled as soon as the resource is no longer wanted; False when it is
        not wanted (nothing done)."""
        assert self._wanted is not None
        if self._wanted() is not True:
            return False
        self._resting = False
        step = asyncio.ensure_future(self._step())
        try:
            while True:
                self._reconsidered.clear()
                change = asyncio.ensure_future(self._reconsidered.wait())
                try:
                    await asyncio.wait({step, change}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    change.cancel()
                if step.done():
                    step.result()  # what the step raised, for run() to handle
                    return True
                if self._wanted() is not True:
                    return False
        finally:
            if not step.done():
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await step

    async def _rest(self) -> None:
        """Not wanted (or not known yet): the sink emptied once it is known not to be, then
        nothing until ``reconsider()``."""
        assert self._wanted is not None
        self._reconsidered.clear()
        decided = self._wanted()
        if decided is True:
            return
        if decided is False and not self._resting:
            self._resting = True
            self._looked = False
            logger.info("%s: not needed now, not watched", self._resource.name)
            self._sink.list_started()
            self._sink.list_finished()
            self._resource_version = None
            self._listing = None
            self.listed = False
            self.served = not self._resource.optional  # unknown: discovery asks again
            if not self.synced.is_set():
                self.synced.set()  # nothing to list, nothing to wait for
                telemetry.WATCH_SYNCED.labels(self._resource.name).set(1)
        await self._reconsidered.wait()

    async def _step(self) -> None:
        if not self.served:
            await self._discover()
            if not self.served:
                await self._sleep(self._settings.discovery_interval_seconds)
                return
        if self._resource_version is None:
            await self._list()
        await self._watch()

    async def _discover(self) -> None:
        resource = self._resource
        response = await self._get(resource.group_path)
        if response.status_code == 404:
            served = False
        elif response.status_code == 200:
            served = any(r.get("name") == resource.plural for r in response.json()["resources"])
        else:
            raise self._refusal(response)
        self._recovered()
        if served and self.synced.is_set() and self._looked:
            logger.info("%s: now served, listing it", resource.name)
        elif not served and not (self.synced.is_set() and self._looked):
            logger.log(
                self._not_served_level,
                "%s: not served (its CRD is not installed); checking every %gs",
                resource.name, self._settings.discovery_interval_seconds,
            )  # fmt: skip
        self._set_served(served)
        self._looked = True

    async def _list(self) -> None:
        if self._listing is None:
            self._sink.list_started()
            self._listing = _Listing()
        listing = self._listing
        while True:
            params = {"limit": str(self._settings.page_size), **self._selector}
            if listing.continue_token:
                params["continue"] = listing.continue_token
            response = await self._get(self._resource.path, params)
            if response.status_code != 200:
                raise self._refusal(response)
            page = jsontext.parse(response.content)
            self._recovered()
            metadata = page["metadata"]
            if listing.resource_version is None:
                listing.resource_version = metadata["resourceVersion"]
            self._sink.listed(page.get("items") or [])
            listing.continue_token = metadata.get("continue")
            if not listing.continue_token:
                break
        self._listing = None
        self._sink.list_finished()
        self.listed = True
        self._resource_version = listing.resource_version
        telemetry.WATCH_LISTS.labels(self._resource.name).inc()
        if not self.synced.is_set():
            logger.info("%s: synced", self._resource.name)
            self.synced.set()
            telemetry.WATCH_SYNCED.labels(self._resource.name).set(1)

    async def _watch(self) -> None:
        version = self._resource_version
        if version is None:  # a list ended without one (``_step`` lists first): list again
            raise _Expired()
        params = {
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._settings.watch_timeout_seconds),
            **self._selector,
        }
        try:
            async with self._streams(
                self._resource.path, params, read_seconds=self._watch_read_seconds
            ) as lines:
                async for line in lines:
                    if line:
                        self._on_event(jsontext.parse(line))
                        if self._failing is not None:
                            self._recovered()
        except httpx.HTTPStatusError as refused:
            failure = self._refusal(refused.response)
            if isinstance(failure, _Failure):
                self._count_restart(failure.reason)
            raise failure from None
        except httpx.TransportError as error:
            self._count_restart("transport")
            raise _Failure("transport", repr(error)) from error
        except _Failure as failure:
            self._count_restart(failure.reason)
            raise
        self._recovered()
        self._count_restart("timeout")

    def _on_event(self, event: MutableObj) -> None:
        kind = event["type"]
        obj = event["object"]
        counter = self._event_counters.get(kind)
        if counter is not None:
            counter.inc()
        if kind in OBJECT_EVENTS:
            self._sink.event(kind, obj)
            self._resource_version = obj["metadata"]["resourceVersion"]
        elif kind == "BOOKMARK":
            self._resource_version = obj["metadata"]["resourceVersion"]
        elif kind == "ERROR":
            code = obj.get("code")
            raise self._classify(code if isinstance(code, int) else None, obj, reason="error")

    async def _get(self, path: str, params: dict[str, str] | None = None) -> httpx.Response:
        try:
            return await self._http.get(path, params=params)
        except httpx.TransportError as error:
            raise _Failure("transport", repr(error)) from error

    def _refusal(self, response: httpx.Response) -> Exception:
        """What a non-200 answer means; its body is usually a Status, sometimes plain text."""
        code = response.status_code
        pause = retry_after(response.headers.get("Retry-After")) if code == 429 else None
        return self._classify(code, status_of(response), reason=f"http_{code}", retry_after=pause)

    def _classify(
        self, code: int | None, status: MutableObj, *, reason: str, retry_after: float | None = None
    ) -> Exception:
        if code == 410 or status.get("reason") in ("Expired", "Gone"):
            return _Expired()
        if code == 404 and self._resource.optional:
            return _NotServed()
        return _Failure(reason, status_detail(status), code=code, retry_after=retry_after)

    def _count_restart(self, reason: str) -> None:
        telemetry.WATCH_RESTARTS.labels(self._resource.name, reason).inc()

    def _start_over(self, reason: str) -> None:
        telemetry.WATCH_RELISTS.labels(self._resource.name, reason).inc()
        self._resource_version = None
        self._listing = None

    async def _no_longer_served(self) -> None:
        logger.log(
            self._not_served_level,
            "%s: no longer served (its CRD was deleted); emptying its store, checking every %gs",
            self._resource.name, self._settings.discovery_interval_seconds,
        )  # fmt: skip
        self._sink.list_started()
        self._sink.list_finished()
        self.listed = False
        self._resource_version = None
        self._listing = None
        self._set_served(False)
        # Discovery may still list the resource for a moment: ask again only after a while.
        await self._sleep(self._settings.discovery_interval_seconds)

    @property
    def _not_served_level(self) -> int:
        return logging.WARNING if self._resource.warn_when_not_served else logging.INFO

    def _set_served(self, served: bool) -> None:
        self.served = served
        telemetry.WATCH_SERVED.labels(self._resource.name).set(1 if served else 0)
        if not served and not self.synced.is_set():
            self.synced.set()  # nothing to list, nothing to wait for
            telemetry.WATCH_SYNCED.labels(self._resource.name).set(1)

    async def _back_off(self, failure: _Failure) -> None:
        if failure.reason != self._failing:
            self._log_failure(failure)
            self._failing = failure.reason
        delay = self._delay(failure)
        self._attempt += 1
        await self._sleep(delay)

    def _delay(self, failure: _Failure) -> float:
        settings = self._settings
        if failure.code in (401, 403):
            return settings.backoff_max_seconds  # nothing changes soon: no point asking often
        if failure.retry_after is not None:
            return min(failure.retry_after, settings.backoff_max_seconds)
        return settings.backoff.delay(self._attempt + 1, self._jitter())

    def _log_failure(self, failure: _Failure) -> None:
        name = self._resource.name
        if failure.code in (401, 403):
            logger.error(
                "%s: the operator lacks permission to list/watch %s (HTTP %d: %s); check its "
                "ServiceAccount and RBAC. Retrying every %gs",
                name, self._resource.path, failure.code, failure.detail,
                self._settings.backoff_max_seconds,
            )  # fmt: skip
        else:
            logger.warning(
                "%s: list/watch failed (%s: %s); retrying with backoff",
                name, failure.reason, failure.detail, exc_info=failure.traceback,
            )  # fmt: skip

    def _recovered(self) -> None:
        if self._failing is not None:
            logger.info(
                "%s: recovered after %d failed attempts", self._resource.name, self._attempt
            )
        self._failing = None
        self._attempt = 0
