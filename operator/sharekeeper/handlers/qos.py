"""kopf indexes for the node QoS check: policies, and trimmed nodes, pods and namespaces.

Values are dicts cut down to the fields ``model.qos`` reads, so the indexes stay small.
"""

from __future__ import annotations

from typing import Any

import kopf

from sharekeeper.handlers.indexes import attach
from sharekeeper.model.qos import THROTTLE_ANNOTATION
from sharekeeper.model.records import OwnRecord

POLICIES = ("ensurance.sharekeeper.io", "v1alpha1", "nodeqosensurancepolicies")
# The pod annotations model.qos reads: our throttle state and the static/mirror markers.
POD_ANNOTATIONS = (
    THROTTLE_ANNOTATION,
    "kubernetes.io/config.mirror",
    "kubernetes.io/config.source",
)


def _pick(source: Any, *keys: str) -> dict[str, Any]:
    return {key: source[key] for key in keys if source and source.get(key) is not None}


@kopf.index(*POLICIES)
async def qos_policy_index(
    name: str, body: kopf.Body, **_: Any
) -> dict[str, OwnRecord[dict[str, Any]]]:
    meta = body["metadata"]
    trimmed = {"metadata": {"name": name}, "spec": dict(body.get("spec") or {})}
    status = dict(body.get("status") or {})
    return {name: OwnRecord(name, meta["uid"], meta.get("generation", 0), trimmed, status)}


@kopf.index("v1", "nodes")
async def qos_node_index(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "metadata": _pick(body["metadata"], "name", "labels", "resourceVersion"),
            "spec": _pick(body.get("spec"), "taints"),
            "status": _pick(body.get("status"), "capacity"),
        }
    }


@kopf.index("v1", "pods")
async def qos_pod_index(body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]] | None:
    spec = body.get("spec") or {}
    node = spec.get("nodeName")
    if not node:
        return None
    meta = body["metadata"]
    annotations = _pick(meta.get("annotations"), *POD_ANNOTATIONS)
    return {
        node: {
            "metadata": {
                **_pick(meta, "name", "namespace", "labels", "ownerReferences",
                        "deletionTimestamp", "creationTimestamp"),
                "annotations": annotations,
            },
            "spec": {
                **_pick(spec, "nodeName", "priority"),
                "containers": [_pick(c, "name", "resources") for c in spec.get("containers", [])],
            },
            "status": _pick(body.get("status"), "phase", "qosClass", "startTime"),
        }
    }  # fmt: skip


@kopf.index("v1", "namespaces")
async def namespace_index(name: str, labels: kopf.Labels, **_: Any) -> dict[str, dict[str, Any]]:
    return {name: {"metadata": {"name": name, "labels": dict(labels)}}}


@kopf.on.event(*POLICIES)
async def qos_policy_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    attach(memo, kwargs)


@kopf.on.event("v1", "namespaces")
async def namespace_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    attach(memo, kwargs)
