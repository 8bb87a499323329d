"""One periodic check of one node: hysteresis → waterlines → gaps → plans → taint state.

``check_node`` is pure: the persisted state and ``now`` come in, the next state goes out
(the caller writes it to the policies' status), together with everything to report and the
plans that ``node_actions`` turns into a flow of actions. Policies whose ``nodeSelector`` does
not match the node are ignored; Preview rules are counted and reported, their waterlines,
gaps and plans computed separately, and they never act nor disable scheduling.

A restored throttle rule contributes a ``throttleUp`` waterline only while the node has
throttled pods: with nothing to give back there is no waterline in force, so a calm node has
none (and gets no waterlines annotation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sharekeeper.engine.qos.hysteresis import (
    Event,
    Observation,
    Phase,
    RuleState,
    SchedulingState,
    advance,
    observe,
    scheduling_state,
)
from sharekeeper.engine.qos.inputs import Objective, QosNode, QosPolicy, Strategy
from sharekeeper.engine.qos.metrics import REGISTRY, ActionClass, MetricRegistry
from sharekeeper.engine.qos.planning import (
    Flow,
    MetricPlan,
    actions,
    metric_plans,
    throttled_pods,
)
from sharekeeper.engine.qos.releasing import NOTHING_UNSAMPLED, Release, carried, unsampled
from sharekeeper.engine.qos.waterlines import (
    Contribution,
    Gap,
    Waterline,
    gaps,
    pooled_waterlines,
)


@dataclass(frozen=True, slots=True, order=True)
class RuleKey:
    policy: str
    rule: str


@dataclass(frozen=True, slots=True)
class NodeQosState:
    """Everything a node's checks must remember; persisted by the caller between checks."""

    rules: Mapping[RuleKey, RuleState] = field(default_factory=dict)
    scheduling: SchedulingState = field(default_factory=SchedulingState)
    releases: tuple[Release, ...] = ()
    """Our accepted actions whose effect the node's sample may not show yet (``releasing``);
    a check's result carries the earlier ones on, and its caller adds the actions it saw
    accepted (``with_releases``)."""


@dataclass(frozen=True, slots=True)
class RuleStatus:
    key: RuleKey
    metric: str
    action_name: str
    preview: bool
    observation: Observation
    state: RuleState
    event: Event | None
    triggered_now: bool
    restored_now: bool
    """The planning level (calm with a full calm streak); ``state.restored`` is what is
    reported."""


@dataclass(frozen=True, slots=True)
class NodeCheckResult:
    node: str
    rules: tuple[RuleStatus, ...]
    state: NodeQosState
    scheduling_disabled: bool
    """Whether the disable-scheduling taint should be on the node after this check."""
    waterlines: tuple[Waterline, ...]
    gaps: tuple[Gap, ...]
    plans: tuple[MetricPlan, ...]
    preview_waterlines: tuple[Waterline, ...] = ()
    preview_gaps: tuple[Gap, ...] = ()
    preview_plans: tuple[MetricPlan, ...] = ()
    notes: tuple[str, ...] = ()


def _contributions(
    policy: QosPolicy, objective: Objective, status: RuleStatus, giving_back: bool
) -> Iterable[Contribution]:
    action = policy.actions.get(objective.action_name)
    if action is None:
        return
    classes: list[ActionClass] = []
    if action.throttle is not None:
        if status.triggered_now:
            classes.append(ActionClass.THROTTLE_DOWN)
        if status.restored_now and giving_back:
            classes.append(ActionClass.THROTTLE_UP)
    if action.eviction is not None and status.triggered_now:
        classes.append(ActionClass.EVICT)
    for action_class in classes:
        yield Contribution(
            policy=policy.name,
            rule=objective.name,
            action_class=action_class,
            metric=objective.metric,
            value=objective.value,
            action=action,
            candidates=policy.candidates,
            evict_on_missing_metrics=policy.evict_on_missing_metrics,
            excess_percent=policy.excess_percent,
        )


def check_node(
    policies: Iterable[QosPolicy],
    node: QosNode,
    state: NodeQosState,
    now: int,
    metrics: MetricRegistry = REGISTRY,
) -> NodeCheckResult:
    """Advance every rule of every policy selecting ``node`` by one check, and plan."""
    selected = sorted(
        (p for p in policies if p.node_selector.matches(node.labels)),
        key=lambda p: p.name,
    )
    statuses: list[RuleStatus] = []
    enforced: list[Contribution] = []
    previewed: list[Contribution] = []
    disabling: list[int] = []
    notes: list[str] = []
    # Throttled pods waiting for their CPU back: what keeps restore going.
    giving_back = bool(throttled_pods(node))
    # 1. Hysteresis per rule, from the persisted state.
    for policy in selected:
        for objective in policy.objectives:
            key = RuleKey(policy.name, objective.name)
            spec = metrics.get(objective.metric)
            if spec is None:
                notes.append(f"{key.policy}/{key.rule}: unknown metric {objective.metric!r}")
            action = policy.actions.get(objective.action_name)
            step = advance(
                state.rules.get(key, RuleState()),
                observe(spec, objective.value, node),
                objective.avoidance_threshold,
                objective.restore_threshold,
                giving_back=giving_back and action is not None and action.throttle is not None,
            )
            preview = objective.strategy is Strategy.PREVIEW
            status = RuleStatus(
                key,
                objective.metric,
                objective.action_name,
                preview,
                step.observation,
                step.state,
                step.event,
                step.triggered_now,
                step.restored_now,
            )
            statuses.append(status)
            if action is None:
                notes.append(f"{key.policy}/{key.rule}: no action {objective.action_name!r}")
                continue
            # 2. What the rule contributes to the waterlines and to the taint.
            contributed = _contributions(policy, objective, status, giving_back)
            (previewed if preview else enforced).extend(contributed)
            if not preview and action.disable_scheduling and step.state.phase is Phase.TRIGGERED:
                disabling.append(action.cool_down_seconds)
    # 3. Pool waterlines, measure gaps, decide how each class acts.
    #    What the sample does not show yet does not count twice (``releasing``).
    lines = pooled_waterlines(enforced, metrics)
    preview_lines = pooled_waterlines(previewed, metrics)
    changing = unsampled(node, state.releases, now) if lines or preview_lines else NOTHING_UNSAMPLED
    line_gaps = gaps(lines, metrics, node, changing)
    preview_gaps = gaps(preview_lines, metrics, node, changing)
    scheduling = scheduling_state(state.scheduling, tuple(disabling), now)
    return NodeCheckResult(
        node=node.name,
        rules=tuple(statuses),
        state=NodeQosState(
            {s.key: s.state for s in statuses}, scheduling, carried(node, state.releases, now)
        ),
        scheduling_disabled=scheduling.disabled,
        waterlines=lines,
        gaps=line_gaps,
        plans=metric_plans(lines, line_gaps, node, metrics),
        preview_waterlines=preview_lines,
        preview_gaps=preview_gaps,
        preview_plans=metric_plans(preview_lines, preview_gaps, node, metrics),
        notes=tuple(notes),
    )


def stays_at_rest(
    policies: Iterable[QosPolicy], node: QosNode, metrics: MetricRegistry = REGISTRY
) -> bool:
    """Whether a check of ``node`` from the zero state (nothing remembered of it: no counter,
    taint, throttled pod nor release) leaves it there, with nothing to report, act on or
    remember: every rule of every policy in ``policies`` (those selecting the node) has a known
    metric and its action, and observes the metric calm. Then ``check_node`` would find just
    that, and the caller may skip it: at thousands of calm nodes, most of a check. Reads the
    node's usage and capacity, not its pods."""
    return all(
        objective.action_name in policy.actions
        and observe(metrics.get(objective.metric), objective.value, node) is Observation.CALM
        for policy in policies
        for objective in policy.objectives
    )


def node_actions(result: NodeCheckResult, node: QosNode, *, preview: bool = False) -> Flow:
    """The flow of actions for a checked node (``preview=True``: what Preview rules would do)."""
    return actions(result.preview_plans if preview else result.plans, node)
