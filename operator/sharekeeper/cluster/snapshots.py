"""Frozen snapshots for one round: the store's nodes, pod totals and our custom resources.

A snapshot is taken on the event loop in one go (no await in between), so the engines see one
consistent picture while events keep arriving; it holds totals, never pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.shares import PolicySnapshot, QueueSnapshot, ShareSnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.records import OwnRecord, PolicyRecord

T = TypeVar("T")


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
        totals=store.totals(store.resource_names()),  # never a resource only a pod names
        pod_groups=store.pod_groups.snapshots(),
        namespace_labels=dict(store.namespaces.records),
        now_seconds=now_seconds,
        seed=seed,
        volcano_queues=store.volcano_queues.uids(),
    )


def specs(records: Iterable[OwnRecord[T]]) -> list[T]:
    """The specs of the records that could be read."""
    return [record.spec for record in records if record.spec is not None]
