"""Frozen snapshots for one round: the store's nodes and pod totals, and our custom resources
from kopf's indexes.

A snapshot is taken on the event loop in one go (no await in between), so the engines see one
consistent picture while events keep arriving; it holds totals, never pods.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.shares import PolicySnapshot, QueueSnapshot, ShareSnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.records import OwnRecord, PolicyRecord, QueueRecord

T = TypeVar("T")

# kopf.Index is a Mapping from key to a Store (a Collection of values); it is typed loosely
# here so that this room does not import kopf.
Index = Mapping[Any, Collection[T]]


@dataclass(frozen=True)
class OwnIndexes:
    """kopf's live indexes of our custom resources, handed over by the first handler call
    (kopf calls handlers only once its indexes are complete)."""

    queues: Index[QueueRecord]
    policies: Index[PolicyRecord]


def values(index: Index[T]) -> Iterator[T]:
    for store in list(index.values()):
        yield from list(store)


def queue_records(indexes: OwnIndexes) -> list[QueueRecord]:
    return sorted(values(indexes.queues), key=lambda record: record.name)


def policy_records(indexes: OwnIndexes) -> list[PolicyRecord]:
    return sorted(values(indexes.policies), key=lambda record: record.name)


def node_policies(policies: list[PolicyRecord]) -> dict[PolicyName, NodePolicy]:
    return {PolicyName(r.name): r.spec.nodes for r in policies if r.spec is not None}


def share_snapshot(
    store: ClusterStore,
    queues: Iterable[QueueSnapshot],
    policies: Iterable[PolicySnapshot],
    *,
    now_seconds: float,
    seed: int = 0,
) -> ShareSnapshot:
    return ShareSnapshot(
        policies=tuple(policies),
        queues=tuple(queues),
        nodes=store.nodes.snapshots(),
        totals=store.totals(),
        pod_groups=store.pod_groups.snapshots(),
        now_seconds=now_seconds,
        seed=seed,
    )


def specs(records: Iterable[OwnRecord[T]]) -> list[T]:
    """The specs of the records that could be read."""
    return [record.spec for record in records if record.spec is not None]
