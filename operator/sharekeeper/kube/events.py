"""Events posted as Kubernetes' own recorder (client-go's EventCorrelator) posts them.

A repeat is a count, not a new object: the same Event (involved object, uid included, type,
reason and message) within ``window`` of its last write is a merge patch of that Event's
``count`` and ``lastTimestamp``; one that expired meanwhile (404) is created anew. The Events
remembered are the ``remembered`` most recent, so memory stays bounded.

No object gets unbounded writes: each involved object has a token bucket of ``burst`` writes,
refilled by one every ``refill_seconds`` (client-go's spam filter: 25, then one per 5 minutes).
A pod whose eviction is refused at every QoS check (every 10 s) thus costs one Event object and
a patch every 5 minutes; a repeat held back is still counted in the next patch's ``count``.

An Event is a courtesy: a failure to post one is logged and counted, never raised.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sharekeeper import telemetry
from sharekeeper.kube.kinds import EVENTS
from sharekeeper.kube.transient import http_status
from sharekeeper.kube.transport import MERGE_PATCH, JsonApi
from sharekeeper.model.objects import MutableObj, rfc3339
from sharekeeper.settings import EventLimits

logger = logging.getLogger(__name__)

# Events about cluster-scoped objects live in this namespace, as the kubelet does for nodes.
EVENT_NAMESPACE = "default"
COMPONENT = "sharekeeper"
MAX_MESSAGE = 1024  # what events.k8s.io/v1 accepts; longer notes are cut


class InvolvedObject(NamedTuple):
    """What an Event is about; ``namespace`` and ``uid`` are "" when it has none."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


class EventKey(NamedTuple):
    """What makes two Events the same one."""

    involved: InvolvedObject
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class _Posted:
    """An Event in the API server, as last written."""

    name: str
    namespace: str
    count: int
    written_at: float


@dataclass(frozen=True, slots=True)
class _Budget:
    """The writes one object has left (a token bucket), as of ``at``."""

    tokens: float
    at: float


class EventRecorder:
    """Posts Events through ``api``, counting repeats and holding back floods."""

    def __init__(
        self,
        api: JsonApi,
        limits: EventLimits = EventLimits(),
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = api
        self._reporting_instance = os.environ.get("HOSTNAME", COMPONENT)
        self._limits = limits
        self._clock = clock
        self._posted: OrderedDict[EventKey, _Posted] = OrderedDict()
        self._budgets: OrderedDict[InvolvedObject, _Budget] = OrderedDict()

    async def post(
        self, target: Mapping[str, str], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """An Event on ``target`` (apiVersion, kind, name; namespace and uid when it has them).

        Events on cluster-scoped objects go to the ``default`` namespace, as the kubelet's do.
        """
        now = self._clock()
        involved = InvolvedObject(
            target["apiVersion"], target["kind"], target.get("namespace") or "", target["name"],
            target.get("uid") or "",
        )  # fmt: skip
        key = EventKey(involved, "Warning" if warning else "Normal", reason, message[:MAX_MESSAGE])
        posted = self._posted.get(key)
        if posted is not None and now - posted.written_at <= self._limits.window_seconds:
            posted.count += 1
            self._posted.move_to_end(key)
        else:
            posted = None
        if not self._within_budget(involved, now):
            telemetry.WRITES.labels("Event", "suppressed").inc()
            return
        if posted is not None and await self._count_repeat(key, posted, now):
            return
        await self._create(key, now)

    def _within_budget(self, involved: InvolvedObject, now: float) -> bool:
        """Takes one write from the object's bucket if there is one left."""
        limits = self._limits
        budget = self._budgets.pop(involved, None)
        tokens = float(limits.burst)
        if budget is not None:
            tokens = min(tokens, budget.tokens + (now - budget.at) / limits.refill_seconds)
        allowed = tokens >= 1
        self._budgets[involved] = _Budget(tokens - 1 if allowed else tokens, now)
        _forget_oldest(self._budgets, limits.remembered)
        return allowed

    async def _count_repeat(self, key: EventKey, posted: _Posted, now: float) -> bool:
        """Patch the repeat into the Event; False if the Event has expired (404)."""
        patch = {"count": posted.count, "lastTimestamp": rfc3339(now)}
        path = EVENTS.object_path(posted.name, posted.namespace)
        try:
            await self._api.send("PATCH", path, patch, content_type=MERGE_PATCH)
        except Exception as error:
            if http_status(error) == 404:
                return False
            _failed(key, error)
            return True
        posted.written_at = now
        telemetry.WRITES.labels("Event", "patched").inc()
        return True

    async def _create(self, key: EventKey, now: float) -> None:
        involved = key.involved
        namespace = involved.namespace or EVENT_NAMESPACE
        reference = {
            "apiVersion": involved.api_version, "kind": involved.kind, "name": involved.name,
        }  # fmt: skip
        if involved.namespace:
            reference["namespace"] = involved.namespace
        if involved.uid:
            reference["uid"] = involved.uid
        at = rfc3339(now)
        event: MutableObj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved.name}.", "namespace": namespace},
            "involvedObject": reference,
            "type": key.type,
            "reason": key.reason,
            "message": key.message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._reporting_instance,
            "firstTimestamp": at,
            "lastTimestamp": at,
            "count": 1,
        }
        try:
            created = await self._api.send("POST", EVENTS.collection(namespace), event)
        except Exception as error:
            _failed(key, error)
            return
        telemetry.WRITES.labels("Event", "created").inc()
        metadata = created.get("metadata") if isinstance(created, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if isinstance(name, str) and name:
            self._posted[key] = _Posted(name, namespace, 1, now)
            _forget_oldest(self._posted, self._limits.remembered)


def _failed(key: EventKey, error: Exception) -> None:
    logger.warning("could not post event %s on %s: %s", key.reason, key.involved.name, error)
    telemetry.WRITES.labels("Event", "error").inc()


def _forget_oldest(recent: OrderedDict[Any, Any], size: int) -> None:
    while len(recent) > size:
        recent.popitem(last=False)
