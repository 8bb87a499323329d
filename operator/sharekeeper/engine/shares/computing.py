"""The share engine's entry point: a whole snapshot in, every queue's and policy's status out.

Steps (each policy is independent of the others):

1. governance: which policy owns which queues and nodes (the oldest of those that select one);
2. accounting: every queue's allocated, request, inqueue and elastic from the pod totals and
   PodGroups;
3. per policy: the dense problem over its queues (sorted by name) and dimensions, then the
   policy's deserved. The dimensions are the resource names its nodes offer and its queues'
   specs name, and every amount it publishes is kept to them: a pod asking for a made-up
   resource adds no column to any status or metric (``queue_dimensions``);
4. per queue: share and overused from deserved and allocated, plus reasons.

Deterministic: no clock or global random source; Random order derives from ``now_seconds`` and
``seed``. Complexity: O(PodGroups + N + D · Q log Q) per policy; no pod is visited. Step 1 and
each policy's rows that its queues' specs decide (``SpecReading``) depend on the policies,
queues, nodes and namespaces only: a caller's ``ShareMemo`` keeps them while those are equal,
and with them what a queue's unchanged pods and numbers made last call.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from sharekeeper.engine.resources import (
    NO_AMOUNTS,
    DenseRows,
    QueueRows,
    Vectors,
    capability_bounds,
    column_sums,
    dense,
    dense_again,
    dimensions,
    nonzero,
    sparse_rows,
    sum_amounts,
    within,
)
from sharekeeper.engine.shares.accounting import (
    NO_USAGE,
    Admits,
    KeptUsage,
    QueueUsage,
    bounded_usage,
    bounded_usages,
    namespace_admission,
    queue_usage,
    refusal,
)
from sharekeeper.engine.shares.capacity import capacity_deserved, capacity_tree
from sharekeeper.engine.shares.common import Floats, ShareProblem, SpecRows, dominant_shares
from sharekeeper.engine.shares.deciding import decided_by
from sharekeeper.engine.shares.governance import Governance, governance, withheld_message
from sharekeeper.engine.shares.guarantee_quota import guarantee_quota_deserved, random_order
from sharekeeper.engine.shares.proportion import proportion_deserved, proportion_tree
from sharekeeper.engine.shares.proportion_optimize import proportion_optimize_deserved
from sharekeeper.engine.shares.snapshot import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER_NAMES,
    PODS,
    PodTotals,
    PolicyName,
    PolicyShare,
    PolicySnapshot,
    QueueName,
    QueueShare,
    QueueSnapshot,
    Reason,
    ShareNode,
    ShareResult,
    ShareSnapshot,
    Sharing,
)
from sharekeeper.engine.shares.sources import shadowed
from sharekeeper.engine.shares.tree import (
    TREE_POLICIES,
    QueueTree,
    TreeRows,
    inner_pods,
    queue_tree,
    roll_up,
)


@dataclass(slots=True)
class _PolicyCarry:
    """What one policy's last call made over its ``_PolicySpecs``, for the next call."""

    usage_rows: dict[str, DenseRows] = field(default_factory=dict)
    """The dense ``allocated`` and ``request`` over the policy's rows, for the next call to read
    again only the queues whose amounts are new objects (``dense_again``)."""
    made: _Made | None = None
    covered: Sequence[QueueUsage] = ()
    """The last call's usages, when none held a name beyond the policy's dimensions
    (``bounded_usages``)."""
    index: tuple[tuple[QueueName, ...], dict[str, int]] | None = None
    """The rows' queues and each one's row (``index_of``)."""

    def index_of(self, queues: tuple[QueueName, ...]) -> dict[str, int]:
        """Each of ``queues``' row: made again only for another tuple of queues."""
        if self.index is None or self.index[0] is not queues:
            self.index = (queues, {queue: row for row, queue in enumerate(queues)})
        return self.index[1]


@dataclass(frozen=True, slots=True)
class _Made:
    """One call's inputs of each row's ``QueueShare`` that are not the specs', and the results
    (rows as in the policy's ``SpecRows``). A row whose inputs are all as they were last call
    (the same usage object, equal numbers) keeps its result: after most pod events, all rows
    but their queue's (a pod event that moves a water level moves most rows' numbers)."""

    deserved: Vectors
    real: Vectors
    shares: Floats
    overused: npt.NDArray[np.bool_]
    published: Sequence[QueueUsage]
    decided: Sequence[Mapping[str, str]]
    reasons: tuple[Reason, ...]
    results: list[QueueShare]

    def rows_to_make(self, last: _Made | None, inner: Sequence[int]) -> list[int] | None:
        """The rows whose results must be made again (None: all), given ``last`` call's;
        ``inner``: the rows of inner queues, always made (their reasons read their own pods)."""
        if (
            last is None
            or last.reasons != self.reasons
            or len(last.published) != len(self.published)
        ):
            return None
        same = (
            (self.deserved == last.deserved).all(axis=1)
            & (self.real == last.real).all(axis=1)
            & (self.shares == last.shares)
            & (self.overused == last.overused)
        )
        same[list(inner)] = False
        rows = zip(
            same.tolist(), self.published, last.published, self.decided, last.decided, strict=True
        )
        return [
            row
            for row, (equal, entry, then, decided, before) in enumerate(rows)
            if not (equal and entry is then and (decided is before or decided == before))
        ]


@dataclass(frozen=True, slots=True)
class _PolicySpecs:
    """What one policy's part of a round reads from the specs and nodes alone."""

    policy: PolicySnapshot
    queues: list[QueueSnapshot]
    """The queues it governs, by name."""
    nodes: list[ShareNode]
    tree: QueueTree
    governed: list[QueueSnapshot]
    """``queues`` without those the tree leaves out."""
    nested: bool
    inner: frozenset[str]
    """The queues with a queue below them (none unless ``nested``)."""
    inner_rows: list[int]
    """Their rows in ``rows``."""
    allocatable: dict[str, int]
    kept: frozenset[str]
    """``PolicyShare.dimensions`` (``queue_dimensions``)."""
    rows: SpecRows
    tree_rows: tuple[TreeRows, Vectors] | None
    """When ``nested``: the rows' tree, and each row's guarantee floor (``TreeRows.floors``)."""
    carried: _PolicyCarry = field(default_factory=_PolicyCarry)
    """What the last call over these specs made, for the next to reuse."""


@dataclass(frozen=True, slots=True)
class SpecReading:
    """What ``deserved_shares`` reads from a snapshot's policies, queues, nodes and namespaces
    alone: which policy governs what, each policy's queue tree and dense spec rows. At 10,000
    queues it is about a third of the call (governance, dimensions, the guarantee and
    capability rows), and most rounds follow pod events, which change none of it."""

    queues: dict[QueueName, QueueSnapshot]
    queue_owners: Governance
    node_owners: Governance
    admits: Admits
    managed: frozenset[str]
    """The schedulers whose pods that name no queue count in the default queue."""
    policies: tuple[_PolicySpecs, ...]
    """By policy name."""
    ungoverned: list[QueueSnapshot]
    """The queues no policy governs, by name."""
    ungoverned_kept: frozenset[str]
    kept_usage: KeptUsage = field(default_factory=dict)
    """The last call's queue usages that the next may take as they are (``queue_usage``):
    they hold for the queues and namespace admission of this reading only."""


class ShareMemo:
    """The last ``SpecReading``, for the next ``deserved_shares`` call to reuse while its
    snapshot's policies, queues, nodes and namespace labels are equal to the last ones (the
    operator's store hands on an unchanged object as the same one, so comparing them is
    mostly a check of identity: under a millisecond at 10,000 queues and 5,000 nodes). With
    the reading go the last call's queue usages, dense usage rows and results, which the next
    reuses for the queues whose ledger buckets are the same objects (``queue_usage``,
    ``dense_again``) and whose numbers are equal (``_Made``). When only queues' weights,
    states or ``reclaimable`` changed (a weight change is the commonest edit of a queue), the
    reading is kept with those queues' weight rows made again (``_edited``): at 10,000 queues
    a new reading costs ~20 ms, and the usages and usage rows it would drop ~40 ms more."""

    def __init__(self) -> None:
        self._last: tuple[_SpecSources, SpecReading] | None = None
        """The last snapshot's sources and the reading made of them."""

    def reading(self, snapshot: ShareSnapshot) -> SpecReading:
        sources = _spec_sources(snapshot)
        if self._last is None:
            reading = spec_reading(snapshot)
        else:
            last_sources, reading = self._last
            if last_sources != sources:
                reading = _edited(reading, last_sources, sources) or spec_reading(snapshot)
        self._last = sources, reading
        return reading


_SpecSources = tuple[
    tuple[PolicySnapshot, ...],
    tuple[QueueSnapshot, ...],
    tuple[ShareNode, ...],
    Mapping[str, Mapping[str, str]],
]
"""What a ``SpecReading`` is read from."""


def _spec_sources(snapshot: ShareSnapshot) -> _SpecSources:
    return (snapshot.policies, snapshot.queues, snapshot.nodes, snapshot.namespace_labels)


def _edited(reading: SpecReading, last: _SpecSources, now: _SpecSources) -> SpecReading | None:
    """``reading`` (read from ``last``) as read from ``now``, when the two differ only in some
    queues' weight, state or ``reclaimable`` (None otherwise): those queues' snapshots and
    weight rows replaced, the rest, with what the last calls carried, the same. A weight enters
    nothing but the weight rows, a state nothing but the queue's result (so a policy with a
    queue whose state changed makes its results again), ``reclaimable`` nothing here.
    O(queues) identity checks, O(queues of a policy) for each policy with a change."""
    if now[0] != last[0] or now[2] != last[2] or now[3] != last[3] or len(now[1]) != len(last[1]):
        return None
    changed: dict[QueueName, QueueSnapshot] = {}
    restated: set[QueueName] = set()
    for before, after in zip(last[1], now[1], strict=True):
        if before is not after and before != after:
            kept = replace(
                after, weight=before.weight, state=before.state, reclaimable=before.reclaimable
            )
            if kept != before:
                return None  # more than these changed
            changed[after.name] = after
            if after.state != before.state:
                restated.add(after.name)
    if not changed:
        return None
    policies = []
    for specs in reading.policies:
        if not any(queue.name in changed for queue in specs.queues):
            policies.append(specs)
            continue
        rows, carried = specs.rows, specs.carried
        weights = rows.weights.copy()
        for row, name in enumerate(rows.queues):
            if name in changed:
                weights[row] = changed[name].weight
        weights.setflags(write=False)
        if any(queue.name in restated for queue in specs.queues):
            carried = _PolicyCarry(usage_rows=carried.usage_rows, covered=carried.covered)
        policies.append(
            replace(
                specs,
                queues=[changed.get(queue.name, queue) for queue in specs.queues],
                governed=[changed.get(queue.name, queue) for queue in specs.governed],
                rows=replace(rows, weights=weights),
                carried=carried,
            )
        )
    return replace(
        reading,
        queues={**reading.queues, **changed},
        policies=tuple(policies),
        ungoverned=[changed.get(queue.name, queue) for queue in reading.ungoverned],
    )


def spec_reading(snapshot: ShareSnapshot) -> SpecReading:
    queues = {queue.name: queue for queue in snapshot.queues}
    queue_owners = governance(
        snapshot.policies, {name: queue.labels for name, queue in queues.items()}, "queue"
    )
    node_owners = governance(
        snapshot.policies, {node.name: node.labels for node in snapshot.nodes}, "node"
    )
    by_name = {policy.name: policy for policy in snapshot.policies}
    default_owner = by_name.get(queue_owners.owner.get(DEFAULT_QUEUE, PolicyName("")))
    managed = default_owner.sharing.scheduler_names if default_owner else DEFAULT_SCHEDULER_NAMES
    sorted_names = sorted(queues)
    policies = []
    for policy in sorted(snapshot.policies, key=lambda policy: policy.name):
        governed = [
            queues[name] for name in sorted_names if queue_owners.owner.get(name) == policy.name
        ]
        nodes = [node for node in snapshot.nodes if node_owners.owner.get(node.name) == policy.name]
        policies.append(_policy_specs(policy, governed, nodes, queue_owners.owner.get, queues))
    ungoverned = [queues[name] for name in sorted_names if name not in queue_owners.owner]
    return SpecReading(
        queues=queues,
        queue_owners=queue_owners,
        node_owners=node_owners,
        admits=namespace_admission(snapshot.queues, snapshot.namespace_labels),
        managed=frozenset(managed),
        policies=tuple(policies),
        ungoverned=ungoverned,
        ungoverned_kept=queue_dimensions((node.allocatable for node in snapshot.nodes), ungoverned)
        if ungoverned
        else frozenset(),
    )


def _policy_specs(
    policy: PolicySnapshot,
    queues: list[QueueSnapshot],
    nodes: list[ShareNode],
    owner_of: Callable[[str], PolicyName | None],
    exists: Container[str],
) -> _PolicySpecs:
    tree = queue_tree({queue.name: queue.parent for queue in queues}, owner_of, exists)
    governed = [queue for queue in queues if queue.name not in tree.left_out]
    nested = tree.nested and policy.sharing.policy in TREE_POLICIES
    allocatable = sum_amounts(node.allocatable for node in nodes)
    rows = spec_rows(policy, governed, allocatable)
    tree_rows = None
    if nested:
        by_row = TreeRows.of(tree, rows.queues)
        floors = by_row.floors(rows.guarantee)
        for array in (by_row.parent, *by_row.levels, floors):
            array.setflags(write=False)
        tree_rows = (by_row, floors)
    inner = frozenset(p for p in tree.parent.values() if p is not None and nested)
    return _PolicySpecs(
        policy=policy,
        queues=queues,
        nodes=nodes,
        tree=tree,
        governed=governed,
        nested=nested,
        inner=inner,
        inner_rows=[row for row, name in enumerate(rows.queues) if name in inner],
        allocatable=allocatable,
        kept=queue_dimensions((allocatable,), queues),
        rows=rows,
        tree_rows=tree_rows,
    )


def deserved_shares(snapshot: ShareSnapshot, memo: ShareMemo | None = None) -> ShareResult:
    """``memo``: what the caller's last call read from the specs, reused where it still holds
    (``ShareMemo``); the result is the same with or without it."""
    # 1. Governance, and each policy's queues, tree and spec rows.
    reading = memo.reading(snapshot) if memo is not None else spec_reading(snapshot)
    queues = reading.queues
    # 2. Accounting.
    accounting = queue_usage(
        queues, snapshot.totals, snapshot.groups, reading.admits, reading.managed.__contains__,
        kept=reading.kept_usage,
    )  # fmt: skip
    results: dict[QueueName, QueueShare] = {}
    policies: dict[PolicyName, PolicyShare] = {}
    # 3. Per policy.
    for specs in reading.policies:
        policy = specs.policy
        shares, summary = _policy_shares(snapshot, specs, accounting.usage)
        withheld_queues = reading.queue_owners.withheld.get(policy.name, {})
        withheld_nodes = reading.node_owners.withheld.get(policy.name, {})
        if withheld_queues or withheld_nodes:
            overlapping = Reason("Overlapping", withheld_message(withheld_queues, withheld_nodes))
            summary = replace(summary, reasons=(*summary.reasons, overlapping))
        policies[policy.name] = summary
        results.update(shares)
    # 4. Queues no policy selects: their dimensions are what any node offers, and what the
    #    specs of such queues name.
    no_policy = Reason("NoPolicy", "no SchedulerPolicy selects this queue")
    if reading.ungoverned:
        entries = [accounting.usage.get(queue.name, NO_USAGE) for queue in reading.ungoverned]
        usages = bounded_usages(entries, reading.ungoverned_kept)
        for queue, usage in zip(reading.ungoverned, usages, strict=True):
            results[queue.name] = _ungoverned(queue, usage, no_policy)
    for name, counts in accounting.refused.items():
        results[name] = replace(results[name], reasons=(*results[name].reasons, refusal(counts)))
    for name, shadow in shadowed(queues, snapshot.volcano_queues).items():
        results[name] = replace(results[name], reasons=(*results[name].reasons, shadow))
    return ShareResult(
        queues=results,
        policies=policies,
        reasons=accounting.reasons,
        refused=accounting.refused,
        unknown=accounting.unknown,
    )


def unmanaged_on(
    policy: PolicySnapshot, nodes: Sequence[ShareNode], totals: PodTotals
) -> dict[str, int]:
    """What the bound pods that name no queue, of schedulers the policy does not manage, hold
    on its nodes (with one ``pods`` each). O(schedulers + nodes with such pods)."""
    names = {node.name for node in nodes}
    managed = policy.sharing.scheduler_names
    return sum_amounts(
        amounts
        for scheduler, by_node in totals.unnamed_bound.items()
        if scheduler not in managed
        for node, amounts in by_node.items()
        if node in names
    )


def queue_dimensions(
    offered: Iterable[Iterable[str]], queues: Iterable[QueueSnapshot]
) -> frozenset[str]:
    """The resource names a policy's amounts are kept in (``PolicyShare.dimensions``): those
    its nodes offer (``offered``: their allocatable), those its queues' specs name, and
    ``pods``. Pods never add one: what a tenant writes in a pod cannot widen every queue's
    status or the metrics. O(nodes x dimensions + queues x spec dimensions)."""
    names = {PODS}
    for resources in offered:
        names.update(resources)
    for queue in queues:
        names.update(queue.capability)
        names.update(queue.guarantee)
        names.update(queue.deserved)
    return frozenset(names)


def spec_rows(
    policy: PolicySnapshot, governed: Sequence[QueueSnapshot], allocatable: Mapping[str, int]
) -> SpecRows:
    """The rows of ``governed`` (sorted by name) that their specs decide, over the policy's
    dimensions: what its nodes offer (``allocatable``, summed) and its queues' specs name; a
    request for anything else is no column."""
    ignore_guarantees = _ignores_guarantees(policy.sharing)
    guarantees = [{} if ignore_guarantees else queue.guarantee for queue in governed]
    capabilities = [queue.capability for queue in governed]
    names = dimensions(
        [allocatable, *guarantees, *capabilities] + [queue.deserved for queue in governed]
    )
    if PODS not in allocatable:
        # Nodes that do not say how many pods they run (written by hand: the kubelet always
        # says) leave the count of pods out of the sharing rather than make every queue overused.
        names = tuple(name for name in names if name != PODS)
    rows = SpecRows(
        queues=tuple(queue.name for queue in governed),
        dimensions=names,
        weights=np.array([queue.weight for queue in governed], dtype=np.int64),
        guarantee=dense(guarantees, names),
        capability=capability_bounds(capabilities, names),
        # Only Capacity reads spec.deserved (its dimensions still show in every policy's).
        spec_deserved=dense([queue.deserved for queue in governed], names)
        if policy.sharing.policy == "Capacity"
        else np.zeros((len(governed), len(names)), dtype=np.int64),
    )
    for array in (rows.weights, rows.guarantee, rows.capability, rows.spec_deserved):
        array.setflags(write=False)
    return rows


def share_problem(
    rows: SpecRows,
    allocatable: Mapping[str, int],
    usage: Mapping[QueueName, QueueUsage],
    reserved: Mapping[str, int] | None = None,
    *,
    last: dict[str, DenseRows] | None = None,
) -> ShareProblem:
    """The dense problem of one policy: its ``rows``, what its queues hold and ask for
    (``usage``), and its nodes' total (``allocatable``) less ``reserved`` (never below 0).
    ``last``: the last call's usage rows over the same ``rows`` (``dense_again``; updated)."""
    total = dict(allocatable)
    if reserved:
        total = {name: max(amount - reserved.get(name, 0), 0) for name, amount in total.items()}
    names = rows.dimensions
    used = [usage.get(name, NO_USAGE) for name in rows.queues]
    kept = last if last is not None else {}
    allocated = kept["allocated"] = dense_again(
        [entry.allocated for entry in used], names, kept.get("allocated")
    )
    request = kept["request"] = dense_again(
        [entry.request for entry in used], names, kept.get("request")
    )
    return ShareProblem(
        rows, total=dense([total], names)[0], allocated=allocated[1], request=request[1]
    )


def policy_deserved(
    problem: ShareProblem, policy: PolicySnapshot, now_seconds: float, seed: int
) -> Vectors:
    """Every queue's deserved under ``policy``, rows as in ``problem``."""
    sharing = policy.sharing
    match sharing.policy:
        case "Proportion":
            return proportion_deserved(problem)
        case "Capacity":
            return capacity_deserved(problem)
        case "ProportionOptimize":
            return proportion_optimize_deserved(problem, sharing.priority_type)
        case "GuaranteeQuota":
            bucket = int(now_seconds // max(sharing.reshuffle_seconds, 1))
            order = random_order(problem.queues, policy.name, seed, bucket)
            return guarantee_quota_deserved(problem, sharing.elastic_order, order)


def _policy_shares(
    snapshot: ShareSnapshot, specs: _PolicySpecs, usage: Mapping[QueueName, QueueUsage]
) -> tuple[dict[QueueName, QueueShare], PolicyShare]:
    policy, queues, nodes, tree = specs.policy, specs.queues, specs.nodes, specs.tree
    governed, nested, kept = specs.governed, specs.nested, specs.kept
    sharing = policy.sharing
    ignore_elastic = sharing.policy == "ProportionOptimize" and not sharing.elastic_enable
    policy_reasons: tuple[Reason, ...] = ()
    if tree.nested and not nested:
        policy_reasons = (
            Reason(
                "TreeUnsupported",
                f"{sharing.policy} shares among all its queues as one level: spec.parent is not "
                f"read under it (only {' and '.join(TREE_POLICIES)} share over a tree)",
            ),
        )
    allocatable = specs.allocatable
    unmanaged = within(unmanaged_on(policy, nodes, snapshot.totals), kept)
    # Usage is kept to ``kept`` where it is published (``bounded_usages``): the dense problem
    # reads its own dimensions only, and sums do not mix names.
    rolled = roll_up(tree, usage) if nested else usage
    carry = specs.carried
    problem = share_problem(
        specs.rows, allocatable, rolled, unmanaged if sharing.reserve_unmanaged else None,
        last=carry.usage_rows,
    )  # fmt: skip
    names = problem.dimensions
    if specs.tree_rows is not None:
        tree_rows, floors = specs.tree_rows
        if sharing.policy == "Capacity":
            deserved, real = capacity_tree(problem, tree_rows)
        else:
            deserved, real = proportion_tree(problem, tree_rows)
        total_guarantee = column_sums(floors[tree_rows.levels[0]])
        reading = replace(problem, rows=replace(problem.rows, guarantee=floors))
        common_real = None
    else:
        deserved = policy_deserved(problem, policy, snapshot.now_seconds, snapshot.seed)
        real, total_guarantee, reading = problem.real_capability, problem.total_guarantee, problem
        common_real = problem.unguaranteed
    short = [
        n
        for n, g, t in zip(names, total_guarantee.tolist(), problem.total.tolist(), strict=True)
        if g > t
    ]
    reasons: tuple[Reason, ...] = ()
    if short:
        reasons = (
            Reason("GuaranteeUnsatisfiable", f"guarantees exceed the total in {', '.join(short)}"),
        )
    # 4. Share (best-effort Capacity queues count as fully served) and overuse, per row. A
    # count of pods is no share of the cluster: with it, a queue whose few pods all run would
    # read as fully served whatever cpu it holds. It still counts for overuse.
    shared = [index for index, name in enumerate(names) if name != PODS]
    shares = dominant_shares(problem.allocated[:, shared], deserved[:, shared])
    shares = np.where(np.isnan(shares), 1.0 if sharing.policy == "Capacity" else 0.0, shares)
    overused = np.asarray((problem.allocated > deserved).any(axis=1))
    entries = [rolled.get(queue.name, NO_USAGE) for queue in governed]
    published = bounded_usages(entries, kept, covered=carry.covered)
    carry.covered = entries if published is entries else ()
    decided = decided_by(reading, deserved, capacity=sharing.policy == "Capacity", real=real)
    for array in (deserved, real, shares, overused):
        array.setflags(write=False)  # kept for the next call's comparison
    last = carry.made
    made: list[QueueShare] = []
    now = _Made(deserved, real, shares, overused, published, decided, reasons, made)
    again = now.rows_to_make(last, specs.inner_rows)
    if again is None:
        rows: Sequence[int] = range(len(governed))
        deserved_rows, real_rows = deserved, real
        share_rows, overused_rows = shares, overused
    else:
        assert last is not None  # rows_to_make answers None without one
        made += last.results
        rows = again
        deserved_rows, real_rows = deserved[again], real[again]
        share_rows, overused_rows = shares[again], overused[again]
    inner = specs.inner
    ignore_guarantees = _ignores_guarantees(sharing)
    for row, queue_deserved, real_capability, share, is_overused in zip(
        rows,
        sparse_rows(deserved_rows, names),
        sparse_rows(real_rows, names, common=common_real),
        share_rows.tolist(),
        overused_rows.tolist(),
        strict=True,
    ):
        queue, entry = governed[row], published[row]
        queue_name = queue.name
        leaf = queue_name not in inner
        queue_reasons = reasons
        if not leaf and (own_pods := usage.get(queue_name, NO_USAGE).request.get(PODS, 0)):
            queue_reasons = (*reasons, inner_pods(own_pods))
        parent = tree.parent[queue_name] if nested else None
        # Positional, in the order of QueueShare's fields: keyword arguments cost twice as much
        # (about 7 ms a round at 10,000 queues).
        result = QueueShare(
            policy.name,
            queue.state,
            queue_deserved,
            NO_AMOUNTS if ignore_guarantees or not queue.guarantee else nonzero(queue.guarantee),
            real_capability,
            # allocated, request: sums of the pod totals, which hold no zeros: nothing to filter.
            entry.allocated,
            entry.request,
            entry.inqueue,
            NO_AMOUNTS if ignore_elastic else entry.elastic,
            share,
            is_overused,
            QueueName(parent) if parent is not None else None,
            leaf,
            decided[row],
            queue_reasons,
            entry.held,
            entry.admitted_pods,
        )
        if again is None:
            made.append(result)
        else:
            made[row] = result
    carry.made = now
    results: dict[QueueName, QueueShare] = dict(zip(specs.rows.queues, made, strict=True))
    for queue in queues:
        if queue.name in tree.left_out:
            reason = Reason("InvalidParent", tree.left_out[queue.name])
            results[queue.name] = replace(
                _ungoverned(queue, bounded_usage(usage.get(queue.name, NO_USAGE), kept), reason),
                policy=policy.name,
            )
    summary = PolicyShare(
        nodes=len(nodes),
        queues=len(queues),
        total=nonzero(sparse_rows(problem.total[np.newaxis, :], names)[0]),
        total_guarantee=nonzero(sparse_rows(total_guarantee[np.newaxis, :], names)[0]),
        reasons=(*reasons, *policy_reasons),
        unmanaged=nonzero(unmanaged),
        allocatable=nonzero(allocatable),
        offered=frozenset(allocatable),
        dimensions=kept,
        rows=QueueRows(
            specs.rows.queues, carry.index_of(specs.rows.queues), names, deserved, problem.allocated
        ),
    )
    return results, summary


def _ignores_guarantees(sharing: Sharing) -> bool:
    return sharing.policy == "ProportionOptimize" and not sharing.guarantee_enable


def _ungoverned(queue: QueueSnapshot, usage: QueueUsage, reason: Reason) -> QueueShare:
    return QueueShare(
        policy=None,
        state=queue.state,
        deserved={},
        guarantee=nonzero(queue.guarantee),
        real_capability={},
        allocated=nonzero(usage.allocated),
        request=nonzero(usage.request),
        inqueue=usage.inqueue,
        elastic=usage.elastic,
        share=0.0,
        overused=False,
        reasons=(reason,),
        held=usage.held,
        admitted_pods=usage.admitted_pods,
    )
