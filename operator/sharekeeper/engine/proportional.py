"""Proportional reservation: CPU and memory kept idle for a node's idle GPUs.

Reference semantics: Volcano's proportional predicate (``predicates/proportional.go`` until
v1.12, ``resource-strategy-fit/proportional.go`` since v1.13; ``reference/volcano.md`` §6).
Where we differ, and why, is in ``docs/overcommit-and-proportional.md``.

For every configured resource R (say ``nvidia.com/gpu``) a node that advertises R must keep
``idle R * cpu`` CPU and ``idle R * memory`` memory free, so that its idle GPUs stay usable. A
pod that requests none of the configured resources may go to such a node only if it leaves that
much idle; a pod that requests one of them is not restricted.

Units: amounts are internal units (cpu millicores, memory bytes, R in milli-units); the
proportion is per *whole* unit of R (``{cpu: "8", memory: 8G}`` is 8000 millicores and 8*10^9
bytes per GPU). Reservations round up: the GPUs never get less than their share.

Invariants: a node without any configured resource gets no reservation and refuses nobody;
``available == max(idle - reserved, 0)``; a pod without configured resources fits a node iff
its cpu and memory requests are ≤ ``idle - reserved`` (equality fits).

Complexity: ``proportional_placements`` is O(pods + distinct requests * nodes * configured
resources).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sharekeeper.engine.resources import CPU, MEMORY

_MILLI = 1000
_BOUND = (CPU, MEMORY)
"""The dimensions a reservation holds back."""


@dataclass(frozen=True, slots=True)
class Proportion:
    """What one whole unit of a configured resource keeps idle."""

    cpu_milli: int
    memory_bytes: int

    def per_unit(self, dimension: str) -> int:
        return self.cpu_milli if dimension == CPU else self.memory_bytes


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's allocatable and the Σ requests of its bound, non-terminal pods."""

    name: str
    allocatable: Mapping[str, int]
    used: Mapping[str, int]


def idle_amount(allocatable: int, used: int) -> int:
    """Allocatable minus used, floored at 0 (an overfull node has nothing idle)."""
    return max(allocatable - used, 0)


def idle_resources(node: NodeUsage) -> dict[str, int]:
    """Every dimension of the node's allocatable, minus what its pods use."""
    return {
        name: idle_amount(node.allocatable[name], node.used.get(name, 0))
        for name in sorted(node.allocatable)
    }


def reserved_amount(idle_units_milli: int, per_unit: int) -> int:
    """``idle units * per-unit amount``, rounded up: a fraction of a unit still needs it."""
    return -(-idle_units_milli * per_unit // _MILLI)


@dataclass(frozen=True, slots=True)
class NodeReservation:
    """Values of the ``proportional-reserved`` and ``proportional-available`` annotations."""

    reserved: Mapping[str, int]
    """cpu and memory kept idle for the node's idle configured resources."""
    available: Mapping[str, int]
    """idle - reserved, floored at 0: what pods without configured resources may still take."""


def reservations_by_resource(
    idle: Mapping[str, int], proportions: Mapping[str, Proportion]
) -> dict[str, dict[str, int]]:
    """Per configured resource the node advertises: the cpu and memory it keeps idle."""
    return {
        resource: {
            dimension: reserved_amount(idle[resource], proportions[resource].per_unit(dimension))
            for dimension in _BOUND
        }
        for resource in sorted(proportions)
        if resource in idle
    }


def proportional_reservation(
    node: NodeUsage, proportions: Mapping[str, Proportion]
) -> NodeReservation | None:
    """The node's reservation, or ``None`` when it advertises no configured resource.

    With several configured resources on one node, each is checked on its own (Volcano's
    rule), so the binding reservation is the largest per dimension, not the sum.
    """
    if not any(resource in node.allocatable for resource in proportions):
        return None  # most nodes: no accelerator, nothing to work out
    idle = idle_resources(node)
    by_resource = reservations_by_resource(idle, proportions)
    if not by_resource:
        return None
    reserved = {
        dimension: max(amounts[dimension] for amounts in by_resource.values())
        for dimension in _BOUND
    }
    available = {
        dimension: max(idle.get(dimension, 0) - reserved[dimension], 0) for dimension in _BOUND
    }
    return NodeReservation(reserved=reserved, available=available)


@dataclass(frozen=True, slots=True, order=True)
class ProportionalRefusal:
    """One reason a node refuses a pod: after the pod, too little is left for ``resource``."""

    resource: str
    """The configured resource whose reservation would be broken."""
    dimension: str
    """``cpu`` or ``memory``."""
    requested: int
    idle: int
    reserved: int


def is_unrestricted(request: Mapping[str, int], proportions: Mapping[str, Proportion]) -> bool:
    """A pod that asks for a configured resource is the reservation's beneficiary."""
    return any(request.get(resource, 0) > 0 for resource in proportions)


def proportional_fit(
    request: Mapping[str, int], node: NodeUsage, proportions: Mapping[str, Proportion]
) -> tuple[ProportionalRefusal, ...]:
    """Why ``node`` refuses a pod with ``request``; empty when the pod may go there."""
    if is_unrestricted(request, proportions):
        return ()
    idle = idle_resources(node)
    return tuple(
        ProportionalRefusal(
            resource, dimension, request.get(dimension, 0), idle.get(dimension, 0), reserved
        )
        for resource, amounts in reservations_by_resource(idle, proportions).items()
        for dimension, reserved in amounts.items()
        # Strict: leaving exactly the reservation idle fits.
        if idle.get(dimension, 0) - request.get(dimension, 0) < reserved
    )


@dataclass(frozen=True, slots=True)
class PendingPod:
    name: str
    """``namespace/name``."""
    request: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where a pending pod without configured resources may go, and why not elsewhere."""

    nodes: tuple[str, ...]
    """Nodes the predicate lets it onto, sorted."""
    refused: Mapping[str, tuple[ProportionalRefusal, ...]]
    """Per refusing node (sorted), the broken reservations."""


def proportional_placements(
    pods: Iterable[PendingPod],
    nodes: Iterable[NodeUsage],
    proportions: Mapping[str, Proportion],
) -> dict[str, PodPlacement]:
    """The predicate for every pending pod that requests no configured resource, by pod name.

    Each pod is judged against the nodes as they are now, not after the pods before it.
    """
    ordered_nodes = sorted(nodes, key=lambda node: node.name)
    placements: dict[str, PodPlacement] = {}
    # The replicas of one workload ask for the same: each distinct request is judged once.
    judged: dict[tuple[tuple[str, int], ...], PodPlacement] = {}
    for pod in sorted(pods, key=lambda pod: pod.name):
        if is_unrestricted(pod.request, proportions):
            continue
        request = tuple(sorted(pod.request.items()))
        if request not in judged:
            verdicts = {
                node.name: proportional_fit(pod.request, node, proportions)
                for node in ordered_nodes
            }
            judged[request] = PodPlacement(
                nodes=tuple(name for name, refusals in verdicts.items() if not refusals),
                refused={name: refusals for name, refusals in verdicts.items() if refusals},
            )
        placements[pod.name] = judged[request]
    return placements
