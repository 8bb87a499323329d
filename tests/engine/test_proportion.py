"""Proportion: Volcano's documented edge cases (volcano.md §3.2), through simulate's path."""

from __future__ import annotations

import pytest

from builders import node, pod, policy, queue, shares


def test_dimensions_a_queue_does_not_request_end_at_zero() -> None:
    result = shares(
        policy(), node("n", cpu=8, memory="8Gi", gpu=2, pods=10), queue("q"), pod("p", "q", cpu=1)
    )
    assert result.queues["q"].deserved == {"cpu": 1000, "memory": 0, "nvidia.com/gpu": 0, "pods": 1}


def test_a_guarantee_above_the_request_stays_reserved() -> None:
    result = shares(
        policy(),
        node("n", cpu=8),
        queue("small", guarantee={"cpu": "3"}),
        queue("big"),
        pod("s", "small", cpu=1),
        pod("b", "big", cpu=100),
    )
    assert result.queues["small"].deserved["cpu"] == 3000
    assert result.queues["big"].deserved["cpu"] == 5000


def test_guarantees_above_the_total_do_not_fail() -> None:
    result = shares(
        policy(),
        node("n", cpu=4),
        queue("a", guarantee={"cpu": "3"}),
        queue("b", guarantee={"cpu": "3"}),
        pod("p", "a", cpu=10),
    )
    assert result.queues["a"].deserved["cpu"] == 3000
    assert result.queues["a"].real_capability["cpu"] == 3000  # max(4 - 6, 0) + 3
    assert [r.kind for r in result.policies["default"].reasons] == ["GuaranteeUnsatisfiable"]


def test_capability_caps_and_the_rest_flows_on() -> None:
    result = shares(
        policy(),
        node("n", cpu=12),
        queue("capped", weight=2, capability={"cpu": "2"}),
        queue("free"),
        pod("c", "capped", cpu=10),
        pod("f", "free", cpu=20),
    )
    assert result.queues["capped"].deserved["cpu"] == 2000
    assert result.queues["free"].deserved["cpu"] == 10000


@pytest.mark.parametrize("zero", ["cpu", "memory"])
def test_a_capability_of_zero_cpu_or_memory_is_no_limit_there_only(zero: str) -> None:
    # Volcano §3.1: cpu or memory of 0 mean "no limit"; 0 of anything else is a bound of 0.
    capability = {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "0", zero: "0"}
    result = shares(
        policy(),
        node("n", cpu=12, memory="12Gi", gpu=4),
        queue("q", capability=capability),
        pod("p", "q", cpu=10, memory="10Gi", gpu=2),
    )
    deserved = result.queues["q"].deserved
    other = "memory" if zero == "cpu" else "cpu"
    assert deserved[zero] == (10_000 if zero == "cpu" else 10 * 2**30)  # its request
    assert deserved[other] == (2_000 if other == "cpu" else 2 * 2**30)  # its capability
    assert deserved["nvidia.com/gpu"] == 0


def test_closed_queues_still_get_a_share() -> None:
    result = shares(policy(), node("n", cpu=4), queue("q", state="Closed"), pod("p", "q", cpu=1))
    assert result.queues["q"].state == "Closed"
    assert result.queues["q"].deserved["cpu"] == 1000


def test_overused_when_allocated_exceeds_deserved_in_some_dimension() -> None:
    result = shares(
        policy(),
        node("n", cpu=4, memory="4Gi"),
        queue("a"),
        queue("b"),
        pod("a1", "a", node="n", cpu=3, memory="1Gi"),
        pod("b1", "b", cpu=2, memory="1Gi"),
    )
    assert result.queues["a"].deserved["cpu"] == 2000  # 4 cpu split 2/2: a runs 3
    assert result.queues["a"].overused
    assert not result.queues["b"].overused
    assert result.queues["a"].share == 1.5


def test_an_idle_guaranteed_queue_keeps_its_guarantee() -> None:
    """Differs from Volcano, which leaves a queue without jobs out and gives the others 5/5."""
    result = shares(
        policy(),
        node("n", cpu=10),
        queue("idle", guarantee={"cpu": "4"}),
        queue("a"),
        queue("b"),
        pod("a", "a", cpu=100),
        pod("b", "b", cpu=100),
    )
    deserved = [result.queues[name].deserved["cpu"] for name in ("idle", "a", "b")]
    assert deserved == [4000, 3000, 3000]
    assert result.queues["idle"].decided_by["cpu"] == "Guarantee"
