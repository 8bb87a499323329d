"""SchedulerPolicy: the model and its reading into engine input (``PolicySpec``: the share engine's
``PolicySnapshot`` and the node-level ``NodePolicy``). Its status is rendered in
``pipeline.statuses``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from sharekeeper.api.base import (
    AGE,
    ApiModel,
    Column,
    Conditions,
    DateTime,
    Int32,
    Int64,
    LabelSelector,
    Metadata,
    QualifiedName,
    Quantity,
    Resource,
    RootModel,
    SchedulerName,
    StatusResources,
    read,
)
from sharekeeper.api.queue import VOLCANO_SOURCE
from sharekeeper.engine.admission import NodePolicy, ReclaimConfig
from sharekeeper.engine.overcommit import (
    OvercommitSpec,
    factor_from_number,
)
from sharekeeper.engine.proportional import Proportion
from sharekeeper.engine.reclaim import ReclaimSettings
from sharekeeper.engine.selectors import MATCH_ALL, Operator, Requirement
from sharekeeper.engine.selectors import LabelSelector as EngineSelector
from sharekeeper.engine.shares import PolicySnapshot, Sharing
from sharekeeper.engine.shares.snapshot import DEFAULT_SCHEDULER_NAMES, SOURCE_LABEL, PolicyName
from sharekeeper.model.objects import Obj, timestamp_at
from sharekeeper.model.quantities import CPU, MEMORY, to_internal
from sharekeeper.model.records import PolicySpec

# The 1 below is Volcano's: an overcommit factor below 1 would undercommit. 100 already admits a
# hundred times the nodes; the bound keeps absurd factors (and .inf) out of the arithmetic.
MAX_FACTOR = 100
Factor = Annotated[float, Field(ge=1, le=MAX_FACTOR)]


class SharingSpec(ApiModel):
    """How the governed queues share the governed nodes' resources."""

    policy: Literal["Proportion", "Capacity", "ProportionOptimize", "GuaranteeQuota"] = Field(
        "Proportion",
        description="Proportion (Volcano's proportion plugin: weighted water-filling capped by "
        "capability and request, floored at the guarantee), Capacity (static spec.deserved), "
        "ProportionOptimize (guarantee and elastic switches with a priority type) or "
        "GuaranteeQuota (guarantees first, the rest after).",
    )
    guarantee_enable: bool = Field(
        True, description="ProportionOptimize only. False ignores every queue's guarantee."
    )
    elastic_enable: bool = Field(
        True,
        description="ProportionOptimize only. False leaves elastic resources out of admission.",
    )
    priority_type: Literal["Weight", "Guarantee"] = Field(
        "Weight",
        description="ProportionOptimize only. Weight shares by weight and tops guarantees up "
        "afterwards; Guarantee raises weights just enough that every guarantee is met.",
    )
    elastic_order: Literal["Weight", "Share", "Random"] = Field(
        "Weight",
        description="GuaranteeQuota only. How what remains after guarantees is handed out: by "
        "weight (water-filling), least-served queue first, or in a random order that changes at "
        "most once per reshuffleSeconds.",
    )
    reshuffle_seconds: Int32 = Field(
        300,
        ge=1,
        description="GuaranteeQuota with elasticOrder Random. How long one random order is kept.",
    )
    scheduler_names: list[SchedulerName] = Field(
        default=sorted(DEFAULT_SCHEDULER_NAMES),
        max_length=16,
        description="A pod that names no queue (no sharekeeper.io/queue label, no Volcano "
        "queue-name annotation, no PodGroup) counts in the queue named default when its "
        "spec.schedulerName is one of these; otherwise it is unmanaged. Default: [volcano].",
    )
    unmanaged: Literal["Reserve", "Ignore"] = Field(
        "Reserve",
        description="What the requests of unmanaged pods bound to the policy's nodes do: "
        "Reserve takes them out of the total the queues share (they occupy those nodes "
        "whatever the queues deserve); Ignore shares the whole allocatable, as Volcano does. "
        "Either way status.unmanaged reports them.",
    )


class OvercommitSettings(ApiModel):
    """Overcommit factors used for admission (Volcano's overcommit plugin)."""

    factor: Factor = Field(
        1.2,
        description=f"Factor for every resource without its own entry in factors (1 to "
        f"{MAX_FACTOR}; default 1.2).",
    )
    factors: dict[
        QualifiedName,
        Annotated[
            Factor,
            Field(description=f"Overcommit factor for this resource (1 to {MAX_FACTOR})."),
        ],
    ] = Field(
        default_factory=dict,
        max_length=32,
        description="Per-resource factors that override factor, for example cpu: 1.5 or "
        f"nvidia.com/gpu: 1. Each must be 1 to {MAX_FACTOR}.",
    )


class PerUnit(ApiModel):
    """What one idle unit of the resource keeps idle."""

    cpu: Quantity = Field(
        description="CPU kept idle per idle unit, a non-negative Kubernetes quantity."
    )
    memory: Quantity = Field(
        description="Memory kept idle per idle unit, a non-negative Kubernetes quantity."
    )


class ProportionalSpec(ApiModel):
    """GPU-proportional reservation (Volcano's proportional predicate): a node keeps CPU and
    memory idle for each of its idle GPUs, so that GPU jobs can still be placed."""

    enable: bool = Field(False, description="Turns the reservation on for this policy's nodes.")
    resources: dict[QualifiedName, PerUnit] = Field(
        default_factory=dict,
        max_length=16,
        description="Per accelerator resource (for example nvidia.com/gpu), the CPU and memory "
        "to keep idle for each idle unit of it.",
    )


MIN_BIND_TIMEOUT_SECONDS = 1
MAX_BIND_TIMEOUT_SECONDS = 86_400
"""A day: a released pod not bound after that is stuck, whatever the cluster."""


class AdmissionSpec(ApiModel):
    """How pods held by the admission gate (namespaces labelled
    sharekeeper.io/admission=enabled) are let through."""

    borrow: bool = Field(
        False,
        description="false: a held pod is admitted while its queue's admitted pods plus it fit "
        "in the queue's deserved share. true: then, once every queue has taken what fits in "
        "its deserved share, up to the queue's realCapability, borrowing what other queues "
        "leave idle; the pods held longest (by priority, then creation time) go first across "
        "queues.",
    )
    bind_timeout_seconds: Int32 = Field(
        300,
        ge=MIN_BIND_TIMEOUT_SECONDS,
        le=MAX_BIND_TIMEOUT_SECONDS,
        description="A pod the gate released that is still not bound to a node this long "
        "after its release (the time in its sharekeeper.io/admitted annotation) stops holding "
        "its queue's room: the held pods behind it are admitted as if it were not there, it "
        "is counted in the queue's status.notBound, and it gets a NotBound Warning Event. "
        "Bound later, it counts again. "
        f"{MIN_BIND_TIMEOUT_SECONDS} to {MAX_BIND_TIMEOUT_SECONDS}; default 300.",
    )


MAX_RECLAIM_AFTER_SECONDS = 86_400
"""A day: a pod that has waited that long has waited long enough for anything."""
MAX_EVICTIONS_PER_ROUND = 1000
EVICTIONS_IN_FLIGHT = 8
"""Reclaim evictions sent before the first is answered."""


class ReclaimSpec(ApiModel):
    """Reclaim: pods of queues above their deserved share are evicted (through the Eviction
    API, so PodDisruptionBudgets decide) to make room for a held or Unschedulable pod of a
    queue within its deserved share. See docs/reclaim.md."""

    mode: Literal["Off", "Preview", "On"] = Field(
        "Off",
        description="Off: nothing is planned. Preview: every round's plan is shown in "
        "status.reclaim (which pods would be evicted for which waiting pods) and nothing is "
        "evicted. On: the plan's pods are evicted through the Eviction API, in order, up to "
        f"{EVICTIONS_IN_FLIGHT} at a time.",
    )
    after_seconds: Int32 = Field(
        60,
        ge=0,
        le=MAX_RECLAIM_AFTER_SECONDS,
        description="A pod held by the admission gate reclaims only once it has waited this "
        "long since its creation, a pod the scheduler finds Unschedulable since it was first "
        f"found so (0 to {MAX_RECLAIM_AFTER_SECONDS}; default 60).",
    )
    max_evictions_per_round: Int32 = Field(
        10,
        ge=1,
        le=MAX_EVICTIONS_PER_ROUND,
        description="At most this many pods are evicted (planned, in Preview) in one share "
        f"round, for all of the policy's waiting pods together (1 to {MAX_EVICTIONS_PER_ROUND}; "
        "default 10).",
    )


class SchedulerPolicySpec(ApiModel):
    """Desired behaviour of the policy."""

    queue_source: Literal["Sharekeeper", "Volcano"] = Field(
        "Sharekeeper",
        description="Where this policy's queues come from. Sharekeeper: the Queues people "
        "create. Volcano: the operator keeps one Sharekeeper Queue per Volcano Queue "
        f"(queues.scheduling.volcano.sh), labelled {SOURCE_LABEL}={VOLCANO_SOURCE}, and the policy "
        "governs those only. A Sharekeeper policy never governs a mirrored queue.",
    )
    queue_selector: LabelSelector | None = Field(
        None,
        description="Label selector over Queues, within the queue source. Empty or absent "
        "selects every queue of the source.",
    )
    node_selector: LabelSelector | None = Field(
        None, description="Label selector over Nodes. Empty or absent selects every node."
    )
    sharing: SharingSpec = Field(default_factory=SharingSpec)
    overcommit: OvercommitSettings = Field(default_factory=OvercommitSettings)
    proportional: ProportionalSpec = Field(default_factory=ProportionalSpec)
    admission: AdmissionSpec = Field(default_factory=AdmissionSpec)
    reclaim: ReclaimSpec = Field(default_factory=ReclaimSpec)


class OvercommitStatus(ApiModel):
    """Admission arithmetic under the overcommit factors."""

    factors: dict[str, Annotated[float, Field(description="Overcommit factor.")]] | None = Field(
        None, description="Effective factor per resource."
    )
    overcommitted_total: StatusResources | None = Field(
        None, description="Total times the factor, per resource."
    )
    used: StatusResources | None = Field(
        None,
        description="Requests of pods bound to governed nodes and not finished, in the "
        "resources the nodes offer or the governed queues' specs name (no other is counted).",
    )
    inqueue: StatusResources | None = Field(
        None, description="Resources of admitted Volcano PodGroups not yet running."
    )
    headroom: StatusResources | None = Field(
        None, description="What one more job may still request, per resource, and be admitted."
    )


class ReclaimVictimStatus(ApiModel):
    """A pod evicted (in Preview: that would be evicted) for a waiting pod."""

    pod: str = Field(description="The evicted pod, namespace/name.")
    queue: str = Field(description="Its queue, which uses more than its deserved share.")
    frees: StatusResources | None = Field(None, description="What its eviction frees.")


class ReclaimEntryStatus(ApiModel):
    """One waiting pod served by the round's plan."""

    reclaimer: str = Field(description="The waiting pod, namespace/name.")
    queue: str = Field(description="Its queue.")
    node: str = Field(description="The node it fits on once the victims are gone.")
    victims: list[ReclaimVictimStatus] | None = Field(
        None, description="The pods evicted for it, in eviction order; empty: it fits already."
    )


class ReclaimStatus(ApiModel):
    """The last round's reclaim plan (spec.reclaim.mode Preview or On)."""

    mode: str | None = Field(None, description="spec.reclaim.mode the plan was made under.")
    waiting: int | None = Field(
        None,
        description="Pods that wait for room (the reclaimers): held by the admission gate, or "
        "found Unschedulable by the scheduler.",
    )
    evictions: int | None = Field(None, description="How many pods the plan evicts.")
    reclaims: list[ReclaimEntryStatus] | None = Field(
        None,
        description="The waiting pods the plan serves, in admission order (at most 50 listed).",
    )
    not_served: dict[str, Annotated[int, Field(description="Waiting pods.")]] | None = Field(
        None,
        description="Waiting pods the plan does not serve, counted by reason: "
        "NotWaitedLongEnough (younger than afterSeconds), AboveShare (its queue, or one above "
        "it, would exceed its deserved share), NoVictims (nothing that may be reclaimed frees "
        "a node for it), RoundBound (maxEvictionsPerRound reached: next round), GangNotWhole "
        "(another waiting pod of its PodGroup is not served, so none of the group is).",
    )


class SchedulerPolicyStatus(ApiModel):
    """What Sharekeeper computed for this policy. Written by the operator only."""

    observed_generation: Int64 | None = Field(
        None, description="The spec generation this status was computed from."
    )
    nodes: int | None = Field(None, description="Number of nodes this policy governs.")
    queues: int | None = Field(None, description="Number of queues this policy governs.")
    total: StatusResources | None = Field(
        None,
        description="What the governed queues share: the allocatable resources of the governed "
        "nodes, less status.unmanaged when sharing.unmanaged is Reserve.",
    )
    total_guarantee: StatusResources | None = Field(
        None, description="Sum of the guarantees of the governed queues."
    )
    unmanaged: StatusResources | None = Field(
        None,
        description="Requests of the unmanaged pods bound to the governed nodes (pods that "
        "name no queue and whose scheduler is not one of sharing.schedulerNames), with one pod "
        "each; taken out of total when sharing.unmanaged is Reserve.",
    )
    overcommit: OvercommitStatus | None = None
    reclaim: ReclaimStatus | None = None
    last_computed: DateTime | None = Field(None, description="When the status was last computed.")
    conditions: Conditions | None = Field(
        None,
        description="Latest observations: Ready, Invalid, GuaranteeUnsatisfiable, "
        "TreeUnsupported (queues name parents, which this sharing policy does not read) and "
        "Overlapping (an older SchedulerPolicy keeps some of the queues or nodes this one "
        "selects).",
    )


class SchedulerPolicy(RootModel):
    """SchedulerPolicy governs the queues and nodes its selectors match: how the queues share
    the nodes' resources, the overcommit factors used for admission, and the GPU-proportional
    reservation of CPU and memory."""

    __resource__ = Resource(
        group="scheduling.sharekeeper.io",
        kind="SchedulerPolicy",
        plural="schedulerpolicies",
        short_names=("skp",),
        comment="SchedulerPolicy: how the queues and nodes it selects share resources, how far "
        "nodes are overcommitted, and what GPU nodes keep for their idle GPUs.",
        columns=(
            Column("Sharing", "string", ".spec.sharing.policy",
                   "How the selected queues share resources."),
            Column("Queues", "integer", ".status.queues", "Number of queues this policy governs."),
            Column("Nodes", "integer", ".status.nodes", "Number of nodes this policy governs."),
            Column("Total-CPU", "string", ".status.total.cpu",
                   "Allocatable CPU of the governed nodes."),
            Column("Total-Mem", "string", ".status.total.memory",
                   "Allocatable memory of the governed nodes."),
            Column("Total-GPU", "string", r".status.total.nvidia\.com/gpu",
                   "Allocatable NVIDIA GPUs of the governed nodes."),
            Column("Ready", "string", '.status.conditions[?(@.type=="Ready")].status',
                   "Whether the last computation succeeded."),
            Column("Headroom", "string", ".status.overcommit.headroom",
                   "What one more job may still request and be admitted.", priority=1),
            AGE,
        ),
    )  # fmt: skip

    metadata: Metadata
    spec: SchedulerPolicySpec = Field(default_factory=SchedulerPolicySpec)
    status: SchedulerPolicyStatus | None = None


def policy_spec(obj: Obj) -> PolicySpec:
    """A SchedulerPolicy object as the engines read it; ``ObjectError`` when it cannot be read.
    Its status, ours to write, is not read (as a Queue's)."""
    policy = read(SchedulerPolicy, {**obj, "status": None})
    spec = policy.spec
    sharing = spec.sharing
    shares = PolicySnapshot(
        name=PolicyName(policy.metadata.name),
        queue_selector=within_source(
            spec.queue_selector.engine() if spec.queue_selector else MATCH_ALL, spec.queue_source
        ),
        node_selector=spec.node_selector.engine() if spec.node_selector else MATCH_ALL,
        sharing=Sharing(
            policy=sharing.policy,
            guarantee_enable=sharing.guarantee_enable,
            elastic_enable=sharing.elastic_enable,
            priority_type=sharing.priority_type,
            elastic_order=sharing.elastic_order,
            reshuffle_seconds=sharing.reshuffle_seconds,
            scheduler_names=frozenset(sharing.scheduler_names),
            reserve_unmanaged=sharing.unmanaged == "Reserve",
        ),
        queue_source=spec.queue_source,
        created_seconds=timestamp_at(obj, "metadata.creationTimestamp"),
    )
    proportional = spec.proportional
    nodes = NodePolicy(
        overcommit=OvercommitSpec(
            factor=factor_from_number(spec.overcommit.factor),
            factors={
                name: factor_from_number(value) for name, value in spec.overcommit.factors.items()
            },
        ),
        proportions={
            resource: Proportion(to_internal(CPU, unit.cpu), to_internal(MEMORY, unit.memory))
            for resource, unit in proportional.resources.items()
        }
        if proportional.enable
        else {},
        borrow=spec.admission.borrow,
        bind_timeout_seconds=float(spec.admission.bind_timeout_seconds),
        reclaim=ReclaimConfig(
            spec.reclaim.mode,
            ReclaimSettings(
                after_seconds=float(spec.reclaim.after_seconds),
                max_evictions=spec.reclaim.max_evictions_per_round,
            ),
        ),
    )
    return PolicySpec(shares, nodes)


def within_source(selector: EngineSelector, source: str) -> EngineSelector:
    """The policy's queue selector, narrowed to the queues of its source: mirrored Volcano
    Queues carry the source label, Queues people make do not."""
    operator: Operator = "In" if source == "Volcano" else "NotIn"
    requirement = Requirement(SOURCE_LABEL, operator, frozenset({VOLCANO_SOURCE}))
    return EngineSelector(selector.match_labels, (*selector.requirements, requirement))
