"""A round renders again only the Queue statuses whose inputs changed, and diffs only the
objects whose record or desired status is new: what the operator carries from one round to the
next (``pipeline.statuses.RenderedQueues``, ``publish.statuses.Unchanged``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from builders import node, pod, policy, queue
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.model.records import OwnRecord
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.pipeline.statuses import RenderedQueues
from sharekeeper.publish.statuses import Unchanged, queue_writes
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


def decide(objects: list[dict[str, Any]], now: float, rendered: RenderedQueues) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(now, 0)), inputs.node_policies,
        unbound=inputs.store.pods.released_unbound(), now=now, rendered=rendered,
    )  # fmt: skip


def test_a_queue_whose_inputs_are_the_same_keeps_its_status_object() -> None:
    rendered = RenderedQueues()
    first = decide(cluster(), RELEASED + 10, rendered)
    again = decide(cluster(), RELEASED + 20, rendered)
    assert again.queues["a"] is first.queues["a"]
    assert again.queues["b"] is first.queues["b"]


def test_a_queue_is_rendered_again_when_its_share_changes() -> None:
    rendered = RenderedQueues()
    first = decide(cluster(), RELEASED + 10, rendered)
    one_more = cluster(pod("a1", "a", node="n", cpu=1))
    after = decide(one_more, RELEASED + 10, rendered)
    assert "cpu" not in first.queues["a"]["allocated"]
    assert after.queues["a"]["allocated"]["cpu"] == "1"
    assert after.queues["a"] == decide(one_more, RELEASED + 10, RenderedQueues()).queues["a"]


def test_a_queue_is_rendered_again_when_only_its_pods_past_their_bind_timeout_change() -> None:
    """The share is the same before and after ``stuck`` times out; the status is not."""
    rendered = RenderedQueues()
    before = decide(cluster(), RELEASED + 59, rendered)
    after = decide(cluster(), RELEASED + 60, rendered)
    assert (before.queues["a"]["notBound"], after.queues["a"]["notBound"]) == (0, 1)
    assert after.queues["a"]["notBoundPods"] == ["ns/stuck"]
    assert after.queues["b"] is before.queues["b"]


def test_a_status_someone_else_overwrote_is_written_again_though_nothing_else_changed() -> None:
    rendered, unchanged = RenderedQueues(), Unchanged()
    desired = decide(cluster(), RELEASED + 10, rendered).queues
    records = [OwnRecord(name, f"uid-{name}", 1, queue_snapshot(queue(name)), {}) for name in "ab"]
    stamp = "2026-01-01T00:00:10Z"
    first = queue_writes(records, desired, now=stamp, unchanged=unchanged)
    assert sorted(w.name for w in first) == ["a", "b"]
    # The watch shows both writes: nothing more to write, round after round.
    shown = [replace(r, status=w.status) for r, w in zip(records, first, strict=True)]
    desired = decide(cluster(), RELEASED + 20, rendered).queues
    assert queue_writes(shown, desired, now=stamp, unchanged=unchanged) == []
    assert queue_writes(shown, desired, now=stamp, unchanged=unchanged) == []
    # Another client writes into a's status: the watch shows a new record, and it is restored.
    overwritten = replace(shown[0], status={**shown[0].status, "deserved": {"cpu": "99"}})
    [restore] = queue_writes([overwritten, shown[1]], desired, now=stamp, unchanged=unchanged)
    assert (restore.name, restore.patch["deserved"]) == ("a", desired["a"]["deserved"])
