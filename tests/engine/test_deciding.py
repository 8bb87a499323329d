"""Which bound decided a queue's deserved (``status.decidedBy``), read back from the numbers."""

from __future__ import annotations

import numpy as np
import pytest

from builders import node, pod, policy, queue, shares
from sharekeeper.engine.resources import UNLIMITED
from sharekeeper.engine.shares.common import ShareProblem, SpecRows
from sharekeeper.engine.shares.deciding import decided_by


def test_proportion_names_request_level_capability_and_guarantee() -> None:
    result = shares(
        policy(),
        node("n", cpu=20),
        queue("asks-little"),
        queue("capped", capability={"cpu": "3"}),
        queue("guaranteed", guarantee={"cpu": "5"}),
        queue("hungry"),
        pod("a", "asks-little", cpu=2),
        pod("c", "capped", cpu=10),
        pod("g", "guaranteed", cpu=1),
        pod("h", "hungry", cpu=100),
    )
    decided = {name: share.decided_by["cpu"] for name, share in result.queues.items()}
    assert decided == {
        "asks-little": "Request",
        "capped": "Capability",
        "guaranteed": "Guarantee",  # 5 reserved although it asks for 1
        "hungry": "Level",
    }
    assert result.queues["hungry"].deserved["cpu"] == 10_000  # 20 - 2 - 3 - 5


def test_a_request_equal_to_the_guarantee_counts_as_request() -> None:
    result = shares(
        policy(), node("n", cpu=8), queue("q", guarantee={"cpu": "2"}), pod("p", "q", cpu=2)
    )
    assert result.queues["q"].decided_by["cpu"] == "Request"


def test_the_guarantee_decides_when_it_is_above_the_level() -> None:
    result = shares(
        policy(),
        node("n", cpu=14),
        queue("floor", guarantee={"cpu": "6"}),
        queue("a"),
        queue("b"),
        pod("f", "floor", cpu=9),
        pod("a", "a", cpu=9),
        pod("b", "b", cpu=9),
    )
    # The level reaches 4: a and b get 4 each (below their realCapability 8); floor keeps 6.
    assert [result.queues[q].deserved["cpu"] for q in ("floor", "a", "b")] == [6000, 4000, 4000]
    assert result.queues["floor"].decided_by["cpu"] == "Guarantee"
    assert result.queues["a"].decided_by["cpu"] == "Level"


def test_the_others_guarantees_decide_through_real_capability() -> None:
    result = shares(
        policy(),
        node("n", cpu=10),
        queue("floor", guarantee={"cpu": "6"}),
        queue("other"),
        pod("o", "other", cpu=9),
    )
    assert result.queues["other"].deserved["cpu"] == 4000  # 10 - 6 guaranteed elsewhere
    assert result.queues["other"].decided_by["cpu"] == "Capability"


def test_capacity_names_deserved_capability_and_guarantee() -> None:
    result = shares(
        policy("volcano", "Capacity"),
        node("n", cpu=10),
        queue("static", deserved={"cpu": "2"}),
        queue("trimmed", deserved={"cpu": "30"}, capability={"cpu": "4"}),
        queue("raised", deserved={"cpu": "1"}, guarantee={"cpu": "3"}),
    )
    decided = {name: share.decided_by["cpu"] for name, share in result.queues.items()}
    assert decided == {"static": "Deserved", "trimmed": "Capability", "raised": "Guarantee"}


@pytest.mark.parametrize("kind", ["Proportion", "ProportionOptimize", "GuaranteeQuota"])
def test_every_dimension_of_the_problem_is_named(kind: str) -> None:
    result = shares(
        policy("p", kind),
        node("n", cpu=8, memory="8Gi", gpu=2),
        queue("q"),
        pod("p", "q", cpu=1),
    )
    decided = result.queues["q"].decided_by
    assert set(decided) >= {"cpu", "memory", "nvidia.com/gpu"}
    assert decided["cpu"] == "Request"
    assert decided["nvidia.com/gpu"] == "Request"  # asks for none, deserves none


def test_an_ungoverned_queue_names_nothing() -> None:
    result = shares(node("n", cpu=8), queue("q"))
    assert result.queues["q"].decided_by == {}


def test_rows_that_repeat_out_of_order_each_get_their_answer() -> None:
    # Per dimension, R: deserves its request of 1; C: capped at 5 below a request of 10; L: 3 of
    # a request of 10, the level. Equal rows are spelled once (``deciding``), so they repeat here
    # apart and out of sorted order.
    patterns = ["RCL", "LLR", "RCL", "CCC", "LLR", "RCL", "LRC"]
    request = {"R": 1, "C": 10, "L": 10}
    capability = {"R": UNLIMITED, "C": 5, "L": UNLIMITED}
    deserved = {"R": 1, "C": 5, "L": 3}

    def matrix(values: dict[str, int]) -> np.ndarray:
        return np.array([[values[c] for c in row] for row in patterns], dtype=np.int64)

    zeros = np.zeros((len(patterns), 3), dtype=np.int64)
    problem = ShareProblem(
        SpecRows(
            queues=tuple(f"q{i}" for i in range(len(patterns))),
            dimensions=("cpu", "gpu", "memory"),
            weights=np.ones(len(patterns), dtype=np.int64),
            guarantee=zeros,
            capability=matrix(capability),
            spec_deserved=zeros,
        ),
        total=np.array([100, 100, 100], dtype=np.int64),
        allocated=zeros,
        request=matrix(request),
    )
    names = {"R": "Request", "C": "Capability", "L": "Level"}
    decided = decided_by(problem, matrix(deserved), capacity=False)
    assert decided == [
        {"cpu": names[a], "gpu": names[b], "memory": names[c]} for a, b, c in patterns
    ]
    assert decided[0] is decided[2] is decided[5]  # queues that end alike share one answer
