"""A round renders again only the Queue statuses whose inputs changed, computes and renders
again only the nodes whose inputs changed, and diffs only the objects whose record or desired
value is new: what the operator carries from one round to the next
(``pipeline.shares.Carried``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from builders import node, pod, policy, queue
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.model.nodes import PROPORTIONAL_AVAILABLE, SHARE_ANNOTATIONS
from sharekeeper.model.records import NodeRecord, OwnRecord
from sharekeeper.pipeline.shares import Carried, Publication, publication
from sharekeeper.publish.annotations import annotation_writes
from sharekeeper.publish.statuses import queue_writes
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of

RELEASED = 1_767_225_600.0
"""2026-01-01T00:00:00Z: the release time ``builders.pod(admitted=True)`` stamps."""


def cluster(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    """a's pod ``stuck`` was released and is not bound; its bind timeout is 60 s."""
    timed = policy("p")
    timed["spec"]["admission"] = {"bindTimeoutSeconds": 60}
    return [
        timed, node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("b0", "b", node="n", cpu=4), pod("stuck", "a", admitted=True, cpu=3), *extra,
    ]  # fmt: skip


def decide(objects: list[dict[str, Any]], now: float, carried: Carried) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(now, 0)), inputs.node_policies,
        unbound=inputs.store.pods.released_unbound(), now=now, carried=carried,
    )  # fmt: skip


def test_a_queue_whose_inputs_are_the_same_keeps_its_status_object() -> None:
    carried = Carried()
    first = decide(cluster(), RELEASED + 10, carried)
    again = decide(cluster(), RELEASED + 20, carried)
    assert again.queues["a"] is first.queues["a"]
    assert again.queues["b"] is first.queues["b"]


def test_a_queue_is_rendered_again_when_its_share_changes() -> None:
    carried = Carried()
    first = decide(cluster(), RELEASED + 10, carried)
    one_more = cluster(pod("a1", "a", node="n", cpu=1))
    after = decide(one_more, RELEASED + 10, carried)
    assert "cpu" not in first.queues["a"]["allocated"]
    assert after.queues["a"]["allocated"]["cpu"] == "1"
    assert after.queues["a"] == decide(one_more, RELEASED + 10, Carried()).queues["a"]


def test_a_queue_rendered_again_keeps_the_spelling_of_the_amounts_that_did_not_move() -> None:
    """After a weight change every share moves and most usage does not: the status is what a
    fresh render makes, its unmoved amounts the last status's very objects."""
    carried = Carried()
    wanting = pod("big", "a", cpu=6)  # a and b want more than the node has: weights decide
    first = decide(cluster(wanting), RELEASED + 10, carried)
    heavier = [queue("a", weight=3) if o.get("kind") == "Queue" and o["metadata"]["name"] == "a"
               else o for o in cluster(wanting)]  # fmt: skip
    after = decide(heavier, RELEASED + 10, carried)
    assert after.queues == decide(heavier, RELEASED + 10, Carried()).queues
    for name in "ab":
        was, now = first.queues[name], after.queues[name]
        assert now["deserved"] != was["deserved"]
        for unmoved in ("request", "allocated", "guarantee", "realCapability", "inqueue"):
            assert now[unmoved] is was[unmoved], (name, unmoved)


def test_a_queue_is_rendered_again_when_only_its_pods_past_their_bind_timeout_change() -> None:
    """The share is the same before and after ``stuck`` times out; the status is not."""
    carried = Carried()
    before = decide(cluster(), RELEASED + 59, carried)
    after = decide(cluster(), RELEASED + 60, carried)
    assert (before.queues["a"]["notBound"], after.queues["a"]["notBound"]) == (0, 1)
    assert after.queues["a"]["notBoundPods"] == ["ns/stuck"]
    assert after.queues["b"] is before.queues["b"]


def test_a_status_someone_else_overwrote_is_written_again_though_nothing_else_changed() -> None:
    carried = Carried()
    unchanged = carried.statuses
    desired = decide(cluster(), RELEASED + 10, carried).queues
    records = [OwnRecord(name, f"uid-{name}", 1, queue_snapshot(queue(name)), {}) for name in "ab"]
    stamp = "2026-01-01T00:00:10Z"
    first = queue_writes(records, desired, now=stamp, unchanged=unchanged)
    assert sorted(w.name for w in first) == ["a", "b"]
    # The watch shows both writes: nothing more to write, round after round.
    shown = [replace(r, status=w.status) for r, w in zip(records, first, strict=True)]
    desired = decide(cluster(), RELEASED + 20, carried).queues
    assert queue_writes(shown, desired, now=stamp, unchanged=unchanged) == []
    assert queue_writes(shown, desired, now=stamp, unchanged=unchanged) == []
    # Another client writes into a's status: the watch shows a new record, and it is restored.
    overwritten = replace(shown[0], status={**shown[0].status, "deserved": {"cpu": "99"}})
    [restore] = queue_writes([overwritten, shown[1]], desired, now=stamp, unchanged=unchanged)
    assert (restore.name, restore.patch["deserved"]) == ("a", desired["a"]["deserved"])


def reserving(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    """A GPU node whose idle GPUs keep cpu idle, and a cpu-only node."""
    kept = policy("p")
    kept["spec"]["proportional"] = {
        "enable": True,
        "resources": {"nvidia.com/gpu": {"cpu": "4", "memory": "8Gi"}},
    }
    return [
        kept, node("gpu", cpu=16, memory="64Gi", gpu=2), node("cpu", cpu=8), queue("a"), *extra,
    ]  # fmt: skip


def test_a_node_whose_inputs_are_the_same_keeps_its_facts_and_annotations() -> None:
    carried = Carried()
    first = decide(reserving(), RELEASED, carried)
    facts = dict(carried.nodes.last)
    again = decide(reserving(), RELEASED, carried)
    assert carried.nodes.last["gpu"][1] is facts["gpu"][1]
    assert again.nodes["gpu"] is first.nodes["gpu"]
    assert again.nodes["cpu"] is first.nodes["cpu"]


def test_a_node_is_computed_again_when_what_runs_on_it_changes() -> None:
    carried = Carried()
    first = decide(reserving(), RELEASED, carried)
    gpu_pod = pod("train", "a", node="gpu", cpu=1, gpu=1)
    after = decide(reserving(gpu_pod), RELEASED, carried)
    assert after.nodes["cpu"] is first.nodes["cpu"]
    # One GPU busy: half the cpu kept idle, and the pod's own cpu used.
    assert after.nodes["gpu"][PROPORTIONAL_AVAILABLE] != first.nodes["gpu"][PROPORTIONAL_AVAILABLE]
    assert after.nodes["gpu"] == decide(reserving(gpu_pod), RELEASED, Carried()).nodes["gpu"]


def test_node_annotations_someone_else_overwrote_are_written_again() -> None:
    carried = Carried()
    unchanged = carried.node_writes
    desired = decide(reserving(), RELEASED, carried).nodes
    inputs = parse_objects(reserving())
    records = inputs.store.nodes.sorted_records()
    first = annotation_writes(records, desired, SHARE_ANNOTATIONS, unchanged)
    assert sorted(w.node for w in first) == ["cpu", "gpu"]
    shown = [replace(r, annotations=w.annotations) for r, w in zip(records, first, strict=True)]
    desired = decide(reserving(), RELEASED, carried).nodes
    assert annotation_writes(shown, desired, SHARE_ANNOTATIONS, unchanged) == []
    assert annotation_writes(shown, desired, SHARE_ANNOTATIONS, unchanged) == []
    # Another client changes one of ours: the watch shows a new record, and it is restored.
    wrong = {**shown[1].annotations, PROPORTIONAL_AVAILABLE: "{}"}
    overwritten: NodeRecord = replace(shown[1], annotations=wrong)
    [restore] = annotation_writes([shown[0], overwritten], desired, SHARE_ANNOTATIONS, unchanged)
    assert restore.patch == {PROPORTIONAL_AVAILABLE: desired["gpu"][PROPORTIONAL_AVAILABLE]}
