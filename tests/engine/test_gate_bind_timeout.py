"""A pod the gate released that no scheduler binds stops holding its queue's room after the
policy's ``admission.bindTimeoutSeconds``; bound later, it counts again. The round's clock is an
input: the same objects decide differently at different ``now``.

Every case runs simulate's path (objects -> store -> snapshot -> shares -> gate decisions),
with the released pods not bound yet as the store indexes them."""

from __future__ import annotations

from typing import Any

import pytest

from builders import node, pod, policy, queue
from sharekeeper.api.policy import policy_spec
from sharekeeper.engine.admission import BIND_TIMEOUT_UNSET
from sharekeeper.engine.gates import NotBound
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.model.objects import ObjectError
from sharekeeper.model.pods import ADMITTED_ANNOTATION, pod_record, pod_snapshot
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.pipeline.statuses import not_bound_text
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of

RELEASED = 1_767_225_600.0
"""2026-01-01T00:00:00Z: the release time ``builders.pod(admitted=True)`` stamps."""


def timed(seconds: int | None = None) -> dict[str, Any]:
    obj = policy("p")
    if seconds is not None:
        obj["spec"]["admission"] = {"bindTimeoutSeconds": seconds}
    return obj


def decide(*objects: dict[str, Any], now: float) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(now, 0)), inputs.node_policies,
        held=inputs.store.pods.held(), unbound=inputs.store.pods.released_unbound(), now=now,
    )  # fmt: skip


def stuck_queue(*extra: dict[str, Any], bound: bool = False) -> list[dict[str, Any]]:
    """Queue a deserves 4 cpu: b's bound pod takes the other 4 of the node's 8. Of a's 4, 3
    went to ``stuck``, released and (unless ``bound``) never bound; ``next`` (2 cpu) is held
    behind it."""
    return [
        timed(60), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("b0", "b", node="n", cpu=4),
        pod("stuck", "a", admitted=True, cpu=3, node="n" if bound else None),
        pod("next", "a", held=True, created="2026-01-01T00:00:00Z", cpu=2),
        *extra,
    ]  # fmt: skip


def test_a_released_pod_not_bound_in_time_stops_holding_its_queues_room() -> None:
    before = decide(*stuck_queue(), now=RELEASED + 59)
    assert before.gates.released == ()
    assert before.gates.waiting[PodKey("ns", "next")].reason == "QuotaExceeded"
    assert before.gates.not_bound == {}
    assert before.gates.next_timeout_seconds == pytest.approx(1)
    assert before.queues["a"]["notBound"] == 0
    assert "notBoundPods" not in before.queues["a"]

    after = decide(*stuck_queue(), now=RELEASED + 60)
    assert after.gates.released == (PodKey("ns", "next"),)
    assert after.gates.not_bound == {PodKey("ns", "stuck"): NotBound(QueueName("a"), RELEASED, 60)}
    assert after.gates.next_timeout_seconds is None
    assert after.queues["a"]["notBound"] == 1
    assert after.queues["a"]["notBoundPods"] == ["ns/stuck"]
    # Still admitted (it has not finished), still requested: only the gate forgets its room.
    assert after.queues["a"]["admitted"] == 1
    assert after.queues["a"]["request"]["cpu"] == "5"


def test_a_pod_bound_after_its_timeout_counts_again() -> None:
    result = decide(*stuck_queue(bound=True), now=RELEASED + 3600)
    assert result.gates.not_bound == {}
    assert result.gates.released == ()
    assert result.gates.waiting[PodKey("ns", "next")].reason == "QuotaExceeded"
    assert result.queues["a"]["notBound"] == 0


def test_what_released_pods_not_bound_request_is_summed_by_policy_until_their_timeout() -> None:
    # A resource no node offers and no queue names is no dimension of the policy: a tenant's
    # pod adds no series to the gauge made of this.
    odd = pod("odd", "a", admitted=True, cpu=1, widgets=5)
    before = decide(*stuck_queue(odd), now=RELEASED + 59)
    assert before.gates.unbound == {"p": {"pods": 2, "cpu": 4000}}
    # Past its timeout a pod holds no room, and is counted apart (not_bound).
    after = decide(*stuck_queue(odd), now=RELEASED + 60)
    assert after.gates.unbound == {}
    assert set(after.gates.not_bound) == {PodKey("ns", "stuck"), PodKey("ns", "odd")}
    bound = decide(*stuck_queue(bound=True), now=RELEASED)
    assert bound.gates.unbound == {}


def test_the_default_timeout_is_the_api_models() -> None:
    spec = policy_spec(policy("p"))
    assert spec.nodes.bind_timeout_seconds == BIND_TIMEOUT_UNSET == 300
    objects = stuck_queue()
    objects[0] = timed()
    assert decide(*objects, now=RELEASED + 299).gates.not_bound == {}
    assert PodKey("ns", "stuck") in decide(*objects, now=RELEASED + 300).gates.not_bound


@pytest.mark.parametrize("seconds", [0, 86_401])
def test_a_timeout_out_of_bounds_is_refused(seconds: int) -> None:
    with pytest.raises(ObjectError, match="bindTimeoutSeconds"):
        policy_spec(timed(seconds))


def test_the_room_given_back_is_given_back_in_the_queues_above_too() -> None:
    """a is a leaf of team; team's deserved bounds its two leaves together."""
    objects = [
        timed(60), node("n", cpu=8, memory="64Gi"),
        queue("team", capability={"cpu": 4}), queue("a", parent="team"),
        queue("c", parent="team"),
        pod("stuck", "a", admitted=True, cpu=3),
        pod("next", "c", held=True, created="2026-01-01T00:00:00Z", cpu=2),
    ]  # fmt: skip
    before = decide(*objects, now=RELEASED + 10)
    why = before.gates.waiting[PodKey("ns", "next")]
    assert (why.reason, why.limiting) == ("QuotaExceeded", "team")
    after = decide(*objects, now=RELEASED + 60)
    assert after.gates.released == (PodKey("ns", "next"),)
    assert after.queues["a"]["notBound"] == 1
    assert after.queues["team"]["notBound"] == 0  # counted where the pod is


def test_a_pod_whose_release_time_cannot_be_read_never_times_out() -> None:
    objects = stuck_queue()
    stuck = objects[5]
    stuck["metadata"]["annotations"][ADMITTED_ANNOTATION] = "yesterday"
    assert pod_snapshot(stuck).admitted_seconds == 0.0  # and the pod is still read
    result = decide(*objects, now=RELEASED + 10**6)
    assert result.gates.not_bound == {}
    assert result.gates.next_timeout_seconds is None
    assert result.gates.released == ()


def test_only_a_released_pod_not_bound_carries_its_release_time() -> None:
    assert pod_snapshot(pod("r", "a", admitted=True, cpu=1)).admitted_seconds == RELEASED
    assert pod_snapshot(pod("b", "a", admitted=True, node="n", cpu=1)).admitted_seconds == 0.0
    assert pod_snapshot(pod("h", "a", held=True, cpu=1)).admitted_seconds == 0.0


def test_the_scheduler_message_is_kept_for_a_released_pod_not_bound() -> None:
    unschedulable = pod("r", "a", admitted=True, cpu=1)
    unschedulable["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node selector."}
        ],
    }  # fmt: skip
    record = pod_record(unschedulable)
    assert record.unscheduled == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node selector."
    )
    held = pod("h", "a", held=True, cpu=1)
    held["status"] = unschedulable["status"]
    assert pod_record(held).unscheduled is None


def test_the_store_indexes_released_pods_until_they_are_bound() -> None:
    inputs = parse_objects(stuck_queue())
    store = inputs.store
    assert [p.name for p in store.pods.released_unbound()] == ["stuck"]
    store.pods.event("MODIFIED", pod("stuck", "a", admitted=True, node="n", cpu=3))
    assert store.pods.released_unbound() == []


def test_the_soonest_timeout_is_the_next_round_due() -> None:
    later = pod("later", "a", admitted=True, cpu=0)
    later["metadata"]["annotations"][ADMITTED_ANNOTATION] = "2026-01-01T00:00:30Z"
    result = decide(*stuck_queue(later), now=RELEASED + 20)
    assert result.gates.next_timeout_seconds == pytest.approx(40)
    result = decide(*stuck_queue(later), now=RELEASED + 70)
    assert set(result.gates.not_bound) == {PodKey("ns", "stuck")}
    assert result.gates.next_timeout_seconds == pytest.approx(20)


def test_the_event_says_when_it_was_admitted_and_what_the_scheduler_said() -> None:
    stuck = NotBound(QueueName("a"), RELEASED, 60)
    assert not_bound_text(stuck) == (
        "admitted at 2026-01-01T00:00:00Z and not bound to a node 60 s later "
        "(admission.bindTimeoutSeconds): it no longer holds queue a's room, which goes to the "
        "pods held behind it until it is bound"
    )
    said = not_bound_text(stuck, "0/2 nodes are available: " + "x" * 1000)
    assert said.endswith("...")
    assert "; the scheduler says: 0/2 nodes are available: " in said


def test_simulate_lists_the_pods_past_their_timeout(tmp_path: Any) -> None:
    import yaml

    from sharekeeper.simulate.reading import parse_objects, read_objects
    from sharekeeper.simulate.rendering import render
    from sharekeeper.simulate.report import build_report, share_section

    path = tmp_path / "stuck.yaml"
    path.write_text(yaml.safe_dump_all(stuck_queue()))
    report = build_report(
        parse_objects(read_objects([path])), Context(RELEASED + 60, 0), [share_section]
    )
    assert report["admission"]["released"] == ["ns/next"]
    assert report["admission"]["notBound"] == {
        "ns/stuck": not_bound_text(NotBound(QueueName("a"), RELEASED, 60))
    }
    table = render(report, {"a": 1, "b": 1}, "table")
    assert "  not bound ns/stuck: admitted at 2026-01-01T00:00:00Z and not bound" in table
