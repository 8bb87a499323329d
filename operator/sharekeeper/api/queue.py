"""Queue (``scheduling.sharekeeper.io/v1alpha1``; a Volcano Queue reads the same): the model
and its reading into the share engine's ``QueueSnapshot``. Its status is rendered in
``pipeline.statuses``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sharekeeper.api.base import (
    AGE,
    ApiModel,
    Cel,
    Column,
    Conditions,
    Int32,
    Int64,
    LabelSelector,
    Metadata,
    QueueReference,
    Resource,
    ResourceList,
    RootModel,
    StatusResources,
    in_internal_units,
    read,
)
from sharekeeper.engine.selectors import MATCH_ALL
from sharekeeper.engine.shares import QueueSnapshot
from sharekeeper.engine.shares.deciding import Decider
from sharekeeper.engine.shares.snapshot import SOURCE_LABEL, QueueName
from sharekeeper.model.objects import is_mapping
from sharekeeper.model.quantities import to_internal

MAX_WEIGHT = 65535
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_SOURCE = "volcano"
"""The value of ``SOURCE_LABEL`` on a Queue the operator keeps for a Volcano Queue."""


class Guarantee(ApiModel):
    """Resources reserved for this queue whatever other queues ask for."""

    resource: ResourceList = Field(
        default_factory=dict,
        description="Guaranteed minimum per resource. Guarantees are taken from the cluster "
        "before anything is shared out by weight.",
    )


class QueueSpec(ApiModel):
    """Desired properties of the queue. Field names and meanings follow Volcano's Queue."""

    __cel__ = (
        Cel(
            "!has(self.capability) || !has(self.guarantee) || !has(self.guarantee.resource) || "
            "self.guarantee.resource.all(k, !(k in self.capability) || "
            "quantity(string(self.guarantee.resource[k]))"
            ".compareTo(quantity(string(self.capability[k]))) <= 0)",
            "guarantee must not exceed capability in any resource",
            field_path=".guarantee.resource",
        ),
    )

    weight: Int32 = Field(
        1,
        ge=1,
        le=MAX_WEIGHT,
        description="Relative weight when resources are shared out by weight (1 to 65535, "
        "default 1). A queue with weight 2 deserves twice the elastic share of a queue with "
        "weight 1.",
    )
    capability: ResourceList = Field(
        default_factory=dict,
        description="Upper bound on what the queue may deserve or use, per resource (for "
        'example cpu: "16", memory: 64Gi). A resource that is not listed is unlimited.',
    )
    guarantee: Guarantee | None = None
    deserved: ResourceList = Field(
        default_factory=dict,
        description="Static deserved resources, read only by the Capacity sharing policy "
        "(trimmed to the queue's effective capability, raised to its guarantee).",
    )
    priority: Int32 = Field(
        0,
        description="Queue priority, a 32-bit integer as in Volcano; higher-priority queues are "
        "ordered first by schedulers.",
    )
    reclaimable: bool = Field(
        True,
        description="Whether resources this queue uses beyond its deserved share may be reclaimed.",
    )
    state: Literal["Open", "Closed"] = Field(
        "Open",
        description="Desired state. A Closed queue admits no new work; status.state shows the "
        "observed one.",
    )
    namespaces: LabelSelector | None = Field(
        None,
        description="Label selector over Namespaces: the namespaces whose pods may be charged to "
        "this queue. Empty or absent selects every namespace; the label "
        "kubernetes.io/metadata.name selects a namespace by name.",
    )
    parent: QueueReference | None = Field(
        None,
        description="Name of the parent Queue, as in Volcano: this queue shares what its parent "
        "deserves with its siblings. Absent or root: directly under the cluster. The parent "
        "must exist, be governed by the same SchedulerPolicy and not be below this queue; "
        "otherwise the queue and everything below it get no numbers (condition InvalidParent). "
        "Pods belong in leaf queues.",
    )

    @model_validator(mode="after")
    def _guarantee_within_capability(self) -> QueueSpec:
        guarantee = self.guarantee.resource if self.guarantee else {}
        for name, amount in guarantee.items():
            if name in self.capability and to_internal(name, amount) > to_internal(
                name, self.capability[name]
            ):
                raise ValueError(
                    f"guarantee must not exceed capability in any resource ({name}: "
                    f"{amount} > {self.capability[name]})"
                )
        return self


MAX_NOT_BOUND_LISTED = 5
"""Pods named in ``status.notBoundPods``; ``notBound`` counts them all."""


class QueueStatus(ApiModel):
    """What Sharekeeper computed for this queue. Written by the operator only."""

    state: str | None = Field(None, description="Observed state of the queue (Open or Closed).")
    policy: str | None = Field(
        None,
        description="Name of the SchedulerPolicy that governs this queue; empty when none does.",
    )
    deserved: StatusResources | None = Field(
        None, description="Resources this queue deserves under its policy."
    )
    guarantee: StatusResources | None = Field(
        None, description="Effective guarantee, as used by the computation."
    )
    real_capability: StatusResources | None = Field(
        None,
        description="Most this queue can deserve: the cluster total minus every other queue's "
        "guarantee, bounded by the queue's capability.",
    )
    allocated: StatusResources | None = Field(
        None,
        description="Requests of the queue's pods that are bound to a node and not finished. "
        "Like every amount here, only in the resources its policy's nodes offer or its spec "
        "names: a pod's request for any other resource is left out.",
    )
    request: StatusResources | None = Field(
        None, description="Allocated plus the requests of the queue's pending pods."
    )
    inqueue: StatusResources | None = Field(
        None,
        description="Resources of Volcano PodGroups admitted (Inqueue) but not yet allocated.",
    )
    elastic: StatusResources | None = Field(
        None,
        description="Allocated above the minResources of the queue's PodGroups: what could be "
        "reclaimed without breaking a gang.",
    )
    decided_by: (
        dict[str, Annotated[Decider, Field(description="The bound that decided deserved.")]] | None
    ) = Field(
        None,
        description="Per resource, the bound that decided deserved: Request (all the queue asks "
        "for), Capability (its realCapability), Guarantee (its guarantee, above what it would "
        "otherwise get), Deserved (spec.deserved, Capacity only) or Level (weight times the "
        "water level the policy's total reaches). `sharekeeper explain queue NAME` shows the "
        "arithmetic.",
    )
    admitted: Int32 | None = Field(
        None,
        description="Pods the operator let through the admission gate that have not finished "
        "(docs/admission.md).",
    )
    gated: Int32 | None = Field(
        None,
        description="Pods the admission gate holds: they wait for room in this queue; each "
        "has an Event that says why.",
    )
    not_bound: Int32 | None = Field(
        None,
        description="Pods the admission gate let through that no scheduler has bound "
        "admission.bindTimeoutSeconds (the policy's) after their release: they no longer hold "
        "this queue's room, and each has a NotBound Event. Part of admitted.",
    )
    not_bound_pods: list[Annotated[str, Field(description="A pod, namespace/name.")]] | None = (
        Field(
            None,
            description="The first of those pods (namespace/name), released longest ago first; at "
            f"most {MAX_NOT_BOUND_LISTED} listed.",
            max_length=MAX_NOT_BOUND_LISTED,
        )
    )
    share: str | None = Field(
        None, description="Largest ratio allocated/deserved over all resources, as a decimal."
    )
    overused: bool | None = Field(
        None, description="True when the queue uses more than it deserves in some resource."
    )
    observed_generation: Int64 | None = Field(
        None, description="The spec generation this status was computed from."
    )
    conditions: Conditions | None = Field(
        None,
        description="Latest observations: Ready, Overused, GuaranteeUnsatisfiable, NoPolicy, "
        "NamespaceNotAdmitted, VolcanoQueueShadowed, InvalidParent, PodsInInnerQueue, "
        "Enqueueable, Invalid.",
    )


class Queue(RootModel):
    """Queue is a share of the cluster's resources. Sharekeeper computes how much each queue
    deserves under the SchedulerPolicy that selects it and publishes it in status."""

    __resource__ = Resource(
        group="scheduling.sharekeeper.io",
        kind="Queue",
        plural="queues",
        short_names=("skq",),
        comment="Queue: a share of the cluster, as in Volcano (a Volcano Queue manifest works "
        "after changing its apiVersion).",
        columns=(
            Column("Weight", "integer", ".spec.weight",
                   "Relative weight when the cluster is shared out."),
            Column("State", "string", ".status.state", "Observed state (Open or Closed)."),
            Column("Deserved-CPU", "string", ".status.deserved.cpu",
                   "CPU this queue deserves under its policy."),
            Column("Deserved-Mem", "string", ".status.deserved.memory",
                   "Memory this queue deserves under its policy."),
            Column("Alloc-CPU", "string", ".status.allocated.cpu",
                   "CPU requested by the queue's bound pods."),
            Column("Alloc-Mem", "string", ".status.allocated.memory",
                   "Memory requested by the queue's bound pods."),
            Column("Share", "string", ".status.share",
                   "Largest allocated/deserved ratio over all resources."),
            Column("Gated", "integer", ".status.gated",
                   "Pods the admission gate holds for this queue."),
            Column("Admitted", "integer", ".status.admitted",
                   "Pods the admission gate let through that have not finished.", priority=1),
            Column("Not-Bound", "integer", ".status.notBound",
                   "Pods let through and not bound after admission.bindTimeoutSeconds.",
                   priority=1),
            Column("Deserved-GPU", "string", r".status.deserved.nvidia\.com/gpu",
                   "NVIDIA GPUs this queue deserves under its policy.", priority=1),
            Column("Alloc-GPU", "string", r".status.allocated.nvidia\.com/gpu",
                   "NVIDIA GPUs requested by the queue's bound pods.", priority=1),
            Column("Request", "string", ".status.request",
                   "Allocated plus what the queue's pending pods request.", priority=1),
            Column("Guarantee", "string", ".status.guarantee",
                   "Effective guarantee.", priority=1),
            Column("Capability", "string", ".spec.capability",
                   "Upper bound set on the queue.", priority=1),
            Column("Parent", "string", ".spec.parent",
                   "The queue this one shares with its siblings; empty: the cluster."),
            Column("Policy", "string", ".status.policy",
                   "SchedulerPolicy that governs this queue.", priority=1),
            Column("Overused", "boolean", ".status.overused",
                   "Whether allocated exceeds deserved.", priority=1),
            AGE,
        ),
    )  # fmt: skip

    metadata: Metadata
    spec: QueueSpec
    status: QueueStatus | None = None


def queue_snapshot(obj: Mapping[str, Any]) -> QueueSnapshot:
    """A Queue object as the share engine reads it; ``ObjectError`` when it cannot be read.
    Its status is not read: it is ours to write, and reading it through the model was two
    thirds of reading a Queue (at every one of a round's 10,000 writes coming back)."""
    queue = read(Queue, {**obj, "status": None})
    spec = queue.spec
    return QueueSnapshot(
        name=QueueName(queue.metadata.name),
        labels=dict(queue.metadata.labels),
        weight=spec.weight,
        capability=in_internal_units(spec.capability),
        guarantee=in_internal_units(spec.guarantee.resource) if spec.guarantee else {},
        deserved=in_internal_units(spec.deserved),
        state=spec.state,
        namespaces=spec.namespaces.engine() if spec.namespaces else MATCH_ALL,
        mirror_of=volcano_owner(obj),
        parent=spec.parent,
        reclaimable=spec.reclaimable,
    )


def volcano_owner(obj: Mapping[str, Any]) -> str | None:
    """UID of the Volcano Queue this Queue mirrors, or None for a Queue people made: a mirror
    carries ``SOURCE_LABEL``=volcano and an owner reference to the Volcano Queue of its own
    name (what the garbage collector deletes it with)."""
    metadata = obj.get("metadata")
    if not is_mapping(metadata):
        return None
    labels = metadata.get("labels")
    if not is_mapping(labels) or labels.get(SOURCE_LABEL) != VOLCANO_SOURCE:
        return None
    references = metadata.get("ownerReferences")
    for reference in references if isinstance(references, list) else ():
        if (
            is_mapping(reference)
            and reference.get("kind") == "Queue"
            and str(reference.get("apiVersion", "")).split("/")[0] == VOLCANO_GROUP
            and reference.get("name") == metadata.get("name")
            and isinstance(reference.get("uid"), str)
            and reference["uid"]
        ):
            return str(reference["uid"])
    return None
