"""kopf indexes of nodes, pods, PodGroups and our own resources, and the handlers that wake the
recompute loop.

Only indexes and ``on.event`` touch nodes and pods: neither writes anything to the objects (no
finalizers, no kopf annotations). An index holds one small frozen value per object.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import kopf

from sharekeeper.cluster.snapshots import ClusterIndexes
from sharekeeper.engine.shares import PodGroupSnapshot, PodSnapshot
from sharekeeper.loops.qos import QosIndexes
from sharekeeper.model.nodes import node_snapshot, our_annotations
from sharekeeper.model.objects import ModelError
from sharekeeper.model.pods import pod_group_snapshot, pod_snapshot
from sharekeeper.model.policies import policy_spec
from sharekeeper.model.queues import queue_snapshot
from sharekeeper.model.records import NodeRecord, OwnRecord, PolicyRecord, QueueRecord

logger = logging.getLogger(__name__)

QUEUES = ("scheduling.sharekeeper.io", "v1alpha1", "queues")
POLICIES = ("scheduling.sharekeeper.io", "v1alpha1", "schedulerpolicies")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")


@kopf.index("v1", "nodes")
async def node_index(name: str, body: kopf.Body, **_: Any) -> dict[str, NodeRecord]:
    return {name: NodeRecord(node_snapshot(body), our_annotations(body))}


@kopf.index("v1", "pods")
async def pod_index(
    namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], PodSnapshot]:
    return {(namespace or "", name): pod_snapshot(body)}


@kopf.index(*PODGROUPS)
async def pod_group_index(
    namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], PodGroupSnapshot]:
    return {(namespace or "", name): pod_group_snapshot(body)}


@kopf.index(*QUEUES)
async def queue_index(name: str, body: kopf.Body, **_: Any) -> dict[str, QueueRecord]:
    return {name: _record(body, queue_snapshot)}


@kopf.index(*POLICIES)
async def policy_index(name: str, body: kopf.Body, **_: Any) -> dict[str, PolicyRecord]:
    return {name: _record(body, policy_spec)}


def _record(body: kopf.Body, read: Any) -> OwnRecord[Any]:
    status = copy.deepcopy(dict(body.get("status") or {}))
    meta = body["metadata"]
    try:
        spec, error = read(body), None
    except ModelError as problem:
        spec, error = None, str(problem)
        logger.warning("%s", problem)
    return OwnRecord(meta["name"], meta["uid"], meta.get("generation", 0), spec, status, error)


def attach(memo: kopf.Memo, kwargs: dict[str, Any]) -> None:
    """Hand the indexes to the loops; kopf calls handlers only once every index is complete."""
    shares = ClusterIndexes(
        nodes=kwargs["node_index"],
        pods=kwargs["pod_index"],
        queues=kwargs["queue_index"],
        policies=kwargs["policy_index"],
        pod_groups=kwargs.get("pod_group_index") or {},
    )
    memo["recompute"].attach(shares)
    memo["qos"].attach(
        QosIndexes(
            policies=kwargs["qos_policy_index"],
            nodes=kwargs["qos_node_index"],
            pods=kwargs["qos_pod_index"],
            namespaces=kwargs["namespace_index"],
            shares=shares,
        )
    )


def _wake(memo: kopf.Memo, kwargs: dict[str, Any]) -> None:
    attach(memo, kwargs)
    memo["recompute"].wake()


@kopf.on.event("v1", "nodes")
async def node_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)


@kopf.on.event("v1", "pods")
async def pod_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)


@kopf.on.event(*PODGROUPS)
async def pod_group_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)


@kopf.on.event(*QUEUES)
async def queue_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)


@kopf.on.event(*POLICIES)
async def policy_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)
