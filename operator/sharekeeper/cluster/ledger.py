"""Running totals of the pods, kept current per pod event: what a round reads instead of pods.

``PodLedger.add``/``remove`` cost O(dimensions) per pod; ``totals()`` copies the buckets into
a frozen ``PodTotals`` in O((queue name, namespace) pairs + PodGroups + nodes), and in
O(dimensions) more for each bucket that changed since the last call: a bucket keeps its copy
until a pod event changes it (or the round reads other resource names).
Given the resource names a round reads (``ClusterStore.resource_names``: what nodes offer and
queue specs name), it copies those only, so a tenant's pods asking for thousands of made-up
resources cost the round nothing per made-up name.
An update is a ``remove`` of the pod's previous record and an ``add`` of the new one, so the
ledger never has to know what changed. Terminal pods hold nothing and are never added.

Which bucket a pod's charges go to is the engine's rule (``accounting.pod_claim``); this room
only keeps the sums. ``tests/cluster/test_ledger.py`` holds it equal to a from-scratch sum
after random event sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from sharekeeper.engine.resources import Amounts, within
from sharekeeper.engine.shares import Charges, GroupPods, PodSnapshot, PodTotals
from sharekeeper.engine.shares.accounting import pod_claim
from sharekeeper.engine.shares.snapshot import PODS, GroupKey


def _add(into: dict[str, int], amounts: Amounts, sign: int) -> None:
    for name, amount in amounts.items():
        value = into.get(name, 0) + sign * amount
        if value:
            into[name] = value
        else:
            into.pop(name, None)  # an emptied dimension leaves no zero behind


def _counted(amounts: dict[str, int], pods: int) -> dict[str, int]:
    """``amounts`` (a copy of the ledger's own) with ``pods`` more of ``PODS``: one a pod, as a
    queue counts its pods (none added for 0)."""
    if pods:
        amounts[PODS] = amounts.get(PODS, 0) + pods
    return amounts


class _Sums(Protocol):
    pods: int

    def change(self, pod: PodSnapshot, sign: int) -> None: ...


_K = TypeVar("_K", bound=Hashable)
_S = TypeVar("_S", bound=_Sums)


class _Keeper:
    """Copies a bucket's sums in ``names`` (and ``pods``) only, each in O(min(its names,
    ``names``)): walking ``names`` (sorted, so the copy's order is the same in every process)
    when the bucket holds more, as one whose pods ask for made-up resources does. None: every
    name. A bucket's copy is kept while the ledger's keeper is the same object."""

    def __init__(self, names: frozenset[str] | None) -> None:
        self.names = names
        self._ordered = tuple(sorted(names)) if names is not None else ()

    def __call__(self, amounts: dict[str, int]) -> dict[str, int]:
        if self.names is None:
            return dict(amounts)
        if len(amounts) <= len(self._ordered):
            return within(amounts, self.names)
        return {name: amounts[name] for name in self._ordered if name in amounts}


@dataclass(slots=True)
class _ChargeSums:
    allocated: dict[str, int] = field(default_factory=dict)
    request: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    allocated_pods: int = 0
    held: dict[str, int] = field(default_factory=dict)
    admitted_pods: int = 0
    copy: tuple[_Keeper, Charges] | None = None
    """The last ``frozen`` copy and the keeper it was made with, until the next change."""

    def change(self, pod: PodSnapshot, sign: int) -> None:
        self.copy = None
        _add(self.request, pod.request, sign)
        if pod.allocated:
            _add(self.allocated, pod.request, sign)
            self.allocated_pods += sign
        if pod.admission == "held":
            _add(self.held, {**pod.request, PODS: 1}, sign)
        elif pod.admission == "admitted":
            self.admitted_pods += sign
        self.pods += sign

    def frozen(self, keep: _Keeper) -> Charges:
        if self.copy is not None and self.copy[0] is keep:
            return self.copy[1]
        made = Charges(
            _counted(keep(self.allocated), self.allocated_pods),
            _counted(keep(self.request), self.pods),
            self.pods,
            self.allocated_pods,
            keep(self.held),
            self.admitted_pods,
        )
        self.copy = (keep, made)
        return made


@dataclass(slots=True)
class _GroupSums:
    allocated: dict[str, int] = field(default_factory=dict)
    allocated_pods: int = 0
    gated: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    copy: tuple[_Keeper, GroupPods] | None = None

    def change(self, pod: PodSnapshot, sign: int) -> None:
        self.copy = None
        if pod.allocated:
            _add(self.allocated, pod.request, sign)
            self.allocated_pods += sign
        elif pod.scheduling_gated:
            _add(self.gated, pod.request, sign)
        self.pods += sign

    def frozen(self, keep: _Keeper) -> GroupPods:
        if self.copy is not None and self.copy[0] is keep:
            return self.copy[1]
        made = GroupPods(keep(self.allocated), self.allocated_pods, keep(self.gated), self.pods)
        self.copy = (keep, made)
        return made


@dataclass(slots=True)
class _NodeSums:
    used: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    copy: tuple[_Keeper, dict[str, int]] | None = None

    def change(self, pod: PodSnapshot, sign: int) -> None:
        self.copy = None
        _add(self.used, pod.request, sign)
        self.pods += sign

    def frozen(self, keep: _Keeper) -> dict[str, int]:
        """``used`` in the keeper's names."""
        if self.copy is not None and self.copy[0] is keep:
            return self.copy[1]
        made = keep(self.used)
        self.copy = (keep, made)
        return made

    def with_pods(self, keep: _Keeper) -> dict[str, int]:
        return {**self.frozen(keep), PODS: self.pods}


class PodLedger:
    def __init__(self) -> None:
        self._named: dict[tuple[str, str], _ChargeSums] = {}
        """By (queue, namespace)."""
        self._grouped: dict[GroupKey, _ChargeSums] = {}
        self._unnamed: dict[tuple[str, str], _ChargeSums] = {}
        """By (scheduler name, namespace)."""
        self._unnamed_bound: dict[tuple[str, str], _NodeSums] = {}
        """The bound ones, by (scheduler name, node)."""
        self._groups: dict[GroupKey, _GroupSums] = {}
        self._nodes: dict[str, _NodeSums] = {}
        self._keeper = _Keeper(None)
        """The last ``totals`` call's: kept while the names asked for are the same, so that
        every bucket's copy made with it holds."""

    def add(self, pod: PodSnapshot) -> None:
        self._change(pod, +1)

    def remove(self, pod: PodSnapshot) -> None:
        self._change(pod, -1)

    def _change(self, pod: PodSnapshot, sign: int) -> None:
        if pod.terminal:
            return
        claim = pod_claim(pod)
        if claim[0] == "named":
            _bucket(self._named, (claim[1], pod.namespace), _ChargeSums, pod, sign)
        elif claim[0] == "grouped":
            _bucket(self._grouped, claim[1], _ChargeSums, pod, sign)
        else:
            scheduler = pod.scheduler_name
            _bucket(self._unnamed, (scheduler, pod.namespace), _ChargeSums, pod, sign)
            if pod.allocated and pod.node_name is not None:
                _bucket(self._unnamed_bound, (scheduler, pod.node_name), _NodeSums, pod, sign)
        if pod.group_name:
            _bucket(self._groups, (pod.namespace, pod.group_name), _GroupSums, pod, sign)
        if pod.allocated and pod.node_name is not None:
            _bucket(self._nodes, pod.node_name, _NodeSums, pod, sign)

    def totals(self, names: Collection[str] | None = None) -> PodTotals:
        """The sums, frozen; only in the resource ``names`` (and ``pods``) when given. A copy is
        shared with earlier calls' while its bucket has not changed: never change one."""
        members = frozenset((*names, PODS)) if names is not None else None
        if members != self._keeper.names:
            self._keeper = _Keeper(members)
        keep = self._keeper
        named: dict[str, dict[str, Charges]] = {}
        for (queue, namespace), sums in self._named.items():
            named.setdefault(queue, {})[namespace] = sums.frozen(keep)
        unnamed: dict[str, dict[str, Charges]] = {}
        for (scheduler, namespace), sums in self._unnamed.items():
            unnamed.setdefault(scheduler, {})[namespace] = sums.frozen(keep)
        unnamed_bound: dict[str, dict[str, dict[str, int]]] = {}
        for (scheduler, node), node_sums in self._unnamed_bound.items():
            unnamed_bound.setdefault(scheduler, {})[node] = node_sums.with_pods(keep)
        return PodTotals(
            named=named,
            grouped={key: sums.frozen(keep) for key, sums in self._grouped.items()},
            unnamed=unnamed,
            unnamed_bound=unnamed_bound,
            groups={key: sums.frozen(keep) for key, sums in self._groups.items()},
            node_used={name: sums.frozen(keep) for name, sums in self._nodes.items()},
            node_pods={name: sums.pods for name, sums in self._nodes.items()},
        )


def _bucket(
    buckets: dict[_K, _S], key: _K, make: Callable[[], _S], pod: PodSnapshot, sign: int
) -> None:
    sums = buckets.get(key)
    if sums is None:
        sums = buckets[key] = make()
    sums.change(pod, sign)
    if sums.pods == 0:
        del buckets[key]  # the last pod left: nothing of it stays in memory or in a round
