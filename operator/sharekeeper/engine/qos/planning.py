"""Precise eviction, throttle and restore as sans-I/O generators (crane.md §9, fixed).

``metric_plans`` decides, per waterline, *how* to act (precisely, on every candidate, or not
at all) and on which sorted candidates. ``actions`` then walks those plans one pod at a time:
it yields a ``QosAction`` and the caller sends back the ``Outcome``. A release counts against
the gap only when the action was accepted (crane.md §12.4 counted it anyway).
``simulate`` drives the same generator with ``accept_all``.

A refused eviction (``BLOCKED`` by a PodDisruptionBudget, or ``REFUSED`` for any other reason)
ends the node's precise evictions for the check: its waterline's sequence stops at that pod,
and so does every evict waterline after it. So the pods a check evicts are always a subset of
those it would have evicted had every eviction been accepted: no refusal ever sends an
eviction to a pod ranked after the refused one, whatever the waterlines and their gaps.
Moving on to the next pod, as this module once did, let a tenant who may create a
PodDisruptionBudget over its own pod have other teams' pods, ranked above it, evicted to make
up for it. Next check the refused pod stands in front again, is tried again, and the
evictions stop again while it is refused. A pod ``BLOCKED`` by its budget is throttled
instead (one step) if a throttle-down waterline of the same resource is in force on the node,
its gap open, and the pod is one of its candidates. Evicting every candidate (the
``evictOnMissingMetrics`` fallback) goes on past a refusal: it evicts them all anyway.

Per check, a pod is acted on at most once, in class order evict → throttle down → restore (a
refused eviction does not count: the pod stands and may still be throttled); an accepted
eviction or throttle reduces every evict and throttle-down gap by what it frees of
that gap's resource (Crane reduced only the gap of the metric being processed), so a throttle
plan after evictions only releases what the evictions left, and what a report calls "still to
release" is what is left after everything accepted in the check. Restore headroom is only used
by restores. Precise loops skip pods that would release nothing: evicting or throttling them
cannot close the gap (a pod without usage data released 0 in Crane and the loop went on to
evict everything, §12.5); the report says which pods were passed over and why (``Skip``).

Fallbacks, when a waterline's metric cannot be quantified or has no usage:
- evict: every candidate, only if a policy behind the waterline sets
  ``evictOnMissingMetrics``; otherwise report and wait;
- throttle down / restore: one step for every candidate, under the highest-priority
  throttleable metric among the class's waterlines (crane.md §9).
Complexity: O(p log p) sorting per waterline, then O(p) per plan.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos.candidates import candidate_pods
from sharekeeper.engine.qos.inputs import CpuThrottle, QosNode, QosPod
from sharekeeper.engine.qos.metrics import (
    ActionClass,
    MetricRegistry,
    MetricSpec,
    Resource,
    pod_usage,
)
from sharekeeper.engine.qos.sorting import GENERAL_SORTER
from sharekeeper.engine.qos.throttling import (
    LimitChange,
    restore_step,
    throttle_floor,
    throttle_step,
)
from sharekeeper.engine.qos.waterlines import Gap, Waterline

ActionKind = Literal["evict", "throttle", "restore"]

RELEASE_CLASSES = frozenset({ActionClass.EVICT, ActionClass.THROTTLE_DOWN})
"""Classes whose gap is usage to release; throttle-up's is headroom to use."""


class Outcome(Enum):
    ACCEPTED = "Accepted"
    REFUSED = "Refused"
    """Not done: an API error, the pod gone, a resize refused."""
    BLOCKED = "Blocked"
    """An eviction a PodDisruptionBudget refused: the pod stays (throttled instead if a
    throttle-down waterline covers it)."""


class Mode(Enum):
    PRECISE = "Precise"
    """Act in sorted order until the gap is closed."""
    ALL = "All"
    """Fallback: act once on every candidate."""
    WAIT = "Wait"
    """Cannot quantify and may not act blindly: report only."""


@dataclass(frozen=True, slots=True)
class MetricPlan:
    action_class: ActionClass
    metric: str
    resource: Resource
    mode: Mode
    gap: int | None
    candidates: tuple[QosPod, ...]
    """Sorted with the metric's sorter: the first is acted on first."""
    throttle: CpuThrottle = field(default_factory=lambda: CpuThrottle(0, 0))
    """The merged throttle parameters; zero for an evict plan, which does not throttle."""
    grace_period_seconds: int | None = None
    reason: str = ""
    policies: tuple[str, ...] = ()
    """The policies behind the waterline, sorted."""


@dataclass(frozen=True, slots=True)
class QosAction:
    kind: ActionKind
    pod: PodKey
    node: str
    metric: str
    resource: Resource
    released: int
    """Evict/throttle: what it frees (millicores or bytes); restore: headroom it may use."""
    cpu_limit_milli: int | None = None
    """Throttle/restore: the pod's new total CPU limit (None: back to unlimited)."""
    throttle: LimitChange | None = None
    grace_period_seconds: int | None = None
    precise: bool = True
    policies: tuple[str, ...] = ()
    """The policies whose waterline the action answers, sorted."""


class SkipReason(Enum):
    """Why a precise plan passed over a candidate: acting on it would free nothing."""

    NO_USAGE = "NoUsage"
    """No usage sample for the pod."""
    NOTHING_USED = "NothingUsed"
    """The pod uses none of the resource."""
    AT_FLOOR = "AtFloor"
    """Throttle: the lowest limit allowed (request, minCPURatio) is not below its usage."""


@dataclass(frozen=True, slots=True)
class Skip:
    action_class: ActionClass
    metric: str
    pod: PodKey
    reason: SkipReason
    floor_milli: int | None = None
    """AT_FLOOR: the lowest CPU limit the pod may be given."""


@dataclass(frozen=True, slots=True)
class Stop:
    """A precise eviction sequence that did not go on because ``pod``'s eviction was refused
    (in this waterline's sequence or an earlier one): nothing more was evicted for it."""

    action_class: ActionClass
    metric: str
    pod: PodKey


@dataclass(frozen=True, slots=True)
class PlanReport:
    accepted: tuple[QosAction, ...] = ()
    refused: tuple[QosAction, ...] = ()
    """Every action not accepted, those ``blocked`` included."""
    blocked: tuple[QosAction, ...] = ()
    """Evictions a PodDisruptionBudget refused (``Outcome.BLOCKED``)."""
    stopped: tuple[Stop, ...] = ()
    """Precise eviction sequences stopped by a refused eviction, in plan order."""
    remaining: tuple[tuple[ActionClass, str, int], ...] = ()
    """Gap left per precise (class, metric) after the accepted actions (≤ 0: closed)."""
    waiting: tuple[str, ...] = ()
    """Why some waterline was not acted on."""
    skipped: tuple[Skip, ...] = ()
    """Candidates a precise plan passed over while its gap was open, in plan order."""


Flow = Generator[QosAction, Outcome, PlanReport]


# --- deciding how to act -------------------------------------------------------------------


def _merged_throttle(waterlines: Iterable[Waterline]) -> CpuThrottle:
    # Like Crane's merge: the strongest floor and the largest step among the actions.
    params = [c.action.throttle for w in waterlines for c in w.contributions if c.action.throttle]
    return CpuThrottle(
        min_cpu_ratio=max((p.min_cpu_ratio for p in params), default=0),
        step_cpu_ratio=max((p.step_cpu_ratio for p in params), default=0),
    )


def _policies(waterlines: Iterable[Waterline]) -> tuple[str, ...]:
    return tuple(sorted({c.policy for w in waterlines for c in w.contributions}))


def _grace(waterline: Waterline) -> int | None:
    graces = [
        c.action.eviction.termination_grace_period_seconds
        for c in waterline.contributions
        if c.action.eviction and c.action.eviction.termination_grace_period_seconds is not None
    ]
    return min(graces, default=None)


def throttled_pods(node: QosNode) -> tuple[QosPod, ...]:
    """The pods of ``node`` we throttled and that wait for their CPU back."""
    # Restoring is always safe, so every throttled pod qualifies, even one a policy no
    # longer selects (it would otherwise stay throttled forever).
    return tuple(p for p in node.pods if p.throttle is not None and not p.terminating)


def _eviction_plan(w: Waterline, g: Gap, spec: MetricSpec | None, node: QosNode) -> MetricPlan:
    sorter = spec.sorter if spec else GENERAL_SORTER
    resource: Resource = spec.resource if spec else "cpu"
    grace = _grace(w)
    if spec is not None and spec.evict_quantified and g.amount is not None:
        pods = sorter.sort(candidate_pods((c.candidates for c in w.contributions), node))
        return MetricPlan(
            w.action_class,
            w.metric,
            resource,
            Mode.PRECISE,
            g.amount,
            pods,
            grace_period_seconds=grace,
            policies=_policies([w]),
        )
    why = "unknown metric" if spec is None else "no usage or capacity for this metric"
    opted = [c for c in w.contributions if c.evict_on_missing_metrics]
    if not opted:
        return MetricPlan(
            w.action_class,
            w.metric,
            resource,
            Mode.WAIT,
            None,
            (),
            reason=f"{why}; evictOnMissingMetrics is false, waiting",
            policies=_policies([w]),
        )
    pods = sorter.sort(candidate_pods((c.candidates for c in opted), node))
    return MetricPlan(
        w.action_class,
        w.metric,
        resource,
        Mode.ALL,
        None,
        pods,
        grace_period_seconds=grace,
        reason=f"{why}; evictOnMissingMetrics: evicting every candidate",
        policies=tuple(sorted({c.policy for c in opted})),
    )


def _throttle_plans(
    action_class: ActionClass,
    lines: list[tuple[Waterline, Gap, MetricSpec | None]],
    node: QosNode,
) -> list[MetricPlan]:
    params = _merged_throttle(w for w, _, _ in lines)

    def pods_for(ws: Iterable[Waterline], spec: MetricSpec) -> tuple[QosPod, ...]:
        if action_class is ActionClass.THROTTLE_UP:
            return spec.sorter.sort(throttled_pods(node))
        rules = (c.candidates for w in ws for c in w.contributions)
        return spec.sorter.sort(candidate_pods(rules, node))

    precise = all(
        spec is not None and spec.throttle_quantified and g.amount is not None
        for _, g, spec in lines
    )
    if precise:
        return [
            MetricPlan(
                action_class,
                w.metric,
                spec.resource,
                Mode.PRECISE,
                g.amount,
                pods_for([w], spec),
                throttle=params,
                policies=_policies([w]),
            )
            for w, g, spec in lines
            if spec is not None
        ]
    # Fallback (crane.md §9): one step for every candidate under the highest-priority
    # throttleable metric; lines are in registry (= priority) order already.
    chosen = next(((w, s) for w, _, s in lines if s is not None and s.throttleable), None)
    unquantified = ", ".join(
        w.metric for w, g, s in lines if s is None or not s.throttle_quantified or g.amount is None
    )
    if chosen is None:
        return [
            MetricPlan(
                action_class,
                lines[0][0].metric,
                "cpu",
                Mode.WAIT,
                None,
                (),
                reason=f"cannot quantify {unquantified} and no throttleable metric has a waterline",
                policies=_policies(w for w, _, _ in lines),
            )
        ]
    w, spec = chosen
    return [
        MetricPlan(
            action_class,
            w.metric,
            spec.resource,
            Mode.ALL,
            None,
            pods_for([x for x, _, _ in lines], spec),
            throttle=params,
            reason=f"cannot quantify {unquantified}: one step for every candidate",
            policies=_policies(x for x, _, _ in lines),
        )
    ]


def metric_plans(
    waterlines: Iterable[Waterline],
    gaps: Iterable[Gap],
    node: QosNode,
    metrics: MetricRegistry,
) -> tuple[MetricPlan, ...]:
    """How each class will act this check, in class order (waterlines come ordered)."""
    by_class: dict[ActionClass, list[tuple[Waterline, Gap, MetricSpec | None]]] = {}
    for w, g in zip(waterlines, gaps, strict=True):
        by_class.setdefault(w.action_class, []).append((w, g, metrics.get(w.metric)))
    plans: list[MetricPlan] = []
    for action_class, lines in by_class.items():
        if action_class is ActionClass.EVICT:
            plans.extend(_eviction_plan(w, g, spec, node) for w, g, spec in lines)
        else:
            plans.extend(_throttle_plans(action_class, lines, node))
    return tuple(plans)


# --- acting, one pod at a time --------------------------------------------------------------


@dataclass(slots=True)
class _Ledger:
    """The generator's private working memory for one check (never escapes it)."""

    remaining: dict[tuple[ActionClass, str], int]
    resources: dict[tuple[ActionClass, str], Resource]
    acted: set[PodKey] = field(default_factory=set)
    accepted: list[QosAction] = field(default_factory=list)
    refused: list[QosAction] = field(default_factory=list)
    blocked: list[QosAction] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    unevicted: set[PodKey] = field(default_factory=set)
    """Pods whose eviction was refused this check."""
    halted_by: PodKey | None = None
    """The first of them: precise evictions on the node end there for the check."""
    stopped: list[Stop] = field(default_factory=list)

    def open(self, plan: MetricPlan) -> bool:
        return self.remaining.get((plan.action_class, plan.metric), 0) > 0

    def record(
        self,
        action: QosAction,
        outcome: Outcome,
        released: Mapping[Resource, int],
        action_class: ActionClass,
    ) -> None:
        if outcome is not Outcome.ACCEPTED:
            self.refused.append(action)
            if action.kind != "evict":
                self.acted.add(action.pod)
                return
            # Not acted on: the pod still stands, and may still be throttled; evictions
            # stop in front of it.
            self.unevicted.add(action.pod)
            if self.halted_by is None:
                self.halted_by = action.pod
            if outcome is Outcome.BLOCKED:
                self.blocked.append(action)
            return
        self.acted.add(action.pod)
        self.accepted.append(action)
        # What an eviction or a throttle frees counts against every gap of usage to release
        # (evictions come first, so the throttle plans see what they left); a restore's
        # headroom counts only against restore gaps.
        affected = RELEASE_CLASSES if action_class in RELEASE_CLASSES else {action_class}
        for key, resource in self.resources.items():
            if key[0] in affected and resource in released:
                self.remaining[key] -= released[resource]


def _eviction(plan: MetricPlan, pod: QosPod, node: str) -> QosAction | Skip:
    usage = pod_usage(plan.resource, pod)
    released = usage or 0
    if plan.mode is Mode.PRECISE and released <= 0:
        reason = SkipReason.NO_USAGE if usage is None else SkipReason.NOTHING_USED
        return Skip(plan.action_class, plan.metric, pod.key, reason)
    return QosAction(
        "evict",
        pod.key,
        node,
        plan.metric,
        plan.resource,
        released,
        grace_period_seconds=plan.grace_period_seconds,
        precise=plan.mode is Mode.PRECISE,
        policies=plan.policies,
    )


def _unthrottleable(plan: MetricPlan, pod: QosPod) -> Skip:
    """Why a throttle step would free nothing of ``pod``'s CPU."""
    usage = pod.cpu_usage_milli
    if usage is None:
        return Skip(plan.action_class, plan.metric, pod.key, SkipReason.NO_USAGE)
    if usage <= 0:
        return Skip(plan.action_class, plan.metric, pod.key, SkipReason.NOTHING_USED)
    floor = throttle_floor(pod, plan.throttle)
    return Skip(plan.action_class, plan.metric, pod.key, SkipReason.AT_FLOOR, floor)


def _limit_action(plan: MetricPlan, pod: QosPod, node: QosNode) -> QosAction | Skip | None:
    if plan.action_class is ActionClass.THROTTLE_DOWN:
        change = throttle_step(pod, plan.throttle)
        kind: ActionKind = "throttle"
        # A precise throttle that frees nothing cannot help close the gap.
        if plan.mode is Mode.PRECISE and (change is None or change.released_milli <= 0):
            return _unthrottleable(plan, pod)
    else:
        change = restore_step(pod, plan.throttle, node.cpu_capacity_milli)
        kind = "restore"
    if change is None:
        return None
    return QosAction(
        kind,
        pod.key,
        node.name,
        plan.metric,
        "cpu",
        change.released_milli,
        cpu_limit_milli=change.cpu_limit_milli,
        throttle=change,
        precise=plan.mode is Mode.PRECISE,
        policies=plan.policies,
    )


def _throttle_instead(
    plans: Iterable[MetricPlan],
    evicting: MetricPlan,
    pod: QosPod,
    node: QosNode,
    ledger: _Ledger,
) -> QosAction | None:
    """One throttle step for ``pod``, whose eviction its PodDisruptionBudget blocked: under the
    first throttle-down plan of the same resource that is acting (all candidates, or a gap
    still open) and has the pod among its candidates; None if there is none or the step
    would free nothing."""
    for plan in plans:
        if (
            plan.action_class is not ActionClass.THROTTLE_DOWN
            or plan.mode is Mode.WAIT
            or plan.resource != evicting.resource
            or (plan.mode is Mode.PRECISE and not ledger.open(plan))
            or all(c.key != pod.key for c in plan.candidates)
        ):
            continue
        action = _limit_action(plan, pod, node)
        return action if isinstance(action, QosAction) else None
    return None


def actions(plans: Iterable[MetricPlan], node: QosNode) -> Flow:
    """Yield the next action; send back its outcome; the return value is the report.

    Drive it with ``first = next(flow)`` then ``flow.send(outcome)`` until ``StopIteration``
    (whose ``value`` is the ``PlanReport``), or with ``accept_all``.
    """
    plan_list = tuple(plans)
    precise = [p for p in plan_list if p.mode is Mode.PRECISE and p.gap is not None]
    ledger = _Ledger(
        remaining={(p.action_class, p.metric): p.gap for p in precise if p.gap is not None},
        resources={(p.action_class, p.metric): p.resource for p in precise},
    )
    waiting = [
        f"{p.action_class.value} {p.metric}: {p.reason}" for p in plan_list if p.mode is Mode.WAIT
    ]
    for plan in plan_list:
        if plan.mode is Mode.WAIT:
            continue
        evicting = plan.action_class is ActionClass.EVICT
        for pod in plan.candidates:
            # 1. A precise plan stops as soon as its gap is closed (maybe by earlier plans).
            if plan.mode is Mode.PRECISE and not ledger.open(plan):
                break
            # 2. ... and precise evictions end with the first refused one (below): nothing
            #    ranked after it goes in its place, for this waterline or any other.
            if evicting and plan.mode is Mode.PRECISE and ledger.halted_by is not None:
                ledger.stopped.append(Stop(plan.action_class, plan.metric, ledger.halted_by))
                break
            if evicting and pod.key in ledger.unevicted:
                continue  # evicting every candidate: this one was refused already
            # 3. One action per pod per check, whichever class or metric got there first.
            if pod.key in ledger.acted:
                continue
            action: QosAction | Skip | None
            if plan.action_class is ActionClass.EVICT:
                action = _eviction(plan, pod, node.name)
            else:
                action = _limit_action(plan, pod, node)
            if isinstance(action, Skip):
                # Acting on it frees nothing; say why if the gap stays open.
                ledger.skipped.append(action)
                continue
            if action is None:
                continue
            # 4. Hand it to the caller; only an accepted action counts against the gaps.
            outcome = yield action
            released: dict[Resource, int] = {"cpu": action.released}
            if evicting:
                released = {"cpu": pod.cpu_usage_milli or 0, "memory": pod.memory_usage_bytes or 0}
            ledger.record(action, outcome, released, plan.action_class)
            if not evicting or outcome is Outcome.ACCEPTED:
                continue
            # 5. A refused eviction: the pod keeps its place in front of the others. Blocked
            #    by its budget, it is throttled instead where a throttle-down waterline covers
            #    it; then (precise) the node's evictions end for the check (step 2).
            if outcome is Outcome.BLOCKED:
                instead = _throttle_instead(plan_list, plan, pod, node, ledger)
                if instead is not None:
                    throttled = yield instead
                    ledger.record(
                        instead, throttled, {"cpu": instead.released}, ActionClass.THROTTLE_DOWN
                    )
            if plan.mode is Mode.PRECISE:
                ledger.stopped.append(Stop(plan.action_class, plan.metric, pod.key))
                break
    return PlanReport(
        accepted=tuple(ledger.accepted),
        refused=tuple(ledger.refused),
        blocked=tuple(ledger.blocked),
        stopped=tuple(ledger.stopped),
        remaining=tuple((k[0], k[1], v) for k, v in ledger.remaining.items()),
        waiting=tuple(waiting),
        skipped=tuple(ledger.skipped),
    )


def accept_all(flow: Flow) -> PlanReport:
    """Drive a flow answering "accepted" to everything (``simulate``, tests)."""
    try:
        next(flow)
        while True:
            flow.send(Outcome.ACCEPTED)
    except StopIteration as stop:
        report: PlanReport = stop.value
        return report
