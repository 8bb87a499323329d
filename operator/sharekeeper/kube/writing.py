"""The one writer: every write the operator makes to the API server goes through ``KubeWriter``.

Status and node-annotation merge patches, the Queue mirrors (create, patch, delete), the admission
gate's release, evictions (through the Eviction API, never a delete, so PodDisruptionBudgets
decide), CPU resizes (``pods/resize``, which can change resources and nothing else), our node
taint, and Events (``events``). At most ``concurrency`` requests are in flight, each transient
failure is tried again under one policy (``transient``), and every write is counted in
``sharekeeper_writes_total`` here.

Nothing here decides what to write: callers pass absolute values. Answers that settle a write
come back as values (the object is gone: None; an eviction refused: its outcome); anything else
raises, except for the writes whose callers only report (evictions, resizes, the taint, Events).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

import httpx2 as httpx  # lightkube's HTTP client
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_global_resource
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Status
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from sharekeeper import telemetry
from sharekeeper.kube.clients import FIELD_MANAGER
from sharekeeper.kube.events import EventRecorder
from sharekeeper.kube.kinds import POLICIES, QOS_POLICIES, QUEUES
from sharekeeper.kube.listing import status_message
from sharekeeper.kube.transient import Retrying, http_status
from sharekeeper.model.nodes import PREFIX
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.pods import release_patch
from sharekeeper.model.quantities import to_quantity

logger = logging.getLogger(__name__)

T = TypeVar("T")
EvictionOutcome = Literal["accepted", "blocked", "refused", "gone"]
"""``blocked``: a PodDisruptionBudget said no; ``refused``: anything else did; ``gone``: the pod
was gone already (it holds nothing, as an evicted one)."""

_WITH_STATUS = {
    r.kind: create_global_resource(r.group, r.version, r.kind, r.plural)
    for r in (QUEUES, POLICIES, QOS_POLICIES)
}
MIRROR = "QueueMirror"
"""The kind the Queue mirrors' writes are counted under (they are Queues, but not statuses)."""
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
"""``policy/v1`` ``DisruptionBudgetCause``: the reason of the cause a budget's 429 carries."""


class Writes(Protocol):
    """What the loops write through (``KubeWriter``; tests give fakes of the part they use)."""

    async def patch_status(self, kind: str, name: str, patch: MutableObj) -> MutableObj | None: ...

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None: ...

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool: ...

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[EvictionOutcome, str]: ...

    async def resize_cpu_limits(
        self, namespace: str, name: str, milli_by_container: Mapping[str, int]
    ) -> str | None: ...

    async def set_taints(
        self, node: str, taints: Sequence[Mapping[str, Any]], resource_version: str
    ) -> None: ...

    async def create_queue(self, body: MutableObj) -> MutableObj | None: ...

    async def patch_queue(self, name: str, body: MutableObj) -> MutableObj | None: ...

    async def delete_queue(self, name: str, uid: str) -> bool: ...

    async def event(
        self, target: Mapping[str, str], reason: str, message: str, *, warning: bool
    ) -> None: ...


def failure_text(error: BaseException) -> str:
    """Why a write failed, in one line of at most 500 characters: the API server's code and
    message (``HTTP 413: etcdserver: request is too large``), or the client's error."""
    code = http_status(error)
    text = " ".join(str(error).split()) or type(error).__name__
    said = f"HTTP {code}: {text}" if code is not None else f"{type(error).__name__}: {text}"
    return said[:500]


def budget_refusal(status: Status) -> str | None:
    """The API server's answer, if a PodDisruptionBudget refused the eviction: a 429 whose
    causes include ``DisruptionBudget`` (no disruption allowed now, or the budget not yet
    processed), or the 500 for a pod that more than one budget selects (which the Eviction
    API never allows). None for any other refusal."""
    causes = [
        c for c in (status.details.causes if status.details else None) or []
        if c.reason == DISRUPTION_BUDGET_CAUSE
    ]  # fmt: skip
    message = status.message or ""
    several = status.code == 500 and "more than one PodDisruptionBudget" in message
    if not (status.code == 429 and causes) and not several:
        return None
    return " ".join([f"{status.code}: {message}", *(c.message for c in causes if c.message)])


class KubeWriter:
    """Writes through lightkube's ``client`` (typed objects) and the plain ``http`` client (the
    Queue mirrors, plain JSON), at most ``concurrency`` requests in flight."""

    def __init__(
        self,
        client: AsyncClient,
        http: httpx.AsyncClient,
        *,
        concurrency: int = 16,
        retrying: Retrying | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        self._client = client
        self._http = http
        self._slots = asyncio.Semaphore(concurrency)
        self._retrying = retrying or Retrying()
        # One recorder for every Event: one memory of recent Events and one budget per object,
        # as client-go's recorders share one broadcaster.
        self._events = events or EventRecorder(client)

    # --- statuses and annotations ---------------------------------------------------------------

    async def patch_status(self, kind: str, name: str, patch: MutableObj) -> MutableObj | None:
        """Patch ``status``; return the status now stored, or None if the object is gone."""
        resource = _WITH_STATUS[kind].Status
        updated: Any = await self._patch(kind, resource, name, {"status": patch})
        if updated is None:
            return None
        status: MutableObj = updated.get("status") or {}
        return status

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        """Merge-patch the node's annotations; return our annotations now on it, None if gone."""
        node = await self._patch("Node", Node, name, {"metadata": {"annotations": patch}})
        if node is None:
            return None
        annotations = node.metadata.annotations if node.metadata is not None else None
        return {k: v for k, v in (annotations or {}).items() if k.startswith(PREFIX)}

    # --- pods -----------------------------------------------------------------------------------

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        """Remove the admission gate from a pod; False if the pod is gone."""
        released = await self._patch(
            "Pod", Pod, name, release_patch(stamp), namespace=namespace,
            patch_type=PatchType.STRATEGIC,
        )  # fmt: skip
        return released is not None

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[EvictionOutcome, str]:
        """Evict through the Eviction API; the outcome and the API server's words. An
        eviction's 429 is a budget's answer, never tried again."""
        options = (
            DeleteOptions(gracePeriodSeconds=grace_period_seconds)
            if grace_period_seconds is not None
            else None
        )
        eviction = Pod.Eviction(
            metadata=ObjectMeta(name=name, namespace=namespace), deleteOptions=options
        )
        try:
            await self._try(
                "Eviction",
                lambda: self._client.create(eviction, name=name, namespace=namespace),
                answers=(429,),
            )
        except ApiError as error:
            said = f"{error.status.code}: {error.status.message}"
            if error.status.code == 404:
                telemetry.WRITES.labels("Eviction", "gone").inc()
                return "gone", said
            telemetry.WRITES.labels("Eviction", "refused").inc()
            budget = budget_refusal(error.status)
            if budget is not None:
                return "blocked", budget
            return "refused", said
        telemetry.WRITES.labels("Eviction", "ok").inc()
        return "accepted", "evicted"

    async def resize_cpu_limits(
        self, namespace: str, name: str, milli_by_container: Mapping[str, int]
    ) -> str | None:
        """Set these containers' CPU limits through ``pods/resize``; None when done, else the
        API server's refusal."""
        resize = [
            {"name": c, "resources": {"limits": {"cpu": to_quantity("cpu", milli)}}}
            for c, milli in milli_by_container.items()
        ]
        try:
            await self._try(
                "Pod",
                lambda: self._client.patch(
                    Pod.Resize, name, {"spec": {"containers": resize}}, namespace=namespace,
                    patch_type=PatchType.STRATEGIC,
                ),
            )  # fmt: skip
        except ApiError as error:
            telemetry.WRITES.labels("Pod", "error").inc()
            return f"{error.status.code}: {error.status.message}"
        telemetry.WRITES.labels("Pod", "ok").inc()
        return None

    # --- nodes ----------------------------------------------------------------------------------

    async def set_taints(
        self, node: str, taints: Sequence[Mapping[str, Any]], resource_version: str
    ) -> None:
        """Replace the node's taints with ``taints``, if it is still at ``resource_version``;
        a node that changed since (409) is not tried again: the caller reads it anew."""
        patch = {
            "metadata": {"resourceVersion": resource_version},
            "spec": {"taints": [dict(t) for t in taints]},
        }
        try:
            await self._try(
                "Node", lambda: self._client.patch(Node, node, patch, patch_type=PatchType.MERGE)
            )
        except ApiError as error:
            conflict = error.status.code == 409
            telemetry.WRITES.labels("Node", "conflict" if conflict else "error").inc()
            logger.warning("could not write the taints of %s: %s", node, error)
            return
        telemetry.WRITES.labels("Node", "ok").inc()

    # --- Queue mirrors --------------------------------------------------------------------------

    async def create_queue(self, body: MutableObj) -> MutableObj | None:
        """The Queue as created; None when one of that name exists already."""
        return await self._send("created", "POST", QUEUES.path, json=body, settled=(409,))

    async def patch_queue(self, name: str, body: MutableObj) -> MutableObj | None:
        """The Queue as patched; None when it is gone or is another object now (its UID
        precondition failed)."""
        return await self._send(
            "patched", "PATCH", f"{QUEUES.path}/{name}",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/merge-patch+json"},
            settled=(404, 409),
        )  # fmt: skip

    async def delete_queue(self, name: str, uid: str) -> bool:
        """Deleted if it still is the object with ``uid`` (True); False when it is gone already
        or is another object now."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        answer = await self._send(
            "deleted", "DELETE", f"{QUEUES.path}/{name}", json=options, settled=(404, 409)
        )
        return answer is not None

    # --- Events ---------------------------------------------------------------------------------

    async def event(
        self, target: Mapping[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        """An Event on ``target`` (``kinds.reference``); never raises."""
        async with self._slots:
            await self._events.post(target, reason, message, warning=warning)

    # --- the one way a request is made ----------------------------------------------------------

    async def _try(
        self, kind: str, request: Callable[[], Awaitable[T]], *, answers: tuple[int, ...] = ()
    ) -> T:
        """``request`` under the retry policy, each try in a slot of its own (a pause between
        tries holds none)."""

        async def attempt() -> T:
            async with self._slots:
                return await request()

        return await self._retrying(kind, attempt, answers=answers)

    async def _counted(
        self,
        kind: str,
        request: Callable[[], Awaitable[T]],
        *,
        settled: tuple[int, ...] = (404,),
        done: str = "ok",
    ) -> T | None:
        """``request`` under the retry policy, counted in ``WRITES`` by how it ended; None when
        the API server's answer is one of ``settled`` (404: the object is gone; 409: its
        precondition failed or the name is taken)."""
        try:
            answer = await self._try(kind, request)
        except Exception as error:
            code = http_status(error)
            if code in settled:
                telemetry.WRITES.labels(kind, "gone" if code == 404 else "conflict").inc()
                return None
            telemetry.WRITES.labels(kind, "error").inc()
            raise
        telemetry.WRITES.labels(kind, done).inc()
        return answer

    async def _patch(
        self,
        kind: str,
        resource: Any,
        name: str,
        body: MutableObj,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Any:
        """The object as patched, or None if it is gone."""
        return await self._counted(
            kind,
            lambda: self._client.patch(
                resource, name, body, namespace=namespace, patch_type=patch_type
            ),
        )

    async def _send(
        self, done: str, method: str, path: str, *, settled: tuple[int, ...], **request: Any
    ) -> MutableObj | None:
        """A plain-JSON request; None when its answer is one of ``settled``."""
        params = {"fieldManager": FIELD_MANAGER} if method != "DELETE" else None

        async def send() -> MutableObj:
            response = await self._http.request(method, path, params=params, **request)
            if response.is_error:
                raise refusal_error(response)
            answer: MutableObj = response.json()
            return answer

        return await self._counted(MIRROR, send, settled=settled, done=done)


def refusal_error(response: httpx.Response) -> httpx.HTTPStatusError:
    """The error a refusal of the plain client raises, as the typed client raises it: its
    ``Status`` as lightkube's ``ApiError``, whose text is the API server's message (httpx's
    own would be "Client error '422 Unprocessable Entity' for url ..." and a link), or httpx's
    error with the body's text when the body is no Status (a proxy's error page)."""
    if response.headers.get("Content-Type") == "application/json":
        with contextlib.suppress(ValueError):  # not JSON after all
            return ApiError(request=response.request, response=response)
    said = status_message(response) or response.reason_phrase
    return httpx.HTTPStatusError(said, request=response.request, response=response)
