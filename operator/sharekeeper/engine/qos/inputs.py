"""Frozen input values of the QoS engine (``QosPod`` aside): policies, the node and its pods,
in internal units.

Units: CPU in millicores, memory in bytes, times in whole seconds since the epoch, rule values
in the metric's own unit (see ``metrics``: millicores, bytes or milli-percent). ``None`` always
means "unknown" (no metrics sample, no start time), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.selectors import LabelSelector

QosClass = Literal["BestEffort", "Burstable", "Guaranteed", ""]

SYSTEM_CLUSTER_CRITICAL = 2_000_000_000
"""Pods at or above this priority (system-cluster-critical, system-node-critical) are never
touched, whatever the policy says. Outside ``SYSTEM_NAMESPACES`` no pod has it as far as we are
concerned: ``model.qos.effective_priority`` reads it as 0 there."""
HIGHEST_USER_PRIORITY = 1_000_000_000
"""The highest value a PriorityClass that is not built in may have: what a cluster admin uses
to give pods precedence on purpose."""
SYSTEM_NAMESPACES = frozenset({"kube-system"})
"""Where the cluster's own components run: pods here are never acted on, and only here does a
system priority count (the one set, for QoS exemption and for every priority we read)."""


@dataclass(frozen=True, slots=True)
class ThrottleState:
    """What we remember about a pod we throttled, kept where tenants cannot write it (the
    NodeQosEnsurancePolicy status, keyed by pod UID): a restore never goes above this
    ``original_limit_milli``, whatever the pod says about itself.

    ``original_limit_milli`` is None when the pod had no CPU limit before we throttled it.
    """

    original_limit_milli: int | None
    current_limit_milli: int


@dataclass(slots=True)
class QosPod:
    """A pod bound to the node. Not frozen, unlike the other values: the operator makes one for
    every bound pod listed and at every event of one, and again with each QoS check's usage
    (150,000 at the top size), and a frozen dataclass is built about four times slower. Not to
    be changed once made."""

    key: PodKey
    uid: str = ""
    qos_class: QosClass = "BestEffort"
    priority: int = 0
    """The effective priority (``model.qos.effective_priority``): a system priority outside
    ``SYSTEM_NAMESPACES`` is 0 here, for exemption, ``maxPriority`` and sorting alike."""
    labels: Mapping[str, str] = field(default_factory=dict)
    start_time: int | None = None
    cpu_usage_milli: int | None = None
    memory_usage_bytes: int | None = None
    cpu_request_milli: int = 0
    cpu_limit_milli: int | None = None
    """Σ container CPU limits, None if any container is unlimited (as the API has it now)."""
    ext_cpu_limit_milli: int = 0
    """Elastic (extended-resource) CPU the pod borrows; 0 when it uses none."""
    throttle: ThrottleState | None = None
    """Our record of throttling this pod (from the policies' status), None if we did not."""
    mirror_or_static: bool = False
    """A static pod's mirror (the kubelet's ``kubernetes.io/config.mirror`` annotation)."""
    daemonset: bool = False
    """Controlled by a DaemonSet that exists: ``claimed_daemonset`` names one the cluster has, in
    the pod's namespace (the cluster store decides, from the DaemonSets it watches)."""
    claimed_daemonset: tuple[str, str] | None = None
    """``(name, uid)`` of the DaemonSet (``apps/v1``) the pod's controller owner reference
    names: what the pod says of itself, which anyone who creates a pod can write; None when
    its controller is no such DaemonSet."""
    grace_period_seconds: int | None = None
    """``spec.terminationGracePeriodSeconds``: how long it may take to stop once deleted."""
    deletion_deadline: int | None = None
    """``metadata.deletionTimestamp``: the pod is terminating, and the kubelet kills what is
    left of it then (deletion + grace period). None while it is not being deleted."""
    deletion_grace_seconds: int | None = None
    """``metadata.deletionGracePeriodSeconds``: the grace period the deletion gave it (so it
    was deleted at ``deletion_deadline`` minus this)."""

    @property
    def terminating(self) -> bool:
        return self.deletion_deadline is not None


@dataclass(frozen=True, slots=True)
class QosNode:
    """A node for one QoS check: capacity, usage, and its pods with their usage."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    cpu_capacity_milli: int | None = None
    memory_capacity_bytes: int | None = None
    cpu_usage_milli: int | None = None
    memory_usage_bytes: int | None = None
    usage_since: int | None = None
    """When the usage sample's window began (NodeMetrics ``timestamp`` minus ``window``): usage
    that ended before then is not in it. None when unknown."""
    usage_at: int | None = None
    """When the usage sample was taken (NodeMetrics ``timestamp``), by the metrics server's
    clock; None when unknown."""
    pods: tuple[QosPod, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Labels of every namespace a pod lives in (for ``candidates.namespaceSelector``)."""


class Strategy(Enum):
    NONE = "None"
    PREVIEW = "Preview"


@dataclass(frozen=True, slots=True)
class Objective:
    """One ``spec.objectiveEnsurances[]`` entry; ``value`` is in the metric's internal unit.
    No defaults in this and the other policy values below: they are the API model's
    (``api.qos``), the one place they are written down."""

    name: str
    metric: str
    value: int
    action_name: str
    avoidance_threshold: int
    restore_threshold: int
    strategy: Strategy


@dataclass(frozen=True, slots=True)
class CpuThrottle:
    """``cpuThrottle`` in percent. No defaults here: they are the API model's
    (``api.qos.CpuThrottleSpec``), the one place they are written down."""

    min_cpu_ratio: int
    step_cpu_ratio: int


@dataclass(frozen=True, slots=True)
class Eviction:
    termination_grace_period_seconds: int | None


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    cool_down_seconds: int
    disable_scheduling: bool
    eviction: Eviction | None
    throttle: CpuThrottle | None


@dataclass(frozen=True, slots=True)
class Candidates:
    max_priority: int
    namespace_selector: LabelSelector
    pod_selector: LabelSelector


@dataclass(frozen=True, slots=True)
class QosPolicy:
    """A NodeQosEnsurancePolicy, already known to select the node being checked."""

    name: str
    objectives: tuple[Objective, ...]
    actions: Mapping[str, Action]
    candidates: Candidates
    node_selector: LabelSelector
    evict_on_missing_metrics: bool
    excess_percent: int
