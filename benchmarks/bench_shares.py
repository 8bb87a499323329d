"""Share engine timings on synthetic clusters with 6 resource dimensions.

Run: ``python benchmarks/bench_shares.py``. Each cluster has Q queues (random weights,
guarantees on a tenth of them, capabilities on a third), Q/10 nodes and two pods per queue
(one running, one pending). The tree rows put the same queues in a tree of depth 5 (each
queue's parent is queue ``(i - 1) // 8``: 6 levels, 5 below the top queue; pods only in the
leaves). Best of 5 runs, two figures per policy:

- ``policy``: the share computation itself (``policy_deserved`` on the dense problem);
- ``end-to-end``: ``deserved_shares`` on the whole snapshot: governance, per-queue accounting
  from the pod totals (kept per event by the operator's store, so pods are not visited), the
  dense problem, the policy and the per-queue results;
- ``a pod later``: the same, as the operator's rounds call it: with the last call's
  ``ShareMemo``, on a snapshot whose pod totals changed by a pod (one more, then one fewer, in
  turn) and whose policies, queues and nodes are the same objects in new tuples;
- ``a weight later``: likewise, on a snapshot in which one queue's weight changed (50 more,
  then back, in turn): the memo keeps its reading with that queue's weight row made again.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial

from sharekeeper.api.policy import policy_spec
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.cluster.ledger import PodLedger
from sharekeeper.engine.resources import sum_amounts
from sharekeeper.engine.shares import (
    PodSnapshot,
    PodTotals,
    PolicySnapshot,
    ShareNode,
    ShareSnapshot,
    Sharing,
    deserved_shares,
)
from sharekeeper.engine.shares.accounting import queue_usage
from sharekeeper.engine.shares.computing import (
    ShareMemo,
    policy_deserved,
    share_problem,
    spec_rows,
)
from sharekeeper.engine.shares.snapshot import NodeName, QueueName


def policy(name: str, sharing: Sharing | None = None) -> PolicySnapshot:
    """A SchedulerPolicy read as the operator reads it (the API model has the defaults)."""
    read = policy_spec({"metadata": {"name": name}}).shares
    return read if sharing is None else replace(read, sharing=sharing)


def sharing(kind: str, **fields: str) -> Sharing:
    """``spec.sharing`` with ``policy: kind`` and ``fields`` (camelCase), read likewise."""
    obj = {"metadata": {"name": "bench"}, "spec": {"sharing": {"policy": kind, **fields}}}
    return policy_spec(obj).shares.sharing


EMPTY_QUEUE = queue_snapshot({"metadata": {"name": "empty"}, "spec": {}})
"""A Queue with the API model's defaults."""

DIMENSIONS = ("cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage", "hugepages-2Mi")
SIZES = (100, 1_000, 10_000)
SHARINGS = (
    sharing("Proportion"),
    sharing("Capacity"),
    sharing("ProportionOptimize", priorityType="Weight"),
    sharing("ProportionOptimize", priorityType="Guarantee"),
    sharing("GuaranteeQuota", elasticOrder="Weight"),
    sharing("GuaranteeQuota", elasticOrder="Share"),
    sharing("GuaranteeQuota", elasticOrder="Random"),
)


def _vector(rng: random.Random, scale: int) -> dict[str, int]:
    return {name: rng.randrange(1, scale) * 1000 for name in DIMENSIONS}


def cluster(
    queues: int, seed: int = 1, fanout: int | None = None
) -> tuple[ShareSnapshot, PodTotals]:
    """The snapshot, and its pod totals with one pod more. ``fanout``: make a tree, queue i
    under queue (i - 1) // fanout, pods in leaves only."""
    rng = random.Random(seed)
    nodes = tuple(
        ShareNode(NodeName(f"node-{i}"), allocatable=_vector(rng, 200))
        for i in range(max(queues // 10, 1))
    )
    queue_snapshots = tuple(
        replace(
            EMPTY_QUEUE,
            name=QueueName(f"queue-{i:05d}"),
            weight=rng.randrange(1, 100),
            guarantee=_vector(rng, 3) if i % 10 == 0 else {},
            capability=_vector(rng, 100) if i % 3 == 0 else {},
            deserved=_vector(rng, 20),
            parent=f"queue-{(i - 1) // fanout:05d}" if fanout and i else None,
        )
        for i in range(queues)
    )
    inner = {queue.parent for queue in queue_snapshots}
    pods = tuple(
        PodSnapshot(
            "bench",
            f"pod-{i}-{running}",
            request={name: amount for name, amount in _vector(rng, 30).items() if name != "pods"},
            node_name=nodes[i % len(nodes)].name if running else None,
            queue_label=queue_snapshots[i].name,
        )
        for i in range(queues)
        for running in (True, False)
        if queue_snapshots[i].name not in inner
    )
    ledger = PodLedger()  # what the operator's store keeps current per event
    for pod in pods:
        ledger.add(pod)
    snapshot = ShareSnapshot(queues=queue_snapshots, nodes=nodes, totals=ledger.totals())
    ledger.add(replace(pods[0], name="one-more"))
    return snapshot, ledger.totals()


def later_rounds(snapshot: ShareSnapshot, more: PodTotals) -> Iterator[ShareSnapshot]:
    """``snapshot`` as the operator's next rounds see it after a pod event each (its totals in
    turn with one pod more, ``more``, and as they are): new tuples of the same policies,
    queues and nodes, and a new dict of the same namespace labels."""
    totals = (more, snapshot.totals)
    copies = [
        # (*items,) is a new tuple where tuple(items) would be the same one.
        replace(
            snapshot,
            policies=(*snapshot.policies,),
            queues=(*snapshot.queues,),
            nodes=(*snapshot.nodes,),
            namespace_labels=dict(snapshot.namespace_labels),
            totals=pods,
        )
        for pods in totals
    ]
    return itertools.cycle(copies)


def reweighted_rounds(snapshot: ShareSnapshot) -> Iterator[ShareSnapshot]:
    """``snapshot`` as the operator's next rounds see it after a weight change each: its middle
    queue 50 heavier, then as it was, in turn, the other queues the same objects."""
    middle = len(snapshot.queues) // 2
    queue = snapshot.queues[middle]
    heavier = replace(queue, weight=queue.weight + 50)
    copies = [
        replace(
            snapshot,
            queues=(*snapshot.queues[:middle], changed, *snapshot.queues[middle + 1 :]),
        )
        for changed in (heavier, queue)
    ]
    return itertools.cycle(copies)


def best_seconds(run: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def timings(
    snapshot: ShareSnapshot, more: PodTotals, kind: Sharing
) -> tuple[float, float, float, float]:
    """The policy alone is timed flat: over a tree it runs inside ``deserved_shares`` only."""
    bench = policy("bench", kind)
    whole = replace(snapshot, policies=(bench,))
    usage = queue_usage([q.name for q in snapshot.queues], snapshot.totals, {}).usage
    allocatable = sum_amounts(node.allocatable for node in snapshot.nodes)
    rows = spec_rows(bench, sorted(snapshot.queues, key=lambda q: q.name), allocatable)
    problem = share_problem(rows, allocatable, usage)
    policy_only = best_seconds(lambda: policy_deserved(problem, bench, 0.0, 0))
    return (
        policy_only,
        best_seconds(lambda: deserved_shares(whole)),
        memoized(whole, later_rounds(whole, more)),
        memoized(whole, reweighted_rounds(whole)),
    )


def memoized(snapshot: ShareSnapshot, rounds: Iterator[ShareSnapshot]) -> float:
    """Best time of ``deserved_shares`` in the operator's ``rounds`` after ``snapshot``'s."""
    memo = ShareMemo()
    deserved_shares(snapshot, memo)
    return best_seconds(lambda: deserved_shares(next(rounds), memo))


def label(kind: Sharing) -> str:
    if kind.policy == "ProportionOptimize":
        return f"{kind.policy}/{kind.priority_type}"
    if kind.policy == "GuaranteeQuota":
        return f"{kind.policy}/{kind.elastic_order}"
    return kind.policy


def main() -> None:
    print(
        f"{'queues':>7}  {'policy':<30} {'policy ms':>10} {'end-to-end ms':>14}"
        f" {'a pod later ms':>15} {'a weight later ms':>18}"
    )
    for size in SIZES:
        snapshot, more = cluster(size)
        for kind in SHARINGS:
            policy_only, whole, later, reweighted = timings(snapshot, more, kind)
            print(
                f"{size:>7}  {label(kind):<30} {policy_only * 1000:>10.1f} {whole * 1000:>14.1f}"
                f" {later * 1000:>15.1f} {reweighted * 1000:>18.1f}"
            )
    tree, more = cluster(SIZES[-1], fanout=8)
    for kind in (sharing("Proportion"), sharing("Capacity")):
        whole_tree = replace(tree, policies=(policy("b", kind),))
        seconds = best_seconds(partial(deserved_shares, whole_tree))
        later = memoized(whole_tree, later_rounds(whole_tree, more))
        reweighted = memoized(whole_tree, reweighted_rounds(whole_tree))
        name = f"{kind.policy} (tree, depth 5)"
        print(
            f"{SIZES[-1]:>7}  {name:<30} {'':>10} {seconds * 1000:>14.1f} {later * 1000:>15.1f}"
            f" {reweighted * 1000:>18.1f}"
        )


if __name__ == "__main__":
    main()
