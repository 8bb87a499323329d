"""What the operator keeps per object: our custom resources as the kopf indexes hold them (the
spec read into engine input, plus the identity and status the publishers diff against), and
Nodes and Pods as the cluster store holds them (read once, on arrival; no raw body kept)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sharekeeper.engine import qos
from sharekeeper.engine.shares import NodeSnapshot, PodSnapshot, QueueSnapshot
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
    qos: qos.NodeSnapshot | None = None
    """The QoS engine's view, without pods and usage (added per check)."""
    taints: tuple[Mapping[str, Any], ...] = ()
    resource_version: str = ""
    """For the taint patch: refused if the node changed since we read it."""


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod: the share engine's view and, for a pod bound to a node, the QoS engine's."""

    share: PodSnapshot
    qos: qos.PodSnapshot | None = None
    """None for an unbound or terminal pod, or one whose QoS fields could not be read."""
    cpu_limits: Mapping[str, int] = field(default_factory=dict)
    """Container -> CPU limit (millicores): what a throttle is spread over."""
    problem: str | None = None
    """Why the QoS view could not be read (the pod is then never acted on)."""
