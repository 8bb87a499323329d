"""Several policies: each governs what its selectors match; overlaps are reported."""

from __future__ import annotations

from builders import node, pod, policy, queue, shares


def test_policies_split_queues_and_nodes_by_selector() -> None:
    result = shares(
        policy("cpu", queue_labels={"pool": "cpu"}, node_labels={"pool": "cpu"}),
        policy("gpu", "Capacity", queue_labels={"pool": "gpu"}, node_labels={"pool": "gpu"}),
        node("c1", {"pool": "cpu"}, cpu=8),
        node("g1", {"pool": "gpu"}, cpu=4, gpu=1),
        queue("web", labels={"pool": "cpu"}),
        queue("ml", labels={"pool": "gpu"}, deserved={"cpu": "2"}),
        pod("w", "web", cpu=20),
    )
    assert result.queues["web"].policy == "cpu"
    assert result.queues["web"].deserved["cpu"] == 8000
    assert result.queues["ml"].policy == "gpu"
    assert result.policies["gpu"].total == {"cpu": 4000, "nvidia.com/gpu": 1000}


def test_a_queue_matched_twice_is_a_conflict_left_out() -> None:
    result = shares(
        policy("one"), policy("two"), node("n", cpu=4), queue("q"), pod("p", "q", cpu=1)
    )
    share = result.queues["q"]
    assert share.policy is None
    assert [reason.kind for reason in share.reasons] == ["Conflict"]
    assert "one, two" in share.reasons[0].message
    assert result.policies["one"].nodes == 0  # the node is contested too
    assert any(reason.kind == "Overlapping" for reason in result.policies["one"].reasons)


def test_a_queue_matched_by_no_policy_says_so() -> None:
    result = shares(policy("p", queue_labels={"x": "y"}), node("n", cpu=4), queue("q"))
    assert [reason.kind for reason in result.queues["q"].reasons] == ["NoPolicy"]
