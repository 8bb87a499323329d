"""Waterlines and gaps (crane.md §4 and §8).

A waterline is, per action class and metric, the smallest rule value among the rules that
contribute this check, pooled over every policy that selects the node: triggered rules of
throttle actions feed ``throttleDown``, of eviction actions feed ``evict``; restored rules of
throttle actions feed ``throttleUp``. The gap is how far usage is past the waterline
(``usage - waterline``; ``waterline - usage`` for throttle-up, i.e. the headroom), times
``1 + excessPercent/100``, in the resource's absolute unit, rounded up so the excess is never
lost to rounding. A gap is ``None`` when it cannot be computed (no usage, no capacity).

Difference from Crane: gaps are computed only for metrics that have a waterline, so a metric
no rule uses can never force the evict-everything fallback (crane.md §12.6).

``unreachable_rules`` finds rules no selected node can ever cross (a value at or above every
node's capacity), so that a unit mistake is reported instead of silently never acting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sharekeeper.engine.qos.inputs import Action, Candidates, QosNode, QosPolicy
from sharekeeper.engine.qos.metrics import (
    ActionClass,
    MetricRegistry,
    MetricSpec,
    absolute,
    node_capacity,
    node_usage,
)
from sharekeeper.engine.qos.releasing import NOTHING_UNSAMPLED, Unsampled

CLASS_ORDER = (ActionClass.EVICT, ActionClass.THROTTLE_DOWN, ActionClass.THROTTLE_UP)
"""Crane's executor order: evict, then throttle down, then restore (crane.md §2)."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """One rule pushing its value into one (action class, metric) waterline this check."""

    policy: str
    rule: str
    action_class: ActionClass
    metric: str
    value: int
    action: Action
    candidates: Candidates
    evict_on_missing_metrics: bool
    excess_percent: int


@dataclass(frozen=True, slots=True)
class Waterline:
    action_class: ActionClass
    metric: str
    value: int
    """The minimum contributed value, in the metric's unit (millicores, bytes, milli-percent)."""
    contributions: tuple[Contribution, ...]
    """Every rule behind it (not only the minimum): their policies' candidates may be acted on."""

    @property
    def excess_percent(self) -> int:
        # The rules that set the waterline decide the excess; the largest wins a tie.
        return max(c.excess_percent for c in self.contributions if c.value == self.value)


@dataclass(frozen=True, slots=True)
class Gap:
    action_class: ActionClass
    metric: str
    usage: int | None
    waterline: int | None
    """The waterline in the resource's absolute unit."""
    amount: int | None
    """(Signed) distance to close, * (1 + excess), in the resource's absolute unit."""
    leaving: int = 0
    """Evict and throttle down: usage on its way out (``releasing``), left out of ``amount``."""
    arriving: int = 0
    """Throttle up: CPU our restores gave back that the sample does not show yet, left out of
    ``amount``."""


def pooled_waterlines(
    contributions: Iterable[Contribution], metrics: MetricRegistry
) -> tuple[Waterline, ...]:
    """Min-pool contributions per (class, metric), in class then registry order."""
    groups: dict[tuple[ActionClass, str], list[Contribution]] = {}
    for c in contributions:
        groups.setdefault((c.action_class, c.metric), []).append(c)
    metric_rank = {name: i for i, name in enumerate(metrics)}

    def order(key: tuple[ActionClass, str]) -> tuple[int, int, str]:
        return (CLASS_ORDER.index(key[0]), metric_rank.get(key[1], len(metric_rank)), key[1])

    return tuple(
        Waterline(
            action_class=key[0],
            metric=key[1],
            value=min(c.value for c in groups[key]),
            contributions=tuple(sorted(groups[key], key=lambda c: (c.policy, c.rule))),
        )
        for key in sorted(groups, key=order)
    )


def _with_excess(raw: int, excess_percent: int) -> int:
    scaled = raw * (100 + excess_percent)
    return -(-scaled // 100)  # ceiling division


def gap(
    waterline: Waterline,
    spec: MetricSpec | None,
    node: QosNode,
    unsampled: Unsampled = NOTHING_UNSAMPLED,
) -> Gap:
    """``unsampled``: what the usage sample counts that is on its way out, which an evict or
    throttle-down gap leaves out, and what our restores gave back that it does not count yet,
    which a restore's headroom leaves out."""
    if spec is None:
        return Gap(waterline.action_class, waterline.metric, None, None, None)
    usage = node_usage(spec.resource, node)
    line = absolute(spec, waterline.value, node)
    if usage is None or line is None:
        return Gap(waterline.action_class, waterline.metric, usage, line, None)
    leaving = arriving = 0
    if waterline.action_class is ActionClass.THROTTLE_UP:
        arriving = unsampled.arriving(spec.resource)
        raw = line - usage - arriving
    else:
        leaving = min(unsampled.leaving(spec.resource), usage)
        raw = usage - leaving - line
    return Gap(
        waterline.action_class,
        waterline.metric,
        usage,
        line,
        _with_excess(raw, waterline.excess_percent),
        leaving,
        arriving,
    )


def gaps(
    waterlines: Iterable[Waterline],
    metrics: Mapping[str, MetricSpec],
    node: QosNode,
    unsampled: Unsampled = NOTHING_UNSAMPLED,
) -> tuple[Gap, ...]:
    return tuple(gap(w, metrics.get(w.metric), node, unsampled) for w in waterlines)


@dataclass(frozen=True, slots=True)
class UnreachableRule:
    """A rule whose value no selected node can cross: usage cannot exceed capacity, and a rule
    is hot only strictly above its value. Usually a unit mistake (Crane wrote
    ``cpu_total_usage`` in millicores: ``14000`` here is 14000 cores)."""

    policy: str
    rule: str
    metric: str
    value: int
    """The rule value, in the metric's unit."""
    largest_capacity: int
    """The largest capacity among the selected nodes, in the resource's absolute unit."""


def unreachable_rules(
    policy: QosPolicy, nodes: Iterable[QosNode], metrics: MetricRegistry
) -> tuple[UnreachableRule, ...]:
    """The rules of ``policy`` whose waterline is at or above the capacity of every node it
    selects among ``nodes``. Nodes without a known capacity do not count; with none left, no
    rule is reported (nothing to compare with). O(rules x nodes)."""
    selected = [n for n in nodes if policy.node_selector.matches(n.labels)]
    found = []
    for objective in policy.objectives:
        spec = metrics.get(objective.metric)
        if spec is None:
            continue
        capacities = [
            (capacity, absolute(spec, objective.value, n))
            for n in selected
            if (capacity := node_capacity(spec.resource, n)) is not None
        ]
        if capacities and all(
            line is not None and line >= capacity for capacity, line in capacities
        ):
            found.append(
                UnreachableRule(
                    policy.name,
                    objective.name,
                    objective.metric,
                    objective.value,
                    max(capacity for capacity, _ in capacities),
                )
            )
    return tuple(found)
