"""Admission through the scheduling gate: which held pods go in a round, and why others wait.

Every case runs simulate's path (objects -> store -> snapshot -> shares -> gate decisions), so
the pods held are what the operator's store would hold."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from builders import node, pod, pod_group, policy, queue
from sharekeeper.engine.gates import GateDecisions
from sharekeeper.engine.keys import PodKey
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.pipeline.statuses import waiting_text
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of


def decide(*objects: dict[str, Any], released: Collection[PodKey] = ()) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(0.0, 0)),
        inputs.node_policies,
        held=inputs.store.pods.held(),
        released=frozenset(released),
    )


def names(decisions: GateDecisions) -> list[str]:
    return [name for _, name in decisions.released]


def held_pods(queue_name: str, count: int, *, prefix: str = "", **requests: Any) -> list[Any]:
    prefix = prefix or queue_name
    return [
        pod(f"{prefix}{i}", queue_name, held=True, created=f"2026-01-01T00:00:{i:02d}Z",
            **(requests or {"cpu": 1}))
        for i in range(count)
    ]  # fmt: skip


def test_two_queues_of_equal_weight_each_get_their_deserved_half() -> None:
    result = decide(
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        *held_pods("a", 6), *held_pods("b", 6),
    )  # fmt: skip
    assert result.queues["a"]["deserved"]["cpu"] == "4"
    assert names(result.gates) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]
    assert result.gates.waiting[("ns", "a4")].reason == "QuotaExceeded"
    assert result.gates.waiting[("ns", "a5")].reason == "BehindOthers"
    assert result.gates.waiting[("ns", "a5")].behind == "ns/a4"
    assert result.queues["a"]["gated"] == 6
    assert result.queues["a"]["admitted"] == 0


def test_weights_shift_what_each_queue_admits() -> None:
    result = decide(
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a", weight=3), queue("b"),
        *held_pods("a", 8), *held_pods("b", 8),
    )  # fmt: skip
    released = names(result.gates)
    assert sum(name.startswith("a") for name in released) == 6
    assert sum(name.startswith("b") for name in released) == 2


def test_running_and_admitted_pods_take_their_room_first() -> None:
    result = decide(
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("r0", "a", node="n", cpu=2, admitted=True),
        pod("r1", "a", cpu=1, admitted=True),  # released, not bound yet
        *held_pods("a", 4), *held_pods("b", 4),
    )  # fmt: skip
    assert [n for n in names(result.gates) if n.startswith("a")] == ["a0"]
    assert result.queues["a"]["admitted"] == 2
    assert result.queues["a"]["gated"] == 4


def test_pods_released_but_not_seen_yet_are_not_released_twice_nor_forgotten() -> None:
    objects = (
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        *held_pods("a", 6), *held_pods("b", 6),
    )  # fmt: skip
    first = decide(*objects)
    again = decide(*objects, released=first.gates.released)
    assert again.gates.released == ()
    assert again.gates.waiting[("ns", "a4")].reason == "QuotaExceeded"
    assert ("ns", "a0") not in again.gates.waiting


def test_priority_then_age_decides_the_order_within_a_queue() -> None:
    result = decide(
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"),
        pod("old", "a", held=True, created="2026-01-01T00:00:00Z", cpu=1),
        pod("new", "a", held=True, created="2026-01-01T00:05:00Z", cpu=1),
        pod("urgent", "a", held=True, priority=100, created="2026-01-01T00:09:00Z", cpu=1),
    )  # fmt: skip
    assert names(result.gates) == ["urgent", "old"]
    assert result.gates.waiting[("ns", "new")].reason == "QuotaExceeded"


def test_a_large_pod_first_in_line_is_not_overtaken_by_small_ones() -> None:
    result = decide(
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("running", "a", node="n", cpu=3),
        pod("big", "a", held=True, created="2026-01-01T00:00:00Z", cpu=2),
        pod("small", "a", held=True, created="2026-01-01T00:01:00Z", cpu=1),
        *held_pods("b", 4),
    )  # fmt: skip
    assert "small" not in names(result.gates)
    big = result.gates.waiting[("ns", "big")]
    assert big.reason == "QuotaExceeded"
    assert waiting_text(big) == (
        "no room in queue a's deserved share: cpu 2 requested, 1 available"
    )
    assert result.gates.waiting[("ns", "small")].reason == "BehindOthers"


def test_a_gang_goes_whole_or_not_at_all() -> None:
    def gang(size: int, cpu: int) -> list[Any]:
        return [
            pod_group("job", "a", min_member=3),
            *(pod(f"w{i}", held=True, group="job", cpu=cpu) for i in range(size)),
        ]

    common = (policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"))
    incomplete = decide(*common, *gang(2, 1))
    assert incomplete.gates.released == ()
    waiting = incomplete.gates.waiting[("ns", "w0")]
    assert (waiting.reason, waiting.members) == ("GangIncomplete", (2, 3))
    assert "2 of its minMember 3" in waiting_text(waiting)
    whole = decide(*common, *gang(3, 2))
    assert sorted(names(whole.gates)) == ["w0", "w1", "w2"]
    # b's demand halves a's share: 3 x 2 cpu no longer fits in 4, and no part goes.
    too_big = decide(*common, *gang(3, 2), *held_pods("b", 4))
    assert [n for n in names(too_big.gates) if n.startswith("w")] == []
    assert {too_big.gates.waiting[("ns", f"w{i}")].reason for i in range(3)} == {"QuotaExceeded"}


def test_a_podgroup_that_names_no_queue_is_admitted_into_the_default_queue() -> None:
    unnamed = pod_group("job", "a")
    del unnamed["spec"]["queue"]
    common = (policy("p"), node("n", cpu=8, memory="64Gi"), queue("b"), unnamed)
    members = [pod(f"w{i}", held=True, group="job", cpu=1) for i in range(2)]
    result = decide(*common, queue("default"), *members)
    assert sorted(names(result.gates)) == ["w0", "w1"]
    assert result.queues["default"]["gated"] == 2
    without = decide(*common, *members)
    assert without.gates.released == ()
    waiting = without.gates.waiting[("ns", "w0")]
    assert (waiting.reason, waiting.queue) == ("QueueNotFound", "default")


def test_a_gangs_min_resources_must_fit_in_the_headroom_as_volcanos_enqueue_asks() -> None:
    def gang(min_cpu: int) -> Publication:
        exact = policy("p")
        exact["spec"]["overcommit"] = {"factor": 1.0}
        return decide(
            exact, node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
            pod("busy", "b", node="n", cpu=5),
            pod_group("job", "a", min_member=2, min_resources={"cpu": min_cpu}),
            *(pod(f"w{i}", held=True, group="job", cpu=1) for i in range(2)),
        )  # fmt: skip

    # 8 cpu x 1.0 less the 5 bound: 3 of headroom. The two pods ask for 2; the gang's minimum
    # decides.
    assert sorted(names(gang(3).gates)) == ["w0", "w1"]
    refused = gang(4)
    assert refused.gates.released == ()
    waiting = refused.gates.waiting[("ns", "w0")]
    assert waiting.reason == "OvercommitHeadroomExceeded"
    assert waiting_text(waiting).endswith("cpu 4 requested, 3 available")


def test_borrowing_admits_up_to_real_capability_within_the_overcommit_headroom() -> None:
    def with_borrow(borrow: bool) -> Publication:
        shared = policy("p")
        shared["spec"]["admission"] = {"borrow": borrow}
        shared["spec"]["overcommit"] = {"factor": 1.0}
        return decide(
            shared, node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
            pod("b-running", "b", node="n", cpu=1),
            *held_pods("a", 10), pod("b0", "b", held=True, cpu=4),
        )  # fmt: skip

    assert len([n for n in names(with_borrow(False).gates) if n.startswith("a")]) == 4
    borrowing = with_borrow(True)
    # realCapability is the whole 8 cpu; the headroom (8 x 1.0 - 1 used) stops a at 7, and
    # b, served first (lowest share), finds no room left.
    a_released = [n for n in names(borrowing.gates) if n.startswith("a")]
    assert len(a_released) + 4 * ("b0" in names(borrowing.gates)) == 7
    blocked = borrowing.gates.waiting[("ns", f"a{len(a_released)}")]
    assert blocked.reason == "OvercommitHeadroomExceeded"


def test_borrowed_room_goes_to_the_oldest_held_pods_across_queues() -> None:
    """Every queue first takes what fits in its deserved share; what is left goes oldest first
    across the queues (a and c alternate by creation time), not queue by queue."""
    shared = policy("p")
    shared["spec"]["admission"] = {"borrow": True}
    shared["spec"]["overcommit"] = {"factor": 1.0}

    def held(name: str, second: int) -> dict[str, Any]:
        return pod(name, name[0], held=True, created=f"2026-01-01T00:00:{second:02d}Z", cpu=1)

    result = decide(
        shared, node("n", cpu=12, memory="64Gi"), queue("a"), queue("b"), queue("c"),
        pod("b-running", "b", node="n", cpu=1),
        pod("b0", "b", held=True, created="2026-01-01T00:00:50Z", cpu=4),
        *(held(f"a{i}", 2 * i) for i in range(8)), *(held(f"c{i}", 2 * i + 1) for i in range(8)),
    )  # fmt: skip
    # Deserved 4 cpu each: a and c take 4 within it, b0 does not fit in b's 3 left. The 3 cpu
    # of the cluster left go to a4 (second 8), c4 (9), a5 (10); c5 finds none.
    released = names(result.gates)
    assert released[:8] == [f"{q}{i}" for q in "ac" for i in range(4)]
    assert released[8:] == ["a4", "c4", "a5"]
    assert result.gates.waiting[("ns", "c5")].reason == "OvercommitHeadroomExceeded"
    assert result.gates.waiting[("ns", "a6")].reason == "OvercommitHeadroomExceeded"
    assert result.gates.waiting[("ns", "a7")].behind == "ns/a6"
    assert result.gates.waiting[("ns", "b0")].reason == "OvercommitHeadroomExceeded"
    assert result.gates.lines["c"] == tuple(("ns", f"c{i}") for i in range(5, 8))


def gpu_policy() -> dict[str, Any]:
    """A policy that keeps 1 cpu and 1Gi idle per idle GPU."""
    gpus = policy("p")
    gpus["spec"]["proportional"] = {
        "enable": True, "resources": {"nvidia.com/gpu": {"cpu": "1", "memory": "1Gi"}},
    }  # fmt: skip
    return gpus


def test_an_accelerator_pod_waits_until_some_node_can_hold_it() -> None:
    result = decide(
        gpu_policy(),
        node("g1", cpu=8, memory="64Gi", **{"nvidia.com/gpu": 3}),
        node("g2", cpu=8, memory="64Gi", **{"nvidia.com/gpu": 1}),
        queue("a"),
        *held_pods("a", 2, cpu=1, **{"nvidia.com/gpu": 1}),
        pod("wide", "a", held=True, created="2026-01-01T00:01:00Z", cpu=1,
            **{"nvidia.com/gpu": 2}),
    )  # fmt: skip
    # The queue has room for all four GPUs, but first fit put a0 and a1 on g1: one GPU is left
    # there and one on g2, and wide needs two on one node.
    assert names(result.gates) == ["a0", "a1"]
    wide = result.gates.waiting[("ns", "wide")]
    assert wide.reason == "NoNodeFits"
    assert waiting_text(wide) == (
        "no node has room for it: nvidia.com/gpu 2 requested, 1 available on the best node"
    )


def test_a_pod_no_node_can_hold_does_not_stop_the_pods_behind_it() -> None:
    result = decide(
        gpu_policy(),
        node("g1", cpu=8, memory="64Gi", **{"nvidia.com/gpu": 1}),
        node("g2", cpu=8, memory="64Gi", **{"nvidia.com/gpu": 1}),
        queue("a"),
        pod("wide", "a", held=True, created="2025-12-31T00:00:00Z", cpu=1,
            **{"nvidia.com/gpu": 2}),
        *held_pods("a", 2, cpu=1, **{"nvidia.com/gpu": 1}),
    )  # fmt: skip
    assert result.gates.waiting[("ns", "wide")].reason == "NoNodeFits"
    assert names(result.gates) == ["a0", "a1"]


def test_pods_that_no_room_would_admit_say_why() -> None:
    result = decide(
        policy("p", queue_labels={"governed": "yes"}), node("n", cpu=8, memory="64Gi"),
        queue("open", labels={"governed": "yes"}),
        queue("closed", state="Closed", labels={"governed": "yes"}),
        queue("loose"),
        pod("lost", "missing", held=True, cpu=1), pod("shut", "closed", held=True, cpu=1),
        pod("free", "loose", held=True, cpu=1), pod("plain", held=True, cpu=1),
        pod("fine", "open", held=True, cpu=1),
    )  # fmt: skip
    reasons = {key[1]: waiting.reason for key, waiting in result.gates.waiting.items()}
    assert reasons == {
        "lost": "QueueNotFound", "shut": "QueueClosed", "free": "NotGoverned", "plain": "NoQueue",
    }  # fmt: skip
    assert names(result.gates) == ["fine"]


def test_a_pod_with_someone_elses_gate_too_keeps_it_and_is_not_held_by_us() -> None:
    inputs = parse_objects([pod("both", "a", held=True, gated=True, cpu=1), pod("theirs", "a",
                            gated=True, cpu=1)])  # fmt: skip
    assert [p.name for p in inputs.store.pods.held()] == ["both"]


def test_in_a_tree_the_parent_bounds_its_children_together() -> None:
    result = decide(
        policy("p"), node("n", cpu=8, memory="64Gi"),
        queue("team", weight=1), queue("other", weight=1),
        queue("x", parent="team"), queue("y", parent="team"),
        *held_pods("x", 4), *held_pods("y", 4), *held_pods("other", 8),
    )  # fmt: skip
    released = names(result.gates)
    assert len([n for n in released if n[0] in "xy"]) == 4
    assert len([n for n in released if n.startswith("other")]) == 4


def test_simulate_shows_what_a_round_does_with_held_pods(tmp_path: Any) -> None:
    import yaml

    from sharekeeper.simulate.reading import parse_objects, read_objects
    from sharekeeper.simulate.rendering import render
    from sharekeeper.simulate.report import build_report, share_section

    objects = [
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"),
        pod("first", "a", held=True, created="2026-01-01T00:00:00Z", cpu=2),
        pod("second", "a", held=True, created="2026-01-01T00:00:01Z", cpu=1),
    ]  # fmt: skip
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    report = build_report(parse_objects(read_objects([path])), Context(0.0, 0), [share_section])
    why = "no room in queue a's deserved share: cpu 1 requested, 0 available"
    assert report["admission"] == {
        "released": ["ns/first"],
        "waiting": {"ns/second": why},
        "queues": {"a": [{"pod": "ns/second", "position": 1, "waits": why}]},
    }
    table = render(report, {"a": 1}, "table")
    assert "  released  ns/first" in table
    assert "  waits     ns/second: no room" in table
