"""The periodic node QoS check: usage -> engine -> actions -> status, annotations, taints.

Every ``checkIntervalSeconds`` (the smallest among the policies) one check runs over all nodes
that a NodeQosEnsurancePolicy selects:

1. read usage from metrics.k8s.io (all nodes and pods in two paged LISTs);
2. run the engine per node, with the counters and taint state persisted in policy status;
3. drive each node's action flow, telling the planner what each action really did, so a
   release counts only when the eviction or resize was accepted, and a refused eviction ends
   the node's evictions for the check (one a PodDisruptionBudget blocked is reported as
   ``EvictionBlocked`` on the pod, its node and the policies, and counted);
4. publish: policy status (only what changed), the ``qos-waterlines`` annotation, the taint.

Everything the next check needs is read back from the cluster, so a restarted operator
continues an episode instead of starting over. A calm cluster causes no writes at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from sharekeeper import telemetry
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.qos import Outcome, PlanReport, QosAction, accept_all, node_actions
from sharekeeper.engine.qos.releasing import SETTLE_SECONDS
from sharekeeper.engine.qos.throttling import split_cpu_limit
from sharekeeper.kube.kinds import reference
from sharekeeper.kube.usage import UsageSource, UsageUnavailable
from sharekeeper.kube.writing import Writes
from sharekeeper.loops.echoes import Echoes
from sharekeeper.loops.health import LoopHealth
from sharekeeper.loops.lane import Lane
from sharekeeper.model.objects import MutableObj, Obj, rfc3339
from sharekeeper.model.qos import TAINT, WATERLINES_ANNOTATION, newest_sample_time
from sharekeeper.model.records import OwnRecord
from sharekeeper.pipeline.qos import (
    ClusterCheck,
    NodeCheck,
    Outcomes,
    cluster_check,
    node_outputs,
    policy_statuses,
)
from sharekeeper.publish.annotations import annotation_writes
from sharekeeper.publish.statuses import own_writes, stale_writes

logger = logging.getLogger(__name__)

QOS_EVENTS = {"Invalid"}
DEFAULT_INTERVAL = 10.0
EVICTION_OUTCOMES = {
    "accepted": Outcome.ACCEPTED,
    "blocked": Outcome.BLOCKED,
    "refused": Outcome.REFUSED,
    "gone": Outcome.REFUSED,  # the check's pods are read now: a gone one is news to it
}
EVICTION_BLOCKED = "EvictionBlocked"


@dataclass
class QosLoop:
    writer: Writes
    usage: UsageSource
    store: ClusterStore
    clock: Callable[[], float] = time.time
    checks: int = 0
    # The persisted state is in these statuses: never read back an older one than we wrote.
    _statuses: Echoes[str, Obj] = field(default_factory=Echoes)
    store_synced: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the owner once every initial list is in the store."""
    lane: Lane = field(default_factory=Lane)
    """Held while a check computes; the owner shares it with the share round."""
    health: LoopHealth = field(init=False)
    _unavailable: str | None = field(default=None, init=False)
    """Why usage could not be read at the last check, if it could not."""
    _unreadable: frozenset[str] = field(default=frozenset(), init=False)
    """Nodes whose usage could not be read at the last check."""
    _clock_ahead: bool = field(default=False, init=False)
    """Whether the last check's usage was stamped ahead of our clock by more than the settle
    margin."""

    def __post_init__(self) -> None:
        self.health = LoopHealth("qos", self._interval)

    async def run(self) -> None:
        await self.store_synced.wait()
        self._statuses = Echoes()  # as in Recompute.run: a new term trusts only what it reads
        while True:
            started = time.monotonic()
            self.health.started()
            try:
                await self.check()
            except Exception as error:
                logger.exception("QoS check failed; retrying at the next interval")
                self.health.failed(error)
                await self._report_stale()
            else:
                self.health.succeeded()
            await asyncio.sleep(max(0.0, self._interval() - (time.monotonic() - started)))

    async def _report_stale(self) -> None:
        """``Stale`` on every policy: what their status shows is the last good check's."""
        problem = f"the last QoS check failed, nothing was checked: {self.health.error}"
        stamp = rfc3339(self.clock())
        records = [self._with_written(r) for r in self.store.qos_policies.sorted_records()]
        try:
            for write in stale_writes("NodeQosEnsurancePolicy", records, problem, now=stamp):
                stored = await self.writer.patch_status(write.kind, write.name, write.patch)
                self._statuses.wrote(write.name, stored)
        except Exception:
            logger.exception("could not report the failed check on the policies")

    def forget(self, kind: str, name: str) -> None:
        """As ``Recompute.forget``, for our policies' statuses."""
        if kind == "NodeQosEnsurancePolicy":
            self._statuses.forget(name)

    def _interval(self) -> float:
        intervals = [
            float(r.spec.get("spec", {}).get("checkIntervalSeconds", DEFAULT_INTERVAL))
            for r in self.store.qos_policies.records.values()
            if r.spec is not None
        ]
        return min(intervals, default=DEFAULT_INTERVAL)

    async def check(self) -> ClusterCheck:
        started = time.perf_counter()
        now = int(self.clock())
        stamp = rfc3339(now)
        records = [self._with_written(r) for r in self.store.qos_policies.sorted_records()]
        policies = [{**r.spec, "status": r.status} for r in records if r.spec is not None]
        # 1. Usage, all at once; unavailable usage is a fact the engine handles, not a crash.
        node_metrics: list[MutableObj] | None = None
        pod_metrics: list[MutableObj] | None = None
        problem: str | None = None
        #    Without a policy nothing needs usage (the check still clears what deleted
        #    policies left on nodes), and a cluster without metrics-server is no news then.
        if policies:
            await self.lane.after_rounds()
            reading = time.perf_counter()
            try:
                node_metrics = await self.usage.node_metrics()
                pod_metrics = await self.usage.pod_metrics()
            except UsageUnavailable as error:
                node_metrics = pod_metrics = None
                problem = str(error)
            self._usage_problem(problem)
            self._usage_clock(node_metrics, now)
            telemetry.QOS_USAGE_SECONDS.observe(time.perf_counter() - reading)
        # 2. The engine, per node, from the state persisted in the policies' status: on the
        #    records read on arrival (a node's pods copied at once as the check comes to it,
        #    the watches keep changing the store), in a worker thread so the event loop keeps
        #    serving watches and probes. Taking turns with the share round (``lane``).
        store = self.store
        async with self.lane:
            nodes = [r.qos for r in store.nodes.sorted_records() if r.qos is not None]
            namespaces = dict(store.namespaces.records)
            check = await asyncio.to_thread(
                cluster_check, policies, nodes, store.pods.qos_views_on, namespaces,
                node_metrics=node_metrics, pod_metrics=pod_metrics, now=now, usage_problem=problem,
            )  # fmt: skip
        self._unreadable_usage(check.unreadable_usage)
        # 3. Act, telling the planner what each action really did.
        outcomes = {c.node.name: await self._act(c) for c in check.nodes}
        # 4. Publish what changed.
        current = {r.name: r.status for r in records}
        desired = policy_statuses(check, outcomes, current, now=stamp)
        for write in own_writes("NodeQosEnsurancePolicy", records, desired, QOS_EVENTS, now=stamp):
            stored = await self.writer.patch_status(write.kind, write.name, write.patch)
            self._statuses.wrote(write.name, stored)
        await self._publish_nodes(check)
        self.checks += 1
        telemetry.QOS_CHECK_SECONDS.observe(time.perf_counter() - started)
        return check

    def _usage_problem(self, problem: str | None) -> None:
        """Say it once when usage becomes unavailable, and once when it is back; the policies'
        ``UsageAvailable`` and ``Ready`` conditions (MetricsUnavailable) and
        ``sharekeeper_usage_available`` say it all along."""
        if problem != self._unavailable:
            if problem is not None:
                logger.warning("usage unavailable, nothing is acted on: %s", problem)
            else:
                logger.info("usage available again")
        self._unavailable = problem
        telemetry.USAGE_AVAILABLE.set(0 if problem is not None else 1)

    def _usage_clock(self, node_metrics: list[MutableObj] | None, now: int) -> None:
        """How far the usage's clock runs ahead of ours, said once when it passes the settle
        margin and once when it is back: the check then takes samples to have begun earlier
        than they say (docs/qos.md, "Usage on its way out"), which an NTP fix makes needless."""
        newest = newest_sample_time(node_metrics) if node_metrics else None
        ahead = max(newest - now, 0) if newest is not None else 0
        telemetry.QOS_USAGE_CLOCK_AHEAD.set(ahead)
        skewed = ahead > SETTLE_SECONDS
        if skewed and not self._clock_ahead:
            logger.warning(
                "usage is stamped %ds ahead of this operator's clock: are the metrics "
                "pipeline's clocks and ours in step (NTP)?", ahead,
            )  # fmt: skip
        elif self._clock_ahead and not skewed:
            logger.info("usage is stamped in step with this operator's clock again")
        self._clock_ahead = skewed

    def _unreadable_usage(self, problems: Mapping[str, str]) -> None:
        """A node whose NodeMetrics or PodMetrics cannot be read is said once, when it starts
        and when it ends (its rules observe Missing in the status all along)."""
        now = frozenset(problems)
        for node in sorted(now - self._unreadable):
            logger.warning("usage of node %s cannot be read: %s", node, problems[node])
        for node in sorted(self._unreadable - now):
            logger.info("usage of node %s can be read again", node)
        self._unreadable = now

    def _with_written(self, record: OwnRecord[Obj]) -> OwnRecord[Obj]:
        status = self._statuses.current(record.name, record.status)
        return record if status is record.status else replace(record, status=status)

    async def _act(self, node_check: NodeCheck) -> Outcomes:
        flow = node_actions(node_check.result, node_check.node)
        refused: list[tuple[QosAction, str]] = []
        blocked: list[tuple[QosAction, str]] = []
        try:
            action = next(flow)
            while True:
                outcome, detail = await self._carry_out(action)
                if outcome is Outcome.BLOCKED and action.kind != "evict":
                    outcome = Outcome.REFUSED  # only an eviction has a budget to block it
                if outcome is Outcome.REFUSED:
                    refused.append((action, detail))
                elif outcome is Outcome.BLOCKED:
                    blocked.append((action, detail))
                    telemetry.QOS_EVICTIONS_BLOCKED.labels(action.metric).inc()
                await self._announce(action, outcome, detail)
                action = flow.send(outcome)
        except StopIteration as stop:
            report: PlanReport = stop.value
        preview = accept_all(node_actions(node_check.result, node_check.node, preview=True))
        return Outcomes.from_reports(
            report, preview, refused=tuple(refused), blocked=tuple(blocked)
        )

    async def _carry_out(self, action: QosAction) -> tuple[Outcome, str]:
        """Carry out one action; anything unexpected counts as refused, never as released."""
        try:
            return await self._dispatch(action)
        except Exception as error:
            logger.exception("%s %s failed", action.kind, action.pod)
            return Outcome.REFUSED, f"failed: {error}"

    async def _dispatch(self, action: QosAction) -> tuple[Outcome, str]:
        namespace, name = action.pod.namespace, action.pod.name
        if action.kind == "evict":
            outcome, detail = await self.writer.evict_pod(
                namespace, name, grace_period_seconds=action.grace_period_seconds
            )
            return EVICTION_OUTCOMES[outcome], detail
        # A pod without a CPU limit has nothing to resize (adding one would change its QoS
        # class): its target is only recorded in the policy's status, for a node agent.
        record = self.store.pods.records.get(action.pod)
        parts = (
            split_cpu_limit(record.cpu_limits if record else {}, action.cpu_limit_milli)
            if action.cpu_limit_milli is not None
            else {}
        )
        if not parts:
            return Outcome.ACCEPTED, "recorded (no CPU limit to resize)"
        refusal = await self.writer.resize_cpu_limits(namespace, name, parts)
        return (Outcome.ACCEPTED, "resized") if refusal is None else (Outcome.REFUSED, refusal)

    async def _announce(self, action: QosAction, outcome: Outcome, detail: str) -> None:
        if outcome is Outcome.BLOCKED:
            await self._announce_blocked(action, detail)
            return
        verb = {"evict": "Evicted", "throttle": "Throttled", "restore": "Restored"}[action.kind]
        reason = verb if outcome is Outcome.ACCEPTED else f"{verb}Refused"
        message = f"{action.kind} {action.pod} on {action.node} for {action.metric}: {detail}"
        warning = outcome is not Outcome.ACCEPTED or action.kind == "evict"
        for target in self._pod_and_node(action):
            await self.writer.event(target, reason, message, warning=warning)

    def _pod_and_node(self, action: QosAction) -> list[dict[str, str]]:
        """The references an action's Events go to: its pod, then its node."""
        pod = action.pod
        return [
            reference("Pod", pod.name, namespace=pod.namespace, uid=self.store.pods.uid(pod)),
            reference("Node", action.node),
        ]

    async def _announce_blocked(self, action: QosAction, detail: str) -> None:
        """``EvictionBlocked`` Warnings on the pod, its node and the policies behind the
        waterline: the pod's PodDisruptionBudget refused its eviction, and no other pod goes
        in its place."""
        message = (
            f"evict {action.pod} on {action.node} for {action.metric}: blocked by a "
            f"PodDisruptionBudget ({detail}); no pod ranked after it is evicted in its place"
        )
        policies = self.store.qos_policies.records
        targets = self._pod_and_node(action)
        for name in action.policies:
            record = policies.get(name)
            uid = record.uid if record is not None else ""
            targets.append(reference("NodeQosEnsurancePolicy", name, uid=uid))
        for target in targets:
            await self.writer.event(target, EVICTION_BLOCKED, message, warning=True)

    async def _publish_nodes(self, check: ClusterCheck) -> None:
        outputs = node_outputs(check)
        records = self.store.nodes.sorted_records()
        # A calm node gets no annotation; one published earlier is removed (the key is ours).
        desired = {
            name: {WATERLINES_ANNOTATION: out["waterlines"]}
            for name, out in outputs.items()
            if out["waterlines"] is not None
        }
        for write in annotation_writes(records, desired, frozenset({WATERLINES_ANNOTATION})):
            await self.writer.patch_node_annotations(write.node, write.patch)
        for record in records:
            name = record.snapshot.name
            has = any(t.get("key") == TAINT["key"] for t in record.taints)
            want = bool(outputs.get(name, {}).get("tainted"))
            if has != want:
                # Everyone else's taints are kept; a node changed since it was read refuses
                # the write (the next check reads it again).
                taints = [t for t in record.taints if t.get("key") != TAINT["key"]]
                await self.writer.set_taints(
                    name, [*taints, TAINT] if want else taints, record.resource_version
                )
