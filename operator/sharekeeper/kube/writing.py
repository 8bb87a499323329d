"""The one writer: every write the operator makes to the API server goes through ``KubeWriter``.

Status and node-annotation merge patches, the Queue mirrors (create, patch, delete), the admission
gate's release, evictions (through the Eviction API, never a delete, so PodDisruptionBudgets
decide), CPU resizes (``pods/resize``, which can change resources and nothing else), our node
taint, and Events (``events``), each a JSON request on the writes' own path (``transport``).
At most ``concurrency`` requests are in flight, each transient failure is tried again under one
policy (``transient``), and every write is counted in ``sharekeeper_writes_total`` here.

Nothing here decides what to write: callers pass absolute values. Answers that settle a write
come back as values (the object is gone: None; an eviction refused: its outcome); anything else
raises, except for the writes whose callers only report (evictions, resizes, the taint, Events).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from sharekeeper import telemetry
from sharekeeper.kube.events import EventRecorder
from sharekeeper.kube.kinds import NODES, PODS, POLICIES, QOS_POLICIES, QUEUES
from sharekeeper.kube.transient import Retrying, http_status
from sharekeeper.kube.transport import MERGE_PATCH, STRATEGIC_PATCH, JsonApi
from sharekeeper.model.nodes import PREFIX
from sharekeeper.model.objects import MutableObj, is_mapping
from sharekeeper.model.pods import release_patch
from sharekeeper.model.quantities import to_quantity

logger = logging.getLogger(__name__)

T = TypeVar("T")
EvictionOutcome = Literal["accepted", "blocked", "refused", "gone"]
"""``blocked``: a PodDisruptionBudget said no; ``refused``: anything else did; ``gone``: the pod
was gone already (it holds nothing, as an evicted one)."""

_WITH_STATUS = {r.kind: r for r in (QUEUES, POLICIES, QOS_POLICIES)}
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
    """Writes through ``api`` (``transport``), at most ``concurrency`` requests in flight."""

    def __init__(
        self,
        api: JsonApi,
        *,
        concurrency: int = 16,
        retrying: Retrying | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        self._api = api
        self._slots = asyncio.Semaphore(concurrency)
        self._retrying = retrying or Retrying()
        # One recorder for every Event: one memory of recent Events and one budget per object,
        # as client-go's recorders share one broadcaster.
        self._events = events or EventRecorder(api)

    # --- statuses and annotations ---------------------------------------------------------------

    async def patch_status(self, kind: str, name: str, patch: MutableObj) -> MutableObj | None:
        """Patch ``status``; return the status now stored, or None if the object is gone."""
        path = f"{_WITH_STATUS[kind].object_path(name)}/status"
        updated = await self._patch(kind, path, {"status": patch})
        if updated is None:
            return None
        status = updated.get("status")
        return status if isinstance(status, dict) else {}

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        """Merge-patch the node's annotations; return our annotations now on it, None if gone."""
        node = await self._patch(
            "Node", NODES.object_path(name), {"metadata": {"annotations": patch}}
        )
        if node is None:
            return None
        metadata = node.get("metadata")
        annotations = metadata.get("annotations") if is_mapping(metadata) else None
        if not is_mapping(annotations):
            return {}
        return {k: v for k, v in annotations.items() if k.startswith(PREFIX)}

    # --- pods -----------------------------------------------------------------------------------

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        """Remove the admission gate from a pod; False if the pod is gone."""
        released = await self._patch(
            "Pod", PODS.object_path(name, namespace), release_patch(stamp),
            content_type=STRATEGIC_PATCH,
        )  # fmt: skip
        return released is not None

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[EvictionOutcome, str]:
        """Evict through the Eviction API; the outcome and the API server's words. An
        eviction's 429 is a budget's answer, never tried again."""
        eviction: MutableObj = {
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }  # fmt: skip
        if grace_period_seconds is not None:
            eviction["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        path = f"{PODS.object_path(name, namespace)}/eviction"
        try:
            await self._try(
                "Eviction", lambda: self._api.send("POST", path, eviction), answers=(429,)
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
        path = f"{PODS.object_path(name, namespace)}/resize"
        body = {"spec": {"containers": resize}}
        try:
            await self._try(
                "Pod",
                lambda: self._api.send("PATCH", path, body, content_type=STRATEGIC_PATCH),
            )
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
        path = NODES.object_path(node)
        try:
            await self._try(
                "Node", lambda: self._api.send("PATCH", path, patch, content_type=MERGE_PATCH)
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
        return await self._counted(
            MIRROR, lambda: self._api.send("POST", QUEUES.path, body), settled=(409,),
            done="created",
        )  # fmt: skip

    async def patch_queue(self, name: str, body: MutableObj) -> MutableObj | None:
        """The Queue as patched; None when it is gone or is another object now (its UID
        precondition failed)."""
        path = QUEUES.object_path(name)
        return await self._counted(
            MIRROR, lambda: self._api.send("PATCH", path, body, content_type=MERGE_PATCH),
            settled=(404, 409), done="patched",
        )  # fmt: skip

    async def delete_queue(self, name: str, uid: str) -> bool:
        """Deleted if it still is the object with ``uid`` (True); False when it is gone already
        or is another object now."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        path = QUEUES.object_path(name)
        answer = await self._counted(
            MIRROR, lambda: self._api.send("DELETE", path, options), settled=(404, 409),
            done="deleted",
        )  # fmt: skip
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
        self, kind: str, path: str, body: MutableObj, *, content_type: str = MERGE_PATCH
    ) -> MutableObj | None:
        """The object as patched, or None if it is gone."""
        answer = await self._counted(
            kind, lambda: self._api.send("PATCH", path, body, content_type=content_type)
        )
        if answer is None:
            return None
        return answer if isinstance(answer, dict) else {}
