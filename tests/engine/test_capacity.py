"""Capacity: static deserved trimmed to the effective capability, raised to the guarantee."""

from __future__ import annotations

from builders import node, pod, policy, queue, shares


def test_deserved_is_static_trimmed_and_floored() -> None:
    result = shares(
        policy("c", "Capacity"),
        node("n", cpu=10, memory="10Gi"),
        queue("trimmed", deserved={"cpu": "20"}, capability={"cpu": "6"}),
        queue("floored", deserved={"cpu": "1"}, guarantee={"cpu": "3"}),
        pod("idle-is-fine", "trimmed", cpu="500m"),
    )
    assert result.queues["trimmed"].deserved["cpu"] == 6000  # not capped by request
    assert result.queues["floored"].deserved["cpu"] == 3000
    assert result.queues["floored"].deserved["memory"] == 0


def test_a_queue_without_deserved_is_best_effort_with_share_one() -> None:
    result = shares(policy("c", "Capacity"), node("n", cpu=4), queue("q"))
    assert result.queues["q"].share == 1.0
