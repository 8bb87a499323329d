"""Mirroring Volcano Queues: which Queues to create, patch and delete, and what to tell on the
Volcano Queues, from both sides as the store holds them.

Pure, so that the rules are a property of this module alone:

- one Queue per Volcano Queue our model accepts, of the same name, labelled
  ``sharekeeper.io/source=volcano`` (with the Volcano Queue's own labels), owned by it (an owner
  reference with its UID, so the garbage collector deletes the mirror with it), its spec the
  Volcano Queue's (``api.mirroring``): a change on the Volcano side is copied, a change on the
  mirror is put back; what differs is patched, nothing else;
- a Queue of that name people made (not labelled, or not owned by that Volcano Queue) is never
  written: the Volcano Queue is not mirrored, and both say so (the Queue in its
  ``VolcanoQueueShadowed`` condition, the Volcano Queue in an Event);
- a Volcano Queue our model refuses is not mirrored (an existing mirror keeps its last good
  spec), and the Event says why;
- a mirror whose Volcano Queue is gone (or is a new one of the same name) is deleted: the
  garbage collector would, and where none runs (a bare API server) nothing else does.

Every patch and delete names the UID it was decided for (a precondition), so a Queue replaced
meanwhile by one people made is refused by the API server rather than written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sharekeeper.api.mirroring import (
    LEFT_OUT_ANNOTATION,
    VOLCANO_API_VERSION,
    QueueOrigin,
    VolcanoQueue,
)
from sharekeeper.api.queue import VOLCANO_SOURCE, Queue
from sharekeeper.engine.shares.snapshot import SOURCE_LABEL
from sharekeeper.engine.shares.tree import ROOT
from sharekeeper.model.objects import MutableObj
from sharekeeper.publish.diffing import merge_patch

QUEUE_API_VERSION = Queue.__resource__.api_version


@dataclass(frozen=True, slots=True)
class Create:
    name: str
    body: MutableObj
    """The whole Queue."""


@dataclass(frozen=True, slots=True)
class Patch:
    name: str
    uid: str
    body: MutableObj
    """A merge patch of the Queue; its ``metadata.uid`` is a precondition."""


@dataclass(frozen=True, slots=True)
class Delete:
    name: str
    uid: str
    """Deleted only if the Queue still has this UID (a precondition)."""


MirrorWrite = Create | Patch | Delete


@dataclass(frozen=True, slots=True)
class Report:
    """What to tell on a Volcano Queue (a Warning Event): why it is not mirrored."""

    name: str
    uid: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class MirrorPlan:
    writes: tuple[MirrorWrite, ...] = ()
    reports: tuple[Report, ...] = ()


def mirror_plan(
    volcano: Mapping[str, VolcanoQueue], queues: Mapping[str, QueueOrigin]
) -> MirrorPlan:
    """The writes that bring the mirrors in line with the Volcano Queues, and the reports.
    O(Volcano Queues + Queues); an unchanged pair costs a few comparisons and no write."""
    writes: list[MirrorWrite] = []
    reports: list[Report] = []
    # Volcano's root queue is the tree's root, which a Queue's parent "root" already names.
    volcano = {name: source for name, source in volcano.items() if name != ROOT}
    for name in sorted(volcano):
        source = volcano[name]
        queue = queues.get(name)
        if queue is not None and queue.mirror_of is None:
            conflict = (
                f"not mirrored: Queue {name} (scheduling.sharekeeper.io) exists and was not made "
                "by the operator, so it is left as it is; rename or delete it to have this "
                "Volcano Queue mirrored"
            )
            reports.append(Report(name, source.uid, "MirrorConflict", conflict))
            continue
        if source.spec is None:
            reports.append(
                Report(name, source.uid, "NotMirrored", source.problem or "not mirrored")
            )
            continue
        if queue is None:
            writes.append(Create(name, mirror_object(source)))
        elif queue.mirror_of != source.uid:
            # The mirror of an older Volcano Queue of this name: deleted now, and the new one
            # mirrored once the deletion is seen.
            writes.append(Delete(name, queue.uid))
        else:
            patch = mirror_patch(source, queue)
            if patch:
                writes.append(Patch(name, queue.uid, patch))
    for name in sorted(queues):
        queue = queues[name]
        if queue.mirror_of is not None and name not in volcano:
            writes.append(Delete(name, queue.uid))
    return MirrorPlan(tuple(writes), tuple(reports))


def mirror_labels(source: VolcanoQueue) -> dict[str, str]:
    return {**source.labels, SOURCE_LABEL: VOLCANO_SOURCE}


def mirror_object(source: VolcanoQueue) -> MutableObj:
    """The Queue that mirrors ``source`` (whose ``spec`` is not None)."""
    assert source.spec is not None
    metadata: MutableObj = {
        "name": source.name,
        "labels": mirror_labels(source),
        "ownerReferences": [
            {
                "apiVersion": VOLCANO_API_VERSION,
                "kind": "Queue",
                "name": source.name,
                "uid": source.uid,
                "controller": True,
            }
        ],
    }
    if source.left_out is not None:
        metadata["annotations"] = {LEFT_OUT_ANNOTATION: source.left_out}
    return {
        "apiVersion": QUEUE_API_VERSION,
        "kind": "Queue",
        "metadata": metadata,
        "spec": dict(source.spec),
    }


def mirror_patch(source: VolcanoQueue, queue: QueueOrigin) -> MutableObj:
    """The merge patch that makes ``queue`` (a mirror of ``source``) mirror it again; ``{}``
    when it does. The spec is compared in ``spec_form``, so the API server's defaults are no
    difference; labels other than the Volcano Queue's and ours are removed, as in the spec."""
    assert source.spec is not None
    metadata: MutableObj = {}
    labels = merge_patch(queue.labels or {}, mirror_labels(source))
    if labels:
        metadata["labels"] = labels
    if queue.left_out != source.left_out:
        metadata["annotations"] = {LEFT_OUT_ANNOTATION: source.left_out}
    patch: dict[str, Any] = {}
    if queue.form != source.spec:
        spec = merge_patch(queue.spec or {}, source.spec)
        if spec:
            patch["spec"] = spec
    if metadata or patch:
        patch["metadata"] = {**metadata, "uid": queue.uid}
    return patch
