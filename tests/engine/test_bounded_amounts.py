"""Amounts at the bound of what is read never overflow the engine's 64-bit arithmetic.

One quantity is at most ``MAX_QUANTITY`` (4P) Kubernetes units, but a tenant may sum many of
them (150,000 pods of 4P cpu, 10,000 guarantees of 4P): sums saturate at ``UNLIMITED`` instead of
wrapping around to negative numbers (found: two ``4Ei`` guarantees gave ``totalGuarantee: -8Ei``
and "GuaranteesFit").
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import share_policy, share_queue, sharing, totals_of
from sharekeeper.engine.resources import UNLIMITED, column_sums, dense, running_sums, total_of
from sharekeeper.engine.shares import (
    PodSnapshot,
    ShareNode,
    ShareSnapshot,
    Sharing,
    deserved_shares,
)
from sharekeeper.engine.shares.snapshot import NodeName, PolicyName
from sharekeeper.model.quantities import MAX_QUANTITY, to_internal

LARGEST_CPU = to_internal("cpu", MAX_QUANTITY)
"""4P cores in millicores: 4 x 10^18, the largest amount one object can carry."""

SHARINGS = (
    sharing("Proportion"),
    sharing("Capacity"),
    sharing("ProportionOptimize", priority_type="Weight"),
    sharing("ProportionOptimize", priority_type="Guarantee"),
    sharing("GuaranteeQuota", elastic_order="Weight"),
    sharing("GuaranteeQuota", elastic_order="Share"),
    sharing("GuaranteeQuota", elastic_order="Random"),
)


def test_sums_saturate_instead_of_wrapping() -> None:
    matrix = dense([{"cpu": LARGEST_CPU}] * 3, ["cpu"])
    assert column_sums(matrix).tolist() == [UNLIMITED]
    assert running_sums(matrix)[:, 0].tolist() == [LARGEST_CPU, UNLIMITED, UNLIMITED]
    assert total_of(matrix[:, 0]) == 3 * LARGEST_CPU  # exact, in Python integers
    # A sum already beyond int64 (a ledger total of many pods) enters the engine saturated.
    assert dense([{"cpu": 10 * LARGEST_CPU}], ["cpu"]).tolist() == [[UNLIMITED]]


def test_small_sums_stay_exact() -> None:
    matrix = np.array([[1, 2], [3, 4]], dtype=np.int64)
    assert column_sums(matrix).tolist() == [4, 6]
    assert running_sums(matrix).tolist() == [[1, 2], [4, 6]]


def test_guarantees_beyond_the_total_do_not_wrap_around() -> None:
    queues = tuple(share_queue(f"q{i}", guarantee={"cpu": LARGEST_CPU}) for i in range(3))
    snapshot = ShareSnapshot(
        queues=queues,
        nodes=(ShareNode(NodeName("n"), allocatable={"cpu": 64_000}),),
        policies=(share_policy("p"),),
    )
    policy = deserved_shares(snapshot).policies[PolicyName("p")]
    assert policy.total_guarantee["cpu"] == UNLIMITED
    assert "GuaranteeUnsatisfiable" in {reason.kind for reason in policy.reasons}


huge = st.sampled_from([0, 1, 1000, 16_000, LARGEST_CPU // 2, LARGEST_CPU])
vectors = st.dictionaries(st.sampled_from(("cpu", "memory")), huge, max_size=2)


@settings(max_examples=150, deadline=None)
@given(
    allocatable=st.lists(vectors, min_size=1, max_size=4),
    guarantees=st.lists(vectors, min_size=1, max_size=8),
    requests=st.lists(vectors, max_size=40),
    sharing=st.sampled_from(SHARINGS),
)
def test_any_mix_of_largest_amounts_computes(
    allocatable: list[dict[str, int]],
    guarantees: list[dict[str, int]],
    requests: list[dict[str, int]],
    sharing: Sharing,
) -> None:
    queues = tuple(
        share_queue(f"q{i}", guarantee=g, capability=g, deserved=g)
        for i, g in enumerate(guarantees)
    )
    pods = tuple(
        PodSnapshot("ns", f"p{i}", request=r, node_name="n0" if i % 2 else None,
                    queue_label=f"q{i % len(queues)}")
        for i, r in enumerate(requests)
    )  # fmt: skip
    snapshot = ShareSnapshot(
        queues=queues,
        nodes=tuple(ShareNode(NodeName(f"n{i}"), allocatable=a) for i, a in enumerate(allocatable)),
        totals=totals_of(pods),
        policies=(share_policy("p", sharing=sharing),),
    )
    result = deserved_shares(replace(snapshot))
    for share in result.queues.values():
        for amount in (*share.deserved.values(), *share.real_capability.values()):
            assert 0 <= amount <= UNLIMITED + LARGEST_CPU
    policy = result.policies[PolicyName("p")]
    assert all(0 <= amount <= UNLIMITED for amount in policy.total_guarantee.values())
