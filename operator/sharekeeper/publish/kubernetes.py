"""The only place that writes to the API server: status patches and Events, via lightkube."""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import UTC, datetime
from typing import Any, Literal

from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_global_resource
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event
from lightkube.types import PatchType

from sharekeeper import telemetry
from sharekeeper.publish.diffing import Json, Transition

logger = logging.getLogger(__name__)

Kind = Literal["Queue", "SchedulerPolicy", "NodeQosEnsurancePolicy"]

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
# Events about cluster-scoped objects live in this namespace, as the kubelet does for nodes.
EVENT_NAMESPACE = "default"
COMPONENT = "sharekeeper"


class KubeWriter:
    """Status merge-patches and Events, at most ``concurrency`` requests in flight."""

    def __init__(self, client: AsyncClient, *, concurrency: int = 16) -> None:
        self._client = client
        self._slots = asyncio.Semaphore(concurrency)
        self._instance = os.environ.get("HOSTNAME", COMPONENT)

    async def patch_status(self, kind: Kind, name: str, patch: Json) -> Json | None:
        """Patch ``status``; return the status now stored, or None if the object is gone."""
        async with self._slots:
            try:
                updated: Any = await self._client.patch(
                    RESOURCES[kind].Status, name, {"status": patch}, patch_type=PatchType.MERGE
                )
            except ApiError as error:
                if error.status.code == 404:
                    telemetry.WRITES.labels(kind, "gone").inc()
                    return None
                telemetry.WRITES.labels(kind, "error").inc()
                raise
        telemetry.WRITES.labels(kind, "ok").inc()
        status: Json = updated.get("status") or {}
        return status

    async def event(self, kind: Kind, name: str, uid: str, transition: Transition) -> None:
        now = datetime.now(UTC)
        warning = transition.type not in {"Overused", "NoPolicy"}
        event = Event(
            metadata=ObjectMeta(generateName=f"{name}.", namespace=EVENT_NAMESPACE),
            involvedObject=ObjectReference(
                apiVersion=API_VERSIONS[kind], kind=kind, name=name, uid=uid
            ),
            type="Warning" if warning else "Normal",
            reason=transition.reason,
            message=transition.message[:1024],
            source=EventSource(component=COMPONENT),
            reportingComponent=COMPONENT,
            reportingInstance=self._instance,
            firstTimestamp=now,
            lastTimestamp=now,
            count=1,
        )
        async with self._slots:
            try:
                await self._client.create(event)
            except ApiError as error:  # an Event is a courtesy: never fail a round for one
                logger.warning("could not post event on %s %s: %s", kind, name, error)
                telemetry.WRITES.labels("Event", "error").inc()
                return
        telemetry.WRITES.labels("Event", "ok").inc()
