"""ProportionOptimize: the design's Weight and Guarantee priorities and its two switches."""

from __future__ import annotations

import numpy as np

from builders import node, pod, policy, queue, shares
from sharekeeper.engine.shares.common import ShareProblem, SpecRows
from sharekeeper.engine.shares.proportion_optimize import raised_weights


def _cluster(**sharing: object) -> dict[str, int]:
    result = shares(
        policy("po", "ProportionOptimize", **sharing),
        node("n", cpu=12),
        queue("light", weight=1, guarantee={"cpu": "6"}),
        queue("heavy", weight=3),
        pod("l", "light", cpu=12),
        pod("h", "heavy", cpu=12),
    )
    return {name: share.deserved["cpu"] for name, share in result.queues.items()}


def test_weight_priority_still_reserves_guarantees_through_real_capability() -> None:
    # By weight heavy would get 9 of 12, but its realCapability is 12 - 6 (light's guarantee).
    assert _cluster() == {"light": 6000, "heavy": 6000}


def test_guarantee_priority_raises_the_weight_to_meet_the_guarantee() -> None:
    # light needs half the weight: 1 -> 3, then 12 cpu split 3:3.
    assert _cluster(priorityType="Guarantee") == {"light": 6000, "heavy": 6000}


def test_guarantee_enable_false_ignores_guarantees() -> None:
    result = shares(
        policy("po", "ProportionOptimize", guaranteeEnable=False, priorityType="Guarantee"),
        node("n", cpu=12),
        queue("light", guarantee={"cpu": "6"}),
        queue("heavy", weight=3),
        pod("l", "light", cpu=12),
        pod("h", "heavy", cpu=12),
    )
    assert result.queues["light"].deserved["cpu"] == 3000
    assert result.queues["light"].guarantee == {}
    assert result.queues["heavy"].real_capability["cpu"] == 12000


def test_weight_priority_tops_up_smallest_deficit_first_with_an_equal_split() -> None:
    result = shares(
        policy("po", "ProportionOptimize"),
        node("n", cpu=10),
        queue("a", guarantee={"cpu": "2"}),
        queue("b", guarantee={"cpu": "6"}),
        queue("c"),
        pod("c1", "c", cpu=5),
    )
    # Water-filling gives a and b nothing (no request) and c its realCapability, 10 - 8 = 2;
    # of the 8 left, a (deficit 2) takes min(2, 8 // 2), then b takes min(6, 6 // 1).
    assert {n: s.deserved["cpu"] for n, s in result.queues.items()} == {
        "a": 2000,
        "b": 6000,
        "c": 2000,
    }


def test_elastic_enable_false_leaves_elastic_out() -> None:
    objects = [
        node("n", cpu=8),
        queue("q"),
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": "ns"},
            "spec": {"queue": "q", "minMember": 1, "minResources": {"cpu": "1"}},
            "status": {"phase": "Running"},
        },
        pod("w0", node="n", group="job", cpu=1),
        pod("w1", node="n", group="job", cpu=1),
    ]
    assert shares(policy("po", "ProportionOptimize"), *objects).queues["q"].elastic == {"cpu": 1000}
    disabled = shares(policy("po", "ProportionOptimize", elasticEnable=False), *objects)
    assert disabled.queues["q"].elastic == {}


def test_raised_weights_are_the_smallest_that_cover_every_guarantee() -> None:
    zeros = np.zeros((3, 1), dtype=np.int64)
    problem = ShareProblem(
        SpecRows(
            queues=("a", "b", "c"),
            dimensions=("cpu",),
            weights=np.array([1, 1, 8], dtype=np.int64),
            guarantee=np.array([[25], [25], [0]], dtype=np.int64),
            capability=zeros,
            spec_deserved=zeros,
        ),
        total=np.array([100], dtype=np.int64),
        allocated=zeros,
        request=zeros,
    )
    weights = raised_weights(problem)
    # a and b each need a quarter of the weight: w = 0.25 * (8 + 2w) -> w = 4.
    assert weights.tolist() == [4.0, 4.0, 8.0]
