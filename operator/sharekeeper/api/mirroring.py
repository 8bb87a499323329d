"""Volcano Queues mirrored as Queues (``SchedulerPolicy.spec.queueSource: Volcano``): a Volcano
Queue read as the Queue the operator keeps for it, and what mirroring reads of our own Queues.

A Volcano Queue is input we do not own, so every value is checked by our own Queue model (the
one the CRD is generated from) before it is copied: a Volcano Queue the model refuses (a weight
of 0, a malformed or huge quantity, a guarantee above the capability) is not mirrored, and the
problem says why, where the API server would have refused the write.

Specs are compared in one form (``spec_form``): as the model reads them, every default written
out, empty maps left out. A mirror written by the operator and read back from the API server (which
adds the CRD's defaults) thus compares equal, and an idle cluster causes no writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sharekeeper.api.base import read
from sharekeeper.api.queue import VOLCANO_GROUP, Queue, QueueSpec, volcano_owner
from sharekeeper.model.objects import (
    MutableObj,
    Obj,
    ObjectError,
    at,
    fail,
    is_mapping,
    labels_of,
    name_of,
)

VOLCANO_API_VERSION = f"{VOLCANO_GROUP}/v1beta1"
LEFT_OUT_ANNOTATION = "sharekeeper.io/volcano-left-out"
"""On a mirror: the Volcano Queue's fields that a Queue does not have, and so were not copied."""

_COPIED = ("weight", "capability", "deserved", "priority", "reclaimable", "parent")
"""Fields of a Volcano Queue's spec copied as they are (``guarantee`` and the state are read
on their own)."""
MAX_LEFT_OUT = 1024
"""The annotation is cut there: a Volcano Queue may carry any number of unknown fields."""
_OPEN = {"Open": "Open", "Closed": "Closed", "Closing": "Closed"}
"""A Volcano Queue's ``status.state`` as our Queue's state (``Unknown`` and the rest: below)."""


@dataclass(frozen=True, slots=True)
class VolcanoQueue:
    """A Volcano Queue as mirroring reads it."""

    name: str
    uid: str
    labels: Mapping[str, str]
    spec: Obj | None
    """The spec its mirror has (in ``spec_form``); None when our Queue model refuses it."""
    left_out: str | None = None
    """The fields a Queue does not have, as the mirror's ``LEFT_OUT_ANNOTATION``; None if none."""
    problem: str | None = None
    """Why it is not mirrored (``spec`` is None)."""


@dataclass(slots=True)
class QueueOrigin:
    """What mirroring reads of one of our Queues. Only a mirror keeps its labels and spec.

    Not frozen (setting a frozen dataclass's fields costs a call each): the store makes one at
    every event of every Queue, the echo of each status write included. Not to be changed."""

    name: str
    uid: str
    resource_version: str = ""
    mirror_of: str | None = None
    """UID of the Volcano Queue it mirrors (``api.queue.volcano_owner``); None when people
    made it: such a Queue is never written."""
    labels: Mapping[str, str] | None = None
    left_out: str | None = None
    spec: Obj | None = None
    """The spec as stored (a merge patch is computed against it)."""
    form: Obj | None = None
    """``spec`` in ``spec_form``; None when our model cannot read it (it differs, then)."""

    def same_but_version(self, other: QueueOrigin | None) -> bool:
        """Equal but for the resourceVersion (a status write changes only that). Field by field:
        a copy with the version replaced costs more than the rest of an echo's reading."""
        return (
            other is not None
            and self.name == other.name
            and self.uid == other.uid
            and self.mirror_of == other.mirror_of
            and self.labels == other.labels
            and self.left_out == other.left_out
            and self.spec == other.spec
            and self.form == other.form
        )


def volcano_queue(obj: Obj) -> VolcanoQueue:
    """``obj`` (a ``scheduling.volcano.sh`` Queue) read for mirroring. Raises ``ObjectError``
    only without a name or UID; any other problem leaves ``spec`` None and says why."""
    name = name_of(obj)
    uid = at(obj, "metadata.uid")
    if not isinstance(uid, str) or not uid:
        raise fail(obj, "metadata.uid", "is required", kind="Queue")
    try:
        labels = labels_of(obj)
        spec, left_out = _mirror_spec(obj, name)
    except ObjectError as error:
        problems = "; ".join(map(str, error.problems))
        return VolcanoQueue(
            name, uid, {}, None, problem=f"Volcano Queue {name} is not mirrored: {problems}"
        )
    return VolcanoQueue(name, uid, labels, spec, left_out)


def _mirror_spec(obj: Obj, name: str) -> tuple[MutableObj, str | None]:
    spec = at(obj, "spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise fail(obj, "spec", "must be a mapping", spec, kind="Queue")
    candidate = {key: spec[key] for key in _COPIED if spec.get(key) is not None}
    guarantee = spec.get("guarantee")
    if isinstance(guarantee, Mapping):
        if guarantee.get("resource") is not None:
            candidate["guarantee"] = {"resource": guarantee["resource"]}
    elif guarantee is not None:
        candidate["guarantee"] = guarantee  # for the model to refuse, naming the field
    candidate["state"] = _state(obj)
    queue = read(Queue, {"kind": "Queue", "metadata": {"name": name}, "spec": candidate})
    left_out = [
        f"spec.{key}={spec[key]:.253}" if isinstance(spec[key], str) else f"spec.{key}"
        for key in sorted(map(str, spec))
        if key not in (*_COPIED, "guarantee", "state") and spec[key] is not None
    ]
    text = ", ".join(left_out)
    if len(text) > MAX_LEFT_OUT:
        text = text[: MAX_LEFT_OUT - 3] + "..."
    return _form(queue.spec), text or None


def _state(obj: Obj) -> str:
    """Volcano keeps a queue's state in ``status.state`` (its controller acts on commands);
    ``spec.state`` is read when the status says nothing useful."""
    observed = at(obj, "status.state")
    if isinstance(observed, str) and observed in _OPEN:
        return _OPEN[observed]
    desired = at(obj, "spec.state")
    return desired if desired in ("Open", "Closed") else "Open"


def spec_form(spec: Any) -> MutableObj | None:
    """A Queue spec as our model reads it, every default written out and empty maps left out;
    None when the model refuses it."""
    try:
        return _form(QueueSpec.model_validate(spec))
    except ValidationError:
        return None


def _form(spec: QueueSpec) -> MutableObj:
    form = spec.model_dump(by_alias=True, exclude_none=True)
    for key in ("capability", "deserved"):
        if not form.get(key):
            form.pop(key, None)
    if not (form.get("guarantee") or {}).get("resource"):
        form.pop("guarantee", None)
    return form


def queue_origin(obj: Obj) -> QueueOrigin:
    """One of our Queues as mirroring reads it; never raises (an unnamed object is the store's
    problem, not ours)."""
    metadata = obj.get("metadata")
    metadata = metadata if is_mapping(metadata) else {}
    name, uid = str(metadata.get("name", "")), str(metadata.get("uid", ""))
    version = str(metadata.get("resourceVersion", ""))
    mirror_of = volcano_owner(obj)
    if mirror_of is None:
        return QueueOrigin(name, uid, version)
    annotations = metadata.get("annotations")
    left_out = annotations.get(LEFT_OUT_ANNOTATION) if is_mapping(annotations) else None
    spec = obj.get("spec")
    spec = dict(spec) if is_mapping(spec) else {}
    return QueueOrigin(
        name, uid, version, mirror_of, labels_of(obj),
        str(left_out) if left_out is not None else None, spec, spec_form(spec),
    )  # fmt: skip
