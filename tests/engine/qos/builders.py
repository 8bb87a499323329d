"""One-line builders for QoS engine inputs (cpu in millicores, memory in bytes). What they
do not set is the API model's default: ``DEFAULTS`` is a minimal policy read as the operator
reads one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sharekeeper.api.qos import qos_policy, read_policy
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    Action,
    Candidates,
    CpuThrottle,
    Eviction,
    Objective,
    QosNode,
    QosPod,
    QosPolicy,
    Strategy,
    ThrottleState,
)
from sharekeeper.engine.qos.inputs import QosClass

DEFAULTS = qos_policy(
    read_policy(
        {
            "kind": "NodeQosEnsurancePolicy",
            "metadata": {"name": "defaults"},
            "spec": {
                "objectiveEnsurances": [
                    {
                        "name": "rule",
                        "metricRule": {"name": "cpu_total_usage", "value": "1"},
                        "actionName": "action",
                    }
                ],
                "actions": [{"name": "action"}],
            },
        }
    )
)


def action(name: str, **fields: Any) -> Action:
    """An action with the API model's defaults, then ``fields``."""
    return replace(DEFAULTS.actions["action"], name=name, **fields)


def candidates_with(**fields: Any) -> Candidates:
    """``spec.candidates`` with the API model's defaults, then ``fields``."""
    return replace(DEFAULTS.candidates, **fields)


EVICT = action("evict", cool_down_seconds=300, disable_scheduling=True, eviction=Eviction(30))
THROTTLE = action("throttle", throttle=CpuThrottle(min_cpu_ratio=10, step_cpu_ratio=20))


def pod(
    name: str,
    *,
    namespace: str = "default",
    qos: QosClass = "BestEffort",
    priority: int = 0,
    cpu: int | None = 0,
    memory: int | None = 0,
    start: int | None = None,
    request: int = 0,
    limit: int | None = None,
    throttled: tuple[int | None, int] | None = None,
    ext_cpu: int = 0,
    labels: dict[str, str] | None = None,
    uid: str = "",
    grace: int | None = None,
    deletion_deadline: int | None = None,
    **flags: bool,
) -> QosPod:
    return QosPod(
        key=PodKey(namespace, name),
        uid=uid,
        qos_class=qos,
        priority=priority,
        labels=labels or {},
        start_time=start,
        cpu_usage_milli=cpu,
        memory_usage_bytes=memory,
        cpu_request_milli=request,
        cpu_limit_milli=limit,
        ext_cpu_limit_milli=ext_cpu,
        throttle=None if throttled is None else ThrottleState(*throttled),
        grace_period_seconds=grace,
        deletion_deadline=deletion_deadline,
        **flags,
    )


def node(
    *pods: QosPod,
    name: str = "node-1",
    cpu: int | None = 0,
    memory: int | None = 0,
    cpu_capacity: int | None = 16_000,
    memory_capacity: int | None = 64 * 2**30,
    labels: dict[str, str] | None = None,
    usage_since: int | None = None,
    usage_at: int | None = None,
) -> QosNode:
    return QosNode(
        name=name,
        labels=labels or {},
        cpu_capacity_milli=cpu_capacity,
        memory_capacity_bytes=memory_capacity,
        cpu_usage_milli=cpu,
        memory_usage_bytes=memory,
        usage_since=usage_since,
        usage_at=usage_at,
        pods=pods,
    )


def rule(
    name: str,
    metric: str,
    value: int,
    action: str = "evict",
    *,
    avoid: int | None = None,
    restore: int | None = None,
    preview: bool = False,
) -> Objective:
    """``avoid``, ``restore``: None is the API model's default."""
    default = DEFAULTS.objectives[0]
    return Objective(
        name=name,
        metric=metric,
        value=value,
        action_name=action,
        avoidance_threshold=default.avoidance_threshold if avoid is None else avoid,
        restore_threshold=default.restore_threshold if restore is None else restore,
        strategy=Strategy.PREVIEW if preview else default.strategy,
    )


def policy(
    *objectives: Objective,
    name: str = "policy",
    actions: tuple[Action, ...] = (EVICT, THROTTLE),
    candidates: Candidates | None = None,
    evict_on_missing: bool | None = None,
    excess: int | None = None,
) -> QosPolicy:
    """What is None (or not given) is the API model's default."""
    return replace(
        DEFAULTS,
        name=name,
        objectives=objectives,
        actions={a.name: a for a in actions},
        candidates=candidates or DEFAULTS.candidates,
        evict_on_missing_metrics=DEFAULTS.evict_on_missing_metrics
        if evict_on_missing is None
        else evict_on_missing,
        excess_percent=DEFAULTS.excess_percent if excess is None else excess,
    )
