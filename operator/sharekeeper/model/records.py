"""What the cluster store keeps per object, read once, on arrival (no raw body kept): our custom
resources (the spec read into engine input, plus the identity and status the publishers diff
against), Nodes and Pods."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from sharekeeper.engine import qos
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.node_constraints import NodeConstraints
from sharekeeper.engine.shares import PodSnapshot, PolicySnapshot, QueueSnapshot, ShareNode
from sharekeeper.model.objects import Obj, ObjectError

SpecT = TypeVar("SpecT")


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A SchedulerPolicy's spec as the engines read it (``api.policy.policy_spec``)."""

    shares: PolicySnapshot
    nodes: NodePolicy


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
    status: Obj = field(default_factory=dict)
    error: str | None = None


def own_record(obj: Obj, read: Callable[[Obj], SpecT]) -> OwnRecord[SpecT]:
    """One of our resources as the loops keep it: its spec read by ``read``, or the reason it
    could not be read (it then gets an Invalid condition instead of results)."""
    meta = obj.get("metadata") or {}
    try:
        spec, error = read(obj), None
    except ObjectError as problem:
        spec, error = None, str(problem)
    return OwnRecord(
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        int(meta.get("generation") or 0),
        spec,
        own_status(obj),
        error,
    )


def own_status(obj: Obj) -> Obj:
    """The status of one of our resources as its record keeps it (``{}`` for none)."""
    status = obj.get("status")
    return dict(status) if isinstance(status, Mapping) else {}


QueueRecord = OwnRecord[QueueSnapshot]
PolicyRecord = OwnRecord[PolicySpec]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node: what the engines read, and the ``sharekeeper.io/`` annotations it carries."""

    snapshot: ShareNode
    annotations: Mapping[str, str] = field(default_factory=dict)
    qos: qos.QosNode | None = None
    """The QoS engine's view, without pods and usage (added per check)."""
    taints: tuple[Obj, ...] = ()
    resource_version: str = ""
    """For the taint patch: refused if the node changed since we read it."""


@dataclass(slots=True)
class PodRecord:
    """A pod: the share engine's view and, for a pod bound to a node, the QoS engine's.

    Not frozen, as its two views: one is made for every pod listed and at every pod event
    (150,000 at the top size), and a frozen dataclass is built about four times slower. Not to
    be changed once made: the store replaces a pod's record, never changes it."""

    share: PodSnapshot
    key: PodKey
    """The key the store keeps the pod under, the very object (its QoS view holds it too), so
    that the store's indexes of pods add no object a pod for the collector to walk."""
    qos: qos.QosPod | None = None
    """None for an unbound or terminal pod, or one whose QoS fields could not be read."""
    cpu_limits: Mapping[str, int] = field(default_factory=dict)
    """Container -> CPU limit (millicores): what a throttle is spread over."""
    problem: str | None = None
    """Why the QoS view could not be read (the pod is then never acted on)."""
    unscheduled: str | None = None
    """For a pod released by the admission gate and not bound yet: why the scheduler could not
    place it (its PodScheduled condition's message), when it said."""
    uid: str = ""
    """For a pod that is not bound and not finished: its UID, which Events about it name (a
    bound pod's is its QoS view's; a finished one gets no Events)."""


@dataclass(slots=True, kw_only=True)
class WaitingPodRecord(PodRecord):
    """A pod that waits to be scheduled and may reclaim: unbound and not finished, and held by
    the admission gate or found Unschedulable by the scheduler. Only these pods carry the two
    fields below: every other pod's record stays as small as it was."""

    constraints: NodeConstraints
    """Its node selector, required node affinity and tolerations."""
    unschedulable_since: float | None
    """Its ``PodScheduled`` condition is False for ``Unschedulable``: since when (the
    condition's ``lastTransitionTime``, else the pod's creation), Unix seconds. None: it is
    not (a held pod)."""
