"""Reclaim in a share round: the engine's inputs built from the store and the snapshot, and the
plan as the SchedulerPolicy's status.reclaim (what ``simulate`` prints too)."""

from __future__ import annotations

import itertools
import operator
import random
from dataclasses import replace
from typing import Any

from builders import node, pod, pod_group, policy, queue, unschedulable
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim import (
    NotServed,
    NotServedReason,
    ReclaimInputs,
    ReclaimPlan,
    Running,
    Waiting,
)
from sharekeeper.engine.shares.snapshot import PolicyName, ShareSnapshot
from sharekeeper.pipeline.reclaiming import ReclaimRead, _in_order, _Order, _overused
from sharekeeper.pipeline.shares import Carried, Publication, publication
from sharekeeper.pipeline.statuses import waiting_text
from sharekeeper.simulate.reading import Inputs, parse_objects
from sharekeeper.simulate.rendering import render
from sharekeeper.simulate.report import Context, share_section, snapshot_of

CREATED = "2026-01-01T00:00:00Z"
NOW = 1_767_225_600.0 + 600  # ten minutes after CREATED


def reclaiming(mode: str = "Preview", after: int = 60, bound: int = 10) -> dict[str, Any]:
    obj = policy("p")
    obj["spec"]["reclaim"] = {
        "mode": mode, "afterSeconds": after, "maxEvictionsPerRound": bound,
    }  # fmt: skip
    return obj


def full_cluster(*extra: dict[str, Any], mode: str = "Preview") -> list[dict[str, Any]]:
    """Queue a fills both nodes (16 cpu); b, of equal weight, has one held pod of 4 cpu: b
    deserves 4, a 12, so a is 4 cpu over its share."""
    return [
        reclaiming(mode),
        node("n1", cpu=8, memory="64Gi"),
        node("n2", cpu=8, memory="64Gi"),
        queue("a"),
        queue("b"),
        *(pod(f"a{i}", "a", node=f"n{1 + i // 2}", cpu=4, memory="1Gi") for i in range(4)),
        pod("b0", "b", held=True, created=CREATED, cpu=4, memory="1Gi", namespace="other"),
        *extra,
    ]


def published(
    *objects: dict[str, Any], now: float = NOW, evicting: frozenset[PodKey] = frozenset()
) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(now, 0)), inputs.node_policies,
        held=inputs.store.pods.held(), pods=inputs.store.pods, now=now, evicting=evicting,
    )  # fmt: skip


def candidates(inputs: ReclaimInputs) -> list[Running]:
    return [pod for pods in inputs.running.values() for pod in pods]


def inputs_of(result: Publication) -> ReclaimInputs:
    return result.reclaims["p"].inputs  # type: ignore[index]


def plan_of(result: Publication) -> ReclaimPlan:
    return result.reclaims["p"].plan  # type: ignore[index]


def test_inputs_come_from_the_overused_queues_and_the_held_pods() -> None:
    result = published(*full_cluster(queue("c"), pod("c0", "c", node="n2", cpu=0, memory="1Gi")))
    inputs = inputs_of(result)
    # Only queue a is overused: only its pods are candidates (c's pod is not looked at).
    assert sorted(r.name for r in candidates(inputs)) == ["a0", "a1", "a2", "a3"]
    assert {r.queue for r in candidates(inputs)} == {"a"}
    assert [(w.namespace, w.name, w.queue) for w in inputs.waiting] == [("other", "b0", "b")]
    assert inputs.now - inputs.waiting[0].since == 600
    assert inputs.waiting[0].request == {"cpu": 4000, "memory": 2**30}
    assert {n.name: n.used["cpu"] for n in inputs.nodes} == {"n1": 8000, "n2": 8000}
    # The very string of the node (the engine's index by node finds it by identity).
    node_names = {n.name: n.name for n in inputs.nodes}
    assert all(r.node is node_names[r.node] for r in candidates(inputs))
    queues = {q.name: q for q in inputs.queues}
    assert queues["a"].allocated["cpu"] == 16000
    assert queues["a"].deserved["cpu"] == 12000
    assert inputs.settings.max_evictions == 10


def test_kube_system_and_mirror_pods_are_protected() -> None:
    mirror = pod("m", "a", node="n2", cpu=1, memory="1Gi")
    mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "x"
    mirror["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": "n2", "uid": "u"}
    ]
    result = published(
        *full_cluster(pod("sys", "a", node="n1", namespace="kube-system", cpu=0, memory="1Gi")),
        mirror,
    )
    protected = {r.name: r.protected for r in candidates(inputs_of(result))}
    assert protected["sys"]
    assert protected["m"]
    assert not protected["a0"]


def test_a_pod_of_a_daemonset_that_exists_is_protected_one_claiming_a_missing_one_is_not() -> None:
    def daemon_pod(name: str, daemonset: str, uid: str) -> dict[str, Any]:
        obj = pod(name, "a", node="n1", cpu=0, memory="1Gi")
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset, "uid": uid,
             "controller": True}
        ]  # fmt: skip
        return obj

    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "ds", "namespace": "ns", "uid": "u1"},
    }  # fmt: skip
    result = published(
        *full_cluster(daemonset, daemon_pod("real", "ds", "u1"), daemon_pod("fake", "gone", "u2"))
    )
    protected = {r.name: r.protected for r in candidates(inputs_of(result))}
    assert protected["real"]
    assert not protected["fake"]


def test_terminating_pods_are_gone_for_reclaim() -> None:
    dying = pod("a9", "a", node="n1", cpu=0, memory="1Gi")
    dying["metadata"]["deletionTimestamp"] = CREATED
    result = published(*full_cluster(dying))
    assert "a9" not in {r.name for r in candidates(inputs_of(result))}


def test_a_pod_whose_eviction_is_in_flight_is_neither_a_candidate_nor_counted() -> None:
    result = published(*full_cluster(), evicting=frozenset({PodKey("ns", "a0")}))
    planned = inputs_of(result)
    assert "a0" not in {r.name for r in candidates(planned)}
    assert {q.name: q.allocated.get("cpu") for q in planned.queues}["a"] == 12000
    assert {n.name: n.used["cpu"] for n in planned.nodes}["n1"] == 4000
    # a is at its deserved now: b's pod fits on n1 with nothing to evict.
    plan = result.reclaims["p"].plan  # type: ignore[index]
    assert plan.evictions == 0
    assert [(r.reclaimer, r.node) for r in plan.reclaims] == [(("other", "b0"), "n1")]


def carried_round(
    inputs: Inputs, carried: Carried, evicting: frozenset[PodKey] = frozenset()
) -> ReclaimInputs:
    """A round on ``inputs`` as the operator makes it, with what its last round ``carried``."""
    return inputs_of(
        publication(
            snapshot_of(inputs, Context(NOW, 0)), inputs.node_policies,
            held=inputs.store.pods.held(), pods=inputs.store.pods, now=NOW,
            evicting=evicting, carried=carried,
        )
    )  # fmt: skip


def test_a_round_reads_and_builds_again_only_what_changed_and_as_afresh() -> None:
    inputs = parse_objects(full_cluster(queue("c"), pod("c0", "c", node="n2", cpu=4)))
    carried = Carried()

    def round_(evicting: frozenset[PodKey] = frozenset()) -> ReclaimInputs:
        return carried_round(inputs, carried, evicting)

    first = round_()
    again = round_()
    assert again == first
    assert again.running["a"] is first.running["a"]  # the very candidates: not read again
    # The very nodes' states: not built again (the queues' are made every round).
    assert all(map(operator.is_, again.nodes, first.nodes))
    # A pod of a changes: a is read again, and sees it; so is its node's state.
    inputs.store.pods.event("MODIFIED", pod("a0", "a", node="n1", cpu=4, memory="2Gi"))
    changed = round_()
    assert {r.name: r.request["memory"] for r in changed.running["a"]}["a0"] == 2 * 2**30
    assert [n.name for n in changed.nodes if n not in first.nodes] == ["n1"]
    assert changed.nodes[1] is first.nodes[1]
    # Being evicted, a pod is gone for the engine at once, and back when no longer.
    evicted = round_(frozenset({PodKey("ns", "a0")}))
    assert "a0" not in {r.name for r in evicted.running["a"]}
    assert "a0" in {r.name for r in round_().running["a"]}
    # Reused, the inputs are those read afresh.
    fresh = parse_objects(full_cluster(queue("c"), pod("c0", "c", node="n2", cpu=4)))
    fresh.store.pods.event("MODIFIED", pod("a0", "a", node="n1", cpu=4, memory="2Gi"))
    assert round_() == inputs_of(publication(
        snapshot_of(fresh, Context(NOW, 0)), fresh.node_policies,
        held=fresh.store.pods.held(), pods=fresh.store.pods, now=NOW,
    ))  # fmt: skip


def test_a_changed_node_object_walks_the_nodes_and_reads_as_afresh() -> None:
    """The nodes' states are patched where their sums, counts or gone pods changed while the
    nodes are the same objects; a node object changed (or added, gone, moved to another
    policy) walks them all again, reusing the others' states."""
    objects = full_cluster()
    inputs, carried = parse_objects(objects), Carried()
    first = carried_round(inputs, carried)
    labelled = node("n2", {"zone": "b"}, cpu=8, memory="64Gi")
    inputs.store.nodes.event("MODIFIED", labelled)
    walked = carried_round(inputs, carried)
    assert walked.nodes[0] is first.nodes[0]
    assert walked.nodes[1] is not first.nodes[1]
    expected = [
        labelled if o.get("kind") == "Node" and o["metadata"]["name"] == "n2" else o
        for o in objects
    ]
    assert walked == inputs_of(published(*expected))
    assert all(map(operator.is_, carried_round(inputs, carried).nodes, walked.nodes))


def test_the_overused_leaf_queues_are_the_same_from_the_rows_or_the_mappings() -> None:
    """Overused, for reclaim: a leaf above its deserved in something other than its count of
    pods. Read from the share engine's rows, or from the queues' mappings without them."""
    objects = full_cluster(
        queue("team"),
        queue("c", parent="team"),
        queue("d"),
        pod("c0", "c", node="n2", cpu=8, memory="1Gi"),
        pod("d0", "d", node="n2", cpu=0, memory="1Gi"),
        node("n3", cpu=0, memory="1Gi", pods=1),  # the policy now shares pods: 1 in all
    )
    shares = published(*objects).shares
    governed = {name: share for name, share in shares.queues.items() if share.policy == "p"}
    rows = shares.policies[PolicyName("p")].rows
    assert rows is not None
    # team is above its deserved cpu too, but not a leaf; d holds more pods than it deserves,
    # and nothing else.
    assert {name for name, share in governed.items() if share.overused} == {"a", "c", "d", "team"}
    assert _overused(governed, rows) == _overused(governed, None) == ["a", "c"]


def test_with_nothing_waiting_nothing_is_read_and_what_was_read_is_kept() -> None:
    """No plan to make, so no queue's or node's state is built; the next waiting pod finds
    what the last round that had one read, and reuses it where nothing changed."""
    inputs = parse_objects(full_cluster())
    carried = Carried()
    first = carried_round(inputs, carried)
    waiting = pod("b0", "b", held=True, created=CREATED, cpu=4, memory="1Gi", namespace="other")
    inputs.store.pods.event("DELETED", waiting)
    idle = carried_round(inputs, carried)
    assert (idle.waiting, idle.queues, idle.nodes, idle.running) == ((), (), (), {})
    inputs.store.pods.event("ADDED", waiting)
    back = carried_round(inputs, carried)
    assert back == first
    assert back.running["a"] is first.running["a"]
    assert all(map(operator.is_, back.nodes, first.nodes))


def test_a_waiting_pods_share_answer_follows_its_queues_numbers() -> None:
    """a holds both nodes (16 cpu), all it deserves with b idle; a9 waits Unschedulable for 6
    more: AboveShare, none available, round after round; once a pod of a is gone, on a's new
    numbers."""
    objects = [o for o in full_cluster() if o["metadata"]["name"] != "b0"]
    inputs = parse_objects([*objects, outside_pod("a9", "a", cpu=6, memory="1Gi")])
    carried = Carried()

    def answer() -> NotServed:
        plan = plan_of(publication(
            snapshot_of(inputs, Context(NOW, 0)), inputs.node_policies,
            held=inputs.store.pods.held(), pods=inputs.store.pods, now=NOW, carried=carried,
        ))  # fmt: skip
        [found] = plan.not_served
        return found

    first = answer()
    assert (first.reason, first.shortfalls[0].available) == (NotServedReason.ABOVE_SHARE, 0)
    assert answer() == first
    inputs.store.pods.event("DELETED", pod("a0", "a", node="n1", cpu=4, memory="1Gi"))
    moved = answer()
    assert (moved.reason, moved.shortfalls[0].available) == (NotServedReason.ABOVE_SHARE, 4000)


def test_preview_shows_the_plan_in_the_policy_status() -> None:
    result = published(*full_cluster())
    section = result.policies["p"]["reclaim"]
    assert section["mode"] == "Preview"
    assert section["waiting"] == 1
    assert section["evictions"] == 1
    [entry] = section["reclaims"]
    assert entry["reclaimer"] == "other/b0"
    assert entry["queue"] == "b"
    [victim] = entry["victims"]
    assert victim["queue"] == "a"
    assert victim["frees"] == {"cpu": "4", "memory": "1Gi"}
    assert victim["pod"].startswith("ns/a")
    assert section["notServed"] == {}


def test_a_pod_that_has_not_waited_long_enough_is_counted_not_served() -> None:
    result = published(*full_cluster(), now=1_767_225_600.0 + 10)
    section = result.policies["p"]["reclaim"]
    assert section["reclaims"] == []
    assert section["notServed"] == {"NotWaitedLongEnough": 1}


def test_mode_off_plans_nothing_and_shows_nothing() -> None:
    result = published(*full_cluster(mode="Off"))
    assert "reclaim" not in result.policies["p"]
    assert result.reclaims == {}


def test_a_queue_that_is_not_reclaimable_gives_nothing() -> None:
    objects = full_cluster()
    objects[3]["spec"]["reclaimable"] = False
    result = published(*objects)
    assert not inputs_of(result).queues[0].reclaimable
    assert result.policies["p"]["reclaim"]["notServed"] == {"NoVictims": 1}


def test_simulate_shows_the_plan() -> None:
    inputs = parse_objects(full_cluster())
    report = share_section(inputs, Context(NOW, 0))
    assert report["schedulerPolicies"]["p"]["reclaim"]["evictions"] == 1


def test_simulate_prints_the_plan_as_a_table_too() -> None:
    inputs = parse_objects(full_cluster())
    table = render(share_section(inputs, Context(NOW, 0)), {}, "table")
    assert "RECLAIM (policy p, mode Preview): 1 waiting, 1 evictions" in table
    assert "  other/b0 (queue b) on n" in table
    assert "(queue a): cpu=4,memory=1Gi" in table


def test_pods_charged_through_their_podgroup_are_candidates_with_their_gang() -> None:
    result = published(
        *full_cluster(),
        pod_group("pg", "a", phase="Running", min_member=1),
        pod("g0", node="n2", group="pg", cpu=0, memory="1Gi"),
        pod("g1", node="n2", group="pg", cpu=0, memory="1Gi"),
    )
    inputs = inputs_of(result)
    assert {r.name: r.group for r in candidates(inputs) if r.group} == {"g0": "pg", "g1": "pg"}
    assert [(g.name, g.running, g.min_member) for g in inputs.gangs] == [("pg", 2, 1)]


def held_gang(pods: int) -> Publication:
    """b's PodGroup "job" of ``pods`` held pods of 2 cpu (full_cluster's b0 left out): b deserves
    what they ask for, up to 8 cpu; a, 16 cpu on two nodes of 8 in pods of 4, deserves the
    rest."""
    objects = [o for o in full_cluster() if o["metadata"]["name"] != "b0"]
    return published(
        *objects,
        pod_group("job", "b", min_member=pods, namespace="other"),
        *(
            pod(f"j{i}", held=True, created=CREATED, group="job", namespace="other", cpu=2,
                memory="1Gi")
            for i in range(pods)
        ),
    )  # fmt: skip


def test_a_held_podgroup_is_reclaimed_for_whole() -> None:
    result = held_gang(2)
    assert {(w.name, w.group) for w in inputs_of(result).waiting} == {("j0", "job"), ("j1", "job")}
    section = result.policies["p"]["reclaim"]
    assert [entry["reclaimer"] for entry in section["reclaims"]] == ["other/j0", "other/j1"]
    assert section["evictions"] == 1


def test_a_held_podgroup_that_cannot_be_served_whole_evicts_nothing() -> None:
    # a deserves 10 cpu: one pod of 4 may go, room for two of the three; none is evicted.
    section = held_gang(3).policies["p"]["reclaim"]
    assert (section["reclaims"], section["evictions"]) == ([], 0)
    assert section["notServed"] == {"GangNotWhole": 2, "NoVictims": 1}


def test_a_node_full_by_pod_count_has_no_room() -> None:
    """n2 has 8 cpu free but no pod slot left: b's pod is not planned there as if it fit; one
    of a's pods there goes to free a slot (a holds 12 cpu of its deserved 5). (The gate,
    which counts cpu, releases b0 and b1; b2, within b's deserved 15 with them, waits for the
    overcommit headroom they took, and reclaims.)"""
    objects = [
        reclaiming(),
        node("n1", cpu=8, pods=110),
        node("n2", cpu=12, pods=2),
        queue("a"),
        queue("b", weight=3),
        *(pod(f"a{i}", "a", node="n1", cpu=4) for i in range(2)),
        *(pod(f"s{i}", "a", node="n2", cpu=2) for i in range(2)),
        *(pod(f"b{i}", "b", held=True, created=CREATED, cpu=5, namespace="other")
          for i in range(3)),
    ]  # fmt: skip
    result = published(*objects)
    assert result.gates.released == (PodKey("other", "b0"), PodKey("other", "b1"))
    assert result.gates.waiting[PodKey("other", "b2")].reason == "OvercommitHeadroomExceeded"
    assert {n.name: n.used["pods"] for n in inputs_of(result).nodes} == {"n1": 2, "n2": 2}
    plan = result.reclaims["p"].plan  # type: ignore[index]
    [reclaim] = plan.reclaims
    assert reclaim.node == "n2"
    assert [v.pod.name for v in reclaim.victims] in (["s0"], ["s1"])
    assert reclaim.frees == {"cpu": 2000, "pods": 1}


# --- pods outside admission: the scheduler finds them Unschedulable -------------------------


def outside_pod(name: str, queue: str | None = None, **fields: Any) -> dict[str, Any]:
    """A pod of namespace other that kube-scheduler found no node for as it was created."""
    found = pod(name, queue, namespace="other", created=CREATED, **fields)
    return unschedulable(found, since=CREATED)


def outside(*extra: dict[str, Any], mode: str = "Preview") -> list[dict[str, Any]]:
    """``full_cluster`` with b's pod never gated: the scheduler found no room for it."""
    objects = full_cluster(*extra, mode=mode)
    objects[-1 - len(extra)] = outside_pod("b0", "b", cpu=4, memory="1Gi")
    return objects


def test_an_unschedulable_pod_outside_admission_reclaims_as_a_held_one_does() -> None:
    held, free = published(*full_cluster()), published(*outside())
    assert held.gates.waiting
    assert not free.gates.waiting  # the gate knows nothing of b0
    inputs = inputs_of(free)
    [waiting] = inputs.waiting
    assert (waiting.namespace, waiting.name, waiting.queue) == ("other", "b0", "b")
    assert inputs.now - waiting.since == 600  # since the condition's transition
    assert free.policies["p"]["reclaim"] == held.policies["p"]["reclaim"]


def test_it_waits_from_when_it_was_found_unschedulable_not_from_its_creation() -> None:
    objects = outside()
    objects[-1] = unschedulable(objects[-1], since="2026-01-01T00:09:50Z")
    result = published(*objects)
    inputs = inputs_of(result)
    assert inputs.now - inputs.waiting[0].since == 10
    assert result.policies["p"]["reclaim"]["notServed"] == {"NotWaitedLongEnough": 1}


def test_an_unschedulable_pod_room_cannot_help_is_no_reclaimer() -> None:
    nameless = outside_pod("x0", cpu=4, memory="1Gi")
    unknown = outside_pod("x1", "nowhere", cpu=4, memory="1Gi")
    unoffered = outside_pod("x2", "b", cpu=4, **{"example.com/fpga": 1})
    result = published(*full_cluster(nameless, unknown, unoffered))
    assert [w.name for w in inputs_of(result).waiting] == ["b0"]  # the held one alone
    closed = outside()
    closed[4] = queue("b", state="Closed")
    assert published(*closed).policies["p"]["reclaim"]["waiting"] == 0


def test_a_pod_of_a_queue_that_does_not_admit_its_namespace_is_no_reclaimer() -> None:
    objects = outside()
    objects[4]["spec"]["namespaces"] = {"matchLabels": {"team": "b"}}
    assert published(*objects).policies["p"]["reclaim"]["waiting"] == 0


def test_a_podgroup_names_the_queue_of_its_unschedulable_pods() -> None:
    member = outside_pod("m0", group="job", cpu=4, memory="1Gi")
    objects = [*full_cluster(), pod_group("job", "b", namespace="other"), member]
    objects.remove(named(objects, "b0"))  # b's held pod: the member alone waits
    [waiting] = inputs_of(published(*objects)).waiting
    assert (waiting.name, waiting.queue) == ("m0", "b")


def test_waiting_pods_are_read_again_only_once_they_or_what_they_were_read_with_changed() -> None:
    later = outside_pod("b1", "b", cpu=1, memory="1Gi")
    member = outside_pod("m0", group="job", cpu=1, memory="1Gi")
    objects = outside(later, queue("c"), pod_group("job", "b", namespace="other"), member)
    inputs, carried = parse_objects(objects), Carried()
    first = carried_round(inputs, carried)
    assert [(w.name, w.queue) for w in first.waiting] == [("b0", "b"), ("b1", "b"), ("m0", "b")]
    again = carried_round(inputs, carried)
    assert all(map(operator.is_, again.waiting, first.waiting))  # the very same
    # b1 changes: b's pods are read again, and b1 is as it now is.
    inputs.store.pods.event("MODIFIED", outside_pod("b1", "b", cpu=2, memory="1Gi"))
    changed = carried_round(inputs, carried)
    assert {w.name: w.request["cpu"] for w in changed.waiting} == {
        "b0": 4000, "b1": 2000, "m0": 1000
    }  # fmt: skip
    assert changed.waiting[2] is first.waiting[2]  # the PodGroup's pods were not
    # The PodGroup now names c: its pod waits for c, though the pod did not change.
    inputs.store.pod_groups.event("MODIFIED", pod_group("job", "c", namespace="other"))
    moved = carried_round(inputs, carried)
    assert {w.name: w.queue for w in moved.waiting} == {"b0": "b", "b1": "b", "m0": "c"}
    # c closes, its pods unchanged: they no longer wait for room; open again, they do.
    closed = replace(inputs, queues=tuple(replace(q, state="Closed") for q in inputs.queues))
    assert carried_round(closed, carried).waiting == ()
    assert [w.name for w in carried_round(inputs, carried).waiting] == ["b0", "b1", "m0"]


def test_the_nodes_found_for_constraints_are_not_kept_for_pods_long_gone() -> None:
    """Which nodes a node selector allows is kept from round to round for the next pods that
    ask the same, but not for more constraints than twice the pods waiting: a tenant's pods
    that come and go, each with a selector of its own, do not grow it without end."""
    zoned = []
    for i in range(5):
        found = outside_pod(f"z{i}", "b", cpu=1, memory="1Gi")
        found["spec"]["nodeSelector"] = {"zone": f"zone-{i}"}
        zoned.append(found)
    inputs, carried = parse_objects(outside(*zoned)), Carried()
    carried_round(inputs, carried)
    eligible = carried.reclaim.eligible[PolicyName("p")]
    assert len(eligible.found) == 5  # b0 asks for any node: nothing to find
    for gone in zoned[1:]:
        inputs.store.pods.event("DELETED", gone)
    left = carried_round(inputs, carried)
    assert [w.name for w in left.waiting] == ["b0", "z0"]
    assert carried.reclaim.eligible[PolicyName("p")] is eligible  # the same nodes
    assert eligible.found == {}  # 5 constraints for 2 waiting pods: forgotten
    assert left.waiting[1].nodes == frozenset()  # no node is in zone-0


def test_pods_of_queues_of_equal_share_wait_in_the_order_of_their_places() -> None:
    """b and c hold nothing (share 0): their pods interleave by priority, then age."""
    created = {"b0": "00:00:00", "c0": "00:00:01", "b1": "00:00:02", "c1": "00:00:03"}
    waiting = []
    for name, time in created.items():
        found = outside_pod(name, name[0], cpu=1, memory="1Gi")
        found["metadata"]["creationTimestamp"] = f"2026-01-01T{time}Z"
        waiting.append(found)
    waiting[-1]["spec"]["priority"] = 10
    objects = outside(queue("c"), *waiting)
    objects.remove(named(objects, "b0"))
    result = published(*objects)
    assert [w.name for w in inputs_of(result).waiting] == ["c1", "b0", "c0", "b1"]


def b_outside_the_gate() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two pods of b, 4 cpu each, that the gate does not hold and the scheduler found no node
    for: b1 never gated, created after b0; b2 released by the gate."""
    later = outside_pod("b1", "b", cpu=4, memory="1Gi")
    later["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05Z"
    released = outside_pod("b2", "b", admitted=True, cpu=4, memory="1Gi")
    return later, released


def test_held_and_unschedulable_pods_wait_in_one_admission_order_each_once() -> None:
    # b (weight 3) deserves all 12 cpu its three pods ask for: the gate would release b0 but
    # for the overcommit headroom. A pod the gate released whose scheduling failed waits too
    # (the gate is done with it).
    objects = full_cluster(*b_outside_the_gate())
    objects[4] = queue("b", weight=3)
    result = published(*objects)
    assert result.gates.waiting[PodKey("other", "b0")].reason == "OvercommitHeadroomExceeded"
    inputs = inputs_of(result)
    assert [w.name for w in inputs.waiting] == ["b0", "b2", "b1"]


def test_a_held_pod_whose_queue_has_its_share_by_the_gates_count_is_no_reclaimer() -> None:
    """b deserves 8 cpu, and its two pods outside the gate ask for 8: the gate holds b0 for b's
    share whatever reclaim frees. Room made for b0 would go to b's other pods, or back to the
    victims' replacements, while b0 went on waiting and reclaiming: b0 is no reclaimer, the two
    others are."""
    result = published(*full_cluster(*b_outside_the_gate()))
    assert result.gates.waiting[PodKey("other", "b0")].reason == "QuotaExceeded"
    assert [w.name for w in inputs_of(result).waiting] == ["b2", "b1"]
    section = result.policies["p"]["reclaim"]
    assert [entry["reclaimer"] for entry in section["reclaims"]] == ["other/b2", "other/b1"]
    assert section["evictions"] == 2


def test_a_held_pod_behind_one_at_its_share_is_no_reclaimer_behind_one_short_of_room_is() -> None:
    # b1 waits behind b0. Alone, b0 waits for the overcommit headroom: both reclaim.
    behind = pod("b1", "b", held=True, cpu=4, memory="1Gi", namespace="other")
    behind["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05Z"
    result = published(*full_cluster(behind))
    assert result.gates.waiting[PodKey("other", "b1")].reason == "BehindOthers"
    assert [w.name for w in inputs_of(result).waiting] == ["b0", "b1"]
    # A pod of b not bound yet, outside the gate and not found Unschedulable, fills b's share
    # by the gate's count: b0 waits for b's quota, b1 behind it, and neither reclaims.
    pending = pod("b9", "b", cpu=8, memory="1Gi", namespace="other")
    result = published(*full_cluster(behind, pending))
    assert result.gates.waiting[PodKey("other", "b0")].reason == "QuotaExceeded"
    assert result.gates.waiting[PodKey("other", "b1")].reason == "BehindOthers"
    assert not inputs_of(result).waiting


def test_a_held_pod_short_of_room_only_as_a_borrower_is_no_reclaimer() -> None:
    """With ``admission.borrow``, b0 is past b's deserved share (b9, pending outside the gate,
    fills it) and is tried against b's realCapability, where the overcommit headroom stops
    it: evicting a's pods for it would let b borrow what a deserves."""
    pending = pod("b9", "b", cpu=8, memory="1Gi", namespace="other")
    objects = full_cluster(pending)
    objects[0]["spec"]["admission"] = {"borrow": True}
    result = published(*objects)
    why = result.gates.waiting[PodKey("other", "b0")]
    assert (why.reason, why.borrow) == ("OvercommitHeadroomExceeded", True)
    assert "(past b's deserved share, borrowing)" in waiting_text(why)
    assert not inputs_of(result).waiting
    # Within b's deserved share (b9 gone), the same wait for headroom is not borrowing.
    objects.remove(pending)
    result = published(*objects)
    why = result.gates.waiting[PodKey("other", "b0")]
    assert (why.reason, why.borrow) == ("OvercommitHeadroomExceeded", False)
    assert [w.name for w in inputs_of(result).waiting] == ["b0"]


def named(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(obj for obj in objects if obj["metadata"]["name"] == name)


# --- the waiting pods' own constraints on nodes ----------------------------------------------


def test_a_reclaimer_is_planned_only_on_nodes_its_selector_and_affinity_allow() -> None:
    objects = outside()
    objects[1]["metadata"]["labels"] = {"zone": "x"}
    objects[2]["metadata"]["labels"] = {"zone": "y"}
    for zone, node_name in (("x", "n1"), ("y", "n2")):
        objects[-1]["spec"]["nodeSelector"] = {"zone": zone}
        result = published(*objects)
        [waiting] = inputs_of(result).waiting
        assert waiting.nodes == frozenset({node_name})
        [entry] = result.policies["p"]["reclaim"]["reclaims"]
        assert entry["node"] == node_name
        assert {v["pod"] for v in entry["victims"]} <= {f"ns/a{i}" for i in range(4)}
    objects[-1]["spec"]["nodeSelector"] = {"zone": "z"}
    result = published(*objects)
    assert inputs_of(result).waiting[0].nodes == frozenset()
    assert result.policies["p"]["reclaim"]["notServed"] == {"NoVictims": 1}
    del objects[-1]["spec"]["nodeSelector"]
    not_x = {"key": "zone", "operator": "NotIn", "values": ["x"]}
    objects[-1]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [not_x]}]}}}  # fmt: skip
    assert inputs_of(published(*objects)).waiting[0].nodes == frozenset({"n2"})


def test_a_reclaimer_is_planned_only_on_nodes_whose_taints_it_tolerates() -> None:
    objects = full_cluster()
    objects[1]["spec"] = {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}
    result = published(*objects)
    assert inputs_of(result).waiting[0].nodes == frozenset({"n2"})  # held pods too
    assert result.policies["p"]["reclaim"]["reclaims"][0]["node"] == "n2"
    named(objects, "b0")["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    assert inputs_of(published(*objects)).waiting[0].nodes is None  # every node of the policy


# --- the proportional reservation -----------------------------------------------------------


def gpu_cluster(*, reserving: bool) -> list[dict[str, Any]]:
    """n1 has an idle GPU, n2 none; queue a holds 4 cpu over its share, two pods of 4 cpu on
    each node, the younger ones on n1; b's held pod of 4 cpu asks for no GPU. With the
    reservation on, n1 keeps 2 cpu idle for its GPU."""
    obj = reclaiming()
    if reserving:
        obj["spec"]["proportional"] = {
            "enable": True, "resources": {"nvidia.com/gpu": {"cpu": "2", "memory": "1Gi"}},
        }  # fmt: skip
    running = []
    for i, (where, started) in enumerate((("n1", "05"), ("n1", "05"), ("n2", "01"), ("n2", "01"))):
        running.append(pod(f"a{i}", "a", node=where, cpu=4, memory="1Gi"))
        running[-1]["status"]["startTime"] = f"2026-01-01T00:{started}:00Z"
    return [
        obj,
        node("n1", cpu=8, memory="64Gi", gpu=1),
        node("n2", cpu=8, memory="64Gi"),
        queue("a"),
        queue("b"),
        *running,
        pod("b0", "b", held=True, created=CREATED, cpu=4, memory="1Gi", namespace="other"),
    ]


def test_a_reclaimer_without_accelerators_leaves_what_idle_ones_reserve() -> None:
    """Evicting one of a's younger pods on n1 would free 4 cpu, but 2 of them stay idle for
    n1's GPU: b0 would not fit there. The plan frees a node where it does."""
    plain = published(*gpu_cluster(reserving=False))
    [reclaim] = plain.reclaims["p"].plan.reclaims  # type: ignore[index]
    assert reclaim.node == "n1"  # the younger pods go first, when nothing is reserved

    result = published(*gpu_cluster(reserving=True))
    reserved = {n.name: (n.reserved, n.reserved_for) for n in inputs_of(result).nodes}
    assert reserved == {
        "n1": ({"cpu": 2000, "memory": 2**30}, frozenset({"nvidia.com/gpu"})),
        "n2": ({}, frozenset()),
    }
    [reclaim] = result.reclaims["p"].plan.reclaims  # type: ignore[index]
    assert reclaim.node == "n2"
    assert len(reclaim.victims) == 1
    assert reclaim.frees["cpu"] == 4000


def test_a_policy_whose_reclaim_is_turned_off_leaves_nothing_kept() -> None:
    """What reclaim keeps per policy from round to round (its nodes as pods' constraints find
    them, the engine's memo) goes once the policy's reclaim is Off."""
    carried = Carried()
    carried_round(parse_objects(full_cluster()), carried)
    assert (set(carried.reclaim.eligible), set(carried.reclaim.plans)) == ({"p"}, {"p"})
    off = parse_objects(full_cluster(mode="Off"))
    publication(
        snapshot_of(off, Context(NOW, 0)), off.node_policies,
        held=off.store.pods.held(), pods=off.store.pods, now=NOW, carried=carried,
    )  # fmt: skip
    assert (carried.reclaim.eligible, carried.reclaim.plans) == ({}, {})


def test_waiting_pods_come_by_their_queues_share_then_their_place_held_ones_among_them() -> None:
    """The admission order over runs of Unschedulable pods (kept ranked by place between rounds)
    and the gate's held ones: a plain sort by share, then place, of every pod (random runs,
    shares and places, equal shares and priorities frequent; a place names its pod)."""
    rng = random.Random(24)
    made = itertools.count()

    def run() -> list[tuple[tuple[int, float, str], Waiting]]:
        places = [
            (
                -rng.randint(0, 2),
                float(rng.randint(0, 5)),
                f"ns/p{rng.randint(0, 999)}-{next(made)}",
            )
            for _ in range(rng.randint(1, 3))
        ]
        return sorted((place, waiting_pod(place[2])) for place in places)

    for _ in range(2000):
        shares = [rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in range(rng.randint(0, 6))]
        runs = [run() for _ in shares]
        held = [(rng.choice([0.0, 0.5, 1.0]), run()) for _ in range(rng.randint(0, 3))]
        everything = [
            (share, *item)
            for share, ranked in (*zip(shares, runs, strict=True), *held)
            for item in ranked
        ]
        expected = [pod for _, _, pod in sorted(everything, key=lambda entry: entry[:2])]
        assert _in_order(_Order.of(runs), shares, held) == expected


def waiting_pod(name: str) -> Waiting:
    return Waiting("ns", name, "q", {"cpu": 1000}, 0.0, None, None)


def test_the_share_engines_rows_say_what_the_queues_states_say_with_the_gone_pods_taken_off() -> (
    None
):
    """The start check reads the share engine's dense rows rather than 10,000 queues' mappings:
    they must hold the states' numbers, a pod being evicted taken off its queue and the queues
    above it, flat and over a tree."""
    flat = outside()  # b0 Unschedulable: it waits under the tree too
    tree = [*flat, queue("top")]
    tree[3], tree[4] = queue("a", parent="top"), queue("b", parent="top")
    for objects in (flat, tree):
        planned = inputs_of(published(*objects, evicting=frozenset({PodKey("ns", "a0")})))
        rows = planned.rows
        assert rows is not None
        assert rows.queues == tuple(q.name for q in planned.queues)
        for state in planned.queues:
            at = rows.index[state.name]
            for column, name in enumerate(rows.dimensions):
                assert rows.deserved[at, column] == state.deserved.get(name, 0), (state, name)
                assert rows.allocated[at, column] == state.allocated.get(name, 0), (state, name)
        cpu = rows.dimensions.index("cpu")
        assert rows.allocated[rows.index["a"], cpu] == 12000  # 16 cpu, a0's 4 being evicted
    assert rows.allocated[rows.index["top"], cpu] == 12000  # above a, the same taken off


def test_the_stores_claim_counts_are_copied_once_a_round_whichever_policy_reads_first() -> None:
    """A pod that changes while a round reads its policies' queues one after the other shows
    as a change next round: the counts every policy's reading is judged against are the copy
    taken before the first policy read anything. (A stand-in store: the race cannot be timed
    with the real one.)"""

    class Counts:
        def __init__(self) -> None:
            self.now = {("named", "a"): 1, ("named", "b"): 1}

        def bound_claims(self) -> dict[tuple[str, ...], int]:
            return dict(self.now)

    store, snapshot, read = Counts(), ShareSnapshot(), ReclaimRead()
    assert read.touched(store, snapshot) is None  # no round before: every queue
    read.round_done()
    assert read.touched(store, snapshot) == set()
    store.now[("named", "a")] = 2  # while the round's second policy reads
    assert read.touched(store, snapshot) == set()  # the round's copy, not a new one
    read.round_done()
    assert read.touched(store, snapshot) == {"a"}  # so the change shows now
