"""Node objects -> engine node snapshots."""

from __future__ import annotations

from sharekeeper.engine.shares import NodeSnapshot
from sharekeeper.engine.shares.snapshot import NodeName
from sharekeeper.model.objects import Obj, labels_of, name_of, resources_at


def node_snapshot(obj: Obj) -> NodeSnapshot:
    return NodeSnapshot(
        name=NodeName(name_of(obj)),
        labels=labels_of(obj),
        allocatable=resources_at(obj, "status.allocatable"),
    )
