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

    def write(record: NodeRecord, annotations: Mapping[str, str]) -> AnnotationWrite | None:
        want = {key: value for key, value in annotations.items() if key in owned}
        have = {key: value for key, value in record.annotations.items() if key in owned}
        patch: dict[str, str | None] = {key: None for key in have if key not in want}
        patch |= {key: value for key, value in want.items() if have.get(key) != value}
        if not patch:
            return None
        after = {k: v for k, v in record.annotations.items() if k not in owned} | want
        return AnnotationWrite(str(record.snapshot.name), patch, after)

    wanted = ((str(r.snapshot.name), r, desired.get(str(r.snapshot.name), _NONE)) for r in records)
    return (unchanged if unchanged is not None else Unchanged()).writes(wanted, write)


_NONE: Mapping[str, str] = {}
"""The annotations of a node with none desired (one object, so that it is known again)."""
