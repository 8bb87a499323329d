"""The operator's in-memory work at a size, without an API server: what a round and a QoS check
cost once the objects are in the store, and what the store costs to fill and to hold.

    .venv/bin/python benchmarks/bench_store.py [--nodes 5000] [--repeat 5]

The objects are those of ``bench_operator.py`` (30 pods per node, 2 queues per node, one
SchedulerPolicy with overcommit and proportional reservation, one NodeQosEnsurancePolicy over
every node), fed to a ``ClusterStore`` the way a complete list would. Reported:

- fill: reading every object into its record (the parse cost of the operator's initial lists,
  without the HTTP and JSON of the list itself), per pod;
- memory: the growth of the process's RSS from before the objects were built to after the
  store was filled and the objects dropped, per pod; and the objects the cyclic collector then
  tracks (what each of its full collections walks: ``collector.py``);
- one round: snapshot, engines and the diff against statuses as published (the decision; the
  writes are the API server's business), as in ``loops/recompute.py``, with the collector held
  back and the refreeze at its end as in the lane (``loops/lane.py``), best of ``--repeat``;
- one status write's echo: each Queue the first round wrote, as the watch brings it back (the
  object with the status written and a new resourceVersion) and the store reads it, with the
  mirroring loop's look at its origin as the operator wires it (``runtime.py``), per Queue
  (best of ``--repeat``): a weight change at the top size brings 11,000 of them;
- one round after a weight change: the same, when every queue's share moves (the first of the
  repetitions renders every status, the others reuse them and diff); with ``--tree-fanout F``
  the queues are those of ``bench_operator.py --tree-fanout F`` and the change goes to a
  top-level queue;
- one round, a new change: each repetition changes the weight again, so every round renders
  and diffs every queue, as each weight change does in the operator; and how soon in it the
  changed queue's write is ready to be sent (before the others are rendered);
- one /metrics scrape: every metric of the process as Prometheus reads it, the per-queue
  series made then from the last round's result (best of ``--repeat``);
- one QoS check: ``cluster_check`` over every node with node usage for each (best of
  ``--repeat``); reading usage from metrics.k8s.io comes on top in a real cluster;
- one round with ``--held`` more pods held by the admission gate (1 cpu each, spread over the
  queues, one in ten asking for a GPU), settled otherwise: the same round, now also deciding
  which to release;
- the same round with reclaim in Preview (no wait, a bound of ``--max-evictions``): the gate
  keeps nearly every held pod for its queue's share, which the workload's pending pods fill by
  its count, so they do not reclaim (``pipeline/reclaiming.py``); then again with ``--held`` of
  those pending pods found Unschedulable by the scheduler (spread over the queues), which
  reclaim for themselves: the cost of deciding for that many waiting pods;
- reclaim's part of that round (issue 24's "reclaim decision", target 100 ms), as the round
  calls it, and its three stages: gathering the waiting pods, the engine's inputs, the engine
  (``ReclaimParts``); first on ``--reclaim-rounds`` rounds that follow one another with
  nothing changed, then on as many with ``--churn`` bound pods deleted before each round, as
  completions do (their queues' and nodes' numbers move, and under Proportion nearly every
  queue's deserved share: little of what the last round kept can be reused). The best round,
  the median one and the quartiles: the machine's speed moves by up to half between runs
  minutes apart, so two versions compare by the middle half of many rounds, alternating.

Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, generate_latest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "e2e"))

from bench_operator import GPU, Workload  # noqa: E402
from bench_shares import best_seconds  # noqa: E402
from objects import pod  # noqa: E402
from sharekeeper import collector  # noqa: E402
from sharekeeper.api.mirroring import QueueOrigin  # noqa: E402
from sharekeeper.cluster.snapshots import node_policies, share_snapshot, specs  # noqa: E402
from sharekeeper.cluster.store import ClusterStore, Listeners  # noqa: E402
from sharekeeper.loops.mirroring import Mirroring  # noqa: E402
from sharekeeper.loops.recompute import Decision, _decide  # noqa: E402
from sharekeeper.model.pods import ADMISSION_GATE  # noqa: E402
from sharekeeper.pipeline import reclaiming, shares  # noqa: E402
from sharekeeper.pipeline.qos import cluster_check  # noqa: E402
from sharekeeper.pipeline.reclaiming import PolicyReclaim  # noqa: E402
from sharekeeper.pipeline.shares import Carried  # noqa: E402

STAMP = "2026-01-01T00:00:00Z"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def objects(workload: Workload) -> list[dict[str, Any]]:
    built = [
        *workload.node_objects(),
        *workload.queue_objects(),
        workload.scheduler_policy(),
        workload.qos_policy(),
        *workload.pod_objects(),
    ]
    for obj in built:
        stored(obj)
    return built


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the UID and generation the API server gives it."""
    meta = obj.setdefault("metadata", {})
    meta.setdefault("uid", f"uid-{meta['name']}")
    meta.setdefault("generation", 1)
    return obj


def status_echoes(workload: Workload, decision: Decision, version: int) -> list[dict[str, Any]]:
    """Each Queue the round wrote, as the watch brings it back: the object as created, with
    the status written (a copy read from JSON, as the watch's) and a new resourceVersion
    (``version`` after the creation's)."""
    written = {write.name: write.status for write in decision.statuses if write.kind == "Queue"}
    echoes = []
    for obj in map(stored, workload.queue_objects()):
        status = written.get(obj["metadata"]["name"])
        if status is not None:
            obj["metadata"]["resourceVersion"] = str(2 + version)
            echoes.append({**obj, "status": json.loads(json.dumps(status))})
    return echoes


# What the operator carries from round to round, carried here too.
CARRIED = Carried()
REFREEZER = collector.Refreezer()


def one_round(
    store: ClusterStore, *, now: float | None = None, early: Callable[[Any], None] | None = None
) -> Decision:
    """A round as the operator's turn of the lane makes it: the collector held back while it
    computes, and what it kept frozen before the collector runs again. With ``now``, as the
    operator's round with reclaim on: the bound pods and the time are passed in too;
    ``early``: called with the writes of the queues whose spec moved, as the operator sends
    them, before the rest is rendered."""
    collecting = collector.hold_back()
    try:
        queues, policies = store.queues.sorted_records(), store.policies.sorted_records()
        snapshot = share_snapshot(
            store, specs(queues), [spec.shares for spec in specs(policies)], now_seconds=0.0
        )
        nodes = store.nodes.sorted_records()
        decision = _decide(
            snapshot, node_policies(policies), queues, policies, nodes, stamp=STAMP,
            held=store.pods.held(), carried=CARRIED,
            pods=store.pods if now is not None else None, now=now, early=early,
        )  # fmt: skip
        # The operator makes a full pass a turn later, outside its round; the figures here are
        # the best of several rounds, which leaves out the rare round followed by one.
        if REFREEZER():
            REFREEZER.full_pass()
    finally:
        collector.let_go(collecting)
    return decision


def held_pods(workload: Workload, count: int) -> list[dict[str, Any]]:
    """Pods the admission gate holds, as the webhook leaves them."""
    queues = workload.queue_names()
    built = []
    for index in range(count):
        held = pod(f"held-{index:06d}", queues[index % len(queues)], "1", "2Gi")
        held["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
        held["metadata"]["creationTimestamp"] = f"2026-01-01T{index // 3600 % 24:02d}:" + (
            f"{index // 60 % 60:02d}:{index % 60:02d}Z"
        )
        if index % 10 == 0:
            resources = held["spec"]["containers"][0]["resources"]
            resources["requests"][GPU] = "1"
            resources["limits"] = {GPU: "1"}
        built.append(held)
    return built


def unschedulable_pods(workload: Workload, count: int) -> list[dict[str, Any]]:
    """``count`` of the workload's pending pods, spread over them, as kube-scheduler leaves a pod
    it found no node for."""
    pending = [obj for obj in workload.pod_objects() if not obj["spec"].get("nodeName")]
    chosen = pending[:: max(len(pending) // count, 1)][:count]
    for obj in chosen:
        obj["metadata"].update(uid=f"uid-{obj['metadata']['name']}", generation=1)
        obj.setdefault("status", {})["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "lastTransitionTime": STAMP}
        ]  # fmt: skip
    return chosen


class ReclaimParts:
    """Reclaim's part of each round, timed where the round calls it: ``reclaim_rounds``, and in
    it gathering the waiting pods, the engine's inputs and the engine (each wrapped where the
    pipeline looks it up, for the time of ``timing``; four clock reads a round)."""

    STAGES = (
        ("reclaim", shares, "reclaim_rounds"),
        ("gathering", reclaiming, "_waiting"),
        ("inputs", reclaiming, "reclaim_inputs"),
        ("engine", reclaiming, "plan_reclaim"),
    )

    def __init__(self) -> None:
        self.rounds: list[dict[str, float]] = []
        self._now: dict[str, float] = {}

    @contextmanager
    def timing(self) -> Iterator[None]:
        originals = [
            (stage, module, name, getattr(module, name)) for stage, module, name in self.STAGES
        ]
        for stage, module, name, original in originals:
            setattr(module, name, self._timed(stage, original))
        try:
            yield
        finally:
            for _, module, name, original in originals:
                setattr(module, name, original)

    def _timed(self, stage: str, run: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return run(*args, **kwargs)
            finally:
                self._now[stage] = self._now.get(stage, 0.0) + time.perf_counter() - started

        return timed

    def round(self, run: Callable[[], object]) -> None:
        self._now = {}
        run()
        self.rounds.append(self._now)

    def report(self) -> str:
        """The best round's reclaim part and its stages, then the median round's, then the
        quartiles of the part (this machine's speed moves between runs: compare the middle
        half of many rounds, not a best)."""
        ranked = sorted(self.rounds, key=lambda parts: parts["reclaim"])
        best, median = ranked[0], ranked[len(ranked) // 2]
        quartiles = (ranked[len(ranked) // 4]["reclaim"], ranked[3 * len(ranked) // 4]["reclaim"])
        return "; ".join(
            [
                f"{label} {parts['reclaim'] * 1000:.0f} ms (gathering "
                f"{parts.get('gathering', 0) * 1000:.0f}, inputs "
                f"{parts.get('inputs', 0) * 1000:.0f}, engine {parts.get('engine', 0) * 1000:.0f})"
                for label, parts in (("best", best), ("median", median))
            ]
            + [f"p25-p75 {quartiles[0] * 1000:.0f}-{quartiles[1] * 1000:.0f} ms"]
        )


def published(store: ClusterStore, decision: Decision) -> None:
    """Every status and annotation as if the writes had landed and the watch brought them back:
    a status as a copy read from JSON, as the watch's is (the very objects the round rendered
    would make every later diff compare them by identity)."""
    for write in decision.statuses:
        kind = store.queues if write.kind == "Queue" else store.policies
        shown = json.loads(json.dumps(write.status))
        kind.records[write.name] = replace(kind.records[write.name], status=shown)
    for note in decision.annotations:
        store.nodes.records[note.node] = replace(
            store.nodes.records[note.node], annotations=note.annotations
        )


def one_check(store: ClusterStore) -> object:
    policies = [{**r.spec, "status": r.status} for r in store.qos_policies.sorted_records()]
    nodes = [r.qos for r in store.nodes.sorted_records() if r.qos is not None]
    usage = [
        {"metadata": {"name": node.name}, "usage": {"cpu": "2", "memory": "8Gi"}} for node in nodes
    ]
    return cluster_check(
        policies, nodes, store.pods.qos_views_on, dict(store.namespaces.records),
        node_metrics=usage, pod_metrics=[], now=0,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--held", type=int, default=10_000, help="pods held by the gate")
    parser.add_argument("--max-evictions", type=int, default=100,
                        help="the reclaim round's bound")  # fmt: skip
    parser.add_argument("--tree-fanout", type=int, default=0,
                        help="the queues as leaves of a tree of this fanout (0: flat)")  # fmt: skip
    parser.add_argument("--churn", type=int, default=200,
                        help="bound pods deleted before each churned reclaim round")  # fmt: skip
    parser.add_argument("--reclaim-rounds", type=int, default=12,
                        help="reclaim rounds timed, quiet and churned each")  # fmt: skip
    args = parser.parse_args()

    collector.tune()  # as the operator runs
    workload = Workload(nodes=args.nodes, tree_fanout=args.tree_fanout)
    gc.collect()
    before = rss_mib()
    built = objects(workload)

    # The mirroring loop only looks at each Queue's origin here: it never runs, so it never
    # writes (no writer) nor reads the Volcano Queues' watch (no source).
    def origin_seen(name: str, old: QueueOrigin | None, new: QueueOrigin | None) -> None:
        mirroring.origin_seen(name, old, new)

    store = ClusterStore(Listeners(origin=origin_seen))
    mirroring = Mirroring(writer=None, store=store, source=None)  # type: ignore[arg-type]
    started = time.perf_counter()
    store.load(built)
    filled = time.perf_counter() - started
    del built
    collector.settle()  # as the operator does once its initial lists are in
    held = rss_mib() - before
    tracked = gc.get_freeze_count() + len(gc.get_objects())

    first = one_round(store)
    published(store, first)
    collector.settle()  # and once its first round is decided
    steady = best_seconds(lambda: one_round(store), args.repeat)
    assert not one_round(store).statuses, "a settled store must need no write"
    # Each repetition's echoes carry versions of their own, as each write's does: an object
    # seen again at the version it has is no news to the mirroring loop, and costs it less.
    versions = [status_echoes(workload, first, version) for version in range(args.repeat)]
    echoes, written = iter(versions), len(versions[0])

    def echoed() -> None:
        for echo in next(echoes):
            store.queues.event("MODIFIED", echo)

    echo = best_seconds(echoed, args.repeat) / written

    # The first queue a weight change of bench_operator.py goes to: it moves every share.
    target = workload.change_targets()[0]

    def weight_changed() -> None:
        queue = store.queues.records[target]
        assert queue.spec is not None
        store.queues.records[queue.name] = replace(
            queue,
            spec=replace(queue.spec, weight=queue.spec.weight + 50),
            generation=queue.generation + 1,
        )

    weight_changed()
    moved = best_seconds(lambda: one_round(store), args.repeat)
    moved_writes = len(one_round(store).statuses)

    handed: list[float] = []

    def round_after_a_change() -> Decision:
        weight_changed()
        started = time.perf_counter()
        return one_round(store, early=lambda _: handed.append(time.perf_counter() - started))

    each = best_seconds(round_after_a_change, args.repeat)
    scrape = best_seconds(lambda: generate_latest(REGISTRY), args.repeat)
    check = best_seconds(lambda: one_check(store), args.repeat)
    store.pods.listed(held_pods(workload, args.held))
    published(store, one_round(store))  # the gated counts are in every status now
    gating = best_seconds(lambda: one_round(store), args.repeat)
    released = len(one_round(store).publication.gates.released)
    # Reclaim planned for every held pod (Preview, no wait), against the queues above their
    # share: what the operator's round adds with reclaim on (its inputs and the engine).
    reclaiming = workload.scheduler_policy()
    reclaiming["spec"]["reclaim"] = {
        "mode": "Preview", "afterSeconds": 0, "maxEvictionsPerRound": args.max_evictions,
    }  # fmt: skip
    reclaiming["metadata"].update(uid="uid-reclaiming", generation=2)
    store.policies.event("MODIFIED", reclaiming)
    later = 1_800_000_000.0  # after every held pod's creation
    published(store, one_round(store, now=later))
    reclaim = best_seconds(lambda: one_round(store, now=later), args.repeat)
    (planned,) = one_round(store, now=later).publication.reclaims.values()
    store.pods.listed(unschedulable_pods(workload, args.held))
    published(store, one_round(store, now=later))
    stuck = best_seconds(lambda: one_round(store, now=later), args.repeat)
    (planned_stuck,) = one_round(store, now=later).publication.reclaims.values()
    quiet, churned = ReclaimParts(), ReclaimParts()
    bound = [obj for obj in workload.pod_objects() if obj["spec"].get("nodeName")]
    leaving = iter(bound[:: max(len(bound) // (args.churn * args.reclaim_rounds), 1)])

    def after_churn() -> Decision:
        for _, obj in zip(range(args.churn), leaving, strict=False):
            store.pods.event("DELETED", obj)
        return one_round(store, now=later)

    for parts, run in ((quiet, lambda: one_round(store, now=later)), (churned, after_churn)):
        with parts.timing():
            for _ in range(args.reclaim_rounds):
                parts.round(run)

    pods = workload.pods
    print(f"{args.nodes:,} nodes, {pods:,} pods, {workload.queues:,} queues")
    print(f"fill the store          {filled:6.2f} s   ({filled / pods * 1e6:.0f} us per pod)")
    print(f"memory held             {held:6.0f} MiB ({held * 2**20 / pods:.0f} bytes per pod)")
    print(f"objects tracked     {tracked:10,}     ({tracked / pods:.1f} a pod, for the collector)")
    print(f"one round, settled      {steady * 1000:6.0f} ms  (0 writes)")
    print(f"one status write's echo {echo * 1e6:6.1f} us  ({written:,} Queues, by the watch)")
    print(f"one round, weight moved {moved * 1000:6.0f} ms  ({moved_writes:,} status writes)")
    print(f"one round, a new change {each * 1000:6.0f} ms  (every queue rendered again)")
    print(f"  its queue's write ready {min(handed) * 1000:6.0f} ms  (handed over to be sent)")
    print(f"one /metrics scrape     {scrape * 1000:6.0f} ms  (every queue's series made)")
    print(f"one QoS check           {check * 1000:6.0f} ms  (every node)")
    print(
        f"one round, {args.held:,} held  {gating * 1000:6.0f} ms  ({released:,} released, "
        "settled otherwise)"
    )
    print(f"  and reclaim Preview     {reclaim * 1000:6.0f} ms  ({reclaimed(planned)})")
    print(f"  {args.held:,} Unschedulable too {stuck * 1000:4.0f} ms  ({reclaimed(planned_stuck)})")
    print(f"    reclaim's part, nothing changed: {quiet.report()}")
    print(f"    {args.churn} bound pods gone before each: {churned.report()}")


def reclaimed(planned: PolicyReclaim) -> str:
    inputs, plan = planned.inputs, planned.plan
    candidates = sum(map(len, inputs.running.values()))
    return (
        f"{len(inputs.waiting):,} waiting, {candidates:,} candidates in {len(inputs.running):,} "
        f"queues above their share, {len(plan.reclaims):,} served, {plan.evictions} evictions "
        "planned"
    )


if __name__ == "__main__":
    main()
