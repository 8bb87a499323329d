"""Kubernetes dicts <-> node QoS engine values (NodeQosEnsurancePolicy, Node, Pod, metrics).

Input: objects as the API server (or ``kubectl get -o yaml``) returns them, including
``metrics.k8s.io/v1beta1`` NodeMetrics/PodMetrics. Every error names the object and the field.
Output: the policy status entry per node, the node annotation ``sharekeeper.io/qos-waterlines``,
the pod annotation ``sharekeeper.io/cpu-throttle`` and the ``simulate`` action dicts.

Units at this boundary: ``cpu_total_usage`` in cores, ``memory_total_usage`` in bytes,
``*_utilization`` in percent (all Kubernetes quantities); internally millicores, bytes and
milli-percent (``sharekeeper.model.quantities``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sharekeeper.engine.qos import (
    REGISTRY,
    Action,
    Candidates,
    CpuThrottle,
    Eviction,
    Gap,
    NodeCheckResult,
    NodeQosState,
    NodeSnapshot,
    Objective,
    Phase,
    PodKey,
    PodSnapshot,
    QosAction,
    QosPolicy,
    RuleKey,
    RuleState,
    SchedulingState,
    Strategy,
    ThrottleState,
    Waterline,
)
from sharekeeper.engine.qos.inputs import QosClass
from sharekeeper.engine.selectors import Operator
from sharekeeper.model.objects import rfc3339
from sharekeeper.model.quantities import QuantityError, to_internal, to_quantity
from sharekeeper.model.selectors import label_selector

WATERLINES_ANNOTATION = "sharekeeper.io/qos-waterlines"
THROTTLE_ANNOTATION = "sharekeeper.io/cpu-throttle"
TAINT_KEY = "sharekeeper.io/interference"
TAINT = {"key": TAINT_KEY, "effect": "PreferNoSchedule"}
EXT_CPU_RESOURCE = "gocrane.io/cpu"
"""The elastic-CPU extended resource (Crane's name, so Crane workloads sort the same)."""

_QOS_CLASSES: tuple[QosClass, ...] = ("BestEffort", "Burstable", "Guaranteed")
_OPERATORS: tuple[Operator, ...] = ("In", "NotIn", "Exists", "DoesNotExist")


class QosModelError(ValueError):
    """An object that cannot be turned into engine input; the message names object and field."""


class _Reader:
    """Typed access to one object's nested fields, with errors naming the object and path."""

    def __init__(self, what: str) -> None:
        self.what = what

    def fail(self, path: str, problem: str) -> QosModelError:
        return QosModelError(f"{self.what}: {path}: {problem}")

    def mapping(self, obj: Mapping[str, object], key: str, path: str) -> Mapping[str, object]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"{path}.{key}", "must be an object")
        return value

    def items(self, obj: Mapping[str, object], key: str, path: str) -> Sequence[object]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"{path}.{key}", "must be a list")
        return value

    def item(self, value: object, path: str) -> Mapping[str, object]:
        if not isinstance(value, Mapping):
            raise self.fail(path, "must be an object")
        return value

    def text(
        self, obj: Mapping[str, object], key: str, path: str, default: str | None = None
    ) -> str:
        value = obj.get(key, default)
        if not isinstance(value, str):
            raise self.fail(f"{path}.{key}", "is required and must be a string")
        return value

    def integer(
        self,
        obj: Mapping[str, object],
        key: str,
        path: str,
        default: int,
        *,
        low: int = 0,
        high: int | None = None,
    ) -> int:
        value = obj.get(key, default)
        if value is None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{path}.{key}", f"must be an integer, got {value!r}")
        if value < low or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise self.fail(f"{path}.{key}", f"must be {bounds}, got {value}")
        return value

    def flag(self, obj: Mapping[str, object], key: str, path: str, default: bool) -> bool:
        value = obj.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{path}.{key}", f"must be true or false, got {value!r}")
        return value

    def quantity(self, resource: str, value: object, path: str) -> int:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise self.fail(path, f"must be a quantity, got {value!r}")
        try:
            return to_internal(resource, value)
        except QuantityError as error:
            raise self.fail(path, str(error)) from error


def _labels(reader: _Reader, obj: Mapping[str, object], key: str, path: str) -> dict[str, str]:
    raw = reader.mapping(obj, key, path)
    labels = {k: v for k, v in raw.items() if isinstance(v, str)}
    if len(labels) != len(raw):
        raise reader.fail(f"{path}.{key}", "values must be strings")
    return labels


# --- NodeQosEnsurancePolicy -------------------------------------------------------------------


def _metric_value(reader: _Reader, metric: str, value: object, path: str) -> int:
    spec = REGISTRY.get(metric)
    if spec is None:
        raise reader.fail(
            path.rsplit(".", 1)[0] + ".name",
            f"unknown metric {metric!r} (known: {', '.join(REGISTRY)})",
        )
    # Cores and percent are parsed on the milli scale, bytes as they are.
    amount = reader.quantity(
        "memory" if spec.resource == "memory" and not spec.utilization else "cpu", value, path
    )
    if amount <= 0:
        raise reader.fail(path, "must be greater than zero")
    return amount


def _objective(reader: _Reader, raw: Mapping[str, object], path: str) -> Objective:
    rule = reader.mapping(raw, "metricRule", path)
    if not rule:
        raise reader.fail(f"{path}.metricRule", "is required")
    metric = reader.text(rule, "name", f"{path}.metricRule")
    strategy = reader.text(raw, "strategy", path, "None")
    if strategy not in ("None", "Preview"):
        raise reader.fail(f"{path}.strategy", "must be None or Preview")
    return Objective(
        name=reader.text(raw, "name", path),
        metric=metric,
        value=_metric_value(reader, metric, rule.get("value"), f"{path}.metricRule.value"),
        action_name=reader.text(raw, "actionName", path),
        avoidance_threshold=reader.integer(raw, "avoidanceThreshold", path, 1, low=1),
        restore_threshold=reader.integer(raw, "restoreThreshold", path, 1, low=1),
        strategy=Strategy(strategy),
    )


def _action(reader: _Reader, raw: Mapping[str, object], path: str) -> Action:
    eviction = reader.mapping(raw, "eviction", path) if "eviction" in raw else None
    throttle = reader.mapping(raw, "throttle", path) if "throttle" in raw else None
    cpu = (
        reader.mapping(throttle, "cpuThrottle", f"{path}.throttle") if throttle is not None else {}
    )
    grace = None
    if eviction and eviction.get("terminationGracePeriodSeconds") is not None:
        grace = reader.integer(eviction, "terminationGracePeriodSeconds", f"{path}.eviction", 0)
    here = f"{path}.throttle.cpuThrottle"
    return Action(
        name=reader.text(raw, "name", path),
        cool_down_seconds=reader.integer(raw, "coolDownSeconds", path, 300),
        disable_scheduling=reader.flag(raw, "disableScheduling", path, False),
        eviction=None if eviction is None else Eviction(grace),
        throttle=None
        if throttle is None
        else CpuThrottle(
            min_cpu_ratio=reader.integer(cpu, "minCPURatio", here, 0, high=100),
            step_cpu_ratio=reader.integer(cpu, "stepCPURatio", here, 0, high=100),
        ),
    )


def policy_from_dict(obj: Mapping[str, object]) -> QosPolicy:
    """A NodeQosEnsurancePolicy object (spec defaults applied) as engine input."""
    name = str(_meta(obj).get("name", "?"))
    reader = _Reader(f"NodeQosEnsurancePolicy {name!r}")
    spec = reader.mapping(obj, "spec", "")
    candidates = reader.mapping(spec, "candidates", "spec")
    objectives = tuple(
        _objective(
            reader,
            reader.item(item, f"spec.objectiveEnsurances[{i}]"),
            f"spec.objectiveEnsurances[{i}]",
        )
        for i, item in enumerate(reader.items(spec, "objectiveEnsurances", "spec"))
    )
    actions = tuple(
        _action(reader, reader.item(item, f"spec.actions[{i}]"), f"spec.actions[{i}]")
        for i, item in enumerate(reader.items(spec, "actions", "spec"))
    )
    for kind, names in (
        ("objectiveEnsurances", [o.name for o in objectives]),
        ("actions", [a.name for a in actions]),
    ):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise reader.fail(f"spec.{kind}", f"duplicate names {duplicates}")
    return QosPolicy(
        name=name,
        objectives=objectives,
        actions={a.name: a for a in actions},
        candidates=Candidates(
            max_priority=reader.integer(
                candidates, "maxPriority", "spec.candidates", 999, low=-(2**31)
            ),
            namespace_selector=label_selector(obj, "spec.candidates.namespaceSelector"),
            pod_selector=label_selector(obj, "spec.candidates.podSelector"),
        ),
        node_selector=label_selector(obj, "spec.nodeSelector"),
        evict_on_missing_metrics=reader.flag(spec, "evictOnMissingMetrics", "spec", False),
        excess_percent=reader.integer(spec, "excessPercent", "spec", 10),
    )


# --- Pods, nodes, metrics ---------------------------------------------------------------------


def _meta(obj: Mapping[str, object]) -> Mapping[str, object]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _epoch(reader: _Reader, value: object, path: str) -> int | None:
    if value is None:
        return None
    try:
        return int(datetime.fromisoformat(str(value)).timestamp())
    except ValueError as error:
        raise reader.fail(path, f"not an RFC 3339 time: {value!r}") from error


def pod_usage(metrics: Mapping[str, object], what: str = "PodMetrics") -> tuple[int, int]:
    """A PodMetrics' CPU (millicores) and memory (bytes), summed over its containers."""
    reader = _Reader(what)
    cpu = memory = 0
    for i, item in enumerate(reader.items(metrics, "containers", "PodMetrics")):
        where = f"PodMetrics.containers[{i}].usage"
        usage = reader.mapping(reader.item(item, f"PodMetrics.containers[{i}]"), "usage", where)
        cpu += reader.quantity("cpu", usage.get("cpu", 0), f"{where}.cpu")
        memory += reader.quantity("memory", usage.get("memory", 0), f"{where}.memory")
    return cpu, memory


def _qos_class(status: Mapping[str, object]) -> QosClass:
    value = status.get("qosClass")
    return next((c for c in _QOS_CLASSES if c == value), "")


def parse_throttle_annotation(value: str, what: str = "pod") -> ThrottleState:
    """``{"originalLimit": "2" | null, "limit": "1600m"}`` -> ThrottleState."""
    reader = _Reader(what)
    path = f"metadata.annotations[{THROTTLE_ANNOTATION}]"
    try:
        raw = json.loads(value)
    except json.JSONDecodeError as error:
        raise reader.fail(path, f"not JSON: {error}") from error
    body = reader.item(raw, path)
    original = body.get("originalLimit")
    return ThrottleState(
        original_limit_milli=None if original is None else reader.quantity("cpu", original, path),
        current_limit_milli=reader.quantity("cpu", body.get("limit"), f"{path}.limit"),
    )


def throttle_annotation(state: ThrottleState | None) -> str | None:
    """The annotation value for a throttle state; None means "remove the annotation"."""
    if state is None:
        return None
    original = state.original_limit_milli
    return json.dumps(
        {
            "originalLimit": None if original is None else to_quantity("cpu", original),
            "limit": to_quantity("cpu", state.current_limit_milli),
        },
        sort_keys=True,
    )


def pod_from_dict(
    obj: Mapping[str, object], metrics: Mapping[str, object] | None = None
) -> PodSnapshot:
    """A Pod (and optionally its PodMetrics) as engine input."""
    pod = pod_view(obj)
    return pod if metrics is None else with_pod_usage(pod, metrics)


def pod_view(obj: Mapping[str, object]) -> PodSnapshot:
    """A Pod as engine input, usage unknown: what the cluster store keeps per bound pod."""
    meta = _meta(obj)
    key = PodKey(str(meta.get("namespace", "default")), str(meta.get("name", "?")))
    reader = _Reader(f"Pod {key}")
    spec, status = reader.mapping(obj, "spec", ""), reader.mapping(obj, "status", "")
    annotations = _labels(reader, meta, "annotations", "metadata")
    owners = [
        reader.item(o, "metadata.ownerReferences[]")
        for o in reader.items(meta, "ownerReferences", "metadata")
    ]
    limits = container_cpu_limits(obj)
    containers = reader.items(spec, "containers", "spec")
    requests, ext = 0, 0
    for i, item in enumerate(containers):
        where = f"spec.containers[{i}].resources"
        resources = reader.mapping(
            reader.item(item, f"spec.containers[{i}]"), "resources", where[:-10]
        )
        req, lim = (
            reader.mapping(resources, "requests", where),
            reader.mapping(resources, "limits", where),
        )
        requests += (
            reader.quantity("cpu", req["cpu"], f"{where}.requests.cpu") if "cpu" in req else 0
        )
        if EXT_CPU_RESOURCE in lim:
            ext += reader.quantity("cpu", lim[EXT_CPU_RESOURCE], f"{where}.limits")
    throttle = annotations.get(THROTTLE_ANNOTATION)
    unlimited = len(limits) < len(containers) or not containers
    return PodSnapshot(
        key=key,
        qos_class=_qos_class(status),
        priority=reader.integer(spec, "priority", "spec", 0, low=-(2**31)),
        labels=_labels(reader, meta, "labels", "metadata"),
        start_time=_epoch(reader, status.get("startTime"), "status.startTime"),
        cpu_request_milli=requests,
        cpu_limit_milli=None if unlimited else sum(limits.values()),
        ext_cpu_limit_milli=ext,
        throttle=None if throttle is None else parse_throttle_annotation(throttle, f"Pod {key}"),
        mirror_or_static="kubernetes.io/config.mirror" in annotations
        or annotations.get("kubernetes.io/config.source", "api") != "api",
        daemonset=any(o.get("kind") == "DaemonSet" for o in owners),
        terminating=meta.get("deletionTimestamp") is not None,
    )


def container_cpu_limits(obj: Mapping[str, object]) -> dict[str, int]:
    """Container name -> CPU limit (millicores), for the containers that have one: what a
    throttle spreads a pod-level limit over (``pods/resize`` is per container)."""
    meta = _meta(obj)
    reader = _Reader(f"Pod {meta.get('namespace', 'default')}/{meta.get('name', '?')}")
    limits: dict[str, int] = {}
    for i, item in enumerate(reader.items(reader.mapping(obj, "spec", ""), "containers", "spec")):
        container = reader.item(item, f"spec.containers[{i}]")
        where = f"spec.containers[{i}].resources"
        resources = reader.mapping(container, "resources", f"spec.containers[{i}]")
        lim = reader.mapping(resources, "limits", where)
        if "cpu" in lim:
            name = reader.text(container, "name", f"spec.containers[{i}]", default="")
            limits[name] = reader.quantity("cpu", lim["cpu"], f"{where}.limits.cpu")
    return limits


def with_pod_usage(pod: PodSnapshot, metrics: Mapping[str, object]) -> PodSnapshot:
    cpu, memory = pod_usage(metrics, f"PodMetrics {pod.key}")
    return replace(pod, cpu_usage_milli=cpu, memory_usage_bytes=memory)


def node_view(node: Mapping[str, object]) -> NodeSnapshot:
    """A Node as engine input, without pods and usage: what the cluster store keeps."""
    name = str(_meta(node).get("name", "?"))
    reader = _Reader(f"Node {name!r}")
    capacity = reader.mapping(reader.mapping(node, "status", ""), "capacity", "status")
    return NodeSnapshot(
        name=name,
        labels=_labels(reader, _meta(node), "labels", "metadata"),
        cpu_capacity_milli=_amount(reader, capacity, "cpu", "status.capacity"),
        memory_capacity_bytes=_amount(reader, capacity, "memory", "status.capacity"),
    )


def _amount(
    reader: _Reader, source: Mapping[str, object] | None, resource: str, path: str
) -> int | None:
    if source is None or resource not in source:
        return None
    return reader.quantity(resource, source[resource], f"{path}.{resource}")


def with_usage(
    node: NodeSnapshot,
    pods: Iterable[PodSnapshot],
    node_metrics: Mapping[str, object] | None = None,
    pod_metrics: Mapping[PodKey, Mapping[str, object]] | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> NodeSnapshot:
    """``node`` with its pods (sorted) and the usage of both, for one check."""
    reader = _Reader(f"Node {node.name!r}")
    usage = reader.mapping(node_metrics, "usage", "NodeMetrics") if node_metrics else None
    found = pod_metrics or {}
    snapshots = [
        pod if (metrics := found.get(pod.key)) is None else with_pod_usage(pod, metrics)
        for pod in pods
    ]
    return replace(
        node,
        cpu_usage_milli=_amount(reader, usage, "cpu", "NodeMetrics.usage"),
        memory_usage_bytes=_amount(reader, usage, "memory", "NodeMetrics.usage"),
        pods=tuple(sorted(snapshots, key=lambda p: p.key)),
        namespace_labels=namespace_labels if namespace_labels is not None else {},
    )


def node_from_dicts(
    node: Mapping[str, object],
    pods: Iterable[Mapping[str, object]],
    node_metrics: Mapping[str, object] | None = None,
    pod_metrics: Mapping[PodKey, Mapping[str, object]] | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> NodeSnapshot:
    """A Node, the pods bound to it (terminal ones are dropped) and their usage."""
    views = [pod_view(raw) for raw in pods if not is_terminal(raw)]
    return with_usage(node_view(node), views, node_metrics, pod_metrics, namespace_labels)


def is_terminal(pod: Mapping[str, object]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def node_metrics_by_name(items: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """NodeMetrics by node name: ``node_from_dicts(node, pods, by_name.get(name), ...)``."""
    return {str(item.get("metadata", {}).get("name")): item for item in items}


def pod_metrics_by_key(items: Iterable[Mapping[str, Any]]) -> dict[PodKey, Mapping[str, Any]]:
    """PodMetrics by namespace/name: the ``pod_metrics`` argument of ``node_from_dicts``."""
    keyed: dict[PodKey, Mapping[str, Any]] = {}
    for item in items:
        meta = item.get("metadata", {})
        keyed[PodKey(str(meta.get("namespace", "default")), str(meta.get("name")))] = item
    return keyed


# --- persisted state: policy status.nodes[] -----------------------------------------------------


def state_from_status(policies: Iterable[Mapping[str, object]], node: str) -> NodeQosState:
    """Counters and taint state for ``node`` from the policies' ``status.nodes[]`` entries.

    Anything missing starts at zero; the taint state is the same in every entry (written by
    one check) and the most restrictive copy wins if they disagree.
    """
    rules: dict[RuleKey, RuleState] = {}
    scheduling = SchedulingState()
    for obj in policies:
        policy = str(_meta(obj).get("name", "?"))
        reader = _Reader(f"NodeQosEnsurancePolicy {policy!r}")
        for i, item in enumerate(
            reader.items(reader.mapping(obj, "status", ""), "nodes", "status")
        ):
            entry = reader.item(item, f"status.nodes[{i}]")
            if entry.get("name") != node:
                continue
            where = f"status.nodes[{i}]"
            for j, raw in enumerate(reader.items(entry, "rules", where)):
                rule = reader.item(raw, f"{where}.rules[{j}]")
                phase = Phase.TRIGGERED if rule.get("phase") == "Triggered" else Phase.CALM
                rules[RuleKey(policy, reader.text(rule, "name", f"{where}.rules[{j}]"))] = (
                    RuleState(
                        phase,
                        reader.integer(rule, "hotStreak", f"{where}.rules[{j}]", 0),
                        reader.integer(rule, "calmStreak", f"{where}.rules[{j}]", 0),
                    )
                )
            taint = reader.mapping(entry, "scheduling", where)
            if taint.get("disabled") is True:
                calm_since = _epoch(reader, taint.get("calmSince"), f"{where}.scheduling.calmSince")
                candidate = SchedulingState(
                    True,
                    reader.integer(taint, "coolDownSeconds", f"{where}.scheduling", 0),
                    calm_since,
                )
                if not scheduling.disabled or candidate.calm_since is None:
                    scheduling = candidate
    return NodeQosState(rules, scheduling)


def _timestamp(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return rfc3339(epoch)


def metric_quantity(metric: str, value: int) -> str:
    """A rule value or waterline (internal metric unit) as the quantity users wrote."""
    spec = REGISTRY.get(metric)
    resource = (
        "memory"
        if spec is not None and spec.resource == "memory" and not spec.utilization
        else "cpu"
    )
    return to_quantity(resource, value)


def waterlines_annotation(lines: Iterable[Waterline]) -> dict[str, str]:
    """``{"evict.cpu_total_usage": "6", ...}``: per action class and metric, the waterline."""
    return {f"{w.action_class.value}.{w.metric}": metric_quantity(w.metric, w.value) for w in lines}


def _gap_dict(gap: Gap) -> dict[str, object]:
    spec = REGISTRY.get(gap.metric)
    resource = spec.resource if spec else "cpu"
    return {
        "class": gap.action_class.value,
        "metric": gap.metric,
        "gap": None if gap.amount is None else _signed_quantity(resource, gap.amount),
    }


def _signed_quantity(resource: str, amount: int) -> str:
    return ("-" if amount < 0 else "") + to_quantity(resource, abs(amount))


def node_status_entry(result: NodeCheckResult, policy: str) -> dict[str, object]:
    """``status.nodes[]`` of ``policy`` for the checked node: what must survive a restart
    (rules' phase and streaks, the taint state) plus what to report."""
    scheduling = result.state.scheduling
    rules = [r for r in result.rules if r.key.policy == policy]
    return {
        "name": result.node,
        "rules": [
            {
                "name": r.key.rule,
                "metric": r.metric,
                "phase": r.state.phase.value,
                "hotStreak": r.state.hot_streak,
                "calmStreak": r.state.calm_streak,
                "observation": r.observation.value,
                "triggered": r.triggered_now,
                "restored": r.restored_now,
                "preview": r.preview,
            }
            for r in rules
        ],
        "scheduling": {
            "disabled": scheduling.disabled,
            "coolDownSeconds": scheduling.cool_down_seconds,
            "calmSince": _timestamp(scheduling.calm_since),
        },
        "waterlines": waterlines_annotation(
            w for w in result.waterlines if any(c.policy == policy for c in w.contributions)
        ),
        "gaps": [_gap_dict(g) for g in result.gaps],
        "previewWaterlines": waterlines_annotation(
            w for w in result.preview_waterlines if any(c.policy == policy for c in w.contributions)
        ),
    }


def action_dict(action: QosAction) -> dict[str, object]:
    """A ``simulate`` / status action: ``{"kind", "pod", "node", "metric", "released"}``, plus
    ``cpuLimit`` for throttle and restore (null: the pod is back to no CPU limit)."""
    out: dict[str, object] = {
        "kind": action.kind,
        "pod": str(action.pod),
        "node": action.node,
        "metric": action.metric,
        "released": to_quantity(action.resource, action.released),
    }
    if action.kind != "evict":
        limit = action.cpu_limit_milli
        out["cpuLimit"] = None if limit is None else to_quantity("cpu", limit)
    return out


__all__ = [
    "TAINT",
    "THROTTLE_ANNOTATION",
    "WATERLINES_ANNOTATION",
    "QosModelError",
    "action_dict",
    "container_cpu_limits",
    "is_terminal",
    "metric_quantity",
    "node_from_dicts",
    "node_metrics_by_name",
    "node_status_entry",
    "node_view",
    "parse_throttle_annotation",
    "pod_from_dict",
    "pod_metrics_by_key",
    "pod_usage",
    "pod_view",
    "policy_from_dict",
    "state_from_status",
    "throttle_annotation",
    "waterlines_annotation",
    "with_pod_usage",
    "with_usage",
]
