"""Our own custom resources as the indexes hold them: the spec read into engine input, plus
the identity and status the publishers diff against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sharekeeper.engine.shares import NodeSnapshot, QueueSnapshot
from sharekeeper.model.policies import PolicySpec

SpecT = TypeVar("SpecT")


@dataclass(frozen=True, slots=True)
class OwnRecord(Generic[SpecT]):
    """One of our custom resources: the spec we compute from and the status that is there.

    ``spec`` is None when the object could not be read (``error`` says why); such an object
    gets an Invalid condition instead of results.
    """

    name: str
    uid: str
    generation: int
    spec: SpecT | None
    status: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


QueueRecord = OwnRecord[QueueSnapshot]
PolicyRecord = OwnRecord[PolicySpec]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node: what the engines read, and the ``sharekeeper.io/`` annotations it carries."""

    snapshot: NodeSnapshot
    annotations: Mapping[str, str] = field(default_factory=dict)
