"""Queue and SchedulerPolicy status, as the dicts that become ``.status``, conditions included:
rendered from the results of one share round, which ``shares.publication`` computes once.
``publish.statuses`` diffs them against what the objects hold, and stamps ``observedGeneration``
and the conditions' times.

Here too is why a held pod waits (its Event, and ``simulate``'s admission section): it says a
shortfall in the words of the ``Enqueueable`` condition. The models these dicts must fit are in
``api`` (``QueueStatus``, ``SchedulerPolicyStatus``); a test reads every rendered status
through them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from sharekeeper.api.queue import MAX_NOT_BOUND_LISTED
from sharekeeper.engine.admission import AdmissionResult
from sharekeeper.engine.gates import GateDecisions, NotBound, Waiting
from sharekeeper.engine.overcommit import (
    OvercommitResult,
    QueueAdmission,
    factor_number,
)
from sharekeeper.engine.resources import UNLIMITED, Shortfall
from sharekeeper.engine.shares import PolicyShare, QueueShare, ShareResult
from sharekeeper.engine.shares.snapshot import PODS, PolicyName, QueueName
from sharekeeper.model.conditions import condition
from sharekeeper.model.documents import one_line
from sharekeeper.model.objects import MutableObj, rfc3339
from sharekeeper.model.quantities import format_resources, to_quantity
from sharekeeper.pipeline.reclaiming import PolicyReclaim

_QueueInputs = tuple[QueueShare, tuple[str, ...], QueueAdmission | None]
"""All a queue's status is rendered from: its share, its released pods past their bind timeout,
and the verdict on its next PodGroup (None: none pending)."""


class RenderedQueues:
    """The last round's Queue statuses and what each was rendered from. At 10,000 queues,
    rendering them all was about a fifth of a settled round, and from one round to the next
    most queues' inputs do not change: those keep their status, the very same object, which
    also lets the publisher skip their diff (``publish.diffing.Unchanged``). Comparing the
    inputs costs a tenth of rendering them. The statuses handed on are never changed
    afterwards (their readers copy them)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[_QueueInputs, MutableObj]] = {}


def queue_statuses(
    shares: ShareResult,
    facts: AdmissionResult,
    gates: GateDecisions,
    rendered: RenderedQueues | None = None,
    *,
    only: Collection[str] | None = None,
) -> dict[str, MutableObj]:
    """Queue name -> status; a queue whose PodGroup waits to be enqueued says why
    (``Enqueueable``); the released pods past their bind timeout are counted in their queue.
    ``rendered``: the last round's, reused where the inputs are equal, and updated; ``only``:
    these queues alone (those of them the engines have a result for)."""
    not_bound = not_bound_by_queue(gates)
    last = rendered.last if rendered is not None else {}
    now: dict[str, tuple[_QueueInputs, MutableObj]] = {}
    queues = {}
    chosen = sorted(
        shares.queues.items()
        if only is None
        else ((n, shares.queues[n]) for n in map(QueueName, only) if n in shares.queues)
    )
    for name, share in chosen:
        verdict = facts.queues.get(name)
        inputs = (
            share,
            tuple(not_bound.get(name, ())),
            verdict if verdict is not None and verdict.podgroup is not None else None,
        )
        before = last.get(name)
        if before is None:
            status = _rendered_queue(*inputs)
        elif before[0] == inputs:
            status = before[1]
        else:
            status = _rendered_queue(*inputs, last=(before[0][0], before[1]))
        now[name] = (inputs, status)
        queues[str(name)] = status
    if rendered is not None:
        rendered.last = now
    return queues


def _rendered_queue(
    share: QueueShare,
    stuck: tuple[str, ...],
    verdict: QueueAdmission | None,
    *,
    last: tuple[QueueShare, MutableObj] | None = None,
) -> MutableObj:
    status = queue_status(share, last)
    status["notBound"] = len(stuck)
    if stuck:
        status["notBoundPods"] = list(stuck[:MAX_NOT_BOUND_LISTED])
    if verdict is not None:
        status["conditions"].append(enqueueable(verdict))
    return status


def not_bound_by_queue(gates: GateDecisions) -> dict[QueueName, list[str]]:
    """Per queue, its released pods past their bind timeout (``namespace/name``), released
    longest ago first."""
    by_queue: dict[QueueName, list[tuple[float, str]]] = {}
    for (namespace, name), stuck in gates.not_bound.items():
        entry = (stuck.admitted_seconds, f"{namespace}/{name}")
        by_queue.setdefault(stuck.queue, []).append(entry)
    return {queue: [pod for _, pod in sorted(found)] for queue, found in by_queue.items()}


def scheduler_policy_statuses(
    shares: ShareResult, facts: AdmissionResult, reclaims: Mapping[PolicyName, PolicyReclaim]
) -> dict[str, MutableObj]:
    """SchedulerPolicy name -> status: the shares, the overcommit of a policy that governs
    nodes, and the reclaim plan of a policy whose ``spec.reclaim.mode`` is not Off."""
    policies = {}
    for policy, policy_share in sorted(shares.policies.items()):
        status = policy_status(policy_share)
        if policy in facts.policies:
            status["overcommit"] = overcommit_section(facts.policies[policy])
        if policy in reclaims:
            status["reclaim"] = reclaim_section(reclaims[policy])
        policies[str(policy)] = status
    return policies


# --- Queue --------------------------------------------------------------------------------------

# Conditions a queue always carries: False (with the reason below) while they do not hold, so a
# person sees them clear rather than vanish.
_QUEUE_CLEAR = {
    "NoPolicy": ("Governed", "a SchedulerPolicy selects this queue"),
    "GuaranteeUnsatisfiable": ("GuaranteesFit", "the guarantees fit in the policy's nodes"),
    "NamespaceNotAdmitted": (
        "NamespacesAdmitted",
        "every pod naming this queue is in a namespace its spec.namespaces admits",
    ),
    "VolcanoQueueShadowed": (
        "NotShadowing",
        "no Volcano Queue being mirrored has this queue's name, or this queue is its mirror",
    ),
    "InvalidParent": ("ParentValid", "the queue has its place in its policy's tree"),
    "PodsInInnerQueue": ("PodsInLeaves", "no pod names this queue while queues are below it"),
}


_CLEAR = {
    kind: condition(kind, False, reason, message)
    for kind, (reason, message) in _QUEUE_CLEAR.items()
}
_COMPUTED = condition("Ready", True, "Computed", "deserved computed")
_OVERUSED = {
    True: condition(
        "Overused", True, "AllocatedAboveDeserved", "allocated exceeds deserved in some resource"
    ),
    False: condition("Overused", False, "WithinDeserved", "allocated is within deserved"),
}
"""The conditions most queues carry, made once and shared by every status (never changed:
their readers copy them), instead of eight new ones per queue and round."""


def queue_status(
    result: QueueShare, last: tuple[QueueShare, MutableObj] | None = None
) -> MutableObj:
    """``QueueStatus`` as a dict (built directly: 10,000 queues a round), without
    ``observedGeneration`` and the conditions' times, which the publisher stamps. ``last``: the
    share this queue's status was rendered from last time, and that status: amounts equal to
    what they were keep their spelling, the same object (after a weight change every queue's
    deserved moves and its usage mostly does not)."""
    was, shown = last if last is not None else (None, _NOT_SHOWN)
    # No numbers: no policy governs the queue, or it has no place in its policy's tree.
    blocking = next((r for r in result.reasons if r.kind in ("NoPolicy", "InvalidParent")), None)
    conditions = [
        _COMPUTED
        if blocking is None
        else condition("Ready", False, blocking.kind, blocking.message),
        _OVERUSED[result.overused],
    ]
    if not result.reasons:  # most queues
        conditions += _CLEAR.values()
    else:
        reasons = sorted(result.reasons)
        for kind, cleared in _CLEAR.items():
            found = [r.message for r in reasons if r.kind == kind]
            conditions.append(condition(kind, True, kind, "; ".join(found)) if found else cleared)
    status: MutableObj = {"state": result.state}
    if result.policy is not None:
        status["policy"] = result.policy
    status |= {
        "deserved": _spelled(result, was, shown, "deserved"),
        "guarantee": _spelled(result, was, shown, "guarantee"),
        "realCapability": shown["realCapability"]
        if was is not None and was.real_capability == result.real_capability
        # A tree's root bounds nothing (Capacity): an unbounded dimension is left out.
        else format_resources(
            {name: amount for name, amount in result.real_capability.items() if amount < UNLIMITED}
        ),
        "allocated": _spelled(result, was, shown, "allocated"),
        "request": _spelled(result, was, shown, "request"),
        "inqueue": _spelled(result, was, shown, "inqueue"),
        "elastic": _spelled(result, was, shown, "elastic"),
        "decidedBy": shown["decidedBy"]
        if was is not None and was.decided_by == result.decided_by
        else dict(result.decided_by),
        "admitted": result.admitted_pods,
        "gated": result.held.get(PODS, 0),
        "share": share_text(result.share),
        "overused": result.overused,
        "conditions": conditions,
    }
    return status


_NOT_SHOWN: MutableObj = {}


def _spelled(result: QueueShare, was: QueueShare | None, shown: MutableObj, field: str) -> object:
    """The amounts ``field`` of ``result`` as a ResourceList: ``shown[field]`` when they equal
    those of ``was``, the share ``shown`` was rendered from."""
    amounts = getattr(result, field)
    return (
        shown[field]
        if was is not None and getattr(was, field) == amounts
        else format_resources(amounts)
    )


def share_text(share: float) -> str:
    """``"0.75"``: two decimals at most, trailing zeros dropped."""
    text = f"{share:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def enqueueable(verdict: QueueAdmission) -> MutableObj:
    """The answer to "why is my job not starting", as the queue's Enqueueable condition."""
    job = f"PodGroup {verdict.podgroup}"
    if verdict.admitted:
        return condition("Enqueueable", True, "Admissible", f"{job} would be admitted now")
    if verdict.closed:
        return condition("Enqueueable", False, "QueueClosed", f"{job} waits: the queue is Closed")
    if verdict.inner:
        return condition(
            "Enqueueable", False, "QueueNotLeaf",
            f"{job} waits: this queue has queues below it, and jobs belong in leaf queues",
        )  # fmt: skip
    if verdict.overcommit:
        return condition(
            "Enqueueable", False, "OvercommitHeadroomExceeded",
            f"{job} asks for more than the policy's overcommitted headroom: "
            + shortfall_text(verdict.overcommit),
        )  # fmt: skip
    where = "the queue's" if verdict.limiting is None else f"queue {verdict.limiting}'s"
    return condition(
        "Enqueueable", False, "CapabilityExceeded",
        f"{job} does not fit in {where} capability: " + shortfall_text(verdict.quota),
    )  # fmt: skip


# --- SchedulerPolicy ----------------------------------------------------------------------------

_POLICY_CLEAR = {
    "GuaranteeUnsatisfiable": ("GuaranteesFit", "the guarantees fit in the policy's nodes"),
    "TreeUnsupported": ("TreeRead", "every spec.parent of the policy's queues is read"),
    # Worded to hold for the older of two overlapping policies too: its status must not change.
    "Overlapping": (
        "KeepsAllSelected",
        "no older SchedulerPolicy keeps a queue or node this policy selects",
    ),
}
"""Conditions a policy always carries, False (with this reason) while they do not hold."""


def policy_status(result: PolicyShare) -> MutableObj:
    """The share part of ``SchedulerPolicyStatus``."""
    conditions = [condition("Ready", True, "Computed", "shares computed")]
    for kind, (reason, message) in _POLICY_CLEAR.items():
        found = [r.message for r in result.reasons if r.kind == kind]
        conditions.append(
            condition(kind, True, kind, "; ".join(found))
            if found
            else condition(kind, False, reason, message)
        )
    return {
        "nodes": result.nodes,
        "queues": result.queues,
        "total": format_resources(result.total),
        "totalGuarantee": format_resources(result.total_guarantee),
        "unmanaged": format_resources(result.unmanaged),
        "conditions": conditions,
    }


def overcommit_section(result: OvercommitResult) -> MutableObj:
    """``status.overcommit`` (``OvercommitStatus``) of a SchedulerPolicy."""
    return {
        "factors": {name: factor_number(f) for name, f in sorted(result.factors.items())},
        "overcommittedTotal": format_resources(result.overcommitted_total),
        "used": format_resources(result.used),
        "inqueue": format_resources(result.inqueue),
        "headroom": format_resources(result.headroom),
    }


MAX_LISTED_RECLAIMS = 50
"""Reclaimers listed in ``status.reclaim.reclaims``; ``evictions`` and the counts cover all."""


def reclaim_section(round_: PolicyReclaim) -> MutableObj:
    """``status.reclaim`` (``ReclaimStatus``) of a SchedulerPolicy."""
    plan = round_.plan
    not_served = {reason.value: count for reason, count in plan.waits.counts().items()}
    return {
        "mode": round_.mode,
        "waiting": len(round_.inputs.waiting),
        "evictions": plan.evictions,
        "reclaims": [
            {
                "reclaimer": f"{r.reclaimer[0]}/{r.reclaimer[1]}",
                "queue": r.queue,
                "node": r.node,
                "victims": [
                    {
                        "pod": f"{v.pod[0]}/{v.pod[1]}",
                        "queue": v.queue,
                        "frees": format_resources(v.request),
                    }
                    for v in r.victims
                ],
            }
            for r in plan.reclaims[:MAX_LISTED_RECLAIMS]
        ],
        "notServed": dict(sorted(not_served.items())),
    }


# --- a held pod ---------------------------------------------------------------------------------


def waiting_message(waiting: Waiting, namespace: str, place: tuple[int, int] | None = None) -> str:
    """The ``AdmissionWaiting`` Event of a held pod of ``namespace``: why it waits and, when it
    is in its queue's line, its place there (``GateDecisions.positions``)."""
    text = f"waits for admission: {waiting_text(waiting, namespace)}"
    if place is None:
        return text
    return f"{text}; {place_text(place)} held in queue {waiting.queue}"


def place_text(place: tuple[int, int]) -> str:
    """``2nd of 5``."""
    return f"{ordinal(place[0])} of {place[1]}"


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``..."""
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"


MAX_SCHEDULER_MESSAGE = 400
"""What of the scheduler's message a NotBound Event repeats (it lists reasons per node)."""


def not_bound_text(stuck: NotBound, scheduler: str | None = None) -> str:
    """The ``NotBound`` Event of a released pod past its bind timeout; ``scheduler``: what its
    PodScheduled condition says, when it says something."""
    text = (
        f"admitted at {rfc3339(stuck.admitted_seconds)} and not bound to a node "
        f"{stuck.timeout_seconds:g} s later (admission.bindTimeoutSeconds): it no longer holds "
        f"queue {stuck.queue}'s room, which goes to the pods held behind it until it is bound"
    )
    if scheduler:
        said = one_line(scheduler)
        cut = said[:MAX_SCHEDULER_MESSAGE] + ("..." if len(said) > MAX_SCHEDULER_MESSAGE else "")
        text += f"; the scheduler says: {cut}"
    return text


def waiting_text(waiting: Waiting, namespace: str | None = None, *, names_all: bool = False) -> str:
    """Why a held pod waits, for its Event and ``simulate``. ``namespace``: the held pod's.
    Whoever may read a pod's Events may read its namespace's, and no other: a pod of another
    namespace is never named (nor any pod, when ``namespace`` is not given), unless
    ``names_all`` (``explain``, run by whoever may read every pod)."""
    queue = f"queue {waiting.queue}"
    match waiting.reason:
        case "NoQueue":
            return "it names no queue: nothing admits it (remove the gate by hand)"
        case "QueueNotFound":
            return f"it names {queue}, which does not exist"
        case "NamespaceNotAdmitted":
            return f"{queue}'s spec.namespaces does not admit this pod's namespace"
        case "NotGoverned":
            return f"no SchedulerPolicy governs {queue}, so it has no share to admit into"
        case "QueueClosed":
            return f"{queue} is Closed"
        case "QueueNotLeaf":
            return f"{queue} has queues below it; pods belong in leaf queues"
        case "ResourceNotOffered":
            asked = listed(waiting.resources, "resources")
            offers = f"which no node of policy {waiting.policy} offers"
            if waiting.behind is None:
                return f"it requests {asked}, {offers}"
            return f"pod {waiting.behind} of its PodGroup requests {asked}, {offers}; it goes whole"
        case "GangIncomplete":
            present, needed = waiting.members
            return f"its PodGroup has {present} of its minMember {needed} pods; it goes whole"
        case "QuotaExceeded":
            bound = "realCapability" if waiting.borrow else "deserved share"
            where = queue if waiting.limiting is None else f"queue {waiting.limiting} above it"
            return f"no room in {where}'s {bound}: {shortfall_text(waiting.shortfalls)}"
        case "OvercommitHeadroomExceeded":
            return f"the policy's overcommitted headroom is too small{_borrowing(waiting)}: " + (
                shortfall_text(waiting.shortfalls)
            )
        case "NoNodeFits":
            short = shortfall_text(waiting.shortfalls)
            return f"no node has room for it{_borrowing(waiting)}: {short} on the best node"
        case "BehindOthers":
            behind = waiting.behind or ""
            if names_all:
                first = f"pod {behind} of {queue}"
            elif namespace is None:
                first = f"another pod in {queue}"
            elif behind.startswith(f"{namespace}/"):
                first = f"pod {behind} of {queue}"
            else:
                first = f"a pod of another namespace in {queue}"
            return f"it waits behind {first} (priority, then age)"


def _borrowing(waiting: Waiting) -> str:
    return f" (past {waiting.queue}'s deserved share, borrowing)" if waiting.borrow else ""


# --- words --------------------------------------------------------------------------------------

MAX_LISTED = 5
"""Resources named in one message; the rest are counted (a pod may ask for hundreds)."""


def listed(names: Sequence[str], noun: str) -> str:
    """``a, b and c``; past ``MAX_LISTED``: ``a, b, c, d, e and 495 more <noun>``."""
    if len(names) <= 1:
        return "".join(names)
    if len(names) <= MAX_LISTED:
        return f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{', '.join(names[:MAX_LISTED])} and {len(names) - MAX_LISTED} more {noun}"


def shortfall_text(shortfalls: tuple[Shortfall, ...]) -> str:
    """What is short, in the words of every message that says it: "cpu 8 requested, 6
    available", or "already 2 over" when the bound is passed already."""
    text = "; ".join(
        f"{s.resource} {to_quantity(s.resource, s.requested)} requested, "
        + (
            f"{to_quantity(s.resource, s.available)} available"
            if s.available >= 0
            else f"already {to_quantity(s.resource, -s.available)} over"
        )
        for s in shortfalls[:MAX_LISTED]
    )
    more = len(shortfalls) - MAX_LISTED
    return text + (f"; and {more} more resource{'s' if more > 1 else ''}" if more > 0 else "")
