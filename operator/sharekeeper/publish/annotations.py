"""Node annotations: the patches that bring a node's annotations to what we publish.

Each loop owns a fixed set of keys and touches no other key, so annotations of other owners,
and keys of our other loop, are never changed. Pure; nothing here calls the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sharekeeper.model.records import NodeRecord
from sharekeeper.publish.diffing import Unchanged


@dataclass(frozen=True, slots=True)
class AnnotationWrite:
    node: str
    patch: dict[str, str | None]
    """Merge patch of ``metadata.annotations``: ``None`` removes a key."""
    annotations: dict[str, str]
    """Our annotations on the node after the patch."""


def annotation_writes(
    records: Iterable[NodeRecord],
    desired: Mapping[str, Mapping[str, str]],
    owned: frozenset[str],
    unchanged: Unchanged | None = None,
) -> list[AnnotationWrite]:
    """``unchanged``: the last call's nodes that needed no write (updated)."""
    last = unchanged.last if unchanged is not None else {}
    settled: dict[str, tuple[object, object]] = {}
    writes = []
    for record in records:
        name = str(record.snapshot.name)
        annotations = desired.get(name, _NONE)
        before = last.get(name)
        if before is not None and before[0] is record and before[1] is annotations:
            settled[name] = before
            continue
        want = {key: value for key, value in annotations.items() if key in owned}
        have = {key: value for key, value in record.annotations.items() if key in owned}
        patch: dict[str, str | None] = {key: None for key in have if key not in want}
        patch |= {key: value for key, value in want.items() if have.get(key) != value}
        if patch:
            after = {k: v for k, v in record.annotations.items() if k not in owned} | want
            writes.append(AnnotationWrite(name, patch, after))
        else:
            settled[name] = (record, annotations)
    if unchanged is not None:
        unchanged.last = settled
    return writes


_NONE: Mapping[str, str] = {}
"""The annotations of a node with none desired (one object, so that it is known again)."""
