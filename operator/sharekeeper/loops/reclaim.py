"""Carrying out a reclaim plan (``spec.reclaim.mode: On``): its victims evicted in order through
the Eviction API (never deleted), a few at a time, and the Events that say why.

At the first refused eviction (a PodDisruptionBudget, or any other refusal) the rest of the
plan is dropped and, once the evictions in flight are answered, the policy is planned again
with ``replan_inputs``: the evictions accepted so far applied, the refused pods excluded, and
the round's bound less what was evicted. At most ``maxEvictionsPerRound`` pods go, and at most
as many refusals are tried, per round. An eviction in flight when another is refused was
planned on the refused one's room; it still keeps every queue at or above its deserved share
and guarantee (a refusal only leaves more in a queue), so the worst it costs is a pod the next
plan would not have chosen.

Events: on each victim a Warning ``Reclaimed`` naming its queue's overuse and the pod it makes
room for only when that pod is of the victim's own namespace ("a pod of another namespace"
otherwise: whoever may read a pod's Events may read its namespace's, and no other); on the
reclaimer a Normal ``ReclaimedFor`` saying what was freed, naming the victims only when of its
own namespace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, MutableMapping

from sharekeeper import telemetry
from sharekeeper.api.policy import EVICTIONS_IN_FLIGHT
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim import (
    Reclaim,
    ReclaimInputs,
    Victim,
    Waiting,
    plan_reclaim,
    replan_inputs,
)
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
    """Evict ``round_``'s plan, planning again after a refusal; the pods evicted, in plan
    order. Evictions go out in plan order, ``EVICTIONS_IN_FLIGHT`` at most unanswered (one
    after another, 40 of them took seconds on a busy API server, and each waiting pod waited
    for every eviction planned before its own); after a refusal none more is sent, the ones in
    flight are awaited, and the plan is made again with the accepted ones gone and the refused
    ones excluded. ``evicting`` gets each pod whose
    eviction is sent (kept when accepted, dropped when refused): the next rounds treat them
    as gone until the watch shows them so. Events name their pod with its UID (``uid_of``)."""
    inputs, plan = round_.inputs, round_.plan
    evicted: list[PodKey] = []
    tries = inputs.settings.max_evictions
    while True:
        sending = _Sending(round_.policy, writer, inputs, uid_of)
        sent: list[tuple[Reclaim, list[tuple[Victim, asyncio.Task[bool]]]]] = []
        for reclaim in plan.reclaims:
            tasks: list[tuple[Victim, asyncio.Task[bool]]] = []
            for victim in reclaim.victims:
                if not await sending.slot():
                    break
                evicting[victim.pod] = clock()
                tasks.append((victim, asyncio.create_task(sending.evict(victim, reclaim))))
            sent.append((reclaim, tasks))
            if sending.refused:
                break
        since_plan: list[PodKey] = []
        for reclaim, tasks in sent:
            gone = [victim.pod for victim, task in tasks if await task]
            since_plan += gone
            if tasks and len(gone) == len(reclaim.victims):
                text = reclaimer_text(reclaim)
                target = sending.pod(reclaim.reclaimer)
                await writer.event(target, "ReclaimedFor", text, warning=False)
        for key in sending.refused:
            evicting.pop(key, None)
        evicted += since_plan
        tries -= max(len(sending.refused), 1)
        if not sending.refused or tries <= 0:
            return evicted
        inputs = replan_inputs(inputs, since_plan, sending.refused)
        plan = plan_reclaim(inputs)
        if not plan.evictions:
            return evicted


class _Sending:
    """One plan's evictions: at most ``EVICTIONS_IN_FLIGHT`` unanswered, none more once one is
    refused."""

    def __init__(
        self,
        policy: str,
        writer: Writes,
        inputs: ReclaimInputs,
        uid_of: Callable[[PodKey], str],
    ) -> None:
        self.policy = policy
        self.writer = writer
        self.waiting = {w.key: w for w in inputs.waiting}
        self.uid_of = uid_of
        self.slots = asyncio.Semaphore(EVICTIONS_IN_FLIGHT)
        self.refused: list[PodKey] = []

    def pod(self, key: PodKey) -> dict[str, str]:
        namespace, name = key
        return reference("Pod", name, namespace=namespace, uid=self.uid_of(key))

    async def slot(self) -> bool:
        """Wait for room to send one more; False once an eviction was refused."""
        await self.slots.acquire()
        if self.refused:
            self.slots.release()
            return False
        return True

    async def evict(self, victim: Victim, reclaim: Reclaim) -> bool:
        """Whether the victim is gone; its Event once it is."""
        try:
            outcome, message = await self.writer.evict_pod(*victim.pod)
        finally:
            self.slots.release()
        if outcome not in ACCEPTED:
            self.refused.append(victim.pod)
            telemetry.RECLAIM_REFUSED.labels(self.policy).inc()
            logger.info(
                "policy %s: eviction of %s/%s for %s/%s refused (%s): planning again",
                self.policy, *victim.pod, *reclaim.reclaimer, message,
            )  # fmt: skip
            return False
        if outcome == "accepted":
            telemetry.RECLAIM_EVICTIONS.labels(self.policy).inc()
            logger.info(
                "policy %s: evicted %s/%s (queue %s) for %s/%s (queue %s)",
                self.policy, *victim.pod, victim.queue, *reclaim.reclaimer, reclaim.queue,
            )  # fmt: skip
            text = victim_text(victim, reclaim, self.waiting.get(reclaim.reclaimer))
            await self.writer.event(self.pod(victim.pod), "Reclaimed", text, warning=True)
        return True


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
