"""Why each running pod of one queue is, or is not, a reclaim victim: for ``explain queue``.

Read from the round's reclaim plan and inputs (``pipeline.reclaiming``), with the engine's own
rule for a pod the plan did not take (``engine.reclaim.spare_reason``):

- a victim of the plan: the waiting pod it is evicted for (would be, in Preview), and where;
- a pod the plan looked at on a victim's node and left (``Reclaim.spared``): why;
- any other: why it may not go for the first waiting pod of the policy in admission order (the
  one the plan serves first), or that it may and is not needed (with what happened to that
  pod: it fits without it, or it is not served, and why).

Only the queue's pods are read (it, and the queues below it), at most ``MAX_EXPLAINED_PODS``
of them; each answer of ``spare_reason`` costs O(the policy's reclaim inputs). Pods of a queue
are candidates only while some held pod of its policy waits for room (the round reads the
overused queues' pods then, and only then).
"""

from __future__ import annotations

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim import (
    NotServed,
    NotServedReason,
    ReclaimInputs,
    Running,
    SpareReason,
    spare_reason,
)
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.quantities import format_resources
from sharekeeper.pipeline.reclaiming import PolicyReclaim
from sharekeeper.pipeline.shares import Publication
from sharekeeper.pipeline.statuses import shortfall_text

MAX_EXPLAINED_PODS = 20
"""Running pods of the queue explained, victims first; the others are counted."""

SPARED = {
    SpareReason.PROTECTED: "it is protected: of kube-system, a DaemonSet's, a static pod, "
    "or of a system priority",
    SpareReason.EVICTION_REFUSED: "its eviction was refused this round (a "
    "PodDisruptionBudget, or another refusal)",
    SpareReason.OTHER_POLICY: "its queue or node is governed by another policy than the "
    "waiting pod's",
    SpareReason.NOT_RECLAIMABLE: "its queue, or one above it, has reclaimable: false",
    SpareReason.QUEUE_NOT_OVERUSED: "its queue is not above its deserved share in what the "
    "waiting pod lacks on the pod's node",
    SpareReason.WOULD_GO_BELOW_DESERVED: "its queue, or one above it, would go below its "
    "deserved share",
    SpareReason.WOULD_GO_BELOW_GUARANTEE: "its queue, or one above it, would go below its "
    "guarantee",
    SpareReason.GANG_WHOLE: "its PodGroup runs at its minMember: it goes whole or not at all, "
    "and the whole group may not go or is not needed",
    SpareReason.NOT_NEEDED: "it may go, but is not needed: the chosen victims suffice, or it "
    "frees nothing the waiting pod lacks",
}
"""Why a pod is spared, in words (``engine.reclaim.SpareReason``)."""

NOT_SERVED = {
    NotServedReason.NOT_WAITED_LONG_ENOUGH: "it has not waited spec.reclaim.afterSeconds yet",
    NotServedReason.ABOVE_SHARE: "its queue, or one above it, would exceed its deserved share "
    "with it",
    NotServedReason.NO_VICTIMS: "nothing that may be reclaimed frees a node for it",
    NotServedReason.ROUND_BOUND: "spec.reclaim.maxEvictionsPerRound is reached this round",
    NotServedReason.GANG_NOT_WHOLE: "another waiting pod of its PodGroup is not served, and a "
    "PodGroup is reclaimed for whole or not at all",
}
"""Why a waiting pod is not served by the plan, in words (``NotServedReason``)."""


def explained_queue(published: Publication, queue: str) -> MutableObj:
    """What ``explain queue`` adds to the report for ``queue``: its reclaim facts (None when the
    queue is not overused, or no policy governs it)."""
    return {"name": queue, "reclaim": reclaim_facts(published, queue)}


def reclaim_facts(published: Publication, queue: str) -> MutableObj | None:
    share = published.shares.queues.get(QueueName(queue))
    if share is None or share.policy is None or not share.overused:
        return None
    round_ = published.reclaims.get(share.policy)
    if round_ is None:
        return {"policy": share.policy, "mode": "Off", "waiting": 0, "pods": [], "more": 0}
    inputs = round_.inputs
    pods = _queue_pods(inputs, queue)
    listed = pods[:MAX_EXPLAINED_PODS]
    return {
        "policy": share.policy,
        "mode": round_.mode,
        "waiting": len(inputs.waiting),
        "pods": [_verdict(round_, pod) for pod in listed],
        "more": len(pods) - len(listed),
    }


def _queue_pods(inputs: ReclaimInputs, queue: str) -> list[Running]:
    """The candidates of ``queue`` and of the queues below it, in the order the plan would
    reach them within a queue: lowest priority, then youngest, then name."""
    parents = {state.name: state.parent for state in inputs.queues}
    mine = {name for name in parents if _under(name, queue, parents)}
    found = [pod for name in mine for pod in inputs.running.get(name, ())]
    return sorted(found, key=lambda pod: (pod.priority, -pod.created_seconds, pod.key))


def _under(name: str, queue: str, parents: dict[str, str | None]) -> bool:
    """``name`` is ``queue`` or below it."""
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current not in seen:
        if current == queue:
            return True
        seen.add(current)
        current = parents.get(current)
    return False


def _verdict(round_: PolicyReclaim, pod: Running) -> MutableObj:
    plan, inputs = round_.plan, round_.inputs
    facts: MutableObj = {
        "pod": str(pod.key),
        "queue": pod.queue,
        "node": pod.node,
        "priority": pod.priority,
        "request": format_resources(pod.request),
    }
    for reclaim in plan.reclaims:
        if any(victim.pod == pod.key for victim in reclaim.victims):
            verb = "evicted" if round_.mode == "On" else "would be evicted (Preview)"
            return facts | {
                "victim": True,
                "reclaimer": str(reclaim.reclaimer),
                "why": f"{verb} for pod {reclaim.reclaimer} of queue {reclaim.queue}, "
                f"which then fits on node {reclaim.node}",
            }
        spared = next((s for s in reclaim.spared if s.pod == pod.key), None)
        if spared is not None:
            return facts | {
                "victim": False,
                "reclaimer": str(reclaim.reclaimer),
                "reason": spared.reason.value,
                "why": f"spared for pod {reclaim.reclaimer}: {SPARED[spared.reason]}",
            }
    first = inputs.waiting[0] if inputs.waiting else None
    if first is None:
        return facts | {
            "victim": False,
            "reclaimer": None,
            "reason": None,
            "why": f"no held pod of policy {round_.policy} waits for room: nothing is reclaimed",
        }
    reason = spare_reason(inputs, first.key, pod.key)
    facts |= {"victim": False, "reclaimer": str(first.key)}
    if reason is not None:
        return facts | {
            "reason": reason.value,
            "why": f"spared for pod {first.key} (first in line): {SPARED[reason]}",
        }
    return facts | {
        "reason": None,
        "why": f"may be evicted for pod {first.key} (first in line), which "
        + _outcome(round_, first.key),
    }


def _outcome(round_: PolicyReclaim, reclaimer: PodKey) -> str:
    """What the plan does with the first waiting pod, when it takes no victim of the queue."""
    plan = round_.plan
    served = next((r for r in plan.reclaims if r.reclaimer == reclaimer), None)
    if served is not None:
        if not served.victims:
            return f"fits on node {served.node} without evicting anyone"
        return f"is served on node {served.node} without this pod"
    missed = next((n for n in plan.not_served if n.reclaimer == reclaimer), None)
    if missed is not None:
        return f"is not served: {not_served_text(missed)}"
    return "the plan does not reach"


def not_served_text(missed: NotServed) -> str:
    """``NOT_SERVED``'s words; for AboveShare, the queue that refuses and by how much."""
    if missed.reason is not NotServedReason.ABOVE_SHARE or not missed.shortfalls:
        return NOT_SERVED[missed.reason]
    where = "its queue" if missed.limiting == missed.queue else f"queue {missed.limiting} above it"
    return f"{where} would exceed its deserved share with it: {shortfall_text(missed.shortfalls)}"
