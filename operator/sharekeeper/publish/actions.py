"""Carrying out node QoS actions: evictions, CPU throttling, the interference taint, Events.

Evictions go through the Eviction API, so PodDisruptionBudgets decide; a refusal is reported
back to the planner without counting the refused pod, and the node's evictions end there for
the check. A budget's refusal is told apart (``Outcome.BLOCKED``: the planner throttles the pod
instead where it may) from any other (``Outcome.REFUSED``). Nothing here ever deletes a pod: a
refused eviction stays refused.
Throttling changes the CPU limits of the pod's containers in place through ``pods/resize``
(which can change resources and nothing else); the throttle record lives in the policy's status,
so the operator never patches a pod itself.

A transient failure (``publish.retrying``) is tried again a few times first, except an
eviction's 429, which is the budget's answer, and the taint's 409, which means the node changed
since it was read (the next check reads it again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Status
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from sharekeeper import telemetry
from sharekeeper.engine.qos import Outcome, QosAction
from sharekeeper.model.qos import TAINT
from sharekeeper.model.quantities import to_quantity
from sharekeeper.publish.events import recorder_for
from sharekeeper.publish.retrying import Retrying

logger = logging.getLogger(__name__)


def split_cpu_limit(cpu_limits: Mapping[str, int], total_milli: int) -> dict[str, int]:
    """A pod-level CPU limit spread over the containers that have one (container -> current
    limit), in proportion to their current limits; the rounding remainder goes to the first,
    so the parts add up exactly."""
    whole = sum(cpu_limits.values())
    if not cpu_limits or whole == 0:
        return {}
    parts = {name: max(1, limit * total_milli // whole) for name, limit in cpu_limits.items()}
    first = next(iter(parts))
    parts[first] += total_milli - sum(parts.values())
    return parts


DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
"""``policy/v1`` ``DisruptionBudgetCause``: the reason of the cause a budget's 429 carries."""


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


class KubeActuator:
    """The QoS loop's hands. Every method reports, none raises for an API refusal."""

    def __init__(self, client: AsyncClient, retrying: Retrying | None = None) -> None:
        self._client = client
        self._events = recorder_for(client)
        self._retrying = retrying or Retrying()

    async def evict(self, action: QosAction) -> tuple[Outcome, str]:
        namespace, name = action.pod.namespace, action.pod.name
        options = (
            DeleteOptions(gracePeriodSeconds=action.grace_period_seconds)
            if action.grace_period_seconds is not None
            else None
        )
        eviction = Pod.Eviction(
            metadata=ObjectMeta(name=name, namespace=namespace), deleteOptions=options
        )
        try:
            await self._retrying(
                "Eviction",
                lambda: self._client.create(eviction, name=name, namespace=namespace),
                answers=(429,),
            )
        except ApiError as error:
            telemetry.WRITES.labels("Eviction", "refused").inc()
            # 429: a PodDisruptionBudget says no; 404: the pod is already gone.
            budget = budget_refusal(error.status)
            if budget is not None:
                return Outcome.BLOCKED, budget
            return Outcome.REFUSED, f"{error.status.code}: {error.status.message}"
        telemetry.WRITES.labels("Eviction", "ok").inc()
        return Outcome.ACCEPTED, "evicted"

    async def set_cpu_limit(
        self, action: QosAction, cpu_limits: Mapping[str, int]
    ) -> tuple[Outcome, str]:
        """Resize the containers that have a CPU limit. A pod without one has nothing to
        resize (adding a limit would change its QoS class): its target is only recorded in
        the policy's status, for a node agent to enforce."""
        namespace, name = action.pod.namespace, action.pod.name
        parts = (
            split_cpu_limit(cpu_limits, action.cpu_limit_milli)
            if action.cpu_limit_milli is not None
            else {}
        )
        if not parts:
            return Outcome.ACCEPTED, "recorded (no CPU limit to resize)"
        resize = [
            {"name": c, "resources": {"limits": {"cpu": to_quantity("cpu", milli)}}}
            for c, milli in parts.items()
        ]
        try:
            await self._retrying(
                "Pod",
                lambda: self._client.patch(
                    Pod.Resize,
                    name,
                    {"spec": {"containers": resize}},
                    namespace=namespace,
                    patch_type=PatchType.STRATEGIC,
                ),
            )
        except ApiError as error:
            telemetry.WRITES.labels("Pod", "error").inc()
            return Outcome.REFUSED, f"{error.status.code}: {error.status.message}"
        telemetry.WRITES.labels("Pod", "ok").inc()
        return Outcome.ACCEPTED, "resized"

    async def set_taint(
        self, node: str, present: bool, taints: Sequence[Mapping[str, Any]], resource_version: str
    ) -> None:
        """Add or remove our taint, keeping everyone else's (``taints``, as read at
        ``resource_version``); refused if the node changed since (the next check retries)."""
        kept = [dict(t) for t in taints if t.get("key") != TAINT["key"]]
        if present:
            kept.append(dict(TAINT))
        patch = {"metadata": {"resourceVersion": resource_version}, "spec": {"taints": kept}}
        try:
            await self._retrying(
                "Node", lambda: self._client.patch(Node, node, patch, patch_type=PatchType.MERGE)
            )
        except ApiError as error:
            telemetry.WRITES.labels(
                "Node", "conflict" if error.status.code == 409 else "error"
            ).inc()
            logger.warning(
                "could not %s the taint on %s: %s", "set" if present else "clear", node, error
            )
            return
        telemetry.WRITES.labels("Node", "ok").inc()

    async def event(
        self, target: Mapping[str, str], reason: str, message: str, *, warning: bool = False
    ) -> None:
        await self._events.post(target, reason, message, warning=warning)
