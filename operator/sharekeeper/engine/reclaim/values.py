"""What the reclaim engine reads and what it answers: small frozen values (``NotServed`` aside),
every field explicit.

No field has a default: what the API defaults (``reclaimable``, the ``after`` delay, the round
bound...) is decided once, by the API models, and the caller passes the values in force.
Amounts are sparse mappings in internal units (``engine.resources``): cpu millicores, memory
bytes, other resources milli-units, ``pods`` a count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.resources import Amounts, QueueRows, Shortfall

GroupKey = tuple[str, str]
"""A PodGroup's ``(namespace, name)``."""

PODS = "pods"
"""The dimension that counts pods: each pod takes one of its node's ``pods``; queues' shares
are never checked in it."""


# --- inputs ----------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueState:
    """One queue of the round, leaf or inner. Not frozen (see ``Running``): the operator makes
    up to one per queue of a policy each round (10,000 at the top size), and a frozen dataclass
    is built about five times slower. Not to be changed once made."""

    name: str
    policy: str
    """The SchedulerPolicy that governs it: a pod is reclaimed only for a queue of the same
    policy, and a reclaimer is placed only on that policy's nodes."""
    parent: str | None
    """The queue above it (None, or a name not among the inputs: the top of its tree)."""
    deserved: Amounts
    """A dimension it does not list is deserved 0."""
    allocated: Amounts
    """Σ requests of its bound pods (an inner queue: of its subtree's), leaving out pods that
    are terminating: a pod whose eviction was accepted is gone for the engine."""
    guarantee: Amounts
    reclaimable: bool
    """False: no pod of this queue, or of a queue below it, is evicted for a pod of a queue
    outside it."""


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    policy: str
    allocatable: Amounts
    """Without ``pods``, the node's pod count is not a limit."""
    used: Amounts
    """Σ requests of its bound, non-terminating pods (every pod, managed or not), and ``pods``:
    how many."""
    reserved: Amounts
    """What the node keeps idle beyond ``used`` (the proportional reservation for its idle
    accelerators); empty when it keeps nothing."""
    reserved_for: frozenset[str]
    """The resources ``reserved`` is kept for: a pod that requests one of them is not held to
    it."""


@dataclass(frozen=True, slots=True)
class Gang:
    """A PodGroup with running pods: it goes whole, or one by one only above ``min_member``."""

    namespace: str
    name: str
    running: int
    """Its pods bound and not terminating."""
    min_member: int


@dataclass(slots=True)
class Running:
    """A bound pod that might be evicted: the pods of overused queues (the caller's filter; a
    pod of another queue is accepted and spared with ``QueueNotOverused``).

    Not frozen, as ``Waiting``: the operator makes tens of thousands each round with reclaim
    on, and a frozen dataclass is built about twice as slowly (37,000 a round at the top size:
    about 6 % of the round). Not to be changed once made."""

    namespace: str
    name: str
    uid: str
    queue: str
    node: str
    request: Amounts
    """The effective request, without ``pods``."""
    priority: int
    """The effective priority (a system class counts only in kube-system)."""
    created_seconds: float
    protected: bool
    """kube-system, DaemonSet, mirror/static or system-critical pods: never evicted."""
    group: str | None
    """Its PodGroup, in its namespace (``ReclaimInputs.gangs`` says how many run)."""

    @property
    def key(self) -> PodKey:
        return PodKey(self.namespace, self.name)


@dataclass(slots=True)
class Waiting:
    """A pod that waits for room: a possible reclaimer. Not frozen (see ``Running``): up to
    every waiting pod is one, and its maker keeps it from round to round while the pod and what
    it was made from stay the same (nothing in it depends on the round). Not to be changed
    once made."""

    namespace: str
    name: str
    queue: str
    request: Amounts
    """The effective request, without ``pods``."""
    since: float
    """When it started waiting, in ``ReclaimInputs.now``'s seconds."""
    nodes: frozenset[str] | None
    """The nodes it could run on (node selector, affinity, taints: the caller's business);
    None: any node of its queue's policy."""
    group: str | None
    """Its PodGroup, in its namespace: the waiting pods of one PodGroup are served together or
    not at all (the admission gate releases a gang whole)."""

    @property
    def key(self) -> PodKey:
        return PodKey(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class ReclaimSettings:
    after_seconds: float
    """A pod reclaims only once it has waited this long."""
    max_evictions: int
    """At most this many pods are evicted in one round."""


@dataclass(frozen=True, slots=True)
class ReclaimInputs:
    queues: tuple[QueueState, ...]
    nodes: tuple[NodeState, ...]
    running: Mapping[str, tuple[Running, ...]]
    """The candidates by their queue (``Running.queue``), as the caller gathers them: the
    round reads them queue by queue (``running_by_queue`` groups a flat list)."""
    gangs: tuple[Gang, ...]
    """Every PodGroup a ``Running`` pod names; one not listed goes whole or not at all."""
    waiting: tuple[Waiting, ...]
    """In the admission order: reclaimers are served in it."""
    excluded: frozenset[PodKey]
    """Pods whose eviction was refused (a PodDisruptionBudget): never chosen, so the plan
    picks the next victim instead (``replan_inputs``)."""
    settings: ReclaimSettings
    now: float
    """The round's time: a pod has waited ``now`` - ``Waiting.since``."""
    rows: QueueRows | None = field(compare=False)
    """``queues``' deserved and allocated as dense rows, in ``queues``' order, when the caller
    has them so (the share engine's): the start check over every waiting pod reads them
    instead of the queues' mappings (``screening``). None: it reads the mappings. Left out of
    comparisons: they are ``queues``' numbers again."""


def running_by_queue(pods: Iterable[Running]) -> dict[str, tuple[Running, ...]]:
    """``pods`` by their queue, in the order each queue's first pod comes."""
    grouped: dict[str, list[Running]] = {}
    for pod in pods:
        grouped.setdefault(pod.queue, []).append(pod)
    return {queue: tuple(found) for queue, found in grouped.items()}


# --- outputs ---------------------------------------------------------------------------------


class NotServedReason(Enum):
    NOT_WAITED_LONG_ENOUGH = "NotWaitedLongEnough"
    ABOVE_SHARE = "AboveShare"
    """Its queue, or one above it, would exceed its deserved share in a dimension the pod
    requests."""
    NO_VICTIMS = "NoVictims"
    """Nothing that may be reclaimed frees a node for it."""
    ROUND_BOUND = "RoundBound"
    """The round's eviction bound is reached (or its victims would pass it): next round."""
    GANG_NOT_WHOLE = "GangNotWhole"
    """Another waiting pod of its PodGroup is not served this round (for its own reason), so
    none of the group is: room made for part of a gang would run none of it."""


class SpareReason(Enum):
    """Why a running pod is not evicted for a reclaimer."""

    PROTECTED = "Protected"
    EVICTION_REFUSED = "EvictionRefused"
    """Its eviction was refused (``ReclaimInputs.excluded``)."""
    OTHER_POLICY = "OtherPolicy"
    """Its queue or node is governed by another policy than the reclaimer's (or unknown)."""
    NOT_RECLAIMABLE = "NotReclaimable"
    """Its queue, or one above it below the queue it shares with the reclaimer, has
    ``reclaimable: false``."""
    QUEUE_NOT_OVERUSED = "QueueNotOverused"
    """Its queue's allocated exceeds its deserved in no dimension that matters (requested by
    the reclaimer and lacking on the pod's node)."""
    WOULD_GO_BELOW_DESERVED = "WouldGoBelowDeserved"
    """Its queue, or one above it (below the queue it shares with the reclaimer), would go
    below its deserved in a dimension that matters."""
    WOULD_GO_BELOW_GUARANTEE = "WouldGoBelowGuarantee"
    GANG_WHOLE = "GangWhole"
    """Its PodGroup is at ``minMember``: it goes only with all its pods, and they may not
    (one is spared) or are not needed."""
    NOT_NEEDED = "NotNeeded"
    """It may go, but the chosen victims suffice (or it frees nothing the reclaimer lacks)."""


@dataclass(frozen=True, slots=True)
class Overuse:
    """A victim's queue in one dimension it frees for the reclaimer, before its eviction."""

    dimension: str
    allocated: int
    deserved: int


@dataclass(frozen=True, slots=True)
class Victim:
    pod: PodKey
    uid: str
    queue: str
    node: str
    request: Amounts
    priority: int
    overuse: tuple[Overuse, ...]
    """Its queue's allocated and deserved in the dimensions that matter (requested by the
    reclaimer and lacking on the node) that it frees, as the round stood just before it."""
    gang: str | None
    """Set when it goes with its whole PodGroup (every pod of the group is in the plan)."""


@dataclass(frozen=True, slots=True)
class Spared:
    pod: PodKey
    reason: SpareReason


@dataclass(frozen=True, slots=True)
class Reclaim:
    """One reclaimer served: evict ``victims`` (in order), then it fits on ``node``."""

    reclaimer: PodKey
    queue: str
    node: str
    victims: tuple[Victim, ...]
    """Empty: it fits on ``node`` as the round left it, nothing to evict (it waits for the
    scheduler, or for something the engine does not see)."""
    frees: Amounts
    """Σ of the victims' requests, with ``pods``: their count."""
    spared: tuple[Spared, ...]
    """Pods of ``node`` ranked before the last victim (or never eligible) that stay, and why."""


@dataclass(slots=True)
class NotServed:
    """Why a waiting pod is not served this round. Not frozen, unlike the other values: a round
    makes one per waiting pod not served (thousands), and a frozen dataclass is built about four
    times slower. Not to be changed once planned."""

    reclaimer: PodKey
    queue: str
    reason: NotServedReason
    limiting: str | None
    """AboveShare: the queue whose deserved refuses (the pod's own, or one above it)."""
    shortfalls: tuple[Shortfall, ...]
    """AboveShare: requested vs deserved - allocated of ``limiting``, where it does not fit."""


class Waits:
    """Why each waiting pod that is not served waits, in admission order. A pod refused by its
    share as the round started (``AboveShare``, most of the waiting pods at the top size) is
    kept as the pod itself and its answer made when first read: the operator's round only
    counts the answers by reason (``counts``), and ``explain`` or ``simulate`` read a few."""

    __slots__ = ("_answer_at_start", "_entries", "_made")

    def __init__(
        self,
        entries: Sequence[NotServed | Waiting] = (),
        answer_at_start: Callable[[Waiting], NotServed] | None = None,
    ) -> None:
        self._entries = entries
        """A ``Waiting`` stands for its answer at the round's start (``answer_at_start``)."""
        self._answer_at_start = answer_at_start
        self._made: tuple[NotServed, ...] | None = None

    def answers(self) -> tuple[NotServed, ...]:
        if self._made is None:
            answer = self._answer_at_start
            made: list[NotServed] = []
            for entry in self._entries:
                if isinstance(entry, NotServed):
                    made.append(entry)
                else:
                    assert answer is not None, "a pod refused at the start needs its answer"
                    made.append(answer(entry))
            self._made = tuple(made)
            self._entries = ()
            self._answer_at_start = None  # what it read is no longer needed
        return self._made

    def counts(self) -> dict[NotServedReason, int]:
        """How many wait for each reason, without making an answer."""
        if self._made is not None:
            return Counter(answer.reason for answer in self._made)
        return Counter(
            entry.reason if isinstance(entry, NotServed) else NotServedReason.ABOVE_SHARE
            for entry in self._entries
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Waits) and self.answers() == other.answers()

    def __hash__(self) -> int:
        return hash(self.answers())

    def __repr__(self) -> str:
        return f"Waits({self.answers()!r})"


@dataclass(frozen=True, slots=True)
class ReclaimPlan:
    reclaims: tuple[Reclaim, ...]
    """In admission order (a PodGroup's waiting pods together, at its first one's place)."""
    waits: Waits
    """Why the others wait, in admission order likewise."""
    evictions: int
    """How many pods ``reclaims`` evict."""

    @property
    def not_served(self) -> tuple[NotServed, ...]:
        return self.waits.answers()

    def victims(self) -> Mapping[PodKey, PodKey]:
        """Victim -> the reclaimer it is evicted for."""
        return {v.pod: r.reclaimer for r in self.reclaims for v in r.victims}
