"""Overcommit: per-resource factors, overcommitted allocatable and the enqueue headroom.

Reference semantics: Volcano's ``overcommit`` plugin (``pkg/scheduler/plugins/overcommit``,
master ed72c7c8) with the per-resource factors of its design PR #3634 / code PR #3647, and the
``proportion`` plugin's ``JobEnqueueableFn`` for the per-queue quota check
(``reference/volcano.md`` §2, §3.4, §5). Where we differ, and why, is in
``docs/overcommit-and-proportional.md``.

Amounts are integers in internal units (``sharekeeper.model.quantities``); factors are exact
``Fraction`` values, so ``1.2 * 10`` is ``12``, never ``11.999…``.

Invariants:

1. every effective factor is ≥ 1, hence overcommitted ≥ allocatable in every dimension;
2. overcommitted ≤ allocatable * factor (we floor): we never publish more than was promised;
3. headroom ≥ 0 in every dimension, and a job is admitted iff each dimension it requests fits
   its headroom (strict: equality passes, one unit more fails).

Complexity: linear in resources * (nodes + PodGroups); per-queue verdicts are linear in
PodGroups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

from sharekeeper.engine.resources import (
    Shortfall,
    exceeded_part,
    inqueue_reservation,
    subtract,
    sum_amounts,
    within,
)

DEFAULT_FACTOR = Fraction(6, 5)
"""Volcano's built-in ``overcommit-factor`` (1.2)."""

PODS = "pods"
"""Never an admission dimension: Volcano's dimension-wise checks skip it."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- factors -----------------------------------------------------------------------------


def factor_from_number(value: int | float | str | Decimal) -> Fraction:
    """An exact factor from a JSON/YAML number: ``1.2`` becomes ``6/5``, not a binary float.

    Raises ``ValueError`` for values below 1: CRD validation rejects them, so reaching here is
    a bug in the caller, and silently using 1.2 instead (as Volcano does) would hide it.
    """
    factor = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if factor < 1:
        raise ValueError(f"overcommit factor {value!r} is below 1")
    return factor


def factor_number(factor: Fraction) -> int | float:
    """A factor as a JSON number for status and annotations: ``1`` or ``1.2``."""
    if factor.denominator == 1:
        return factor.numerator
    return float(factor)


@dataclass(frozen=True, slots=True)
class OvercommitSpec:
    """``spec.overcommit`` of a SchedulerPolicy, factors already exact."""

    factor: Fraction | None = None
    """``spec.overcommit.factor``; ``None`` means the built-in 1.2."""
    factors: Mapping[str, Fraction] = field(default_factory=dict)
    """``spec.overcommit.factors``: per resource name, overriding ``factor``."""

    def __post_init__(self) -> None:
        for name, value in (("factor", self.factor), *self.factors.items()):
            if value is not None and value < 1:
                raise ValueError(f"overcommit factor for {name} is {value}, below 1")


def effective_factor(resource: str, spec: OvercommitSpec) -> Fraction:
    """Precedence: 1.2 → ``factor`` → ``factors[resource]``."""
    if resource in spec.factors:
        return spec.factors[resource]
    if spec.factor is not None:
        return spec.factor
    return DEFAULT_FACTOR


def effective_factors(resources: Iterable[str], spec: OvercommitSpec) -> dict[str, Fraction]:
    """The factor of every named resource and every resource with its own factor, sorted."""
    names = sorted(set(resources) | set(spec.factors))
    return {name: effective_factor(name, spec) for name in names}


def overcommitted_amount(amount: int, factor: Fraction) -> int:
    """``amount * factor`` floored to a whole internal unit (never more than promised). In
    integers: a Fraction product costs ten times as much, and every node's every resource is
    scaled each round."""
    return amount * factor.numerator // factor.denominator


def overcommitted_allocatable(
    allocatable: Mapping[str, int], spec: OvercommitSpec
) -> dict[str, int]:
    """Every dimension of ``allocatable`` scaled by its effective factor, sorted."""
    return {
        name: overcommitted_amount(allocatable[name], effective_factor(name, spec))
        for name in sorted(allocatable)
    }


@dataclass(frozen=True, slots=True)
class NodeOvercommit:
    """Values of the ``overcommit-factors`` and ``overcommit-allocatable`` node annotations."""

    factors: Mapping[str, Fraction]
    allocatable: Mapping[str, int]


def node_overcommit(allocatable: Mapping[str, int], spec: OvercommitSpec) -> NodeOvercommit:
    """One node's annotations: factors of the resources it advertises, and their scaled value.

    Only the node's own resources are listed, so a node without GPUs gets no GPU factor.
    """
    return NodeOvercommit(
        factors={name: effective_factor(name, spec) for name in sorted(allocatable)},
        allocatable=overcommitted_allocatable(allocatable, spec),
    )


# --- inqueue -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OvercommitPodGroup:
    """A Volcano PodGroup with the aggregates of its pods."""

    name: str
    """``namespace/name``; the last tie-break when ordering pending PodGroups."""
    queue: str
    phase: str
    """``Pending``, ``Inqueue``, ``Running``, ``Completed``, ``Unknown``."""
    min_member: int
    min_resources: Mapping[str, int] | None = None
    """``spec.minResources``; ``None`` means the PodGroup is admitted without any check."""
    allocated: Mapping[str, int] = field(default_factory=dict)
    """Σ requests of its bound, non-terminal pods."""
    allocated_pods: int = 0
    gated: Mapping[str, int] = field(default_factory=dict)
    """Σ requests of its pods that still have scheduling gates."""
    priority: int = 0
    created: datetime = _EPOCH


def podgroup_inqueue(podgroup: OvercommitPodGroup) -> dict[str, int]:
    """What an admitted PodGroup still holds back: its minimum minus what already runs.

    Counts for ``Inqueue`` PodGroups and for ``Running`` ones that reached ``minMember``
    (Volcano's rule). Unlike Volcano's overcommit plugin, an ``Inqueue`` PodGroup's allocated
    pods are subtracted: they are already in ``used`` (Volcano fixed this double count in
    ``proportion`` in v1.15 but not in ``overcommit``).
    """
    if podgroup.min_resources is None:
        return {}
    admitted = podgroup.phase == "Inqueue" or (
        podgroup.phase == "Running" and podgroup.allocated_pods >= podgroup.min_member
    )
    if not admitted:
        return {}
    remaining = inqueue_reservation(podgroup.min_resources, podgroup.allocated)
    # Gated pods cannot be scheduled yet, so their share of the minimum is not held back.
    ungated = exceeded_part(remaining, podgroup.gated)
    return {name: ungated[name] for name in sorted(ungated) if ungated[name] > 0}


def inqueue_resources(podgroups: Iterable[OvercommitPodGroup]) -> dict[str, int]:
    """Σ ``podgroup_inqueue`` over the PodGroups, keys sorted."""
    return dict(sorted(sum_amounts(podgroup_inqueue(podgroup) for podgroup in podgroups).items()))


# --- headroom and admission -----------------------------------------------------------------


def headroom_amount(overcommitted: int, used: int, inqueue: int) -> int:
    """What a new job may still ask for in one dimension, floored at 0."""
    return max(overcommitted - used - inqueue, 0)


def enqueue_headroom(
    overcommitted_total: Mapping[str, int], used: Mapping[str, int], inqueue: Mapping[str, int]
) -> dict[str, int]:
    """Per dimension (``pods`` excluded): what one more job may ask for and be admitted.

    A dimension that is used or held back but has no capacity gets 0, so a job asking for it
    is refused; a dimension nobody has and nobody asks for is absent.
    """
    names = (set(overcommitted_total) | set(used) | set(inqueue)) - {PODS}
    return {
        name: headroom_amount(
            overcommitted_total.get(name, 0), used.get(name, 0), inqueue.get(name, 0)
        )
        for name in sorted(names)
    }


def shortfalls(requested: Mapping[str, int], available: Mapping[str, int]) -> tuple[Shortfall, ...]:
    """Dimensions where ``requested`` exceeds ``available``, sorted by name.

    Volcano's ``LessEqualWithDimensionAndResourcesName`` rephrased: only dimensions the job
    asks for (> 0) count, ``pods`` never does, a dimension missing from ``available`` is 0,
    and the comparison is strict (equality fits).
    """
    short = [
        name
        for name, amount in requested.items()
        if amount > 0 and amount > available.get(name, 0) and name != PODS
    ]
    if not short:
        return ()  # the common case: nothing sorted, nothing made
    short.sort()
    return tuple(Shortfall(name, requested[name], max(available.get(name, 0), 0)) for name in short)


@dataclass(frozen=True, slots=True)
class OvercommitSnapshot:
    """The inputs for one SchedulerPolicy."""

    spec: OvercommitSpec
    total: Mapping[str, int]
    """Σ allocatable of the policy's nodes."""
    used: Mapping[str, int]
    """Σ requests of the bound, non-terminal pods on those nodes."""
    podgroups: Sequence[OvercommitPodGroup] = ()
    dimensions: Set[str] | None = None
    """The policy's resource names (``PolicyShare.dimensions``): ``used`` and ``inqueue`` are
    kept to them, so a pod or PodGroup asking for a made-up resource adds no key to the
    policy's status; None keeps every name."""


@dataclass(frozen=True, slots=True)
class OvercommitResult:
    """``status.overcommit`` of a SchedulerPolicy."""

    factors: Mapping[str, Fraction]
    overcommitted_total: Mapping[str, int]
    used: Mapping[str, int]
    inqueue: Mapping[str, int]
    headroom: Mapping[str, int]


def overcommit_status(snapshot: OvercommitSnapshot) -> OvercommitResult:
    """The policy's overcommit status.

    The total is scaled as a whole, as Volcano does, so it may exceed the sum of the nodes'
    floored ``overcommit-allocatable`` by less than one internal unit per node.
    """
    overcommitted = overcommitted_allocatable(snapshot.total, snapshot.spec)
    inqueue = inqueue_resources(snapshot.podgroups)
    used = snapshot.used
    if snapshot.dimensions is not None:
        inqueue, used = within(inqueue, snapshot.dimensions), within(used, snapshot.dimensions)
    return OvercommitResult(
        factors=effective_factors(snapshot.total, snapshot.spec),
        overcommitted_total=overcommitted,
        used=dict(sorted(used.items())),
        inqueue=inqueue,
        headroom=enqueue_headroom(overcommitted, used, inqueue),
    )


@dataclass(frozen=True, slots=True)
class OvercommitQueue:
    """What the proportion enqueue check needs to know about one queue.

    ``allocated``, ``inqueue``, ``elastic`` and ``real_capability`` are the share engine's
    per-queue results (``QueueShare``), so the verdict agrees with the queue's status.
    """

    name: str
    open: bool = True
    """``status.state == Open``; a closed queue admits nothing."""
    allocated: Mapping[str, int] = field(default_factory=dict)
    inqueue: Mapping[str, int] = field(default_factory=dict)
    elastic: Mapping[str, int] = field(default_factory=dict)
    real_capability: Mapping[str, int] | None = None
    """``None`` skips the quota check (no share policy governs the queue)."""
    leaf: bool = True
    """False for a queue with queues below it: it takes no jobs (Volcano's rule)."""
    ancestors: tuple[OvercommitQueue, ...] = ()
    """Its parent, the parent's parent, ...: a job must fit in every one of them too."""


@dataclass(frozen=True, slots=True)
class QueueAdmission:
    """Would the queue's next pending PodGroup be admitted now, and if not, why not."""

    queue: str
    podgroup: str | None
    """The next pending PodGroup (``namespace/name``); ``None`` when nothing is pending."""
    closed: bool = False
    overcommit: tuple[Shortfall, ...] = ()
    """Dimensions where the job exceeds the cluster's enqueue headroom."""
    quota: tuple[Shortfall, ...] = ()
    """Dimensions where the job exceeds the queue's capability (proportion)."""
    inner: bool = False
    """The queue has queues below it, and takes no jobs."""
    limiting: str | None = None
    """The ancestor whose capability ``quota`` is about; None: the queue's own."""

    @property
    def admitted(self) -> bool:
        return self.podgroup is not None and not (
            self.closed or self.inner or self.overcommit or self.quota
        )


def next_pending(podgroups: Iterable[OvercommitPodGroup]) -> OvercommitPodGroup | None:
    """The pending PodGroup the enqueue action tries first: priority, then age, then name."""
    pending = [podgroup for podgroup in podgroups if podgroup.phase == "Pending"]
    return min(pending, key=lambda pg: (-pg.priority, pg.created, pg.name), default=None)


def quota_available(queue: OvercommitQueue) -> dict[str, int] | None:
    """What the queue's capability leaves a new job, per dimension:
    ``capability - (allocated + inqueue - elastic)``, negative where the queue is over it;
    ``None`` when no quota applies (no share policy governs the queue)."""
    if queue.real_capability is None:
        return None
    negative_elastic = {name: -amount for name, amount in queue.elastic.items()}
    return subtract(
        queue.real_capability, sum_amounts((queue.allocated, queue.inqueue, negative_elastic))
    )


def quota_shortfalls(queue: OvercommitQueue, minimum: Mapping[str, int]) -> tuple[Shortfall, ...]:
    """Proportion's enqueue check: minimum + allocated + inqueue - elastic <= capability.

    Rephrased as "minimum <= capability - (allocated + inqueue - elastic)" so that the
    shortfall names what the job could still get.
    """
    available = quota_available(queue)
    return () if available is None else shortfalls(minimum, available)


def queue_admission(
    queue: OvercommitQueue, podgroups: Iterable[OvercommitPodGroup], headroom: Mapping[str, int]
) -> QueueAdmission:
    """The verdict on ``queue``'s next pending PodGroup against the cluster ``headroom``.

    ``podgroups`` are the queue's own. Each queue is judged on its own against the current
    headroom: admitting one queue's job is not assumed to shrink another's.
    """
    candidate = next_pending(podgroups)
    if candidate is None:
        return QueueAdmission(queue=queue.name, podgroup=None, closed=not queue.open)
    if not queue.leaf:
        return QueueAdmission(queue=queue.name, podgroup=candidate.name, inner=True)
    if candidate.min_resources is None:
        # The enqueue action admits a PodGroup without minResources without asking anyone.
        return QueueAdmission(queue=queue.name, podgroup=candidate.name)
    quota: tuple[Shortfall, ...] = ()
    limiting = None
    for level in (queue, *queue.ancestors):  # the job counts in every queue above (§4.3)
        quota = quota_shortfalls(level, candidate.min_resources)
        if quota:
            limiting = None if level is queue else level.name
            break
    return QueueAdmission(
        queue=queue.name,
        podgroup=candidate.name,
        closed=not queue.open,
        overcommit=shortfalls(candidate.min_resources, headroom),
        quota=quota,
        limiting=limiting,
    )


def queue_admissions(
    queues: Iterable[OvercommitQueue],
    podgroups: Iterable[OvercommitPodGroup],
    headroom: Mapping[str, int],
) -> dict[str, QueueAdmission]:
    """``queue_admission`` for every queue, keyed and sorted by queue name."""
    by_queue: dict[str, list[OvercommitPodGroup]] = {}
    for podgroup in podgroups:
        by_queue.setdefault(podgroup.queue, []).append(podgroup)
    return {
        queue.name: queue_admission(queue, by_queue.get(queue.name, []), headroom)
        for queue in sorted(queues, key=lambda q: q.name)
    }
