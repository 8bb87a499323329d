"""Which pod is acted on first: sorters composed from small comparators (crane.md §10).

A comparator turns a pod into a sort key; smaller keys are acted on first. A sorter is an
ordered tuple of comparators, compared lexicographically (the first one that differs
decides), and every sorter ends with namespace/name so the order is total: the same pods give
the same plan whatever order they arrive in. Keys are exact (integers, ``Fraction``) so no
float tolerance is needed. Sorting n pods is O(n log n) with one key per pod.

Differences from Crane, on purpose: CPU and memory usage order *descending* (E1 sorted CPU
ascending, crane.md §12.10) and compare absolute usage (what an eviction releases), not
usage/quota; classAndPriority compares QoS class before priority as the design asks (Crane E2
swapped them); ties never depend on the sort algorithm. The priority compared is the pod's
effective one (``QosPod.priority``): a tenant that names system-cluster-critical outside
``kube-system`` sorts as priority 0, not after everyone else's pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

from sharekeeper.engine.qos.inputs import QosPod

SortKey: TypeAlias = "int | Fraction | str | tuple[SortKey, ...]"

_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


@dataclass(frozen=True, slots=True)
class Comparator:
    name: str
    key: Callable[[QosPod], SortKey]


@dataclass(frozen=True, slots=True)
class Sorter:
    name: str
    comparators: tuple[Comparator, ...]

    def key(self, pod: QosPod) -> tuple[SortKey, ...]:
        return (*(c.key(pod) for c in self.comparators), pod.key.namespace, pod.key.name)

    def sort(self, pods: Iterable[QosPod]) -> tuple[QosPod, ...]:
        return tuple(sorted(pods, key=self.key))


def _qos_rank(pod: QosPod) -> SortKey:
    # An unknown class sorts after the three known ones, as in Crane.
    return _QOS_RANK.get(pod.qos_class, len(_QOS_RANK))


def _running_time(pod: QosPod) -> SortKey:
    # Younger first; a pod without a start time has not really started: it goes first.
    return (0, 0) if pod.start_time is None else (1, -pod.start_time)


def _ext_cpu_ratio(pod: QosPod) -> SortKey:
    # Pods borrowing elastic CPU go first, the least-used borrowing first; others tie.
    if pod.ext_cpu_limit_milli <= 0:
        return (1, Fraction(0))
    return (0, Fraction(pod.cpu_usage_milli or 0, pod.ext_cpu_limit_milli))


QOS_CLASS = Comparator("qosClass", _qos_rank)
PRIORITY = Comparator("priority", lambda pod: pod.priority)
CLASS_AND_PRIORITY = Comparator("classAndPriority", lambda pod: (_qos_rank(pod), pod.priority))
CPU_USAGE = Comparator("cpuUsage", lambda pod: -(pod.cpu_usage_milli or 0))
MEMORY_USAGE = Comparator("memoryUsage", lambda pod: -(pod.memory_usage_bytes or 0))
USES_EXT_CPU = Comparator("usesExtCpu", lambda pod: 0 if pod.ext_cpu_limit_milli > 0 else 1)
EXT_CPU_RATIO = Comparator("extCpuRatio", _ext_cpu_ratio)
RUNNING_TIME = Comparator("runningTime", _running_time)

GENERAL_SORTER = Sorter("general", (CLASS_AND_PRIORITY, RUNNING_TIME))
CPU_SORTER = Sorter("cpu", (CLASS_AND_PRIORITY, CPU_USAGE, EXT_CPU_RATIO, RUNNING_TIME))
MEMORY_SORTER = Sorter("memory", (CLASS_AND_PRIORITY, MEMORY_USAGE, RUNNING_TIME))
