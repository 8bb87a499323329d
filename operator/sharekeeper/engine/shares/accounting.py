"""Per-queue usage: which pods belong to which queue, and what they hold and want.

Follows Volcano's session accounting (``reference/volcano.md`` §2, v1.15+):

- ``allocated`` = Σ requests of pods bound to a node and not terminal, plus ``pods``: one per
  pod (Volcano's ``GetPodResourceRequest`` adds it since 2023);
- ``request`` = ``allocated`` + Σ requests of unbound, non-terminal pods (one ``pods`` each);
- ``inqueue`` = per PodGroup in phase Inqueue (or Running with at least ``minMember`` pods
  allocated) that has ``minResources``: ``max(minResources - allocated, 0)`` minus what its
  scheduling-gated pods request, floored at 0;
- ``elastic`` = Σ per PodGroup of its allocation above ``minResources`` (all of it when the
  group has no ``minResources``). A pod without a PodGroup is its own job with
  ``minResources`` = its request, so it adds nothing to either.

Pod -> queue: label, then Volcano annotation, then its PodGroup's queue (``default`` when the
PodGroup names none). A pod that names none of them counts in ``default`` only when its
``spec.schedulerName`` is one of the scheduler names of the policy that governs ``default``
(Volcano charges a queue only for its own jobs); every other such pod is unmanaged: charged to
no queue, and reported (and by default reserved) by the policy of the node it is bound to.
A queue is charged only for pods of the namespaces its ``namespaces`` selector admits (Kueue's
LocalQueue idea, simply): a pod of another namespace that names it is charged to no queue and
reported on the queue (``NamespaceNotAdmitted``), so no tenant can spend another team's queue.
``pod_claim`` is the part of that rule that depends on the pod alone (the running totals are
kept by it); ``queue_usage`` resolves the rest per round. Complexity: linear in (queue name,
namespace) pairs + PodGroups; no pod is visited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal

from sharekeeper.engine.resources import (
    NO_AMOUNTS,
    Amounts,
    add,
    exceeded_part,
    inqueue_reservation,
    nonzero,
    within,
)
from sharekeeper.engine.selectors import NAMESPACE_NAME_LABEL
from sharekeeper.engine.shares.snapshot import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER_NAMES,
    Charges,
    GroupKey,
    GroupPods,
    PodGroupSnapshot,
    PodSnapshot,
    PodTotals,
    QueueName,
    QueueSnapshot,
    Reason,
    group_queue,
)

Claim = (
    tuple[Literal["named"], str] | tuple[Literal["grouped"], GroupKey] | tuple[Literal["unnamed"]]
)


def pod_claim(pod: PodSnapshot) -> Claim:
    """Where a pod's charges are totalled: the queue it names, else its PodGroup, else none."""
    named = pod.queue_label or pod.queue_annotation
    if named:
        return ("named", named)
    if pod.group_name:
        return ("grouped", (pod.namespace, pod.group_name))
    return ("unnamed",)


@dataclass(slots=True)
class QueueUsage:
    allocated: Amounts = field(default_factory=dict)
    """Possibly a ``Charges``' own mapping: never changed, replaced by a sum (``add``)."""
    request: Amounts = field(default_factory=dict)
    inqueue: Amounts = field(default_factory=dict)
    elastic: Amounts = field(default_factory=dict)
    held: Amounts = field(default_factory=dict)
    """What the admission gate holds back, plus ``pods``: how many pods it holds."""
    admitted_pods: int = 0


NO_USAGE = QueueUsage()
"""What a queue without pods or PodGroups uses; shared, so never mutated."""


def bounded_usage(entry: QueueUsage, names: frozenset[str]) -> QueueUsage:
    """``entry`` on the resource names ``names`` only (a policy's dimensions): what its pods
    ask for beyond them is no dimension of the queue. The same object when nothing is left
    out, the common case. O(dimensions of ``entry``); no pod is visited."""
    # Spelled out: at 10,000 queues a round, a loop over the parts costs more than the check;
    # and issuperset: ``keys() <=`` looks each name up the generic way, 1.5 times as slow.
    covers = names.issuperset
    if (
        covers(entry.request)
        and covers(entry.allocated)
        and (not entry.held or covers(entry.held))
        and (not entry.inqueue or covers(entry.inqueue))
        and (not entry.elastic or covers(entry.elastic))
    ):
        return entry
    parts = (entry.allocated, entry.request, entry.inqueue, entry.elastic, entry.held)
    allocated, request, inqueue, elastic, held = (within(part, names) for part in parts)
    return QueueUsage(allocated, request, inqueue, elastic, held, entry.admitted_pods)


_PARTS = tuple(attrgetter(part) for part in ("allocated", "request"))
_SPARSE_PARTS = tuple(attrgetter(part) for part in ("inqueue", "elastic", "held"))
"""Most queues hold none of these: only the entries that do are read."""


def bounded_usages(
    entries: Sequence[QueueUsage],
    names: frozenset[str],
    *,
    covered: Sequence[QueueUsage] = (),
) -> Sequence[QueueUsage]:
    """``bounded_usage`` of each entry; ``entries`` itself when none holds a name beyond
    ``names`` (the common case). That is found from every entry's names gathered at once:
    checked entry by entry, ``frozenset.issuperset`` makes a set of each mapping it is given
    (before Python 3.12), two or more a queue. ``covered``: entries a last call found to hold
    nothing beyond the same ``names``, in the same order; those of ``entries`` that are the
    very same objects are not read again (a usage is never changed once made)."""
    if len(covered) == len(entries):
        pairs = zip(entries, covered, strict=True)
        entries_read: Sequence[QueueUsage] = [entry for entry, then in pairs if entry is not then]
    else:
        entries_read = entries
    held: set[str] = set()
    for part in _PARTS:
        held.update(*map(part, entries_read))
    for part in _SPARSE_PARTS:
        held.update(*filter(None, map(part, entries_read)))
    if names.issuperset(held):
        return entries
    return [bounded_usage(entry, names) for entry in entries]


@dataclass(frozen=True, slots=True)
class Accounting:
    usage: Mapping[QueueName, QueueUsage]
    """Only the queues that use something: look up with ``usage.get(name, NO_USAGE)``."""
    reasons: tuple[Reason, ...]
    refused: Mapping[QueueName, Mapping[str, int]] = field(default_factory=dict)
    """Queue -> namespace it does not admit -> how many of its pods name the queue anyway
    (those pods are charged to no queue)."""
    unknown: Mapping[str, int] = field(default_factory=dict)
    """Queue that does not exist -> how many pods name it (charged to no queue)."""


Admits = Callable[[QueueName, str], bool]
"""Whether a queue admits pods of a namespace."""
Manages = Callable[[str], bool]
"""Whether pods of a scheduler that name no queue count in the default queue."""


def admit_all(queue: QueueName, namespace: str) -> bool:
    return True


def namespace_admission(
    queues: Iterable[QueueSnapshot], namespace_labels: Mapping[str, Mapping[str, str]]
) -> Admits:
    """The queues' ``namespaces`` selectors over the namespaces' labels (a namespace the caller
    knows nothing of still has its name, as the API server labels every namespace)."""
    selectors = {queue.name: queue.namespaces for queue in queues if not queue.namespaces.empty}
    if not selectors:
        return admit_all
    seen: dict[tuple[QueueName, str], bool] = {}

    def admits(queue: QueueName, namespace: str) -> bool:
        selector = selectors.get(queue)
        if selector is None:
            return True
        key = (queue, namespace)
        if key not in seen:
            labels = {NAMESPACE_NAME_LABEL: namespace, **namespace_labels.get(namespace, {})}
            seen[key] = selector.matches(labels)
        return seen[key]

    return admits


KeptUsage = dict[str, tuple[Charges, str, QueueUsage]]
"""Per queue whose usage came from one bucket of pods that name it and nothing else: that
bucket's charges, its namespace and the usage made of them (``queue_usage``'s ``kept``)."""


def queue_usage(
    queues: Iterable[QueueName],
    totals: PodTotals,
    groups: Mapping[GroupKey, PodGroupSnapshot],
    admits: Admits = admit_all,
    manages: Manages = DEFAULT_SCHEDULER_NAMES.__contains__,
    *,
    kept: KeptUsage | None = None,
) -> Accounting:
    """``kept``: the single-bucket usages of the last call with the same ``queues`` and
    ``admits`` (then replaced by this call's). Such a queue's usage is the very same object
    while the ledger hands on its bucket as the same ``Charges`` (it does until one of its pods
    changes): at 10,000 queues, making every queue's usage again was about a third of a round's
    share computation. One that something else is charged to this call (a PodGroup, pods that
    name no queue) is copied first and no longer single. So a usage is never changed once a
    call has returned it: the next call may take a queue's result as it was while its usage is
    the same object (``computing``)."""
    known = set(queues)
    usage: dict[QueueName, QueueUsage] = {}
    unknown: dict[str, int] = {}
    refused: dict[QueueName, dict[str, int]] = {}
    last = kept if kept is not None else {}
    single: KeptUsage = {}

    def own(name: QueueName, entry: QueueUsage) -> QueueUsage:
        """``entry``, to be charged more: no longer single, and a copy when it was (it may be
        the last call's, which its results were made from)."""
        if single.pop(name, None) is None:
            return entry
        entry = usage[name] = QueueUsage(
            entry.allocated, entry.request, entry.inqueue, entry.elastic, entry.held,
            entry.admitted_pods,
        )  # fmt: skip
        return entry

    def entry_of(queue: str) -> QueueUsage | None:
        name = QueueName(queue)
        if name not in known:
            return None
        entry = usage.get(name)
        if entry is None:
            entry = usage[name] = QueueUsage()
        return own(name, entry)

    def charge(queue: str | None, namespace: str, charges: Charges, named: bool) -> None:
        if queue is None:
            return
        name = QueueName(queue)
        if name not in known:
            unknown[queue] = unknown.get(queue, 0) + charges.pods
            return
        if not admits(name, namespace):
            if named:  # a pod that names no queue asked for nothing: nothing to report
                per_namespace = refused.setdefault(name, {})
                per_namespace[namespace] = per_namespace.get(namespace, 0) + charges.pods
            return
        entry = usage.get(name)
        if entry is None:
            # The common case, one source of charges per queue: its sums as they are (pods
            # counted in), not copied; a second source replaces them with sums.
            usage[name] = QueueUsage(
                charges.allocated,
                charges.request,
                NO_AMOUNTS,
                NO_AMOUNTS,
                charges.held or NO_AMOUNTS,
                charges.admitted_pods,
            )
            return
        entry = own(name, entry)
        entry.request = add(entry.request, charges.request)
        entry.allocated = add(entry.allocated, charges.allocated)
        if charges.held:
            entry.held = add(entry.held, charges.held)
        entry.admitted_pods += charges.admitted_pods

    default = DEFAULT_QUEUE if DEFAULT_QUEUE in known else None
    # 1. Pods: allocated and request, by what they name.
    for queue, by_namespace in totals.named.items():
        if len(by_namespace) == 1:
            ((namespace, charges),) = by_namespace.items()
            before = last.get(queue)
            if before is not None and before[0] is charges and before[1] == namespace:
                usage[QueueName(queue)] = before[2]
                single[queue] = before
                continue
            charge(queue, namespace, charges, True)
            if (entry := usage.get(QueueName(queue))) is not None:
                single[queue] = (charges, namespace, entry)
            continue
        for namespace, charges in by_namespace.items():
            charge(queue, namespace, charges, True)
    for key, charges in totals.grouped.items():
        group = groups.get(key)
        named = group.queue if group is not None else None
        charge(named or default, key[0], charges, bool(named))
    for scheduler, by_namespace in totals.unnamed.items():
        if manages(scheduler):
            for namespace, charges in by_namespace.items():
                charge(default, namespace, charges, False)
    # 2. PodGroups: inqueue and elastic, charged to the PodGroup's own queue.
    for key, group in sorted(groups.items()):
        queue = group_queue(group)
        entry = entry_of(queue) if admits(queue, group.namespace) else None
        if entry is None:
            continue
        members = totals.groups.get(key, GroupPods())
        entry.elastic = add(
            entry.elastic, exceeded_part(members.allocated, group.min_resources or {})
        )
        if group.min_resources is not None and _reserves(group, members.allocated_pods):
            reserved = inqueue_reservation(group.min_resources, members.allocated)
            entry.inqueue = add(entry.inqueue, exceeded_part(reserved, members.gated))
    for entry in usage.values():
        if entry.inqueue:
            entry.inqueue = nonzero(entry.inqueue)
        if entry.elastic:
            entry.elastic = nonzero(entry.elastic)
    reasons = tuple(
        Reason("UnknownQueue", f"{count} pod{' names' if count == 1 else 's name'} queue {queue!r}")
        for queue, count in sorted(unknown.items())
    )
    if kept is not None:
        kept.clear()
        kept.update(single)
    return Accounting(usage, reasons, refused, unknown)


def refusal(counts: Mapping[str, int]) -> Reason:
    """The queue's reason for pods it does not admit: how many, from where."""
    pods = sum(counts.values())
    where = ", ".join(sorted(counts)[:5]) + (" and more" if len(counts) > 5 else "")
    return Reason(
        "NamespaceNotAdmitted",
        f"{pods} pod{'' if pods == 1 else 's'} in namespace{'' if len(counts) == 1 else 's'} "
        f"{where} name{'s' if pods == 1 else ''} this queue, whose spec.namespaces does not admit "
        "them; they are charged to no queue",
    )


def _reserves(group: PodGroupSnapshot, allocated_pods: int) -> bool:
    if group.phase == "Inqueue":
        return True
    return group.phase == "Running" and allocated_pods >= group.min_member
