"""Invariants of every share policy on random clusters (DESIGN.md "Testing")."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace

from hypothesis import assume, given
from hypothesis import strategies as st

from builders import share_policy, share_queue, sharing, totals_of
from sharekeeper.engine.shares import (
    PodSnapshot,
    QueueSnapshot,
    ShareNode,
    ShareResult,
    ShareSnapshot,
    Sharing,
    deserved_shares,
)
from sharekeeper.engine.shares.snapshot import NodeName

DIMENSIONS = ("cpu", "memory", "nvidia.com/gpu")
SHARINGS = {
    "Proportion": sharing("Proportion"),
    "Capacity": sharing("Capacity"),
    "ProportionOptimize/Weight": sharing("ProportionOptimize", priority_type="Weight"),
    "ProportionOptimize/Guarantee": sharing("ProportionOptimize", priority_type="Guarantee"),
    "ProportionOptimize/noGuarantee": sharing("ProportionOptimize", guarantee_enable=False),
    "GuaranteeQuota/Weight": sharing("GuaranteeQuota", elastic_order="Weight"),
    "GuaranteeQuota/Share": sharing("GuaranteeQuota", elastic_order="Share"),
    "GuaranteeQuota/Random": sharing("GuaranteeQuota", elastic_order="Random"),
}
FLOORED = {"Proportion", "Capacity", "ProportionOptimize/Guarantee"} | {
    name for name in SHARINGS if name.startswith("GuaranteeQuota")
}

amount = st.integers(min_value=0, max_value=16_000)
vectors = st.dictionaries(st.sampled_from(DIMENSIONS), amount, max_size=3)


@dataclass(frozen=True)
class Cluster:
    queues: tuple[QueueSnapshot, ...]
    nodes: tuple[ShareNode, ...]
    pods: tuple[PodSnapshot, ...]
    seed: int

    def snapshot(self) -> ShareSnapshot:
        return ShareSnapshot(
            queues=self.queues, nodes=self.nodes, totals=totals_of(self.pods), seed=self.seed
        )


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes = tuple(
        ShareNode(NodeName(f"n{i}"), allocatable=draw(vectors))
        for i in range(draw(st.integers(1, 3)))
    )
    queues = tuple(
        share_queue(
            f"q{i}",
            weight=draw(st.integers(1, 10)),
            capability=draw(st.none() | vectors) or {},
            guarantee=draw(st.none() | vectors) or {},
            deserved=draw(vectors),
        )
        for i in range(draw(st.integers(1, 6)))
    )
    pods = tuple(
        PodSnapshot(
            "ns",
            f"p{i}",
            request=draw(vectors),
            node_name=draw(st.none() | st.just("n0")),
            queue_label=draw(st.sampled_from([queue.name for queue in queues])),
        )
        for i in range(draw(st.integers(0, 10)))
    )
    return Cluster(queues, nodes, pods, draw(st.integers(0, 9)))


def _run(snapshot: ShareSnapshot, sharing: Sharing) -> ShareResult:
    policy = share_policy("p", sharing=sharing)
    return deserved_shares(replace(snapshot, policies=(policy,)))


def _get(amounts: Mapping[str, int], name: str) -> int:
    return amounts.get(name, 0)


def _total(snapshot: ShareSnapshot, name: str) -> int:
    return sum(_get(node.allocatable, name) for node in snapshot.nodes)


sharings = st.sampled_from(sorted(SHARINGS))


@given(clusters(), sharings)
def test_bounds_of_every_queue_and_of_the_sum(cluster: Cluster, policy: str) -> None:
    snapshot = cluster.snapshot()
    result = _run(snapshot, SHARINGS[policy])
    for name in DIMENSIONS:
        total = _total(snapshot, name)
        guarantees = sum(_get(share.guarantee, name) for share in result.queues.values())
        deserved = [_get(share.deserved, name) for share in result.queues.values()]
        # Capacity publishes the static spec.deserved, which users may over-subscribe.
        spec_deserved = sum(
            max(_get(queue.deserved, name), _get(queue.guarantee, name))
            for queue in snapshot.queues
        )
        if guarantees <= total and (policy != "Capacity" or spec_deserved <= total):
            assert sum(deserved) <= total
        for share in result.queues.values():
            guarantee = _get(share.guarantee, name)
            assert _get(share.deserved, name) <= max(_get(share.real_capability, name), guarantee)
            if policy in FLOORED:
                assert _get(share.deserved, name) >= guarantee
        short = [
            s for s in result.queues.values() if _get(s.deserved, name) < _get(s.guarantee, name)
        ]
        if policy == "ProportionOptimize/Weight" and short and guarantees <= total:
            # Below its guarantee only when the top-up has nothing left to split.
            assert total - sum(deserved) < len(short)


@given(clusters(), sharings, st.integers(1, 8_000))
def test_a_met_request_stays_met_when_the_total_grows(
    cluster: Cluster, policy: str, extra: int
) -> None:
    snapshot = cluster.snapshot()
    if policy == "ProportionOptimize/Guarantee":
        # Not promised when the new node brings the first unit of a guaranteed dimension: the
        # guarantee's fraction of the total goes from undefined to defined, and the weight it
        # raises takes every dimension (a CI run found q3 guaranteeing the only GPU, then
        # taking all the memory).
        guaranteed = {d for q in cluster.queues for d, amount in q.guarantee.items() if amount}
        assume(all(_total(snapshot, d) > 0 for d in guaranteed))
    before = _run(snapshot, SHARINGS[policy])
    bigger = ShareNode(NodeName("extra"), allocatable=dict.fromkeys(DIMENSIONS, extra))
    after = _run(replace(snapshot, nodes=(*snapshot.nodes, bigger)), SHARINGS[policy])
    for name, share in before.queues.items():
        met = all(_get(share.deserved, d) >= amount for d, amount in share.request.items())
        if met:
            grown = after.queues[name]
            assert all(_get(grown.deserved, d) >= amount for d, amount in grown.request.items())


@given(clusters(), sharings, st.randoms(use_true_random=False))
def test_results_do_not_depend_on_input_order(
    cluster: Cluster, policy: str, shuffler: random.Random
) -> None:
    shuffled = replace(
        cluster,
        queues=tuple(shuffler.sample(cluster.queues, len(cluster.queues))),
        nodes=tuple(shuffler.sample(cluster.nodes, len(cluster.nodes))),
        pods=tuple(shuffler.sample(cluster.pods, len(cluster.pods))),
    )
    assert _run(shuffled.snapshot(), SHARINGS[policy]) == _run(cluster.snapshot(), SHARINGS[policy])


@given(clusters(), sharings.filter(lambda name: name != "GuaranteeQuota/Share"), st.integers(1, 50))
def test_a_small_request_change_moves_others_by_at_most_that_much(
    cluster: Cluster, policy: str, delta: int
) -> None:
    changed = cluster.queues[0].name
    nudge = PodSnapshot("ns", "nudge", request={"cpu": delta}, queue_label=changed)
    before = _run(cluster.snapshot(), SHARINGS[policy])
    after = _run(replace(cluster, pods=(*cluster.pods, nudge)).snapshot(), SHARINGS[policy])
    for name, share in before.queues.items():
        if name == changed:
            continue
        for dimension in DIMENSIONS:
            moved = abs(
                _get(after.queues[name].deserved, dimension) - _get(share.deserved, dimension)
            )
            # One unit of slack for largest-remainder rounding; other dimensions do not move.
            assert moved <= (delta + 1 if dimension == "cpu" else 1)
