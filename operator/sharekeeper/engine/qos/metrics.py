"""The metric registry: what each rule metric means and which actions can act on it precisely.

Adding a metric is one ``MetricSpec`` in ``REGISTRY``; no planning code changes (crane.md §7).
A metric measures one node resource, either absolutely (millicores, bytes) or as a
utilization (milli-percent of the node's capacity, so ``"50.5"`` percent is exact). Gaps and
releases are always in the resource's absolute unit, whichever form the rule uses.

Differences from Crane: ``cpu_total_utilization`` is throttle-quantified too (a CPU gap in
percent converts to millicores exactly like an eviction gap does); memory cannot be throttled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from sharekeeper.engine.qos.inputs import QosNode, QosPod
from sharekeeper.engine.qos.sorting import CPU_SORTER, GENERAL_SORTER, MEMORY_SORTER, Sorter

Resource = Literal["cpu", "memory"]

MILLI_PERCENT = 100_000
"""Utilization rule values are in milli-percent: 100 % of capacity is 100 000."""


class ActionClass(Enum):
    EVICT = "evict"
    THROTTLE_DOWN = "throttleDown"
    THROTTLE_UP = "throttleUp"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    resource: Resource
    utilization: bool
    action_priority: int
    sorter: Sorter = GENERAL_SORTER
    """Order of candidates for this metric; ``GENERAL_SORTER`` if the metric is not sortable."""
    throttleable: bool = False
    throttle_quantified: bool = False
    evict_quantified: bool = False


MetricRegistry = Mapping[str, MetricSpec]


def registry(*specs: MetricSpec) -> MetricRegistry:
    """A registry from specs; iteration order is the planning order (priority, then name)."""
    ordered = sorted(specs, key=lambda s: (-s.action_priority, s.name))
    return {spec.name: spec for spec in ordered}


REGISTRY = registry(
    MetricSpec(
        "cpu_total_usage",
        "cpu",
        utilization=False,
        action_priority=5,
        sorter=CPU_SORTER,
        throttleable=True,
        throttle_quantified=True,
        evict_quantified=True,
    ),
    MetricSpec(
        "cpu_total_utilization",
        "cpu",
        utilization=True,
        action_priority=5,
        sorter=CPU_SORTER,
        throttleable=True,
        throttle_quantified=True,
        evict_quantified=True,
    ),
    MetricSpec(
        "memory_total_usage",
        "memory",
        utilization=False,
        action_priority=5,
        sorter=MEMORY_SORTER,
        evict_quantified=True,
    ),
    MetricSpec(
        "memory_total_utilization",
        "memory",
        utilization=True,
        action_priority=5,
        sorter=MEMORY_SORTER,
        evict_quantified=True,
    ),
)


def node_usage(resource: Resource, node: QosNode) -> int | None:
    return node.cpu_usage_milli if resource == "cpu" else node.memory_usage_bytes


def node_capacity(resource: Resource, node: QosNode) -> int | None:
    capacity = node.cpu_capacity_milli if resource == "cpu" else node.memory_capacity_bytes
    return capacity if capacity else None


def pod_usage(resource: Resource, pod: QosPod) -> int | None:
    return pod.cpu_usage_milli if resource == "cpu" else pod.memory_usage_bytes


def absolute(spec: MetricSpec, value: int, node: QosNode) -> int | None:
    """A rule value in the resource's absolute unit; None if a utilization lacks capacity.

    Rounds down, so a waterline never sits above the value the user wrote.
    """
    if not spec.utilization:
        return value
    capacity = node_capacity(spec.resource, node)
    return None if capacity is None else value * capacity // MILLI_PERCENT
