"""Frozen snapshots of the cluster, taken from kopf's indexes for one recompute.

kopf keeps the indexes current from the watches (``handlers.indexes``); a snapshot copies the
few values the engines need into tuples sorted by name, so the engines see a consistent,
ordered picture even while events keep arriving.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.shares import PodGroupSnapshot, PodSnapshot, ShareSnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.records import NodeRecord, PolicyRecord, QueueRecord

T = TypeVar("T")

# kopf.Index is a Mapping from key to a Store (a Collection of values); it is typed loosely
# here so that this room does not import kopf.
Index = Mapping[Any, Collection[T]]


@dataclass(frozen=True)
class ClusterIndexes:
    """The live kopf indexes, handed over by the first handler call (they are complete then)."""

    nodes: Index[NodeRecord]
    pods: Index[PodSnapshot]
    queues: Index[QueueRecord]
    policies: Index[PolicyRecord]
    pod_groups: Index[PodGroupSnapshot] = field(default_factory=dict)


def values(index: Index[T]) -> Iterator[T]:
    for store in list(index.values()):
        yield from list(store)


def queue_records(indexes: ClusterIndexes) -> list[QueueRecord]:
    return sorted(values(indexes.queues), key=lambda record: record.name)


def policy_records(indexes: ClusterIndexes) -> list[PolicyRecord]:
    return sorted(values(indexes.policies), key=lambda record: record.name)


def node_records(indexes: ClusterIndexes) -> list[NodeRecord]:
    return sorted(values(indexes.nodes), key=lambda record: record.snapshot.name)


def node_policies(indexes: ClusterIndexes) -> dict[PolicyName, NodePolicy]:
    return {PolicyName(r.name): r.spec.nodes for r in policy_records(indexes) if r.spec is not None}


def share_snapshot(indexes: ClusterIndexes, *, now_seconds: float) -> ShareSnapshot:
    return ShareSnapshot(
        policies=tuple(r.spec.shares for r in policy_records(indexes) if r.spec is not None),
        queues=tuple(r.spec for r in queue_records(indexes) if r.spec is not None),
        nodes=tuple(record.snapshot for record in node_records(indexes)),
        pods=tuple(sorted(values(indexes.pods), key=lambda pod: (pod.namespace, pod.name))),
        pod_groups=tuple(
            sorted(values(indexes.pod_groups), key=lambda group: (group.namespace, group.name))
        ),
        now_seconds=now_seconds,
    )
