"""One-line builders of Kubernetes objects as ``kubectl get -o yaml`` prints them, and a
helper that runs them through simulate's path (model parsing, then the share engine)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from sharekeeper.api.policy import policy_spec
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.cluster.ledger import PodLedger
from sharekeeper.engine.shares import (
    PodSnapshot,
    PodTotals,
    PolicySnapshot,
    QueueSnapshot,
    ShareResult,
    Sharing,
    deserved_shares,
)
from sharekeeper.model.objects import MutableObj
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of

Resources = Mapping[str, str | int]


def node(
    name: str, labels: Mapping[str, str] | None = None, **allocatable: str | int
) -> MutableObj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {"allocatable": _keyword_resources(allocatable)},
    }


def queue(
    name: str,
    *,
    weight: int | None = None,
    capability: Resources | None = None,
    guarantee: Resources | None = None,
    deserved: Resources | None = None,
    state: str | None = None,
    labels: Mapping[str, str] | None = None,
    parent: str | None = None,
) -> MutableObj:
    spec: MutableObj = {}
    if parent is not None:
        spec["parent"] = parent
    if weight is not None:
        spec["weight"] = weight
    if capability is not None:
        spec["capability"] = _quantities(capability)
    if guarantee is not None:
        spec["guarantee"] = {"resource": _quantities(guarantee)}
    if deserved is not None:
        spec["deserved"] = _quantities(deserved)
    if state is not None:
        spec["state"] = state
    return {
        "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def pod(
    name: str,
    queue: str | None = None,
    *,
    node: str | None = None,
    namespace: str = "ns",
    phase: str | None = None,
    group: str | None = None,
    gated: bool = False,
    held: bool = False,
    admitted: bool = False,
    priority: int | None = None,
    created: str | None = None,
    scheduler: str | None = None,
    **requests: str | int,
) -> MutableObj:
    """``gated``: someone else's scheduling gate; ``held``: ours (the admission gate);
    ``admitted``: released by the operator (its annotation)."""
    labels = {"sharekeeper.io/queue": queue} if queue else {}
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    if admitted:
        annotations["sharekeeper.io/admitted"] = "2026-01-01T00:00:00Z"
    spec: MutableObj = {
        "containers": [{"name": "main", "resources": {"requests": _keyword_resources(requests)}}]
    }
    if node:
        spec["nodeName"] = node
    gates = [{"name": "wait"}] if gated else []
    if held:
        gates.append({"name": "sharekeeper.io/admission"})
    if gates:
        spec["schedulingGates"] = gates
    if scheduler:
        spec["schedulerName"] = scheduler
    if priority is not None:
        spec["priority"] = priority
    metadata: MutableObj = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if created is not None:
        metadata["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node else "Pending")},
    }


def unschedulable(obj: MutableObj, since: str | None = "2026-01-01T00:01:00Z") -> MutableObj:
    """A copy of the pod ``obj`` as kube-scheduler leaves one it found no node for: its
    PodScheduled condition False for Unschedulable since ``since`` (None: no transition time),
    after the kubelet's Initialized."""
    found = copy.deepcopy(obj)
    condition: MutableObj = {
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/2 nodes are available: 2 Insufficient cpu.",
    }  # fmt: skip
    if since is not None:
        condition["lastTransitionTime"] = since
    found["status"]["conditions"] = [{"type": "Initialized", "status": "True"}, condition]
    return found


def pod_group(
    name: str,
    queue: str,
    *,
    phase: str = "Pending",
    min_member: int = 1,
    min_resources: Resources | None = None,
    namespace: str = "ns",
) -> MutableObj:
    spec: MutableObj = {"queue": queue, "minMember": min_member}
    if min_resources is not None:
        spec["minResources"] = _quantities(min_resources)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }


def policy(
    name: str = "default",
    kind: str = "Proportion",
    *,
    queue_labels: Mapping[str, str] | None = None,
    node_labels: Mapping[str, str] | None = None,
    **sharing: Any,
) -> MutableObj:
    return {
        "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": name},
        "spec": {
            "queueSelector": {"matchLabels": dict(queue_labels or {})},
            "nodeSelector": {"matchLabels": dict(node_labels or {})},
            "sharing": {"policy": kind, **sharing},
        },
    }


def share_policy(name: str, **fields: Any) -> PolicySnapshot:
    """The share engine's view of a SchedulerPolicy ``name`` with an empty spec, read as the
    operator reads one (the API model's defaults), then ``fields``."""
    read = policy_spec({"kind": "SchedulerPolicy", "metadata": {"name": name}}).shares
    return replace(read, **fields)


def sharing(policy_kind: str, **fields: Any) -> Sharing:
    """``spec.sharing`` with the API model's defaults, the sharing policy ``policy_kind`` and
    ``fields``."""
    return replace(share_policy("p").sharing, policy=policy_kind, **fields)


def share_queue(name: str, **fields: Any) -> QueueSnapshot:
    """The share engine's view of a Queue ``name`` with an empty spec, read as the operator
    reads one (the API model's defaults), then ``fields``."""
    read = queue_snapshot({"kind": "Queue", "metadata": {"name": name}, "spec": {}})
    return replace(read, **fields)


def totals_of(pods: Iterable[PodSnapshot]) -> PodTotals:
    """The running totals of ``pods``, as the operator's ledger keeps them."""
    ledger = PodLedger()
    for pod_snapshot in pods:
        ledger.add(pod_snapshot)
    return ledger.totals()


def shares(*objects: MutableObj, now: float = 0.0, seed: int = 0) -> ShareResult:
    """The share engine's result for these objects, read the way ``simulate`` reads them."""
    inputs = parse_objects(objects)
    return deserved_shares(snapshot_of(inputs, Context(now_seconds=now, seed=seed)))


def _quantities(resources: Resources) -> dict[str, str]:
    return {name: str(value) for name, value in resources.items()}


def _keyword_resources(resources: Resources) -> dict[str, str]:
    """``gpu=1, ephemeral_storage="1Gi"`` -> ``nvidia.com/gpu``, ``ephemeral-storage``."""
    return {
        "nvidia.com/gpu" if name == "gpu" else name.replace("_", "-"): str(value)
        for name, value in resources.items()
    }


def exposed(text: bytes) -> list[Sample]:
    """The samples of a ``/metrics`` answer, as Prometheus' own parser of the format reads them."""
    families = text_string_to_metric_families(text.decode())
    return [sample for family in families for sample in family.samples]


def exposed_value(text: bytes, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` with exactly ``labels`` (None: no such sample)."""
    values = [s.value for s in exposed(text) if s.name == name and s.labels == labels]
    assert len(values) <= 1, f"{name}{labels} exposed {len(values)} times"
    return values[0] if values else None
