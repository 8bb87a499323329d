"""Pods, Nodes and metrics.k8s.io usage -> the node QoS engine's views; the node annotation
``sharekeeper.io/qos-waterlines``.

Nothing a pod says about itself grants it anything: exemptions come only from what a tenant
cannot forge (the kubelet's mirror-pod annotation with the Node as owner, a controller
reference to a DaemonSet that exists, a system priority in a system namespace), and the
throttle state lives in the policies' status, not on the pod.

A fast trimmed reader (the cluster store reads up to 150,000 pods with it): plain dict access,
no model objects; every error is an ``ObjectError`` naming the object, the field and the value.
NodeQosEnsurancePolicies are read by ``api.qos``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    REGISTRY,
    QosNode,
    QosPod,
    Waterline,
)
from sharekeeper.engine.qos.inputs import SYSTEM_CLUSTER_CRITICAL, SYSTEM_NAMESPACES, QosClass
from sharekeeper.model.objects import (
    Obj,
    ObjectError,
    as_list,
    as_mapping,
    at,
    fail,
    is_mapping,
    mapping_at,
    name_of,
    rfc3339_seconds,
    section,
)
from sharekeeper.model.quantities import QuantityError, to_internal, to_quantity

WATERLINES_ANNOTATION = "sharekeeper.io/qos-waterlines"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Set by the kubelet on the API copy of a static pod, and immutable once the pod exists."""
TAINT_KEY = "sharekeeper.io/interference"
TAINT = {"key": TAINT_KEY, "effect": "PreferNoSchedule"}
EXT_CPU_RESOURCE = "gocrane.io/cpu"
"""The elastic-CPU extended resource (Crane's name, so Crane workloads sort the same)."""

_QOS_CLASSES: dict[object, QosClass] = {c: c for c in ("BestEffort", "Burstable", "Guaranteed")}
"""Each class by its name: what a pod's ``status.qosClass`` may say (anything else reads "")."""
DAEMONSET_API_VERSION = "apps/v1"
"""The one DaemonSet version an owner reference may name to exempt a pod: the garbage collector
resolves it; a version it cannot resolve (``apps/v1beta2``) keeps the pod whatever it says."""

DaemonSetId = tuple[str, str, str]
"""A DaemonSet the cluster has: ``(namespace, name, uid)``."""


def effective_priority(namespace: str, priority: int) -> int:
    """The priority Sharekeeper reads a pod as having: ``spec.priority``, except that a system
    priority (``SYSTEM_CLUSTER_CRITICAL`` and above: system-cluster-critical,
    system-node-critical) outside ``SYSTEM_NAMESPACES`` counts as 0.

    The API server lets a pod of any namespace name the built-in system classes (unless an
    admin limits them with a ResourceQuota), so there that priority says nothing about the
    pod, only about what its author wanted: to be admitted before every other pod of its queue,
    and never to be throttled or evicted. A pod in ``kube-system`` keeps it. A cluster admin
    who wants some pods to go first gives them a PriorityClass of their own (values up to
    ``HIGHEST_USER_PRIORITY``) and restricts its use (a ResourceQuota whose ``scopeSelector``
    names the PriorityClass); that value is read as is.

    Computed once, where a pod is read (``pod_view`` here, ``model.pods.pod_snapshot`` for
    admission), so admission order, QoS exemption, ``maxPriority`` and QoS sorting all see the
    same number."""
    if priority >= SYSTEM_CLUSTER_CRITICAL and namespace not in SYSTEM_NAMESPACES:
        return 0
    return priority


def metric_resource(metric: str) -> str:
    """The quantity scale of a metric's values: ``memory`` (bytes) for memory usage, ``cpu``
    (milli) for CPU usage in cores and for every utilization in percent."""
    spec = REGISTRY.get(metric)
    return (
        "memory"
        if spec is not None and spec.resource == "memory" and not spec.utilization
        else "cpu"
    )


def _quantity(obj: Obj, resource: str, value: object, path: str, kind: str) -> int:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise fail(obj, path, "must be a quantity", value, kind=kind)
    try:
        return to_internal(resource, value)
    except QuantityError as error:
        raise fail(obj, path, str(error), kind=kind) from error


def _strings(obj: Obj, value: object, path: str, kind: str) -> dict[str, str]:
    """``value``, found at ``path`` in ``obj``, checked to map strings to strings."""
    raw = as_mapping(obj, path, value)
    if not all(isinstance(v, str) for v in raw.values()):
        raise fail(obj, path, "values must be strings", dict(raw), kind=kind)
    return dict(raw)


# --- Pods, nodes, metrics ---------------------------------------------------------------------


def _integer(obj: Obj, value: object, path: str, kind: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise fail(obj, path, "must be an integer", value, kind=kind)
    return value


def _epoch(obj: Obj, value: object, path: str, kind: str) -> int | None:
    if value is None:
        return None
    try:
        return int(rfc3339_seconds(value))
    except ValueError as error:
        raise fail(obj, path, "is not an RFC 3339 time", value, kind=kind) from error


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_DURATION = re.compile(f"(?:{_DURATION_PART.pattern})+")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _duration(obj: Obj, value: object, path: str, kind: str) -> float:
    """A Go duration as metav1.Duration writes it (``10s``, ``1m0.5s``, ``500ms``), in
    seconds."""
    text = str(value)
    if not _DURATION.fullmatch(text):
        raise fail(obj, path, "is not a duration such as 10s or 1m0s", value, kind=kind)
    return sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))


def usage_times(metrics: Mapping[str, object]) -> tuple[int | None, int | None]:
    """When a NodeMetrics sample's window began (``timestamp`` minus ``window``, rounded down to
    the second) and when it was taken (``timestamp``); None where it does not say."""
    kind = "NodeMetrics"
    stamp = _epoch(metrics, metrics.get("timestamp"), "timestamp", kind)
    window = metrics.get("window")
    if stamp is None or window is None:
        return None, stamp
    return stamp - math.ceil(_duration(metrics, window, "window", kind)), stamp


def newest_sample_time(node_metrics: Iterable[Mapping[str, object]]) -> int | None:
    """The newest NodeMetrics ``timestamp`` (compared as text: metrics-server writes them all
    alike, in UTC), None when none has one or the newest is not a time."""
    stamped = [m for m in node_metrics if isinstance(m.get("timestamp"), str)]
    if not stamped:
        return None
    newest = max(stamped, key=lambda m: str(m["timestamp"]))
    try:
        return _epoch(newest, newest["timestamp"], "timestamp", "NodeMetrics")
    except ObjectError:
        return None


def pod_usage(metrics: Mapping[str, object]) -> tuple[int, int]:
    """A PodMetrics' CPU (millicores) and memory (bytes), summed over its containers."""
    kind = "PodMetrics"
    cpu = memory = 0
    for i, item in enumerate(as_list(metrics, "containers", metrics.get("containers"), kind=kind)):
        where = f"containers[{i}].usage"
        usage = item.get("usage") if is_mapping(item) else None
        if not is_mapping(usage):
            raise fail(metrics, where, "must be a mapping", usage, kind=kind)
        cpu += _quantity(metrics, "cpu", usage.get("cpu", 0), f"{where}.cpu", kind)
        memory += _quantity(metrics, "memory", usage.get("memory", 0), f"{where}.memory", kind)
    return cpu, memory


def _qos_class(status: Mapping[str, object]) -> QosClass:
    value = status.get("qosClass")
    # A hostile value may be unhashable (a list, a mapping): only a string can name a class.
    return _QOS_CLASSES.get(value, "") if isinstance(value, str) else ""


def pod_view(
    obj: Mapping[str, object],
    cpu_limits: Mapping[str, int] | None = None,
    *,
    daemonsets: Collection[DaemonSetId] = frozenset(),
    key: PodKey | None = None,
) -> QosPod:
    """A Pod as engine input, usage unknown: what the cluster store keeps per bound pod.
    ``cpu_limits``: ``container_cpu_limits(obj)``, when the caller has read it already;
    ``daemonsets``: the DaemonSets known now (the cluster store, which also keeps
    ``daemonset`` current as they come and go, reads with none); ``key``: the pod's, when
    the caller has read it already."""
    kind = "Pod"
    meta = section(obj, "metadata")
    if key is None:
        key = PodKey(str(meta.get("namespace", "default")), str(meta.get("name", "?")))
    spec, status = mapping_at(obj, "spec"), mapping_at(obj, "status")
    annotations = _strings(obj, meta.get("annotations"), "metadata.annotations", kind)
    owners = as_list(obj, "metadata.ownerReferences", meta.get("ownerReferences"), kind=kind)
    limits = container_cpu_limits(obj) if cpu_limits is None else cpu_limits
    containers = as_list(obj, "spec.containers", spec.get("containers"), kind=kind)
    requests, ext = 0, 0
    for i, item in enumerate(containers):
        resources = item.get("resources") if is_mapping(item) else None
        resources = resources if is_mapping(resources) else {}
        req, lim = resources.get("requests") or {}, resources.get("limits") or {}
        if "cpu" in req:
            where = f"spec.containers[{i}].resources.requests.cpu"
            requests += _quantity(obj, "cpu", req["cpu"], where, kind)
        if EXT_CPU_RESOURCE in lim:
            where = f"spec.containers[{i}].resources.limits[{EXT_CPU_RESOURCE}]"
            ext += _quantity(obj, "cpu", lim[EXT_CPU_RESOURCE], where, kind)
    priority = _integer(obj, spec.get("priority"), "spec.priority", kind) or 0
    unlimited = len(limits) < len(containers) or not containers
    claimed = _claimed_daemonset(owners)
    return QosPod(
        key=key,
        uid=str(meta.get("uid") or ""),
        qos_class=_qos_class(status),
        priority=effective_priority(key.namespace, priority),
        labels=_strings(obj, meta.get("labels"), "metadata.labels", kind),
        start_time=_epoch(obj, status.get("startTime"), "status.startTime", kind),
        cpu_request_milli=requests,
        cpu_limit_milli=None if unlimited else sum(limits.values()),
        ext_cpu_limit_milli=ext,
        # ``kubernetes.io/config.source`` is not read: any pod author can write it.
        mirror_or_static=MIRROR_ANNOTATION in annotations
        and any(_owned_by_node(owner, spec.get("nodeName")) for owner in owners),
        daemonset=claimed is not None and (key.namespace, *claimed) in daemonsets,
        claimed_daemonset=claimed,
        grace_period_seconds=_integer(
            obj,
            spec.get("terminationGracePeriodSeconds"),
            "spec.terminationGracePeriodSeconds",
            kind,
        ),
        deletion_deadline=_epoch(
            obj, meta.get("deletionTimestamp"), "metadata.deletionTimestamp", kind
        ),
        deletion_grace_seconds=_integer(
            obj,
            meta.get("deletionGracePeriodSeconds"),
            "metadata.deletionGracePeriodSeconds",
            kind,
        ),
    )


def _owned_by_node(owner: object, node: object) -> bool:
    """The kubelet makes the Node the owner of a static pod's mirror."""
    return (
        is_mapping(owner)
        and owner.get("kind") == "Node"
        and owner.get("apiVersion") == "v1"
        and owner.get("name") == node
    )


def _claimed_daemonset(owners: list[Any]) -> tuple[str, str] | None:
    """``(name, uid)`` of the DaemonSet the pod's controller owner reference names, exactly as
    the DaemonSet controller writes it (``apps/v1``); None for any other controller, or none.
    Only a claim: whether that DaemonSet exists is the caller's to check."""
    for owner in owners:
        if is_mapping(owner) and owner.get("controller") is True:
            name, uid = owner.get("name"), owner.get("uid")
            if (
                owner.get("kind") == "DaemonSet"
                and owner.get("apiVersion") == DAEMONSET_API_VERSION
                and isinstance(name, str)
                and isinstance(uid, str)
                and name
                and uid
            ):
                return name, uid
            return None  # the API server allows one controller reference
    return None


def daemonset_id(obj: Obj) -> DaemonSetId:
    """A DaemonSet as the cluster store keeps it: namespace, name and UID, nothing else."""
    uid = at(obj, "metadata.uid")
    if not isinstance(uid, str) or not uid:
        raise fail(obj, "metadata.uid", "is required", kind="DaemonSet")
    return str(at(obj, "metadata.namespace") or "default"), name_of(obj), uid


def with_daemonsets(pod: QosPod, daemonsets: Collection[DaemonSetId]) -> QosPod:
    """``pod`` with ``daemonset`` saying whether the DaemonSet it claims is one of
    ``daemonsets`` (in the pod's namespace: owner references do not cross namespaces)."""
    claimed = pod.claimed_daemonset
    exists = claimed is not None and (pod.key.namespace, *claimed) in daemonsets
    return pod if exists == pod.daemonset else replace(pod, daemonset=exists)


def container_cpu_limits(obj: Mapping[str, object]) -> dict[str, int]:
    """Container name -> CPU limit (millicores), for the containers that have one: what a
    throttle spreads a pod-level limit over (``pods/resize`` is per container)."""
    limits: dict[str, int] = {}
    containers = as_list(obj, "spec.containers", at(obj, "spec.containers"), kind="Pod")
    for i, container in enumerate(containers):
        if not is_mapping(container):
            raise fail(obj, f"spec.containers[{i}]", "must be a mapping", container, kind="Pod")
        resources = container.get("resources")
        lim = resources.get("limits") if is_mapping(resources) else None
        if is_mapping(lim) and "cpu" in lim:
            where = f"spec.containers[{i}].resources.limits.cpu"
            limits[str(container.get("name", ""))] = _quantity(obj, "cpu", lim["cpu"], where, "Pod")
    return limits


def with_pod_usage(pod: QosPod, metrics: Mapping[str, object]) -> QosPod:
    cpu, memory = pod_usage(metrics)
    return replace(pod, cpu_usage_milli=cpu, memory_usage_bytes=memory)


def node_view(node: Mapping[str, object]) -> QosNode:
    """A Node as engine input, without pods and usage: what the cluster store keeps."""
    meta = section(node, "metadata")
    name = str(meta.get("name", "?"))
    capacity = mapping_at(node, "status.capacity")
    return QosNode(
        name=name,
        labels=_strings(node, meta.get("labels"), "metadata.labels", "Node"),
        cpu_capacity_milli=_amount(node, capacity, "cpu", "status.capacity", "Node"),
        memory_capacity_bytes=_amount(node, capacity, "memory", "status.capacity", "Node"),
    )


def _amount(
    obj: Obj, source: Mapping[str, object] | None, resource: str, path: str, kind: str
) -> int | None:
    if source is None or resource not in source:
        return None
    return _quantity(obj, resource, source[resource], f"{path}.{resource}", kind)


def with_usage(
    node: QosNode,
    pods: Iterable[QosPod],
    node_metrics: Mapping[str, object] | None = None,
    pod_metrics: Mapping[PodKey, Mapping[str, object]] | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> QosNode:
    """``node`` with its pods (sorted) and the usage of both, for one check. Raises
    ``ObjectError`` for a NodeMetrics or PodMetrics that cannot be read."""
    found = pod_metrics or {}
    snapshots = [
        pod if (metrics := found.get(pod.key)) is None else with_pod_usage(pod, metrics)
        for pod in pods
    ]
    return replace(
        with_node_usage(node, node_metrics),
        pods=tuple(sorted(snapshots, key=lambda p: p.key)),
        namespace_labels=namespace_labels if namespace_labels is not None else {},
    )


def with_node_usage(node: QosNode, node_metrics: Mapping[str, object] | None) -> QosNode:
    """``node`` with its own usage (not its pods'); raises ``ObjectError`` for a NodeMetrics
    that cannot be read."""
    if not node_metrics:
        return node
    usage = mapping_at(node_metrics, "usage")
    kind = "NodeMetrics"
    since, at = usage_times(node_metrics)
    return replace(
        node,
        cpu_usage_milli=_amount(node_metrics, usage, "cpu", "usage", kind),
        memory_usage_bytes=_amount(node_metrics, usage, "memory", "usage", kind),
        usage_since=since,
        usage_at=at,
    )


def node_from_dicts(
    node: Mapping[str, object],
    pods: Iterable[Mapping[str, object]],
    node_metrics: Mapping[str, object] | None = None,
    pod_metrics: Mapping[PodKey, Mapping[str, object]] | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    *,
    daemonsets: Collection[DaemonSetId] = frozenset(),
) -> QosNode:
    """A Node, the pods bound to it (terminal ones are dropped) and their usage;
    ``daemonsets``: the DaemonSets that exist (``daemonset_id``)."""
    views = [pod_view(raw, daemonsets=daemonsets) for raw in pods if not is_terminal(raw)]
    return with_usage(node_view(node), views, node_metrics, pod_metrics, namespace_labels)


def is_terminal(pod: Mapping[str, object]) -> bool:
    status = pod.get("status")
    return is_mapping(status) and status.get("phase") in ("Succeeded", "Failed")


def node_metrics_by_name(items: Iterable[Obj]) -> dict[str, Obj]:
    """NodeMetrics by node name: ``node_from_dicts(node, pods, by_name.get(name), ...)``."""
    return {str(item.get("metadata", {}).get("name")): item for item in items}


def pod_metrics_by_key(items: Iterable[Obj]) -> dict[PodKey, Obj]:
    """PodMetrics by namespace/name: the ``pod_metrics`` argument of ``node_from_dicts``."""
    keyed: dict[PodKey, Obj] = {}
    for item in items:
        meta = item.get("metadata", {})
        keyed[PodKey(str(meta.get("namespace", "default")), str(meta.get("name")))] = item
    return keyed


def metric_quantity(metric: str, value: int) -> str:
    """A rule value or waterline (internal metric unit) as the quantity users wrote."""
    return to_quantity(metric_resource(metric), value)


def waterlines_annotation(lines: Iterable[Waterline]) -> dict[str, str]:
    """``{"evict.cpu_total_usage": "6", ...}``: per action class and metric, the waterline."""
    return {f"{w.action_class.value}.{w.metric}": metric_quantity(w.metric, w.value) for w in lines}


__all__ = [
    "TAINT",
    "WATERLINES_ANNOTATION",
    "DaemonSetId",
    "container_cpu_limits",
    "daemonset_id",
    "effective_priority",
    "is_terminal",
    "metric_quantity",
    "metric_resource",
    "node_from_dicts",
    "node_metrics_by_name",
    "node_view",
    "pod_metrics_by_key",
    "pod_usage",
    "pod_view",
    "waterlines_annotation",
    "with_daemonsets",
    "with_node_usage",
    "with_pod_usage",
    "with_usage",
]
