"""Status patches, node annotations and the Events about them, via lightkube (the QoS
actions, evictions, resizes and taints, are in ``publish.actions``). A patch is tried again
through transient failures (``publish.retrying``); one that still fails raises, and the loop's
next round wants it again."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_global_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from sharekeeper import telemetry
from sharekeeper.model.nodes import PREFIX
from sharekeeper.model.pods import release_patch
from sharekeeper.publish.actions import budget_refusal
from sharekeeper.publish.diffing import Json, Transition
from sharekeeper.publish.events import recorder_for
from sharekeeper.publish.retrying import Retrying, http_status
from sharekeeper.publish.statuses import Kind

logger = logging.getLogger(__name__)

EvictionOutcome = Literal["accepted", "blocked", "refused", "gone"]

RESOURCES = {
    "Queue": create_global_resource("scheduling.sharekeeper.io", "v1alpha1", "Queue", "queues"),
    "SchedulerPolicy": create_global_resource(
        "scheduling.sharekeeper.io", "v1alpha1", "SchedulerPolicy", "schedulerpolicies"
    ),
    "NodeQosEnsurancePolicy": create_global_resource(
        "ensurance.sharekeeper.io", "v1alpha1", "NodeQosEnsurancePolicy", "nodeqosensurancepolicies"
    ),
}
API_VERSIONS = {
    "Queue": "scheduling.sharekeeper.io/v1alpha1",
    "SchedulerPolicy": "scheduling.sharekeeper.io/v1alpha1",
    "NodeQosEnsurancePolicy": "ensurance.sharekeeper.io/v1alpha1",
}


def failure_text(error: BaseException) -> str:
    """Why a write failed, in one line of at most 500 characters: the API server's code and
    message (``HTTP 413: etcdserver: request is too large``), or the client's error."""
    code = http_status(error)
    text = " ".join(str(error).split()) or type(error).__name__
    said = f"HTTP {code}: {text}" if code is not None else f"{type(error).__name__}: {text}"
    return said[:500]


class KubeWriter:
    """Status merge-patches and Events, at most ``concurrency`` requests in flight."""

    def __init__(
        self, client: AsyncClient, *, concurrency: int = 16, retrying: Retrying | None = None
    ) -> None:
        self._client = client
        self._slots = asyncio.Semaphore(concurrency)
        self._retrying = retrying or Retrying()

    async def patch_status(self, kind: Kind, name: str, patch: Json) -> Json | None:
        """Patch ``status``; return the status now stored, or None if the object is gone."""
        resource = RESOURCES[kind].Status
        updated: Any = await self._patch(kind, resource, name, {"status": patch})
        if updated is None:
            return None
        status: Json = updated.get("status") or {}
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

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        """Remove the admission gate from a pod; False if the pod is gone."""
        released = await self._patch(
            "Pod", Pod, name, release_patch(stamp), namespace=namespace,
            patch_type=PatchType.STRATEGIC,
        )  # fmt: skip
        return released is not None

    async def evict_pod(self, namespace: str, name: str) -> tuple[EvictionOutcome, str]:
        """Evict through the Eviction API (never a delete), so PodDisruptionBudgets decide:
        ``blocked`` is a budget's refusal, ``refused`` any other, ``gone`` a pod already gone."""
        eviction = Pod.Eviction(metadata=ObjectMeta(name=name, namespace=namespace))

        async def attempt() -> Any:
            async with self._slots:
                return await self._client.create(eviction, name=name, namespace=namespace)

        try:
            await self._retrying("Eviction", attempt, answers=(429,))
        except ApiError as error:
            if error.status.code == 404:
                telemetry.WRITES.labels("Eviction", "gone").inc()
                return "gone", "the pod is gone"
            telemetry.WRITES.labels("Eviction", "refused").inc()
            budget = budget_refusal(error.status)
            if budget is not None:
                return "blocked", budget
            return "refused", f"{error.status.code}: {error.status.message}"
        telemetry.WRITES.labels("Eviction", "ok").inc()
        return "accepted", "evicted"

    async def _patch(
        self,
        kind: str,
        resource: Any,
        name: str,
        body: Json,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Any:
        """The object as patched, or None if it is gone; transient failures are retried, each
        try in a slot of its own (a pause between tries holds none)."""

        async def attempt() -> Any:
            async with self._slots:
                return await self._client.patch(
                    resource, name, body, namespace=namespace, patch_type=patch_type
                )

        try:
            patched = await self._retrying(kind, attempt)
        except Exception as error:
            if http_status(error) == 404:
                telemetry.WRITES.labels(kind, "gone").inc()
                return None
            telemetry.WRITES.labels(kind, "error").inc()
            raise
        telemetry.WRITES.labels(kind, "ok").inc()
        return patched

    async def pod_event(
        self, namespace: str, name: str, reason: str, message: str, *, warning: bool = True
    ) -> None:
        target = {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace}
        async with self._slots:
            await recorder_for(self._client).post(target, reason, message, warning=warning)

    async def event(self, kind: Kind, name: str, uid: str, transition: Transition) -> None:
        target = {"apiVersion": API_VERSIONS[kind], "kind": kind, "name": name, "uid": uid}
        warning = transition.type not in {"Overused", "NoPolicy"}
        async with self._slots:
            await recorder_for(self._client).post(
                target, transition.reason, transition.message, warning=warning
            )
