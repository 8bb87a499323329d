"""``ShareMemo``: the share engine's reading of the specs, carried from round to round, gives
the same result as reading them afresh, and is read again exactly when they change."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import share_policy, share_queue, sharing, totals_of
from sharekeeper.cluster.ledger import PodLedger
from sharekeeper.engine.selectors import LabelSelector
from sharekeeper.engine.shares import (
    PodGroupSnapshot,
    PodSnapshot,
    PolicySnapshot,
    QueueSnapshot,
    ShareMemo,
    ShareNode,
    ShareSnapshot,
    deserved_shares,
)
from sharekeeper.engine.shares.snapshot import NodeName, QueueName

DIMENSIONS = ("cpu", "memory", "nvidia.com/gpu")
KINDS = ("Proportion", "Capacity", "ProportionOptimize", "GuaranteeQuota")
QUEUES = ("default", *(f"q{i}" for i in range(5)))
"""``default`` is charged for pods of a missing PodGroup and for pods that name nothing."""

vectors = st.dictionaries(st.sampled_from(DIMENSIONS), st.integers(0, 16_000), max_size=3)
pools = st.sampled_from(("a", "b"))
CHANGES = ("none", "pod", "pod", "groups", "queue", "edits", "node", "policy", "namespace")


@st.composite
def queues(draw: st.DrawFn, name: str) -> QueueSnapshot:
    return share_queue(
        name,
        labels={"pool": draw(pools)},
        weight=draw(st.integers(1, 10)),
        capability=draw(st.none() | vectors) or {},
        guarantee=draw(st.none() | vectors) or {},
        deserved=draw(vectors),
        parent=draw(st.none() | st.sampled_from(QUEUES)),
        namespaces=draw(st.sampled_from((LabelSelector(), LabelSelector({"team": "x"})))),
    )


@st.composite
def nodes(draw: st.DrawFn, name: str) -> ShareNode:
    return ShareNode(NodeName(name), labels={"pool": draw(pools)}, allocatable=draw(vectors))


@st.composite
def policies(draw: st.DrawFn, name: str) -> PolicySnapshot:
    return share_policy(
        name,
        queue_selector=LabelSelector({"pool": draw(pools)}),
        node_selector=draw(st.sampled_from((LabelSelector(), LabelSelector({"pool": "a"})))),
        sharing=sharing(draw(st.sampled_from(KINDS))),
        created_seconds=float(draw(st.integers(0, 3))),
    )


@st.composite
def pods(draw: st.DrawFn, name: str) -> PodSnapshot:
    """A pod that names a queue, or only a PodGroup (charged to the group's queue), or
    nothing (charged to the default queue when its scheduler is managed)."""
    claim = draw(st.sampled_from(("queue", "queue", "group", "none")))
    return PodSnapshot(
        draw(st.sampled_from(("ns", "other"))),
        name,
        request=draw(vectors),
        node_name=draw(st.none() | st.sampled_from(("n0", "n1"))),
        queue_label=draw(st.sampled_from(QUEUES)) if claim == "queue" else None,
        group_name=draw(st.sampled_from(("g0", "g1"))) if claim == "group" else None,
    )


@st.composite
def pod_groups(draw: st.DrawFn) -> tuple[PodGroupSnapshot, ...]:
    return tuple(
        PodGroupSnapshot(
            namespace,
            group,
            queue=draw(st.none() | st.sampled_from(QUEUES)),
            phase=draw(st.sampled_from(("Pending", "Inqueue", "Running"))),
            min_member=draw(st.integers(1, 3)),
            min_resources=draw(st.none() | vectors),
        )
        for namespace in ("ns", "other")
        for group in ("g0", "g1")
        if draw(st.booleans())
    )


@st.composite
def rounds(draw: st.DrawFn) -> list[ShareSnapshot]:
    """A first snapshot, then snapshots each made from the last by one or two changes (or none):
    a pod added or removed, the PodGroups, a queue, some queues' weight, state and
    reclaimable alone, a node, a policy or the namespaces' labels. Every snapshot holds new
    tuples, what did not change is the same object, and one ledger keeps the pod totals
    throughout, as the operator's store does (an unchanged bucket's charges are the same
    object)."""
    queue_list = [draw(queues(name)) for name in QUEUES[: draw(st.integers(1, len(QUEUES)))]]
    node_list = [draw(nodes(name)) for name in ("n0", "n1")[: draw(st.integers(1, 2))]]
    policy_list = [draw(policies(name)) for name in ("p", "r")[: draw(st.integers(1, 2))]]
    labels: dict[str, dict[str, str]] = {"ns": {"team": "x"}}
    groups = draw(pod_groups())
    ledger = PodLedger()
    running: list[PodSnapshot] = []
    for index in range(draw(st.integers(0, 8))):
        running.append(draw(pods(f"p{index}")))
        ledger.add(running[-1])
    found = []
    for step in range(draw(st.integers(1, 8))):
        # One change or two at once, as events between two rounds can be.
        for change in draw(st.lists(st.sampled_from(CHANGES), min_size=1, max_size=2)):
            if change == "pod":
                if running and draw(st.booleans()):
                    ledger.remove(running.pop(draw(st.integers(0, len(running) - 1))))
                else:
                    running.append(draw(pods(f"s{step}-{len(running)}")))
                    ledger.add(running[-1])
            elif change == "groups":
                groups = draw(pod_groups())
            elif change == "queue":
                index = draw(st.integers(0, len(queue_list) - 1))
                queue_list[index] = draw(queues(queue_list[index].name))
            elif change == "edits":
                for index in draw(st.sets(st.integers(0, len(queue_list) - 1), min_size=1)):
                    queue_list[index] = replace(
                        queue_list[index],
                        weight=draw(st.integers(1, 10)),
                        state=draw(st.sampled_from(("Open", "Closed"))),
                        reclaimable=draw(st.booleans()),
                    )
            elif change == "node":
                index = draw(st.integers(0, len(node_list) - 1))
                node_list[index] = draw(nodes(node_list[index].name))
            elif change == "policy":
                index = draw(st.integers(0, len(policy_list) - 1))
                policy_list[index] = draw(policies(policy_list[index].name))
            elif change == "namespace":
                labels = {"ns": {"team": draw(st.sampled_from(("x", "y")))}}
        found.append(
            ShareSnapshot(
                policies=tuple(policy_list),
                queues=tuple(queue_list),
                nodes=tuple(node_list),
                totals=ledger.totals(),
                pod_groups=groups,
                namespace_labels=dict(labels),
            )
        )
    return found


@settings(max_examples=300)
@given(rounds())
def test_a_carried_memo_gives_what_a_fresh_reading_gives(snapshots: list[ShareSnapshot]) -> None:
    memo = ShareMemo()
    for snapshot in snapshots:
        assert deserved_shares(snapshot, memo) == deserved_shares(snapshot)


def _snapshot(*queue_list: QueueSnapshot) -> ShareSnapshot:
    """Each queue asks for the whole node (4 cpu), which is shared by weight."""
    pods = [
        PodSnapshot("ns", f"p-{queue.name}", request={"cpu": 4000}, queue_label=queue.name)
        for queue in queue_list
    ]
    return ShareSnapshot(
        policies=(share_policy("p", sharing=sharing("Proportion")),),
        queues=queue_list,
        nodes=(ShareNode(NodeName("n0"), allocatable={"cpu": 4000, "pods": 10}),),
        totals=totals_of(pods),
    )


def test_the_reading_is_kept_while_the_specs_are_the_same_and_made_again_once_one_changes() -> None:
    q0, q1 = share_queue("q0", weight=1), share_queue("q1", weight=3)
    first = _snapshot(q0, q1)
    memo = ShareMemo()
    reading = memo.reading(first)
    assert deserved_shares(first, memo).queues[QueueName("q0")].deserved["cpu"] == 1000
    more_pods = totals_of(
        [PodSnapshot("ns", f"p{i}", request={"cpu": 500}, node_name="n0", queue_label="q1")
         for i in range(3)]
    )  # fmt: skip
    # Pods changed, the specs are the same objects in new tuples: the same reading.
    assert memo.reading(replace(first, queues=(q0, q1), totals=more_pods)) is reading
    # A queue read again into an equal object: the same reading too.
    assert memo.reading(replace(first, queues=(share_queue("q0", weight=1), q1))) is reading
    # A queue's spec changed beyond its weight: read again, and the result follows it.
    capped = replace(first, queues=(share_queue("q0", weight=3, capability={"cpu": 1500}), q1))
    assert memo.reading(capped) is not reading
    deserved = deserved_shares(capped, memo).queues[QueueName("q0")].deserved
    assert deserved == deserved_shares(capped).queues[QueueName("q0")].deserved
    assert deserved["cpu"] == 1500


def test_a_weight_change_keeps_the_reading_and_what_it_carries_but_the_weights() -> None:
    """Only q0's weight moves: the reading is the last one with q0's snapshot and weight row
    replaced, its usages and the policy's carried rows and results handed on; the result is
    what a fresh reading gives."""
    q0, q1 = share_queue("q0", weight=1), share_queue("q1", weight=3)
    first = _snapshot(q0, q1)
    memo = ShareMemo()
    deserved_shares(first, memo)
    reading = memo.reading(first)
    (specs,) = reading.policies
    heavier = replace(first, queues=(share_queue("q0", weight=3), q1))
    kept = memo.reading(heavier)
    (kept_specs,) = kept.policies
    assert kept is not reading
    assert kept.kept_usage is reading.kept_usage
    assert kept_specs.carried is specs.carried
    assert kept_specs.tree is specs.tree
    assert kept_specs.rows.guarantee is specs.rows.guarantee
    assert (kept_specs.rows.weights.tolist(), specs.rows.weights.tolist()) == ([3, 3], [1, 3])
    weights = (kept.queues[QueueName("q0")], kept_specs.queues[0], kept_specs.governed[0])
    assert [queue.weight for queue in weights] == [3, 3, 3]
    assert kept_specs.governed[1] is q1
    assert deserved_shares(heavier, memo) == deserved_shares(heavier)
    assert deserved_shares(heavier, memo).queues[QueueName("q0")].deserved["cpu"] == 2000
    # Its weight and its capability at once: read afresh.
    capped = replace(first, queues=(share_queue("q0", weight=5, capability={"cpu": 500}), q1))
    assert memo.reading(capped).kept_usage is not reading.kept_usage
    assert deserved_shares(capped, memo) == deserved_shares(capped)


def test_a_state_change_keeps_the_reading_and_makes_the_policys_results_again() -> None:
    """q0 closes: its numbers do not move, yet its result must say Closed, so the policy's
    results are made again while the reading and the usages are kept."""
    q0, q1 = share_queue("q0"), share_queue("q1")
    first = _snapshot(q0, q1)
    memo = ShareMemo()
    deserved_shares(first, memo)
    reading = memo.reading(first)
    (specs,) = reading.policies
    closed = replace(first, queues=(replace(q0, state="Closed"), q1))
    kept = memo.reading(closed)
    (kept_specs,) = kept.policies
    assert kept.kept_usage is reading.kept_usage
    assert kept_specs.carried is not specs.carried
    assert kept_specs.carried.usage_rows is specs.carried.usage_rows
    result = deserved_shares(closed, memo)
    assert result == deserved_shares(closed)
    assert result.queues[QueueName("q0")].state == "Closed"
    # Reclaimable alone enters no result: everything carried stays.
    spared = replace(closed, queues=(replace(q0, state="Closed", reclaimable=False), q1))
    assert memo.reading(spared).policies[0].carried is kept_specs.carried
    assert deserved_shares(spared, memo) == deserved_shares(spared)


def test_the_rows_handed_to_later_rounds_cannot_be_written() -> None:
    memo = ShareMemo()
    (specs,) = memo.reading(_snapshot(share_queue("q0", guarantee={"cpu": 1000}))).policies
    for array in (specs.rows.weights, specs.rows.guarantee, specs.rows.capability):
        assert isinstance(array, np.ndarray)
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 7


def test_a_queue_charged_from_a_second_source_is_not_given_its_last_result() -> None:
    """q0's usage came from its own pods alone and was kept; then a PodGroup that names it is
    admitted (Inqueue, with minResources): the usage kept must not be changed in place, or the
    result made from it last round would look current."""
    memo = ShareMemo()
    first = _snapshot(share_queue("q0"))
    assert deserved_shares(first, memo).queues[QueueName("q0")].inqueue == {}
    group = PodGroupSnapshot("ns", "g", "q0", "Inqueue", 1, {"cpu": 2000})
    admitted = replace(first, pod_groups=(group,))
    assert deserved_shares(admitted, memo) == deserved_shares(admitted)
    assert deserved_shares(admitted, memo).queues[QueueName("q0")].inqueue == {"cpu": 2000}


def test_a_resource_no_node_offers_is_kept_out_after_a_round_that_had_none() -> None:
    """Last round every usage was within the policy's dimensions; a pod that asks for a made-up
    resource joins q0: its queue's usage is read again and bounded to them."""
    ledger = PodLedger()
    ledger.add(PodSnapshot("ns", "a", request={"cpu": 1000}, node_name="n0", queue_label="q0"))
    memo = ShareMemo()
    first = replace(_snapshot(share_queue("q0"), share_queue("q1")), totals=ledger.totals())
    deserved_shares(first, memo)
    made_up = {"cpu": 500, "example.com/made-up": 7}
    ledger.add(PodSnapshot("ns", "b", request=made_up, node_name="n0", queue_label="q0"))
    second = replace(first, totals=ledger.totals())
    assert deserved_shares(second, memo) == deserved_shares(second)
    assert deserved_shares(second, memo).queues[QueueName("q0")].allocated == {
        "cpu": 1500,
        "pods": 2,
    }


@pytest.mark.parametrize("other", ["policies", "nodes", "namespace_labels"])
def test_weights_changed_with_something_else_read_afresh(other: str) -> None:
    """A weight change keeps the reading only when nothing else it was read from changed."""
    q0 = share_queue("q0", weight=1, namespaces=LabelSelector({"team": "x"}))
    q1 = share_queue("q1", weight=3)
    first = replace(_snapshot(q0, q1), namespace_labels={"ns": {"team": "x"}})
    memo = ShareMemo()
    deserved_shares(first, memo)
    also = {
        "policies": (share_policy("p", sharing=sharing("Capacity")),),
        "nodes": (ShareNode(NodeName("n0"), allocatable={"cpu": 8000, "pods": 10}),),
        "namespace_labels": {"ns": {"team": "y"}},
    }[other]
    changed = replace(first, queues=(replace(q0, weight=2), q1), **{other: also})
    assert deserved_shares(changed, memo) == deserved_shares(changed)
    assert deserved_shares(changed) != deserved_shares(replace(first, queues=changed.queues))
