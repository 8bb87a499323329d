"""The debounced recompute loop: snapshot -> engines -> status and node annotation writes.

Handlers only call ``wake()``. The loop waits until events stop arriving for ``quiet_seconds``
(or ``max_delay_seconds`` have passed since the first one), then recomputes everything from a
fresh snapshot (level-based: the result depends on the cluster, not on which events came).
A burst of 500 pod events thus costs a handful of rounds, and a lone change shows within about
a second.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from sharekeeper import telemetry
from sharekeeper.cluster.snapshots import node_policies, share_snapshot, specs
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.collector import Refreezer
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.gates import GateDecisions, NotBound, WaitReason
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.shares import PodSnapshot, ShareSnapshot
from sharekeeper.engine.shares.snapshot import PODS, PolicyName, QueueName
from sharekeeper.kube.kinds import reference
from sharekeeper.kube.transient import http_status, transient_reason
from sharekeeper.kube.writing import Writes, failure_text
from sharekeeper.loops.debouncing import debounced_rounds
from sharekeeper.loops.echoes import Echoes
from sharekeeper.loops.health import FAILING_WRITES, LoopHealth, StatusFailures
from sharekeeper.loops.lane import Lane
from sharekeeper.loops.outbox import Outbox
from sharekeeper.loops.reclaim import carry_out
from sharekeeper.model.nodes import SHARE_ANNOTATIONS
from sharekeeper.model.objects import MutableObj, Obj, rfc3339
from sharekeeper.model.quantities import scale
from sharekeeper.model.records import NodeRecord, OwnRecord
from sharekeeper.pipeline.reclaiming import BoundPods, PolicyReclaim
from sharekeeper.pipeline.shares import Carried, Publication, publication
from sharekeeper.pipeline.statuses import not_bound_text, waiting_message
from sharekeeper.publish.annotations import AnnotationWrite, annotation_writes
from sharekeeper.publish.diffing import Transition
from sharekeeper.publish.statuses import (
    NORMAL_TRANSITIONS,
    QUEUE_EVENTS_PER_ROUND,
    Kind,
    StatusWrite,
    Untold,
    policy_writes,
    queue_writes,
    spec_unseen,
    stale_writes,
    told_in_turn,
)
from sharekeeper.settings import LoopSettings

logger = logging.getLogger(__name__)


MAX_POD_EVENTS = 100
"""Pods told per change of which queues refuse which namespaces (the queue's condition has
the count of them all), and held pods told per round why they wait (the rest next round)."""
EVICTION_SEEN_SECONDS = 60.0
"""A pod whose eviction was accepted is gone for reclaim until the watch shows it terminating
or gone, or for this long at most."""
WAITED_MARGIN_SECONDS = 0.5
"""The round for a held pod that reaches ``afterSeconds`` runs this long after it does."""
EARLY_AT_MOST = 16
"""Queues whose spec moved whose statuses a round sends before it renders and diffs the rest:
someone is waiting to see them. More is a bulk change (an apply of every queue), sent in the
round's order with everything else."""
RELEASE_SEEN_SECONDS = 60.0
"""A released pod the watch still shows held after this long is decided on again (the patch
is idempotent)."""


class Recompute:
    def __init__(
        self,
        writer: Writes,
        store: ClusterStore,
        settings: LoopSettings = LoopSettings(),
        clock: Callable[[], float] = time.time,
        *,
        lane: Lane | None = None,
        refreezer: Refreezer | None = None,
    ) -> None:
        self._writer = writer
        self._lane = lane if lane is not None else Lane()
        """Held while a round computes; the owner shares it with the QoS loop."""
        self._refreezer = refreezer
        """Called once a round is decided, still in the lane: what the round keeps is frozen
        out of the garbage collector's way before the collector runs again. When it says a full
        pass is due, the pass takes a turn of the lane once the round's writes are handed on."""
        self._full_pass: asyncio.Task[None] | None = None
        self._evicting: dict[PodKey, float] = {}
        """Pods whose eviction reclaim sent (when, monotonic), until the watch shows them
        terminating or gone: gone for the next rounds' plans, never evicted twice."""
        self._reclaiming: set[PolicyName] = set()
        """Policies whose evictions are being sent: their next plan waits for them."""
        self._reclaim_series: set[PolicyName] = set()
        self._unbound_series: set[tuple[PolicyName, str]] = set()
        self._evictions: set[asyncio.Task[None]] = set()
        """The eviction tasks in flight, cancelled when the loop stops (leadership lost)."""
        self._reclaim_timer: asyncio.TimerHandle | None = None
        """A round when the next held pod will have waited ``afterSeconds``: rounds follow
        events, and time passing is none."""
        self._bind_timer: asyncio.TimerHandle | None = None
        """A round when the next released pod not bound yet reaches ``bindTimeoutSeconds``."""
        self._store = store
        self._settings = settings
        self._clock = clock
        self._woken = asyncio.Event()
        self.store_synced = asyncio.Event()
        """Set by the owner once every initial list is in the store."""
        self.first_round = asyncio.Event()
        """Set once a round has been decided: each queue's long-lived state exists."""
        self._statuses: Echoes[tuple[Kind, str], Obj] = Echoes()
        self._carried = Carried()
        """What the last round computed, rendered and found nothing to write for: the next
        round redoes none of it where the inputs are the same."""
        self._annotations: Echoes[str, Mapping[str, str]] = Echoes()
        self._annotations_failing: set[str] = set()
        """Nodes whose last annotation write failed (said once until one lands)."""
        self._outbox: Outbox[tuple[str, str], StatusWrite | AnnotationWrite] = Outbox(
            self._send, self._retry_later
        )
        self.rounds = 0
        self._misdirected: tuple[Mapping[QueueName, Mapping[str, int]], Mapping[str, int]] = (
            {},
            {},
        )
        self._told: set[tuple[PodKey, str]] = set()
        self._telling: set[asyncio.Task[None]] = set()
        self._releasing: dict[PodKey, float] = {}
        """Pods released (when, monotonic) whose release the watch has not shown yet."""
        self._told_waiting: dict[PodKey, WaitReason] = {}
        """Held pods told why they wait, and the reason they were told."""
        self._told_not_bound: set[PodKey] = set()
        self.status_failures = StatusFailures(wall_clock=clock)
        """Statuses whose writes keep failing: told once, and reported by ``/healthz``."""
        self.health = LoopHealth(
            "recompute",
            lambda: max(self._settings.error_backoff_seconds, self._settings.max_delay_seconds),
            degraded=self.status_failures.degraded,
        )

    def wake(self) -> None:
        self._woken.set()
        self._lane.round_due()

    def status_seen(self, kind: str, name: str, value: Obj) -> None:
        """A status (or a node's ``sharekeeper.io/`` annotations, kind ``Node``) changed on its
        own: the echo of our write, or someone else's write, which the next round restores."""
        echo = (
            self._annotations.shown(name, value)
            if kind == "Node"
            else self._statuses.shown((cast(Kind, kind), name), value)
        )
        if not echo:
            self.wake()

    def forget(self, kind: str, name: str) -> None:
        """``kind`` ``name`` was deleted or replaced: the next round diffs against what the new
        object holds, not against what we wrote to the old one."""
        if kind == "Node":
            self._annotations.forget(name)
            self._annotations_failing.discard(name)
        elif kind in ("Queue", "SchedulerPolicy"):
            self._statuses.forget((cast(Kind, kind), name))
            self.status_failures.forget(kind, name)

    @property
    def pending_writes(self) -> int:
        """Status and annotation writes decided and not yet answered (queued or in flight)."""
        return self._outbox.pending

    async def run(self) -> None:
        # A round on a half-listed cluster would publish wrong numbers (and remove annotations
        # of nodes not listed yet): wait for every initial list.
        await self.store_synced.wait()
        # Run again after leadership came back: another leader may have written since, so
        # what we wrote in an earlier term says nothing about what the objects hold now.
        self._statuses, self._annotations = Echoes(), Echoes()
        self._carried = Carried()
        self.status_failures.clear()
        self._woken.set()  # the first round publishes whatever changed while we were away
        try:
            await debounced_rounds(
                "recompute",
                self._woken,
                self._settings,
                self.health,
                self.recompute,
                on_failure=self._report_stale,
            )
        finally:
            # A replica that no longer leads evicts nothing more.
            for task in (*self._evictions, self._full_pass):
                if task is not None:
                    task.cancel()
            for timer in (self._reclaim_timer, self._bind_timer):
                if timer is not None:
                    timer.cancel()
            await self._outbox.close()
            self.status_failures.clear()  # a replica that no longer leads writes nothing

    def _report_stale(self) -> None:
        """``Stale`` on every queue and policy: their numbers are the last good round's."""
        problem = f"the last share round failed, the numbers shown are older: {self.health.error}"
        stamp = rfc3339(self._clock())
        store = self._store
        kinds: tuple[tuple[Kind, list[OwnRecord[Any]]], ...] = (
            ("Queue", store.queues.sorted_records()),
            ("SchedulerPolicy", store.policies.sorted_records()),
        )
        stale = [
            write
            for kind, records in kinds
            for write in stale_writes(kind, self._with_written(kind, records), problem, now=stamp)
        ]
        told, untold = told_in_turn(stale)
        writes: dict[tuple[str, str], StatusWrite | AnnotationWrite] = {
            (write.kind, write.name): write for write in told
        }
        self._outbox.replace(writes)
        self._tell_untold(untold)

    async def written(self) -> None:
        """Until every write of the rounds so far has been sent."""
        await self._outbox.drained()

    def _retry_later(self) -> None:
        asyncio.get_running_loop().call_later(self._settings.error_backoff_seconds, self.wake)

    async def recompute(self) -> Publication:
        try:
            return await self._round()
        finally:
            if not self._woken.is_set():  # else the next round is due already
                self._lane.round_done()

    async def _round(self) -> Publication:
        started = time.perf_counter()
        # The QoS check computes in a thread too; taking turns (``lane``) lets whichever came
        # first run at full speed, where sharing the GIL would slow both to the end of the two.
        async with self._lane:
            now = self._clock()
            stamp = rfc3339(now)
            # 1. One consistent snapshot of everything the engines read: totals, not pods.
            store = self._store
            queues_now, policies_now = (
                store.queues.sorted_records(),
                store.policies.sorted_records(),
            )
            snapshot = share_snapshot(
                store,
                specs(queues_now),
                [spec.shares for spec in specs(policies_now)],
                now_seconds=now,
            )
            queues = self._with_written("Queue", queues_now)
            policies = self._with_written("SchedulerPolicy", policies_now)
            nodes = self._with_written_annotations(store.nodes.sorted_records())
            held = store.pods.held()
            unbound = store.pods.released_unbound()
            self._forget_releases(held)
            self._forget_evictions()
            # 2. The engines (the same call `sharekeeper simulate` makes) and the diff against
            #    what the objects hold (or what we just wrote to them), in a worker thread, so
            #    that watches and the probes stay served while thousands of queues compute.
            loop = asyncio.get_running_loop()
            sent_first: set[tuple[str, str]] = set()

            def early(writes: list[StatusWrite]) -> None:
                # In the round's thread: the writes go while it renders the other queues.
                handed: dict[tuple[str, str], StatusWrite | AnnotationWrite] = {
                    (write.kind, write.name): write for write in writes
                }
                sent_first.update(handed)
                loop.call_soon_threadsafe(self._outbox.send_first, handed)

            decided = await asyncio.to_thread(
                _decide, snapshot, node_policies(policies_now), queues, policies, nodes,
                stamp=stamp, held=held, released=frozenset(self._releasing),
                unbound=unbound, pods=store.pods, now=now, evicting=frozenset(self._evicting),
                carried=self._carried, early=early,
            )  # fmt: skip
            full_pass_due = self._refreezer is not None and self._refreezer()
        telemetry.RECOMPUTE_SECONDS.observe(time.perf_counter() - started)
        # 3. The writes, sent while the next round may already compute; a queue whose spec
        #    just changed first (someone is looking at it).
        statuses, untold = told_in_turn(decided.statuses)
        writes: dict[tuple[str, str], StatusWrite | AnnotationWrite] = {
            (write.kind, write.name): write
            for write in statuses
            if (write.kind, write.name) not in sent_first
        }
        writes.update((("Node", write.node), write) for write in decided.annotations)
        urgent = frozenset((w.kind, w.name) for w in statuses if w.spec_changed)
        self._outbox.replace(writes, urgent, first=sent_first)
        self._tell_untold(untold)
        shares = decided.publication.shares
        self._tell_misdirected(shares.refused, shares.unknown)
        gates = decided.publication.gates
        self._release(gates.released, stamp)
        self._tell_waiting(gates)
        self._tell_not_bound(gates.not_bound)
        self._count_unbound(gates.unbound, shares.policies.keys())
        self._bind_timer = self._wake_in(gates.next_timeout_seconds, self._bind_timer)
        self._reclaim(decided.publication.reclaims)
        telemetry.PODS_HELD.set(len(held))
        if full_pass_due:
            self._pass_between_rounds()
        self.rounds += 1
        self.first_round.set()
        if writes:
            logger.info(
                "round %d: %d status and %d node writes",
                self.rounds,
                len(decided.statuses),
                len(decided.annotations),
            )
        return decided.publication

    def _pass_between_rounds(self) -> None:
        """The collector's full pass, in a turn of the lane of its own (one at a time)."""
        refreezer = self._refreezer
        if refreezer is not None and (self._full_pass is None or self._full_pass.done()):
            self._full_pass = asyncio.create_task(self._lane.between_rounds(refreezer.full_pass))

    def _forget_evictions(self) -> None:
        """Evictions the watch has shown (the pod terminating or gone), or not for too long."""
        now = time.monotonic()
        records = self._store.pods.records
        # In place: an eviction task in flight adds to this very dict.
        for key, at in list(self._evicting.items()):
            record = records.get(key)
            shown = (
                record is None
                or not record.share.allocated
                or (record.qos is not None and record.qos.terminating)
            )
            if shown or now - at >= EVICTION_SEEN_SECONDS:
                del self._evicting[key]

    def _reclaim(self, rounds: Mapping[PolicyName, PolicyReclaim]) -> None:
        """The gauge of waiting reclaimers; under mode On, the plan's evictions, sent in order
        by a task per policy (one at a time: a policy's next plan waits for its evictions)."""
        for gone in self._reclaim_series - rounds.keys():
            telemetry.RECLAIM_WAITING.remove(gone)
        self._reclaim_series = set(rounds)
        self._wake_when_waited(rounds)
        for policy, round_ in rounds.items():
            telemetry.RECLAIM_WAITING.labels(policy).set(len(round_.inputs.waiting))
            if round_.mode != "On" or not round_.plan.evictions or policy in self._reclaiming:
                continue
            self._reclaiming.add(policy)
            task = asyncio.create_task(self._evict(round_))
            self._evictions.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._evictions.discard)

    def _wake_when_waited(self, rounds: Mapping[PolicyName, PolicyReclaim]) -> None:
        """A round as soon as a held pod has waited long enough to reclaim."""
        left = (
            waiting.since + round_.inputs.settings.after_seconds - round_.inputs.now
            for round_ in rounds.values()
            for waiting in round_.inputs.waiting
        )
        soonest = min((seconds for seconds in left if seconds > 0), default=None)
        self._reclaim_timer = self._wake_in(soonest, self._reclaim_timer)

    def _wake_in(
        self, seconds: float | None, timer: asyncio.TimerHandle | None
    ) -> asyncio.TimerHandle | None:
        """``timer`` cancelled, and a new one that wakes the loop ``seconds`` from now (a
        little after: the times compared are whole seconds, the clock is not); None: none."""
        if timer is not None:
            timer.cancel()
        if seconds is None:
            return None
        delay = max(seconds, 0.0) + WAITED_MARGIN_SECONDS
        return asyncio.get_running_loop().call_later(delay, self.wake)

    async def _evict(self, round_: PolicyReclaim) -> None:
        evicted: list[PodKey] = []
        try:
            evicted = await carry_out(
                round_, self._writer, self._evicting, clock=time.monotonic,
                uid_of=self._store.pods.uid,
            )  # fmt: skip
        except Exception:
            logger.exception("policy %s: reclaim evictions failed; next round", round_.policy)
        finally:
            self._reclaiming.discard(round_.policy)
        if evicted:
            self.wake()  # the next round sees what was evicted, and releases the reclaimers
        else:
            # Every eviction refused (or failed): planned again at once, the cluster unchanged,
            # the same evictions would be sent and refused again, round after round.
            self._retry_later()

    def _forget_releases(self, held: Iterable[PodSnapshot]) -> None:
        """Releases the watch has shown (the pod is no longer held, or gone), and those it has
        not shown for too long, leave ``_releasing``; pods no longer held leave the told set."""
        held_now = {(pod.namespace, pod.name) for pod in held}
        now = time.monotonic()
        self._releasing = {
            key: at
            for key, at in self._releasing.items()
            if key in held_now and now - at < RELEASE_SEEN_SECONDS
        }
        self._told_waiting = {
            key: reason for key, reason in self._told_waiting.items() if key in held_now
        }

    def _release(self, pods: Iterable[PodKey], stamp: str) -> None:
        now = time.monotonic()
        for key in pods:
            self._releasing[key] = now
            self._spawn(self._send_release(key, stamp))

    async def _send_release(self, key: PodKey, stamp: str) -> None:
        namespace, name = key
        try:
            found = await self._writer.release_pod(namespace, name, stamp)
        except Exception:
            logger.exception("releasing pod %s/%s failed; the next round decides again", *key)
            self._releasing.pop(key, None)
            self._retry_later()
            return
        if found:
            telemetry.PODS_RELEASED.inc()
            logger.info("admitted pod %s/%s", namespace, name)
        else:
            self._releasing.pop(key, None)

    def _tell_waiting(self, gates: GateDecisions) -> None:
        """A Normal Event on each held pod saying why it waits and its place in its queue's
        line: once per pod and reason, not every round (a pod that is released and held again
        by hand is told again). A new reason is told (a gang the Job controller has just
        completed no longer waits for its pods but for room); new amounts or a new place are
        not: a place changes with every pod admitted or arriving ahead, and ``explain queue``
        has the current ones."""
        waiting = gates.waiting
        told = self._told_waiting
        new = [key for key, why in waiting.items() if told.get(key) != why.reason]
        new = new[:MAX_POD_EVENTS]
        places = gates.positions(new)
        for key in new:
            told[key] = waiting[key].reason
            message = waiting_message(waiting[key], key[0], places.get(key))
            self._spawn(self._pod_event(key, "AdmissionWaiting", message, warning=False))

    def _tell_not_bound(self, not_bound: Mapping[PodKey, NotBound]) -> None:
        """A Warning Event on each released pod past its bind timeout, once (it leaves the told
        set when it binds, finishes or goes)."""
        self._told_not_bound &= not_bound.keys()
        new = [key for key in not_bound if key not in self._told_not_bound][:MAX_POD_EVENTS]
        self._told_not_bound.update(new)
        records = self._store.pods.records
        for key in new:
            record = records.get(key)
            said = record.unscheduled if record is not None else None
            message = not_bound_text(not_bound[key], said)
            self._spawn(self._pod_event(key, "NotBound", message, warning=True))

    def _count_unbound(
        self, unbound: Mapping[PolicyName, Mapping[str, int]], policies: Iterable[PolicyName]
    ) -> None:
        """The gauge of what released pods not bound yet request: every policy's pod count
        (0 when none), the resources they request; the series of resources no longer
        requested, and of policies gone, removed."""
        series = {(policy, PODS) for policy in policies}
        series.update((policy, name) for policy, amounts in unbound.items() for name in amounts)
        for gone in self._unbound_series - series:
            telemetry.ADMISSION_UNBOUND.remove(*gone)
        self._unbound_series = series
        for policy, name in series:
            amount = unbound.get(policy, {}).get(name, 0)
            telemetry.ADMISSION_UNBOUND.labels(policy, name).set(amount / scale(name))

    async def _pod_event(self, pod: PodKey, reason: str, message: str, *, warning: bool) -> None:
        namespace, name = pod
        target = reference("Pod", name, namespace=namespace, uid=self._store.pods.uid(pod))
        await self._writer.event(target, reason, message, warning=warning)

    async def _transition_event(self, write: StatusWrite, transition: Transition) -> None:
        target = reference(write.kind, write.name, uid=write.uid)
        warning = transition.type not in NORMAL_TRANSITIONS
        await self._writer.event(target, transition.reason, transition.message, warning=warning)

    def _tell_untold(self, untold: Iterable[Untold]) -> None:
        """One Event on each policy for its queues whose condition turned True this round
        without an Event each (``told_in_turn``); a log line for queues of no policy."""
        records = self._store.policies.records
        for group in untold:
            text = (
                f"{group.queues:,} more queues turned {group.condition} in one round; Events "
                f"went to the first {QUEUE_EVENTS_PER_ROUND} queues (by name) of each condition, "
                "and every queue's conditions are in its status (kubectl get skq)"
            )
            record = records.get(group.policy)
            if record is None:
                logger.info("queues of no policy: %s", text)
                continue
            target = reference("SchedulerPolicy", group.policy, uid=record.uid)
            reason = f"{group.condition}Queues"
            self._spawn(self._writer.event(target, reason, text, warning=group.warning))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._telling.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._telling.discard)

    def _tell_misdirected(
        self, refused: Mapping[QueueName, Mapping[str, int]], unknown: Mapping[str, int]
    ) -> None:
        """A Warning Event on each pod that names a queue that does not exist or does not admit
        its namespace, once (the queue's ``NamespacesAdmitted`` condition counts the latter)."""
        if (refused, unknown) == self._misdirected:
            return
        self._misdirected = (refused, unknown)
        pods = self._store.misdirected_pods(refused, unknown) if refused or unknown else []
        new = sorted(set(pods) - self._told)[:MAX_POD_EVENTS]
        self._told = set(pods) & (self._told | set(new))
        if new:
            self._spawn(self._post_misdirections(new, set(unknown)))

    async def _post_misdirections(self, pods: list[tuple[PodKey, str]], unknown: set[str]) -> None:
        for (namespace, name), queue in pods:
            if queue in unknown:
                reason = "QueueNotFound"
                message = f"this pod names queue {queue}, which does not exist"
            else:
                reason = "NamespaceNotAdmitted"
                message = (
                    f"this pod names queue {queue}, whose spec.namespaces does not admit "
                    f"namespace {namespace}"
                )
            message = f"{message}: it is charged to no queue"
            await self._pod_event(PodKey(namespace, name), reason, message, warning=True)

    def _with_written(self, kind: Kind, records: Iterable[OwnRecord[Any]]) -> list[OwnRecord[Any]]:
        """The records with the status we wrote where the watch has not shown it yet; at 10,000
        queues a round copies only those."""
        result = []
        for record in records:
            status = self._statuses.current((kind, record.name), record.status)
            result.append(record if status is record.status else replace(record, status=status))
        return result

    def _with_written_annotations(self, records: Iterable[NodeRecord]) -> list[NodeRecord]:
        result = []
        for record in records:
            notes = self._annotations.current(record.snapshot.name, record.annotations)
            result.append(
                record if notes is record.annotations else replace(record, annotations=notes)
            )
        return result

    async def _send(self, write: StatusWrite | AnnotationWrite) -> None:
        if isinstance(write, StatusWrite):
            await self._apply(write)
        else:
            await self._annotate(write)

    async def _annotate(self, write: AnnotationWrite) -> None:
        self._annotations.sending(write.node, write.annotations)
        try:
            stored = await self._writer.patch_node_annotations(write.node, write.patch)
        except Exception as error:
            # Said once per node until a write lands again, not once per round (with a
            # traceback only for what is no answer of the API server: a bug).
            if write.node not in self._annotations_failing:
                self._annotations_failing.add(write.node)
                unexpected = http_status(error) is None and transient_reason(error) is None
                logger.warning(
                    "node %s: annotations not written; tried again next round: %s",
                    write.node, failure_text(error), exc_info=unexpected,
                )  # fmt: skip
            self._retry_later()
            return
        if write.node in self._annotations_failing:
            self._annotations_failing.discard(write.node)
            logger.info("node %s: annotations written again", write.node)
        self._annotations.wrote(write.node, stored)

    async def _apply(self, write: StatusWrite) -> None:
        self._statuses.sending((write.kind, write.name), write.status)
        try:
            stored = await self._writer.patch_status(write.kind, write.name, write.patch)
        except Exception as error:
            # Not raised to the outbox, which would log a traceback per write, every round.
            self._status_not_written(write, error)
            self._retry_later()
            return
        self._statuses.wrote((write.kind, write.name), stored)
        recovered = self.status_failures.succeeded(write.kind, write.name)
        if recovered is not None:
            logger.info(
                "%s %s: status written again, after %d failed writes",
                write.kind, write.name, recovered.failures,
            )  # fmt: skip
        if stored is None:
            return
        for transition in write.transitions:
            await self._transition_event(write, transition)

    def _status_not_written(self, write: StatusWrite, error: Exception) -> None:
        """One failed status write: counted (``sharekeeper_writes_total``, by the writer);
        when it makes the object failing, one log line and one Warning Event on the object."""
        message = failure_text(error)
        streak = self.status_failures.failed(write.kind, write.name, message)
        if streak is None:
            logger.debug("%s %s: status not written: %s", write.kind, write.name, message)
            return
        since = rfc3339(streak.since)
        # A failure that is no answer of the API server (a bug) gets its traceback, once.
        unexpected = http_status(error) is None and transient_reason(error) is None
        logger.warning(
            "%s %s: status not written %d times in a row since %s; its numbers and "
            "observedGeneration are those of the last write that landed: %s",
            write.kind, write.name, streak.failures, since, message, exc_info=unexpected,
        )  # fmt: skip
        note = (
            f"the status of this {write.kind} could not be written {FAILING_WRITES} times in a "
            f"row since {since}; what it shows is older than its spec and the cluster: {message}"
        )
        transition = Transition("StatusNotWritten", "StatusNotWritten", note)
        self._spawn(self._transition_event(write, transition))


def _early_writes(
    records: list[OwnRecord[Any]], stamp: str, early: Callable[[list[StatusWrite]], None]
) -> Callable[[Mapping[str, MutableObj]], None]:
    """What ``_decide`` calls with the statuses of ``records`` rendered first: their writes
    handed to ``early``."""
    return lambda statuses: early(queue_writes(records, statuses, now=stamp))


@dataclass(frozen=True, slots=True)
class Decision:
    publication: Publication
    statuses: list[StatusWrite]
    annotations: list[AnnotationWrite]


def _decide(
    snapshot: ShareSnapshot,
    policies_by_name: Mapping[PolicyName, NodePolicy],
    queues: list[OwnRecord[Any]],
    policies: list[OwnRecord[Any]],
    nodes: list[NodeRecord],
    *,
    stamp: str,
    held: Iterable[PodSnapshot] = (),
    released: frozenset[PodKey] = frozenset(),
    unbound: Iterable[PodSnapshot] = (),
    pods: BoundPods | None = None,
    now: float | None = None,
    evicting: frozenset[PodKey] = frozenset(),
    carried: Carried | None = None,
    early: Callable[[list[StatusWrite]], None] | None = None,
) -> Decision:
    """``carried``: what the caller's last round computed, rendered and found nothing to write
    for (updated), to redo none of it where the inputs are the same. ``early``: called with the
    writes of the queues whose spec moved (``EARLY_AT_MOST`` at most, else none is early) as
    soon as the engines are done, before the other queues are rendered and diffed; they are
    among the decision's writes too."""
    first = None
    if early is not None:
        moved = [record for record in queues if spec_unseen(record)]
        if 0 < len(moved) <= EARLY_AT_MOST:
            first = ([record.name for record in moved], _early_writes(moved, stamp, early))
    published = publication(
        snapshot, policies_by_name, held=held, released=released, unbound=unbound, pods=pods,
        now=now, evicting=evicting, carried=carried, first=first,
    )  # fmt: skip
    statuses = queue_writes(
        queues, published.queues, now=stamp, unchanged=carried.statuses if carried else None
    )
    statuses += policy_writes(policies, published.policies, now=stamp)
    annotations = annotation_writes(
        nodes, published.nodes, SHARE_ANNOTATIONS, carried.node_writes if carried else None
    )
    telemetry.QUEUES.export(published.shares)
    return Decision(published, statuses, annotations)
