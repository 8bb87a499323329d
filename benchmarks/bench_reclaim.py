"""Reclaim engine timings at the design's top size: one round's plan, best of N runs.

Run: ``.venv/bin/python benchmarks/bench_reclaim.py`` (``--help`` for the sizes). The cluster:

- 5,000 nodes of 64 cpu / 256Gi / 110 pods; every tenth one also has 8 GPUs;
- 10,000 queues: 100 parents of 99 leaves each;
- about 136,000 running pods: each node is filled with pods of random leaves (1, 2 or 4 cpu;
  2, 4 or 8Gi; on GPU nodes every third asks for a GPU) until one no longer fits or 40 run,
  so every node is full in cpu;
- deserved: parents are in turn "big" or "small"; leaves deserve 60%, 200% or 100% of what
  they run (in turn), times 1.4 in a big parent and 0.7 in a small one, scaled so that the
  leaves together deserve 95% of the cluster's cpu and of the memory in use; a parent
  deserves what its leaves do, so about half of the parents are above their share. The
  candidates are the pods of the queues above their deserved (the caller's filter), by
  queue as the pipeline gathers them: about 68,000;
- 10,000 waiting pods, the replicas of Jobs of ``--job-size`` pods (20 by default; 1: every
  pod on its own), each Job of one of 12 shapes in a random leaf; nine Jobs in ten waited
  long enough;
- the round's bound: ``--max-evictions`` (100 by default).

Only ``plan_reclaim`` is timed (the inputs are built once), as it is ("plan") and as the
operator computes it, in its round's turn of the lane, where the cyclic collector is held back
("lane", ``loops/lane.py``). Five rounds:

``typical``
    the cluster above;
``siblings``
    every parent below its deserved, so that only leaves of the reclaimer's own parent may
    give (most candidates are out of reach, and most nodes too);
``quiet``
    the same with nothing overused (no candidates): the price of asking every round;
``constrained``
    the typical cluster where the waiting pods' own constraints (node selector, affinity,
    taints: ``Waiting.nodes``) keep them off the GPU nodes (tainted), and every other Job of
    20 to one of five zones of the other nodes (six distinct node sets in all);
``adversarial``
    every waiting pod in an under-share leaf, each of a different shape (no two walks share
    a cached failure), and a bound of 10,000 evictions;
``concentrated``
    the typical cluster where only the pods of one node in 50 may be reclaimed (the others
    protected, as if kube-system's): more giving pods than ``GIVERS_LISTED``, on 100 of the
    5,000 nodes, so that each reclaimer screens every node rather than listing the givers'.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from sharekeeper import collector
from sharekeeper.engine.reclaim import (
    Gang,
    NodeState,
    QueueState,
    ReclaimInputs,
    ReclaimPlan,
    ReclaimSettings,
    Running,
    Waiting,
    plan_reclaim,
)

GI = 2**30
GPU = "nvidia.com/gpu"
NOW = 1_000_000.0
"""The rounds' time: a waiting pod has waited ``NOW`` - its ``since``."""

PodSpec = tuple[str, str, dict[str, int], int, float, bool]
"""A running pod before it is made a ``Running``: name, node, request, priority, created,
protected."""


def cluster(sizes: argparse.Namespace) -> ReclaimInputs:
    """Nodes filled with pods of random leaves until a pod no longer fits (or ``pods_per_node``
    pods run): every node is (nearly) full."""
    rng = random.Random(sizes.seed)
    leaves = [
        f"q{p:03d}-{i:03d}" for p in range(sizes.parents) for i in range(sizes.leaves_per_parent)
    ]
    node_states: list[NodeState] = []
    pods: dict[str, list[PodSpec]] = {}
    allocated: dict[str, dict[str, int]] = {leaf: {} for leaf in leaves}
    for n in range(sizes.nodes):
        # One string per node, which its pods name too, as the pipeline hands them over.
        name = f"node-{n:05d}"
        gpus = 8000 if n % 10 == 0 else 0
        allocatable = {"cpu": 64_000, "memory": 256 * GI, "pods": 110}
        if gpus:
            allocatable[GPU] = gpus
        used = {"cpu": 0, "memory": 0, "pods": 0, GPU: 0}
        for i in range(sizes.pods_per_node):
            request = {"cpu": rng.choice((1000, 2000, 4000)), "memory": rng.choice((2, 4, 8)) * GI}
            if gpus and i % 3 == 0 and used[GPU] < gpus:
                request[GPU] = 1000
            if any(used[d] + a > allocatable[d] for d, a in request.items()):
                break
            leaf = rng.choice(leaves)
            pods.setdefault(leaf, []).append(
                (f"p{n}-{i}", name, request, rng.randrange(0, 3) * 100,
                 float(rng.randrange(0, 100_000)), i == 0)
            )  # fmt: skip
            for d, a in request.items():
                used[d] += a
                allocated[leaf][d] = allocated[leaf].get(d, 0) + a
            used["pods"] += 1
        node_states.append(NodeState(name, "bench", allocatable, used, {}, frozenset()))
    total = {d: sum(n.allocatable.get(d, 0) for n in node_states) for d in ("cpu", "memory")}
    queues = shares(allocated, sizes.parents, total)
    overused = {
        q.name for q in queues if any(a > q.deserved.get(d, 0) for d, a in q.allocated.items())
    }
    shapes = [{"cpu": c, "memory": m * GI} for c in (1000, 2000, 4000, 8000) for m in (2, 8, 16)]
    reclaimers: list[Waiting] = []
    while len(reclaimers) < sizes.waiting:
        leaf, shape = rng.choice(leaves), rng.choice(shapes)
        waited = 600.0 if rng.random() < 0.9 else 10.0
        for _ in range(min(sizes.job_size, sizes.waiting - len(reclaimers))):
            i = len(reclaimers)
            reclaimers.append(Waiting("bench", f"w{i}", leaf, shape, NOW - waited, None, None))
    return ReclaimInputs(
        queues=tuple(queues),
        nodes=tuple(node_states),
        running=candidates(pods, overused),
        gangs=tuple[Gang, ...](),
        waiting=tuple(reclaimers),
        excluded=frozenset(),
        settings=ReclaimSettings(60.0, sizes.max_evictions),
        now=NOW,
        rows=None,
    )


def candidates(
    pods: dict[str, list[PodSpec]], overused: set[str]
) -> dict[str, tuple[Running, ...]]:
    """The pods of the overused leaves, made queue by queue (request included) as the pipeline
    makes them each round, so that they lie in memory in the order the round reads them."""
    made: dict[str, tuple[Running, ...]] = {}
    for leaf in sorted(overused & pods.keys()):
        made[leaf] = tuple(
            Running("bench", pod, f"uid-{pod}", leaf, node, dict(request), priority, created,
                    protected, None)
            for pod, node, request, priority, created, protected in pods[leaf]
        )  # fmt: skip
    return made


def shares(
    allocated: dict[str, dict[str, int]], parents: int, total: dict[str, int]
) -> list[QueueState]:
    """Parents are in turn "big" (their leaves deserve 140% of a fair share) or "small" (70%);
    their leaves in turn deserve 60%, 200% or 100% of what they run, times that. Scaled so
    that the leaves deserve 95% of the cluster's cpu and of what runs in memory together; each
    parent deserves what its leaves do. So about half of the parents are above their share."""
    leaves = sorted(allocated)
    wanted = {
        leaf: {
            d: a * (0.6, 2.0, 1.0)[i % 3] * (1.4, 0.7)[int(leaf[1:4]) % 2]
            for d, a in allocated[leaf].items()
        }
        for i, leaf in enumerate(leaves)
    }
    running = {d: sum(a.get(d, 0) for a in allocated.values()) for d in total}
    target = {"cpu": 0.95 * total["cpu"], "memory": 0.95 * running["memory"]}
    summed = {d: sum(w.get(d, 0) for w in wanted.values()) for d in total}
    scale = {d: target[d] / max(summed[d], 1) for d in total}
    queues: list[QueueState] = []
    by_parent: dict[str, list[str]] = {}
    for leaf in leaves:
        by_parent.setdefault(leaf.split("-")[0], []).append(leaf)
    for parent, children in sorted(by_parent.items()):
        deserved_sum: dict[str, int] = {}
        allocated_sum: dict[str, int] = {}
        for leaf in children:
            deserved = {d: int(a * scale.get(d, 1.0)) for d, a in wanted[leaf].items()}
            queues.append(QueueState(leaf, "bench", parent, deserved, allocated[leaf], {}, True))
            for d, a in deserved.items():
                deserved_sum[d] = deserved_sum.get(d, 0) + a
            for d, a in allocated[leaf].items():
                allocated_sum[d] = allocated_sum.get(d, 0) + a
        queues.append(QueueState(parent, "bench", None, deserved_sum, allocated_sum, {}, True))
    assert len(by_parent) == parents
    return queues


def siblings(inputs: ReclaimInputs) -> ReclaimInputs:
    """Every parent 20% below its deserved: only queues of the same parent may give."""
    queues = tuple(
        replace(q, deserved={d: int(a * 1.2) for d, a in q.allocated.items()})
        if q.parent is None
        else q
        for q in inputs.queues
    )
    return replace(inputs, queues=queues)


def quiet(inputs: ReclaimInputs) -> ReclaimInputs:
    queues = tuple(
        replace(q, deserved={d: max(a, q.deserved.get(d, 0)) for d, a in q.allocated.items()})
        for q in inputs.queues
    )
    return replace(inputs, queues=queues, running={})


def constrained(inputs: ReclaimInputs) -> ReclaimInputs:
    names = [node.name for node in inputs.nodes]
    untainted = frozenset(name for i, name in enumerate(names) if i % 10)
    zones = [frozenset(n for i, n in enumerate(names) if i % 10 and i % 5 == z) for z in range(5)]
    waiting = tuple(
        replace(w, nodes=zones[i // 40 % 5] if i // 20 % 2 else untainted)
        for i, w in enumerate(inputs.waiting)
    )
    return replace(inputs, waiting=waiting)


def adversarial(inputs: ReclaimInputs, seed: int) -> ReclaimInputs:
    rng = random.Random(seed)
    by_name = {q.name: q for q in inputs.queues}

    def room(queue: QueueState) -> bool:
        return all(
            queue.deserved.get(d, 0) - queue.allocated.get(d, 0) >= amount
            for d, amount in (("cpu", 8000), ("memory", 16 * GI))
        )

    under = [
        q.name
        for q in inputs.queues
        if q.parent is not None and room(q) and room(by_name[q.parent])
    ]
    reclaimers = tuple(
        Waiting("bench", f"w{i}", rng.choice(under),
                {"cpu": 1000 + i % 3000, "memory": GI + 4096 * i}, NOW - 600.0, None, None)
        for i in range(len(inputs.waiting))
    )  # fmt: skip
    return replace(inputs, waiting=reclaimers, settings=ReclaimSettings(60.0, len(inputs.waiting)))


def concentrated(inputs: ReclaimInputs) -> ReclaimInputs:
    """Only the candidates of every 50th node stay reclaimable; the others are protected."""
    on = {node.name for i, node in enumerate(inputs.nodes) if i % 50 == 0}
    running = {
        queue: tuple(pod if pod.node in on else replace(pod, protected=True) for pod in pods)
        for queue, pods in inputs.running.items()
    }
    return replace(inputs, running=running)


def best(run: Callable[[], ReclaimPlan], repeat: int) -> tuple[float, ReclaimPlan]:
    fastest, plan = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        plan = run()
        fastest = min(fastest, time.perf_counter() - started)
    assert plan is not None
    return fastest, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--parents", type=int, default=100)
    parser.add_argument("--leaves-per-parent", type=int, default=99)
    parser.add_argument("--pods-per-node", type=int, default=40)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--job-size", type=int, default=20)
    parser.add_argument("--max-evictions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    built = time.perf_counter()
    base = cluster(args)
    print(
        f"built in {time.perf_counter() - built:.1f} s: {len(base.nodes)} nodes, "
        f"{len(base.queues)} queues, {sum(map(len, base.running.values()))} candidates "
        f"(of {sum(n.used['pods'] for n in base.nodes)} pods), {len(base.waiting)} waiting "
        f"in Jobs of {args.job_size}, bound {args.max_evictions}"
    )
    print(f"{'round':<12} {'plan ms':>8} {'lane ms':>9} {'served':>7} {'evicted':>8}  not served")
    for name, inputs in (
        ("typical", base),
        ("siblings", siblings(base)),
        ("quiet", quiet(base)),
        ("constrained", constrained(base)),
        ("adversarial", adversarial(base, args.seed)),
        ("concentrated", concentrated(base)),
    ):
        seconds, plan = best(lambda inputs=inputs: plan_reclaim(inputs), args.repeat)
        # The same as the operator computes it, in its round's turn of the lane: no collection
        # while it runs (loops/lane.py).
        collecting = collector.hold_back()
        try:
            in_lane, _ = best(lambda inputs=inputs: plan_reclaim(inputs), args.repeat)
        finally:
            collector.let_go(collecting)
        reasons = Counter(n.reason.value for n in plan.not_served)
        with_victims = sum(1 for r in plan.reclaims if r.victims)
        print(
            f"{name:<12} {seconds * 1000:>8.1f} {in_lane * 1000:>9.1f} {len(plan.reclaims):>7} "
            f"{plan.evictions:>8}  {dict(sorted(reasons.items()))} "
            f"({with_victims} reclaims with victims)"
        )


if __name__ == "__main__":
    main()
