"""Carrying out a reclaim plan (``spec.reclaim.mode: On``): its victims evicted in order through
the Eviction API (never deleted), and the Events that say why.

At the first refused eviction (a PodDisruptionBudget, or any other refusal) the rest of the
plan is dropped and the policy is planned again with ``replan_inputs``: the evictions accepted
so far applied, the refused pod excluded, and the round's bound less what was evicted. At most
``maxEvictionsPerRound`` pods go, and at most as many refusals are tried, per round.

Events: on each victim a Warning ``Reclaimed`` naming its queue's overuse and the pod it makes
room for only when that pod is of the victim's own namespace ("a pod of another namespace"
otherwise: whoever may read a pod's Events may read its namespace's, and no other); on the
reclaimer a Normal ``ReclaimedFor`` saying what was freed, naming the victims only when of its
own namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping

from sharekeeper import telemetry
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim import Reclaim, Victim, Waiting, plan_reclaim, replan_inputs
from sharekeeper.engine.resources import Amounts
from sharekeeper.kube.kinds import reference
from sharekeeper.kube.writing import Writes
from sharekeeper.model.quantities import to_quantity
from sharekeeper.pipeline.reclaiming import PolicyReclaim

logger = logging.getLogger(__name__)

ACCEPTED = frozenset({"accepted", "gone"})
"""A gone pod frees what it held as an evicted one does."""


async def carry_out(
    round_: PolicyReclaim,
    writer: Writes,
    evicting: MutableMapping[PodKey, float],
    *,
    clock: Callable[[], float],
    uid_of: Callable[[PodKey], str],
) -> list[PodKey]:
    """Evict ``round_``'s plan, planning again after each refusal; the pods evicted, in
    order. ``evicting`` gets each pod whose eviction is sent (kept when accepted, dropped
    when refused): the next rounds treat them as gone until the watch shows them so. Events
    name their pod with its UID (``uid_of``)."""

    def pod(key: PodKey) -> dict[str, str]:
        namespace, name = key
        return reference("Pod", name, namespace=namespace, uid=uid_of(key))

    inputs, plan = round_.inputs, round_.plan
    policy = round_.policy
    evicted: list[PodKey] = []
    tries = inputs.settings.max_evictions
    while True:
        since_plan: list[PodKey] = []
        refused: PodKey | None = None
        waiting = {w.key: w for w in inputs.waiting}
        for reclaim in plan.reclaims:
            done: list[Victim] = []
            for victim in reclaim.victims:
                evicting[victim.pod] = clock()
                outcome, message = await writer.evict_pod(*victim.pod)
                if outcome not in ACCEPTED:
                    evicting.pop(victim.pod, None)
                    telemetry.RECLAIM_REFUSED.labels(policy).inc()
                    logger.info(
                        "policy %s: eviction of %s/%s for %s/%s refused (%s): planning again",
                        policy, *victim.pod, *reclaim.reclaimer, message,
                    )  # fmt: skip
                    refused = victim.pod
                    break
                since_plan.append(victim.pod)
                done.append(victim)
                if outcome == "accepted":
                    telemetry.RECLAIM_EVICTIONS.labels(policy).inc()
                    logger.info(
                        "policy %s: evicted %s/%s (queue %s) for %s/%s (queue %s)",
                        policy, *victim.pod, victim.queue, *reclaim.reclaimer, reclaim.queue,
                    )  # fmt: skip
                    text = victim_text(victim, reclaim, waiting.get(reclaim.reclaimer))
                    await writer.event(pod(victim.pod), "Reclaimed", text, warning=True)
            if done and len(done) == len(reclaim.victims):
                text = reclaimer_text(reclaim)
                await writer.event(pod(reclaim.reclaimer), "ReclaimedFor", text, warning=False)
            if refused is not None:
                break
        evicted += since_plan
        tries -= 1
        if refused is None or tries <= 0:
            return evicted
        inputs = replan_inputs(inputs, since_plan, [refused])
        plan = plan_reclaim(inputs)
        if not plan.evictions:
            return evicted


def amounts_text(amounts: Amounts) -> str:
    return ", ".join(
        f"{name} {to_quantity(name, amount)}" for name, amount in sorted(amounts.items()) if amount
    )


def victim_text(victim: Victim, reclaim: Reclaim, waiting: Waiting | None) -> str:
    """The victim's ``Reclaimed`` Event: its queue's overuse and what it made room for."""
    holds = ", ".join(
        f"{o.dimension} {to_quantity(o.dimension, o.allocated)} of its deserved "
        f"{to_quantity(o.dimension, o.deserved)}"
        for o in victim.overuse
    )
    namespace, name = reclaim.reclaimer
    whom = f"pod {namespace}/{name}" if namespace == victim.pod[0] else "a pod of another namespace"
    needs = amounts_text(waiting.request) if waiting is not None else ""
    wants = f" that waits for {needs}" if needs else ""
    over = f"queue {victim.queue} holds {holds}" if holds else f"queue {victim.queue} is overused"
    return (
        f"{over}; evicted for {whom} of queue {reclaim.queue}{wants}, which is within its "
        "deserved share (SchedulerPolicy spec.reclaim)"
    )


def reclaimer_text(reclaim: Reclaim) -> str:
    """The reclaimer's ``ReclaimedFor`` Event: what was freed for it, and where."""
    namespace = reclaim.reclaimer[0]
    own = [f"{v.pod[0]}/{v.pod[1]}" for v in reclaim.victims if v.pod[0] == namespace]
    others = len(reclaim.victims) - len(own)
    named = ", ".join(own)
    if others:
        more = f"{others} pod{'s' if others > 1 else ''} of other namespaces"
        named = f"{named} and {more}" if named else more
    queues = sorted({v.queue for v in reclaim.victims})
    where = (
        f"queue {queues[0]}, above its deserved share"
        if len(queues) == 1
        else f"queues {', '.join(queues)}, above their deserved shares"
    )
    return (
        f"evicted {named} ({where}) on node {reclaim.node}, freeing "
        f"{amounts_text(reclaim.frees)} for this pod"
    )
