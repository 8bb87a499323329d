"""The share engine's inputs and outputs: small frozen values, no Kubernetes dicts.

Amounts are sparse mappings in internal units (``engine.resources``). The engine resolves pods
to queues and policies to queues and nodes itself, so that the operator and ``simulate`` feed
it the same raw facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NewType

from sharekeeper.engine.node_constraints import Taint
from sharekeeper.engine.resources import Amounts, QueueRows
from sharekeeper.engine.selectors import LabelSelector

QueueName = NewType("QueueName", str)
NodeName = NewType("NodeName", str)
PolicyName = NewType("PolicyName", str)

PolicyKind = Literal["Proportion", "Capacity", "ProportionOptimize", "GuaranteeQuota"]
PriorityType = Literal["Weight", "Guarantee"]
ElasticOrder = Literal["Weight", "Share", "Random"]
QueueState = Literal["Open", "Closed"]
QueueSource = Literal["Sharekeeper", "Volcano"]
PodGroupPhase = Literal["Pending", "Inqueue", "Running", "Unknown", "Completed"]
Admission = Literal["none", "held", "admitted"]
"""Where a pod stands with Sharekeeper's admission gate: never gated, held by the gate, or
released by the operator (it carries the ``sharekeeper.io/admitted`` annotation)."""

DEFAULT_QUEUE = QueueName("default")
"""Pods that name no queue belong here, if a Queue of that name exists and their scheduler is
one the governing policy manages."""
PODS = "pods"
"""The dimension that counts pods: one per pod in a queue's allocated and request."""
DEFAULT_SCHEDULER = "default-scheduler"
"""What the API server puts in a pod's ``spec.schedulerName`` when it names none."""
DEFAULT_SCHEDULER_NAMES = frozenset({"volcano"})
"""Whose pods count in the default queue when the policy says nothing (or none governs it)."""
SOURCE_LABEL = "sharekeeper.io/source"
"""On a Queue the operator keeps for a Volcano Queue: ``volcano``."""


@dataclass(frozen=True, slots=True)
class Sharing:
    """``spec.sharing`` of a SchedulerPolicy: no defaults here, they are the API model's
    (``api.policy.SharingSpec``)."""

    policy: PolicyKind
    guarantee_enable: bool
    elastic_enable: bool
    priority_type: PriorityType
    elastic_order: ElasticOrder
    reshuffle_seconds: int
    scheduler_names: frozenset[str]
    reserve_unmanaged: bool


@dataclass(frozen=True, slots=True)
class PolicySnapshot:
    """A SchedulerPolicy as the share engine reads it (``api.policy.policy_spec``)."""

    name: PolicyName
    queue_selector: LabelSelector
    node_selector: LabelSelector
    sharing: Sharing
    queue_source: QueueSource
    created_seconds: float = 0.0
    """Creation time (Unix seconds; 0 when unknown): of several policies that select a queue or
    node, the oldest keeps it (``governance``)."""


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """A Queue as the share engine reads it (``api.queue.queue_snapshot``; the API model has
    the defaults)."""

    name: QueueName
    labels: Mapping[str, str]
    weight: int
    capability: Amounts
    """Upper bound; a missing dimension is unlimited."""
    guarantee: Amounts
    deserved: Amounts
    """``spec.deserved``: read by the Capacity policy only."""
    state: QueueState
    namespaces: LabelSelector
    """Over namespace labels: pods of other namespaces that name the queue are not charged."""
    mirror_of: str | None
    """UID of the Volcano Queue this Queue mirrors (it carries ``SOURCE_LABEL`` and an owner
    reference to that Volcano Queue); None for a Queue people made."""
    parent: str | None
    """``spec.parent``: the queue whose deserved this one shares (None or ``root``: none)."""
    reclaimable: bool
    """``spec.reclaimable``: read by reclaim only (``pipeline.reclaiming``)."""


@dataclass(frozen=True, slots=True)
class ShareNode:
    """A node as the share engine reads it: labels for node selectors, and allocatable."""

    name: NodeName
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Amounts = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    """Those that keep pods off (``NoSchedule``, ``NoExecute``): not the share engine's, but
    read in the same round (reclaim plans a pod only on nodes it tolerates)."""


@dataclass(slots=True)
class PodSnapshot:
    """A pod as the share engine reads it. Not frozen, as ``QueueShare``: the operator makes one
    for every pod listed and at every pod event (150,000 at the top size), and a frozen
    dataclass is built about four times slower. Not to be changed once made."""

    namespace: str
    name: str
    request: Amounts
    """The effective request: max(Σ containers, each init container) + overhead."""
    node_name: str | None = None
    terminal: bool = False
    """Phase Succeeded or Failed."""
    scheduling_gated: bool = False
    queue_label: str | None = None
    queue_annotation: str | None = None
    group_name: str | None = None
    """The Volcano PodGroup (annotation ``scheduling.k8s.io/group-name``) in the pod's namespace."""
    scheduler_name: str = DEFAULT_SCHEDULER
    """``spec.schedulerName``: for a pod that names no queue, whether any queue is charged."""
    admission: Admission = "none"
    priority: int = 0
    """The effective priority (``model.qos.effective_priority``: a system priority outside
    kube-system counts as 0); read only for a held pod (the order it is admitted in)."""
    created_seconds: float = 0.0
    """Creation time (Unix seconds); read only for a held pod."""
    admitted_seconds: float = 0.0
    """When the operator released it (its ``sharekeeper.io/admitted`` annotation, Unix
    seconds); read only for a released pod not bound yet, 0 when unknown: the gate stops
    counting it against its queue once its policy's ``bindTimeoutSeconds`` have passed."""

    @property
    def allocated(self) -> bool:
        return self.node_name is not None and not self.terminal

    @property
    def pending(self) -> bool:
        return self.node_name is None and not self.terminal


@dataclass(frozen=True, slots=True)
class PodGroupSnapshot:
    namespace: str
    name: str
    queue: str | None
    phase: PodGroupPhase
    min_member: int
    min_resources: Amounts | None
    created_seconds: float = 0.0
    """Creation time (Unix seconds): older pending PodGroups are admitted first."""


GroupKey = tuple[str, str]
"""A PodGroup's ``(namespace, name)``."""


def group_queue(group: PodGroupSnapshot | None) -> QueueName:
    """The queue a PodGroup (and each pod of it that names no queue itself) is charged to: the
    one it names, else the default queue, as for a PodGroup that is not known."""
    return QueueName(group.queue) if group is not None and group.queue else DEFAULT_QUEUE


@dataclass(frozen=True, slots=True)
class Charges:
    """What some pods hold and want, as a queue's allocated and request count them."""

    allocated: Amounts = field(default_factory=dict)
    """Σ requests of the bound ones, plus ``pods``: their count (no ``pods`` added for none)."""
    request: Amounts = field(default_factory=dict)
    """Σ requests of all of them, plus ``pods``: their count. Counted in already, so that a
    queue charged from one source (most are) holds these mappings as they are, uncopied."""
    pods: int = 0
    allocated_pods: int = 0
    held: Amounts = field(default_factory=dict)
    """Σ requests of the pods the admission gate holds, plus ``pods``: their count."""
    admitted_pods: int = 0
    """Pods the operator released from the admission gate that have not finished."""


@dataclass(frozen=True, slots=True)
class GroupPods:
    """The non-terminal pods of one PodGroup, summed."""

    allocated: Amounts = field(default_factory=dict)
    allocated_pods: int = 0
    gated: Amounts = field(default_factory=dict)
    """Σ requests of its pending pods that still have scheduling gates."""
    pods: int = 0


@dataclass(frozen=True, slots=True)
class PodTotals:
    """Every non-terminal pod, summed the ways the engines read them (``cluster.ledger`` keeps
    these current per event, so a round never iterates pods).

    A pod's charges go to exactly one of ``named``, ``grouped`` or ``unnamed``, by what it
    names (see ``accounting``); which queue that ends up being is decided per round, because it
    depends on PodGroups and on whether a ``default`` Queue exists.
    """

    named: Mapping[str, Mapping[str, Charges]] = field(default_factory=dict)
    """Queue named by the pod's label or Volcano annotation -> the pod's namespace -> its pods'
    charges (the queue's ``namespaces`` decide which of them count)."""
    grouped: Mapping[GroupKey, Charges] = field(default_factory=dict)
    """Pods that name no queue but a PodGroup, by PodGroup."""
    unnamed: Mapping[str, Mapping[str, Charges]] = field(default_factory=dict)
    """Pods that name neither, by scheduler name, then namespace: the ``default`` queue's if
    it exists, admits the namespace and its policy manages the scheduler; else unmanaged."""
    unnamed_bound: Mapping[str, Mapping[str, Amounts]] = field(default_factory=dict)
    """The bound ones of ``unnamed``, by scheduler name, then node: Σ requests plus ``pods``
    (their count), which an unmanaged pod takes from its node's policy."""
    groups: Mapping[GroupKey, GroupPods] = field(default_factory=dict)
    """Every pod of a PodGroup, whatever queue it names, by PodGroup."""
    node_used: Mapping[str, Amounts] = field(default_factory=dict)
    """Node name -> Σ requests of the pods bound to it."""
    node_pods: Mapping[str, int] = field(default_factory=dict)
    """Node name -> how many pods are bound to it (what its ``pods`` allocatable bounds)."""


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    policies: tuple[PolicySnapshot, ...] = ()
    queues: tuple[QueueSnapshot, ...] = ()
    nodes: tuple[ShareNode, ...] = ()
    totals: PodTotals = PodTotals()
    pod_groups: tuple[PodGroupSnapshot, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Labels of the namespaces, for the queues' ``namespaces`` selectors."""
    now_seconds: float = 0.0
    """Only the Random elastic order reads it, bucketed by ``reshuffleSeconds``."""
    seed: int = 0
    volcano_queues: Mapping[QueueName, str] = field(default_factory=dict)
    """The Volcano Queues being mirrored (while a policy's ``queueSource`` is Volcano): name ->
    UID. A Queue of the same name that is not their mirror shadows one (``sources``)."""
    groups: Mapping[GroupKey, PodGroupSnapshot] = field(init=False, repr=False, compare=False)
    """``pod_groups`` by namespace and name: made once with the snapshot, for the accounting,
    the gate and reclaim alike."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", {(g.namespace, g.name): g for g in self.pod_groups})


ReasonKind = Literal[
    "NoPolicy",
    "GuaranteeUnsatisfiable",
    "UnknownQueue",
    "Overlapping",
    "NamespaceNotAdmitted",
    "VolcanoQueueShadowed",
    "InvalidParent",
    "PodsInInnerQueue",
    "TreeUnsupported",
]


@dataclass(frozen=True, slots=True, order=True)
class Reason:
    kind: ReasonKind
    message: str


@dataclass(slots=True)
class QueueShare:
    """One queue's result. Not frozen, unlike the other values: a round makes one per queue
    (10,000 at the top size), and a frozen dataclass is built twice as slowly (about 15 ms a
    round). Not to be changed once computed: the operator compares it with the last round's to
    skip rendering what did not change. The share engine builds it with positional arguments
    (keywords cost twice as much), so a new field goes last or there too."""

    policy: PolicyName | None
    state: QueueState
    deserved: Amounts
    guarantee: Amounts
    real_capability: Amounts
    allocated: Amounts
    request: Amounts
    inqueue: Amounts
    elastic: Amounts
    share: float
    """max over dimensions of allocated/deserved (Volcano §3.3)."""
    overused: bool
    parent: QueueName | None = None
    """The queue above it in its policy's tree (None: the root, or not in a tree)."""
    leaf: bool = True
    """No queue is below it."""
    decided_by: Mapping[str, str] = field(default_factory=dict)
    """Dimension -> the bound that decided deserved there (``deciding``); empty when no policy
    governs the queue."""
    reasons: tuple[Reason, ...] = ()
    held: Amounts = field(default_factory=dict)
    """What the admission gate holds back (part of ``request``), plus ``pods``: their count."""
    admitted_pods: int = 0
    """Pods the operator admitted that have not finished."""


@dataclass(frozen=True, slots=True)
class PolicyShare:
    nodes: int
    queues: int
    total: Amounts
    total_guarantee: Amounts
    reasons: tuple[Reason, ...] = ()
    unmanaged: Amounts = field(default_factory=dict)
    """What unmanaged pods hold on the policy's nodes (``total`` is net of it under Reserve)."""
    allocatable: Amounts = field(default_factory=dict)
    """Σ allocatable of the policy's nodes: ``total`` before unmanaged pods are taken out."""
    offered: frozenset[str] = frozenset()
    """The resource names its nodes' allocatable lists (even at 0): a held pod that asks for
    another one waits (``ResourceNotOffered``), since no node of the policy could run it."""
    dimensions: frozenset[str] = frozenset()
    """The resource names every amount of the policy and of its queues is kept in: ``offered``,
    the names its queues' specs use (capability, guarantee, deserved) and ``pods``. What pods
    request (or PodGroups reserve) beyond them is left out: resource names come from the
    cluster's nodes and the platform team's specs, never from what a tenant writes in a pod."""
    rows: QueueRows | None = field(default=None, compare=False, repr=False)
    """The governed queues' deserved and allocated as the round computed them, dense (rows by
    queue name), for reclaim's start check; the same numbers as their ``QueueShare``s (left out
    of comparisons: they are those numbers again)."""


@dataclass(frozen=True, slots=True)
class ShareResult:
    queues: Mapping[QueueName, QueueShare]
    policies: Mapping[PolicyName, PolicyShare]
    reasons: tuple[Reason, ...] = ()
    """Snapshot-wide findings, e.g. pods naming a queue that does not exist."""
    refused: Mapping[QueueName, Mapping[str, int]] = field(default_factory=dict)
    """Queue -> namespace it does not admit -> how many of its pods name the queue anyway."""
    unknown: Mapping[str, int] = field(default_factory=dict)
    """Queue that does not exist -> how many pods name it."""
