"""NodeQosEnsurancePolicy: the model, its reading into the QoS engine's ``QosPolicy``, and the
reading of its status into the persisted per-node state (the entries are rendered by
``pipeline.qos``).

Units at this boundary: ``cpu_total_usage`` in cores, ``memory_total_usage`` in bytes,
``*_utilization`` in percent (all Kubernetes quantities); internally millicores, bytes and
milli-percent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sharekeeper.api.base import (
    AGE,
    ApiModel,
    Cel,
    Column,
    Conditions,
    DateTime,
    Int32,
    Int64,
    LabelSelector,
    Metadata,
    PositiveQuantity,
    Resource,
    RootModel,
    Schema,
    read,
)
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    Action,
    Candidates,
    CpuThrottle,
    Eviction,
    NodeQosState,
    Objective,
    Phase,
    QosPolicy,
    Release,
    RuleKey,
    RuleState,
    SchedulingState,
    Strategy,
    ThrottleState,
)
from sharekeeper.engine.selectors import MATCH_ALL
from sharekeeper.model.objects import MutableObj, Obj, rfc3339_seconds
from sharekeeper.model.qos import metric_resource
from sharekeeper.model.quantities import CPU, QuantityError, to_internal

MetricName = Literal[
    "cpu_total_usage", "cpu_total_utilization", "memory_total_usage", "memory_total_utilization"
]
"""The metrics of ``engine.qos.REGISTRY`` (a test keeps the two equal)."""

ListMap = Schema({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
Atomic = Schema({"x-kubernetes-list-type": "atomic"})


# --- spec ---------------------------------------------------------------------------------------


class CandidatesSpec(ApiModel):
    """Which pods may be acted on. Whatever is set here, pods in kube-system, static and mirror
    pods, DaemonSet pods, terminating pods and pods at or above system-cluster-critical priority
    are never touched."""

    max_priority: Int32 = Field(
        999, description="Pods whose priority is above this are never throttled or evicted."
    )
    namespace_selector: LabelSelector | None = Field(
        None,
        description="Label selector over the pod's namespace labels. Empty selects every "
        "namespace.",
    )
    pod_selector: LabelSelector | None = Field(
        None, description="Label selector over pods. Empty selects every pod."
    )


class MetricRule(ApiModel):
    """The metric and the value above which the node is hot."""

    name: MetricName = Field(
        description="Node metric: cpu_total_usage (cores), cpu_total_utilization (percent), "
        "memory_total_usage (bytes) or memory_total_utilization (percent)."
    )
    value: PositiveQuantity = Field(
        description='Threshold: cores for CPU usage (for example "6" or 5500m), bytes for memory '
        "usage (for example 12Gi), percent for utilization."
    )


class ObjectiveEnsurance(ApiModel):
    """One rule, a metric threshold and the action taken when it is crossed."""

    name: str = Field(
        min_length=1, max_length=63, description="Rule name, unique within the policy."
    )
    metric_rule: MetricRule
    avoidance_threshold: Int32 = Field(
        1, ge=1, description="Consecutive hot checks before the rule triggers."
    )
    restore_threshold: Int32 = Field(
        1, ge=1, description="Consecutive calm checks before a triggered rule restores."
    )
    action_name: str = Field(
        max_length=63,
        description="Name of the entry in spec.actions to take when the rule triggers.",
    )
    strategy: Literal["None", "Preview"] = Field(
        "None", description="None acts; Preview computes and reports the plan but never acts."
    )


class EvictionSpec(ApiModel):
    """Evict candidate pods, lowest priority and highest usage first."""

    termination_grace_period_seconds: Int64 | None = Field(
        None,
        ge=0,
        description="Grace period given to evicted pods; absent keeps each pod's own.",
    )


class CpuThrottleSpec(ApiModel):
    """CPU limit steps."""

    min_cpu_ratio: Int32 = Field(
        10,
        ge=0,
        le=100,
        alias="minCPURatio",
        description="Never throttle a pod below this percent of its original CPU limit.",
    )
    step_cpu_ratio: Int32 = Field(
        10,
        ge=1,
        le=100,
        alias="stepCPURatio",
        description="Each throttle step sets the CPU limit this percent below the lower of the "
        "pod's limit and its usage; each restore step raises the limit this percent above its "
        "current value, up to the original.",
    )


class ThrottleSpec(ApiModel):
    """Throttle candidate pods' CPU."""

    cpu_throttle: CpuThrottleSpec = Field(default_factory=CpuThrottleSpec)


class ActionSpec(ApiModel):
    """A named action; any combination of its parts may be set."""

    name: str = Field(
        min_length=1,
        max_length=63,
        description="Action name, referenced by objectiveEnsurances[].actionName.",
    )
    cool_down_seconds: Int32 = Field(
        300, ge=0, description="After the rule restores, how long the node stays unschedulable."
    )
    disable_scheduling: bool = Field(
        False,
        description="Taint the node sharekeeper.io/interference:PreferNoSchedule while the rule "
        "is triggered and during the cool-down.",
    )
    eviction: EvictionSpec | None = None
    throttle: ThrottleSpec | None = None


class NodeQosEnsurancePolicySpec(ApiModel):
    """Rules, actions and which nodes and pods they apply to."""

    __cel__ = (
        Cel(
            "self.objectiveEnsurances.all(r, self.actions.exists(a, a.name == r.actionName))",
            "every objectiveEnsurances[].actionName must be the name of an entry in spec.actions",
            field_path=".objectiveEnsurances",
            reason="FieldValueInvalid",
        ),
    )

    node_selector: LabelSelector | None = Field(
        None, description="Label selector over Nodes. Empty or absent selects every node."
    )
    candidates: CandidatesSpec = Field(default_factory=CandidatesSpec)
    check_interval_seconds: Int32 = Field(
        10, ge=1, le=3600, description="Seconds between two checks of a node's usage."
    )
    excess_percent: Int32 = Field(
        10,
        ge=0,
        le=100,
        description="Margin added to each gap, in percent: an action releases (1 + excess) times "
        "the distance to the waterline, so that usage settles below it rather than on it.",
    )
    evict_on_missing_metrics: bool = Field(
        False,
        description="When a triggered evict rule's usage cannot be measured, evict every "
        "candidate pod (true) or report and wait (false, the default: evicting blind is "
        "destructive).",
    )
    objective_ensurances: Annotated[list[ObjectiveEnsurance], ListMap] = Field(
        min_length=1, max_length=32, description="Rules on node metrics. Names are unique."
    )
    actions: Annotated[list[ActionSpec], ListMap] = Field(
        min_length=1, max_length=16, description="What may be done to a hot node. Names are unique."
    )

    @model_validator(mode="after")
    def _names(self) -> NodeQosEnsurancePolicySpec:
        for field, names in (
            ("objectiveEnsurances", [o.name for o in self.objective_ensurances]),
            ("actions", [a.name for a in self.actions]),
        ):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ValueError(f"{field}: duplicate names {duplicates}")
        actions = {a.name for a in self.actions}
        missing = sorted({o.action_name for o in self.objective_ensurances} - actions)
        if missing:
            raise ValueError(
                "every objectiveEnsurances[].actionName must be the name of an entry in "
                f"spec.actions (missing: {', '.join(missing)})"
            )
        return self


# --- status -------------------------------------------------------------------------------------


class RuleStatus(ApiModel):
    """One rule on this node."""

    name: str = Field(description="Rule name.")
    metric: str | None = Field(None, description="The rule's metric.")
    phase: str | None = Field(None, description="Triggered (actions in force) or Calm.")
    hot_streak: int = Field(
        0,
        description="Consecutive checks above the rule's value (saturates at avoidanceThreshold).",
    )
    calm_streak: int = Field(
        0,
        description="Consecutive checks at or below the value (saturates at restoreThreshold).",
    )
    observation: str | None = Field(
        None, description="What the last check saw, Hot, Calm or Missing (no usage)."
    )
    triggered: bool | None = Field(None, description="Whether the last check triggered the rule.")
    restored: bool | None = Field(
        None,
        description="Whether the rule was triggered and has restored: true on the check it "
        "restores, then while pods its throttling lowered still get their CPU back. A rule "
        "that never triggered is never restored.",
    )
    preview: bool | None = Field(
        None, description="Whether the rule only previews (strategy Preview)."
    )


class SchedulingStatus(ApiModel):
    """The interference taint this node carries because of QoS rules."""

    disabled: bool = Field(False, description="Whether scheduling is disabled (the taint is on).")
    cool_down_seconds: int = Field(
        0, description="How long the taint stays after the last rule restored."
    )
    calm_since: DateTime | None = Field(
        None,
        description="When the last triggered rule restored; the cool-down counts from here.",
    )


class GapStatus(ApiModel):
    """One gap."""

    action_class: str | None = Field(
        None, alias="class", description="evict, throttleDown or throttleUp."
    )
    metric: str | None = Field(None, description="The metric.")
    gap: str | None = Field(
        None,
        description="The amount to release (or that restore may give back), in the metric's unit.",
    )
    leaving: str | None = Field(
        None,
        description="evict and throttleDown: usage on its way out (terminating pods, our "
        "evictions and throttles the usage sample does not show yet), left out of the gap.",
    )
    arriving: str | None = Field(
        None,
        description="throttleUp: CPU our restores gave back that the usage sample does not show "
        "yet, left out of the headroom.",
    )


class LastAction(ApiModel):
    """One action on one pod."""

    kind: str | None = Field(None, description="evict, throttle or restore.")
    pod: str | None = Field(None, description="namespace/name of the pod.")
    metric: str | None = Field(None, description="The metric the action answered.")
    released: str | None = Field(
        None, description="Usage the action released (or gave back), in the metric's unit."
    )
    cpu_limit: str | None = Field(
        None, description="The pod's CPU limit after a throttle or restore."
    )
    outcome: str | None = Field(
        None,
        description="Done; Blocked (an eviction a PodDisruptionBudget refused) or Refused (an "
        "API error, the pod gone), with the API server's reason; or Preview.",
    )
    time: DateTime | None = Field(None, description="When the check ran.")


Waterlines = dict[str, Annotated[str, Field(description="The waterline, in the metric's unit.")]]


class ThrottledPod(ApiModel):
    """A pod whose CPU limit the operator lowered: the record a restore goes back to. Kept
    here, where tenants cannot write, and never read from the pod."""

    pod: str = Field(max_length=317, description="namespace/name of the pod.")
    uid: str = Field("", max_length=128, description="The pod's UID: a new pod starts afresh.")
    original_limit: str | None = Field(
        None,
        max_length=64,
        description="The pod's CPU limit before the first throttle; absent if it had none. A "
        "restore never goes above it.",
    )
    limit: str = Field(max_length=64, description="The CPU limit the operator set last.")


class ReleasingPod(ApiModel):
    """An eviction, throttle or restore this policy's checks made whose effect the node's usage
    sample may not show yet: it is left out of the gaps until a sample whose window starts
    after the pod stopped, or the new limit applied (5 minutes at most)."""

    action: Literal["evict", "throttle", "restore"] = Field(description="What was done to the pod.")
    pod: str = Field(max_length=317, description="namespace/name of the pod.")
    uid: str = Field("", max_length=128, description="The pod's UID.")
    cpu: str = Field(
        max_length=64,
        description="evict: the pod's CPU usage when evicted; throttle: what the lower limit "
        "frees; restore: what the higher limit lets the pod take back.",
    )
    memory: str = Field(max_length=64, description="evict: the pod's memory usage when evicted.")
    at: DateTime = Field(description="When the action was accepted.")
    deadline: DateTime | None = Field(
        None,
        description="evict: when the kubelet kills what is left of the pod (the eviction's "
        "grace period after it, or the pod's deletionTimestamp once seen).",
    )
    gone_at: DateTime | None = Field(
        None, description="evict: when a check first found the pod gone from the node."
    )


class BlockedEviction(ApiModel):
    """A pod whose eviction a PodDisruptionBudget refused. The evictions for that waterline
    stopped there: no pod ranked after it was evicted in its place."""

    pod: str = Field(max_length=317, description="namespace/name of the pod.")
    uid: str | None = Field(None, max_length=128, description="The pod's UID.")
    metric: str | None = Field(
        None, max_length=64, description="The metric whose waterline wanted the eviction."
    )
    message: str | None = Field(
        None,
        max_length=512,
        description="The API server's answer, naming the PodDisruptionBudget.",
    )
    time: DateTime | None = Field(None, description="When the check ran.")


class NodeStatus(ApiModel):
    """This policy's view of one node."""

    name: str = Field(description="Node name.")
    rules: Annotated[list[RuleStatus], ListMap] = Field(
        default_factory=list,
        description="Hysteresis state of each rule of this policy on the node.",
    )
    scheduling: SchedulingStatus | None = None
    waterlines: Waterlines | None = Field(
        None,
        description="Per action class and metric (for example evict.cpu_total_usage), the "
        "waterline in force.",
    )
    preview_waterlines: Waterlines | None = Field(
        None, description="Waterlines of Preview rules, which are reported but never acted on."
    )
    gaps: Annotated[list[GapStatus], Atomic] | None = Field(
        None,
        description="How far the node is from each waterline in force (usage minus waterline, "
        "times 1 + excess).",
    )
    message: str | None = Field(
        None,
        description="Why the last check could not act fully (for example missing metrics).",
    )
    last_actions: Annotated[list[LastAction], Atomic] | None = Field(
        None,
        max_length=100,
        description="Actions of the last check that acted, in execution order.",
    )
    throttled: Annotated[list[ThrottledPod], Atomic] | None = Field(
        None,
        max_length=1000,
        description="Pods on the node whose CPU limit this policy's checks lowered and have not "
        "restored yet.",
    )
    releasing: Annotated[list[ReleasingPod], Atomic] | None = Field(
        None,
        max_length=100,
        description="Evictions, throttles and restores on the node whose effect its usage sample "
        "may not show yet: not counted again in the gaps (no second action for the same "
        "usage).",
    )
    blocked_evictions: Annotated[list[BlockedEviction], Atomic] | None = Field(
        None,
        max_length=100,
        description="Pods whose eviction a PodDisruptionBudget refused in the last check that "
        "acted (EvictionBlocked): they are throttled instead where a throttle rule is in force, "
        "and no pod ranked after them is evicted in their place.",
    )


class NodeQosEnsurancePolicyStatus(ApiModel):
    """Observations and actions, per node. Written by the operator only."""

    observed_generation: Int64 | None = Field(
        None, description="The spec generation the last check used."
    )
    matched_nodes: int | None = Field(None, description="Number of nodes the policy selects.")
    triggered_nodes: int | None = Field(
        None, description="Number of selected nodes with at least one triggered rule."
    )
    nodes: Annotated[list[NodeStatus], ListMap] = Field(
        default_factory=list,
        description="Per selected node: the state that must survive an operator restart (rule "
        "counters, the scheduling taint) and what the last check found and did.",
    )
    conditions: Conditions | None = Field(
        None,
        description="Latest observations: Ready, UsageAvailable (metrics.k8s.io could be "
        "read), WaterlinesReachable (False names rules no selected node can cross, such as a "
        "CPU value above every node's capacity) and Invalid.",
    )


class NodeQosEnsurancePolicy(RootModel):
    """NodeQosEnsurancePolicy keeps node usage under waterlines: when a metric stays above a
    rule's value, low-priority pods on that node are throttled or evicted, just enough to get
    back under the waterline, and restored when usage falls."""

    __resource__ = Resource(
        group="ensurance.sharekeeper.io",
        kind="NodeQosEnsurancePolicy",
        plural="nodeqosensurancepolicies",
        short_names=("nep",),
        comment="NodeQosEnsurancePolicy: waterlines on node usage and what to do, precisely, "
        "when a node is hot.",
        columns=(
            Column("Rules", "string", ".spec.objectiveEnsurances[*].name",
                   "Names of the objective ensurance rules."),
            Column("Nodes", "integer", ".status.matchedNodes",
                   "Number of nodes the policy selects."),
            Column("Triggered", "integer", ".status.triggeredNodes",
                   "Number of nodes with a triggered rule."),
            Column("Ready", "string", '.status.conditions[?(@.type=="Ready")].status',
                   "Whether the last check succeeded."),
            AGE,
        ),
    )  # fmt: skip

    metadata: Metadata
    spec: NodeQosEnsurancePolicySpec
    status: NodeQosEnsurancePolicyStatus | None = None


# --- reading ------------------------------------------------------------------------------------

KIND = "NodeQosEnsurancePolicy"


def read_policy(obj: Obj) -> NodeQosEnsurancePolicy:
    """The object's metadata and spec through the model (``ObjectError`` when they cannot be
    read); a status that cannot be read is dropped (``read_status``): it only holds counters,
    and a bad one must not stop the policy from being checked."""
    policy = read(NodeQosEnsurancePolicy, {"kind": KIND, **obj, "status": None})
    return policy.model_copy(update={"status": read_status(obj)})


def read_status(obj: Obj) -> NodeQosEnsurancePolicyStatus | None:
    """The persisted per-node state (``status.nodes``; nothing else of the status is read), or
    None (start from zero) when it cannot be read."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    try:
        return NodeQosEnsurancePolicyStatus.model_validate({"nodes": status.get("nodes")})
    except ValueError:
        return None


def qos_policy_view(obj: Obj) -> MutableObj:
    """What the cluster store keeps of a policy: its name and its spec with every default
    filled in, once the model has read it (``ObjectError`` otherwise: the policy is then
    reported Invalid and left out of the checks)."""
    policy = read(NodeQosEnsurancePolicy, {"kind": KIND, **obj, "status": None})
    return {
        "metadata": {"name": policy.metadata.name},
        "spec": policy.spec.model_dump(by_alias=True, exclude_none=True),
    }


def qos_policy(policy: NodeQosEnsurancePolicy) -> QosPolicy:
    """The engine's view of a policy (read with ``read_policy``)."""
    spec = policy.spec
    candidates = spec.candidates
    return QosPolicy(
        name=policy.metadata.name,
        objectives=tuple(_objective(o) for o in spec.objective_ensurances),
        actions={a.name: _action(a) for a in spec.actions},
        candidates=Candidates(
            max_priority=candidates.max_priority,
            namespace_selector=_selector(candidates.namespace_selector),
            pod_selector=_selector(candidates.pod_selector),
        ),
        node_selector=_selector(spec.node_selector),
        evict_on_missing_metrics=spec.evict_on_missing_metrics,
        excess_percent=spec.excess_percent,
    )


def _selector(selector: LabelSelector | None) -> Any:
    return selector.engine() if selector is not None else MATCH_ALL


def _objective(rule: ObjectiveEnsurance) -> Objective:
    metric = rule.metric_rule.name
    return Objective(
        name=rule.name,
        metric=metric,
        value=to_internal(metric_resource(metric), rule.metric_rule.value),
        action_name=rule.action_name,
        avoidance_threshold=rule.avoidance_threshold,
        restore_threshold=rule.restore_threshold,
        strategy=Strategy(rule.strategy),
    )


def _action(action: ActionSpec) -> Action:
    throttle = action.throttle.cpu_throttle if action.throttle is not None else None
    return Action(
        name=action.name,
        cool_down_seconds=action.cool_down_seconds,
        disable_scheduling=action.disable_scheduling,
        eviction=None
        if action.eviction is None
        else Eviction(action.eviction.termination_grace_period_seconds),
        throttle=None
        if throttle is None
        else CpuThrottle(
            min_cpu_ratio=throttle.min_cpu_ratio, step_cpu_ratio=throttle.step_cpu_ratio
        ),
    )


NodeEntries = Sequence[tuple[str, NodeStatus]]
"""One node's ``status.nodes[]`` entries, each with the name of the policy it is in."""


def node_entries(
    policies: Iterable[NodeQosEnsurancePolicy],
) -> dict[str, list[tuple[str, NodeStatus]]]:
    """Every policy's ``status.nodes[]`` entries by node: read once for a whole check (each
    policy lists up to 1,000 nodes, and a check may look up 5,000)."""
    found: dict[str, list[tuple[str, NodeStatus]]] = {}
    for policy in policies:
        for entry in policy.status.nodes if policy.status is not None else ():
            found.setdefault(entry.name, []).append((policy.metadata.name, entry))
    return found


def state_from_status(entries: NodeEntries) -> NodeQosState:
    """Counters and taint state for a node from its entries in the policies' status
    (``node_entries``).

    Anything missing starts at zero; the taint state is the same in every entry (written by
    one check) and the most restrictive copy wins if they disagree.
    """
    rules: dict[RuleKey, RuleState] = {}
    scheduling = SchedulingState()
    releases: dict[str, Release] = {}
    for policy, entry in entries:
        for pod in entry.releasing or ():
            release = _release(pod)
            if release is not None:  # every selecting policy holds a copy
                releases.setdefault(throttle_key(release.uid, pod.pod), release)
        for rule in entry.rules:
            phase = Phase.TRIGGERED if rule.phase == "Triggered" else Phase.CALM
            key = RuleKey(policy, rule.name)
            restored = bool(rule.restored) and phase is Phase.CALM
            rules[key] = RuleState(phase, rule.hot_streak, rule.calm_streak, restored)
        taint = entry.scheduling
        if taint is not None and taint.disabled:
            candidate = SchedulingState(True, taint.cool_down_seconds, _epoch(taint.calm_since))
            if not scheduling.disabled or candidate.calm_since is None:
                scheduling = candidate
    return NodeQosState(rules, scheduling, tuple(releases.values()))


def _release(pod: ReleasingPod) -> Release | None:
    namespace, slash, name = pod.pod.partition("/")
    at = _epoch(pod.at)
    try:
        cpu, memory = to_internal(CPU, pod.cpu), to_internal("memory", pod.memory)
    except QuantityError:
        return None  # not ours (we write only valid quantities): forget it
    if not slash or at is None:
        return None
    return Release(
        pod.action,
        PodKey(namespace, name),
        pod.uid,
        cpu,
        memory,
        at,
        deadline=_epoch(pod.deadline),
        gone_at=_epoch(pod.gone_at),
    )


def throttles_from_status(entries: NodeEntries) -> dict[str, ThrottleState]:
    """What a node's entries in the policies' status (``node_entries``) remember of its
    throttled pods, by ``throttle_key``. Copies in several policies agree unless a write was
    lost; then the lower limits win, so a restore can only stop short, never overshoot."""
    found: dict[str, ThrottleState] = {}
    for _, entry in entries:
        for pod in entry.throttled or ():
            state = _throttle_state(pod)
            if state is None:
                continue
            key = throttle_key(pod.uid, pod.pod)
            found[key] = state if key not in found else _lower(found[key], state)
    return found


def throttle_key(uid: str, pod: str) -> str:
    """How a throttled pod is found again: its UID (a re-created pod is a new pod)."""
    return uid or pod


def _throttle_state(pod: ThrottledPod) -> ThrottleState | None:
    try:
        original = None if pod.original_limit is None else to_internal(CPU, pod.original_limit)
        return ThrottleState(original, to_internal(CPU, pod.limit))
    except QuantityError:
        return None  # not ours (we write only valid quantities): forget it


def _lower(left: ThrottleState, right: ThrottleState) -> ThrottleState:
    originals = [
        o for o in (left.original_limit_milli, right.original_limit_milli) if o is not None
    ]
    return ThrottleState(
        min(originals, default=None),
        min(left.current_limit_milli, right.current_limit_milli),
    )


def _epoch(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(rfc3339_seconds(value))
    except ValueError:
        return None  # a cool-down without a known start restarts now: the safe side
