"""Overcommit engine: Volcano's reference cases, the factor-precedence examples, properties."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference
from sharekeeper.engine.overcommit import (
    DEFAULT_FACTOR,
    OvercommitPodGroup,
    OvercommitQueue,
    OvercommitSnapshot,
    OvercommitSpec,
    effective_factor,
    effective_factors,
    enqueue_headroom,
    factor_from_number,
    factor_number,
    inqueue_resources,
    node_overcommit,
    overcommit_status,
    overcommitted_allocatable,
    overcommitted_amount,
    podgroup_inqueue,
    queue_admission,
    queue_admissions,
    shortfalls,
)
from sharekeeper.engine.resources import Shortfall, exceeded_part, sum_amounts
from sharekeeper.model.quantities import parse_resources

GIB = 2**30
GPU = "nvidia.com/gpu"
OTHER = "example.com/other"  # stands for the cases' "<other>": a resource with no own factor

# --- reference cases -----------------------------------------------------------------------

CASES = reference.volcano_cases()


def cases(*, plugin_prefix: str, kind: str) -> list[Any]:
    return [
        pytest.param(case, id=case["id"])
        for case in CASES
        if case["plugin"].startswith(plugin_prefix) and case["kind"] == kind
    ]


def internal(plain: Mapping[str, Any]) -> dict[str, int]:
    """The cases' plain units (scalars as counts) to internal units (scalars in milli)."""
    scale = {"cpu": 1, "memory": 1, "pods": 1}
    return {name: int(Fraction(str(v)) * scale.get(name, 1000)) for name, v in plain.items()}


def from_go_struct(resource: Mapping[str, Any]) -> dict[str, int]:
    """A Go ``Resource`` literal (already in internal units) as a resource map."""
    amounts = {"cpu": resource.get("MilliCPU", 0), "memory": resource.get("Memory", 0)}
    amounts.update(resource.get("ScalarResources") or {})
    return {name: int(v) for name, v in amounts.items() if v}


def spec_from_arguments(arguments: Mapping[str, float]) -> OvercommitSpec:
    """Volcano plugin arguments (``overcommit-factor[.<resource>]``) as a spec."""
    factors = {
        key.removeprefix("overcommit-factor."): factor_from_number(value)
        for key, value in arguments.items()
        if key.startswith("overcommit-factor.")
    }
    factor = arguments.get("overcommit-factor")
    return OvercommitSpec(None if factor is None else factor_from_number(factor), factors)


@pytest.mark.parametrize("case", cases(plugin_prefix="overcommit", kind="effective-factors"))
def test_effective_factors_reference(case: dict[str, Any]) -> None:
    spec = spec_from_arguments(case["config"]["arguments"])
    for resource, expected in case["expected"]["effective_factor_per_resource"].items():
        name = OTHER if resource == "<other>" else resource
        assert effective_factor(name, spec) == factor_from_number(expected), resource


@pytest.mark.parametrize("case", cases(plugin_prefix="overcommit", kind="argument-parse"))
def test_argument_parse_reference(case: dict[str, Any]) -> None:
    spec = spec_from_arguments(case["config"]["arguments"])
    for key, expected in case["expected"]["factor_map"].items():
        name = OTHER if key == "overcommit-factor" else key
        assert effective_factor(name, spec) == factor_from_number(expected), key


@pytest.mark.parametrize("case", cases(plugin_prefix="overcommit", kind="resource-api"))
def test_scaled_resources_reference(case: dict[str, Any]) -> None:
    ratio = case["config"]["ratio"]
    arguments = {f"overcommit-factor.{k}": v for k, v in ratio.items() if k != "overcommit-factor"}
    arguments["overcommit-factor"] = ratio["overcommit-factor"]
    spec = spec_from_arguments(arguments)
    scaled = overcommitted_allocatable(from_go_struct(case["input"]), spec)
    assert scaled == from_go_struct(case["expected"])


@pytest.mark.parametrize("case", cases(plugin_prefix="overcommit", kind="JobEnqueueable"))
def test_job_enqueueable_reference(case: dict[str, Any]) -> None:
    arguments = case["config"]["arguments"]
    (pg,) = case["podgroups"]
    minimum = internal(pg["minResources"])
    queue = pg["queue"]
    # The Go test's PodGroup is already Inqueue (counted at session open) and the test calls
    # JobEnqueued before JobEnqueueable: its minimum is held back twice, then asked once more.
    podgroups = [
        OvercommitPodGroup(f"{pg['namespace']}/{pg['name']}", queue, "Inqueue", 2, minimum),
        OvercommitPodGroup("enqueued-twice", queue, "Inqueue", 2, minimum),
        OvercommitPodGroup("candidate", queue, "Pending", 2, minimum),
    ]
    status = overcommit_status(
        OvercommitSnapshot(
            spec_from_arguments(arguments),
            total=internal(case["cluster_total"]),
            used={},
            podgroups=podgroups,
        )
    )
    derived = case["derived"]
    # Volcano's idle may end in a fraction of a unit; we floor.
    assert status.overcommitted_total == {
        name: int(amount) for name, amount in internal(derived["idle"]).items()
    }
    verdict = queue_admission(OvercommitQueue(queue), podgroups, status.headroom)
    assert verdict.admitted is case["expected"]["enqueueable"]
    insufficient = [s.resource for s in verdict.overcommit]
    assert insufficient == derived.get("insufficient", [])


def proportion_enqueue_cases() -> list[Any]:
    return [
        pytest.param(case, id=case["id"])
        for case in CASES
        if case["plugin"] == "proportion" and _enqueue_expectation(case) is not None
    ]


def _enqueue_expectation(case: Mapping[str, Any]) -> tuple[str, str] | None:
    """(PodGroup, verdict) a proportion case states about the enqueue check, if any."""
    derived, expected = case["derived"], case["expected"]
    if "enqueue_verdict" in derived:
        return derived["enqueue_verdict_for"], derived["enqueue_verdict"]
    if "pgB_enqueued" in expected:  # TestNoDoubleCountingForInqueueJobWithBindingTasks
        return "pgB", "Permit" if expected["pgB_enqueued"] else "Reject"
    return None


@pytest.mark.parametrize("case", proportion_enqueue_cases())
def test_proportion_enqueue_reference(case: dict[str, Any]) -> None:
    """The quota half of the per-queue verdict, fed the share engine's realCapability."""
    podgroups = []
    for pg in case["podgroups"]:
        pods = [p for p in case["pods"] if p["podgroup"] == pg["name"] and p["node"]]
        podgroups.append(
            OvercommitPodGroup(
                name=f"{pg['namespace']}/{pg['name']}",
                queue=pg["queue"],
                phase=pg["phase"],
                min_member=pg["minMember"],
                min_resources=internal(pg["minResources"]),
                allocated=internal(_sum(p["request"] for p in pods)),
                allocated_pods=len(pods),
            )
        )
    derived = case["derived"]
    per_queue = derived.get("queues", derived)
    queues = []
    for queue in case["queues"]:
        # What the share engine reports for the queue (its QueueShare), recomputed here.
        mine = [pg for pg in podgroups if pg.queue == queue["name"]]
        elastic = sum_amounts(exceeded_part(pg.allocated, pg.min_resources or {}) for pg in mine)
        queues.append(
            OvercommitQueue(
                queue["name"],
                open=queue["state"] == "Open",
                allocated=sum_amounts(pg.allocated for pg in mine),
                inqueue=inqueue_resources(mine),
                elastic=elastic,
                real_capability=internal(per_queue[queue["name"]]["realCapability"]),
            )
        )
    # Overcommit is off in these Go tests: give it a headroom that never binds.
    unbounded = dict.fromkeys(case["cluster_total"], 10**18)
    verdicts = queue_admissions(queues, podgroups, unbounded)
    (verdict,) = (v for v in verdicts.values() if v.podgroup is not None)
    expectation = _enqueue_expectation(case)
    assert expectation is not None
    podgroup, expected = expectation
    assert verdict.podgroup == f"ns1/{podgroup}"
    assert verdict.closed is (expected == "Reject (queue not Open)")
    quota = [s.resource for s in verdict.quota]
    if expected.startswith("Reject (insufficient"):
        assert str(quota) in expected
    else:
        assert quota == []
    assert verdict.admitted is (expected == "Permit")


def _sum(items: Iterator[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for item in items:
        for name, amount in item.items():
            total[name] = total.get(name, 0) + amount
    return total


@pytest.mark.parametrize("case", cases(plugin_prefix="resource-api", kind="inqueue-resource"))
def test_inqueue_resource_reference(case: dict[str, Any]) -> None:
    podgroup = OvercommitPodGroup(
        "ns/pg",
        "q",
        "Inqueue",
        min_member=1,
        min_resources=parse_resources(case["args"]["minResources"]),
        allocated=from_go_struct(case["args"]["allocated"]),
    )
    assert podgroup_inqueue(podgroup) == from_go_struct(case["expected"])


# --- factor precedence: the seed's overcommit examples --------------------------------------

NODE = {
    "cpu": 10_000,
    "memory": 10 * GIB,
    "pods": 110,
    "ephemeral-storage": 100 * GIB * 1000,
    GPU: 8_000,
}


def test_default_factor_only() -> None:
    result = node_overcommit(NODE, OvercommitSpec())
    assert set(result.factors.values()) == {Fraction(6, 5)}
    assert result.allocatable == {
        "cpu": 12_000,  # 1.2 * 10 cores is exactly 12, not 11.999...
        "ephemeral-storage": 120 * GIB * 1000,
        "memory": 12 * GIB,
        GPU: 9_600,
        "pods": 132,
    }


def test_global_factor_only() -> None:
    spec = OvercommitSpec(factor=factor_from_number(1.5))
    assert node_overcommit(NODE, spec).allocatable == {
        "cpu": 15_000,
        "ephemeral-storage": 150 * GIB * 1000,
        "memory": 15 * GIB,
        GPU: 12_000,
        "pods": 165,
    }


def test_per_resource_factor_only_keeps_default_elsewhere() -> None:
    spec = OvercommitSpec(factors={"cpu": factor_from_number(2), GPU: factor_from_number(1)})
    result = node_overcommit(NODE, spec)
    assert result.factors["cpu"] == 2
    assert result.factors[GPU] == 1
    assert result.factors["memory"] == DEFAULT_FACTOR
    assert result.allocatable["cpu"] == 20_000
    assert result.allocatable[GPU] == 8_000
    assert result.allocatable["memory"] == 12 * GIB


def test_per_resource_factor_overrides_global() -> None:
    spec = OvercommitSpec(
        factor=factor_from_number(1.1),
        factors={"cpu": factor_from_number(1.5), "pods": factor_from_number(2.0)},
    )
    factors = effective_factors(NODE, spec)
    assert {name: factor_number(f) for name, f in factors.items()} == {
        "cpu": 1.5,
        "ephemeral-storage": 1.1,
        "memory": 1.1,
        GPU: 1.1,
        "pods": 2,
    }
    allocatable = overcommitted_allocatable(NODE, spec)
    assert allocatable["cpu"] == 15_000
    assert allocatable["memory"] == 11 * GIB
    assert allocatable["pods"] == 220


def test_factor_exactly_one_is_no_overcommit() -> None:
    spec = OvercommitSpec(factor=factor_from_number(1))
    assert overcommitted_allocatable(NODE, spec) == NODE
    assert factor_number(effective_factor("cpu", spec)) == 1


def test_factor_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="below 1"):
        factor_from_number(0.8)
    with pytest.raises(ValueError, match="below 1"):
        OvercommitSpec(factors={"cpu": Fraction(9, 10)})


def test_decimal_factors_are_exact() -> None:
    # As binary floats, 1.15 * 100 is 114.99999999999999 and would floor to 114.
    assert overcommitted_allocatable({"cpu": 100}, OvercommitSpec(factor_from_number(1.15))) == {
        "cpu": 115
    }


def test_floors_to_whole_units() -> None:
    assert overcommitted_allocatable({"memory": 7}, OvercommitSpec()) == {"memory": 8}  # 8.4


def test_policy_lists_factors_of_configured_resources_without_nodes() -> None:
    spec = OvercommitSpec(factors={GPU: Fraction(1)})
    assert set(effective_factors({"cpu": 1}, spec)) == {"cpu", GPU}


def test_json_numbers() -> None:
    assert json.dumps({"f": factor_number(factor_from_number(1.2))}) == '{"f": 1.2}'
    assert json.dumps({"f": factor_number(factor_from_number(1.0))}) == '{"f": 1}'


# --- headroom and admission --------------------------------------------------------------------


def test_headroom_is_strict_and_only_requested_dimensions_count() -> None:
    status = overcommit_status(
        OvercommitSnapshot(
            OvercommitSpec(),
            total={"cpu": 10_000, "memory": 10_000, "pods": 10},
            used={"cpu": 4_000, "memory": 12_000, "pods": 3},
            podgroups=[OvercommitPodGroup("ns/a", "q", "Inqueue", 1, {"cpu": 2_000})],
        )
    )
    assert status.headroom == {"cpu": 6_000, "memory": 0}  # pods is not an admission dimension
    assert shortfalls({"cpu": 6_000}, status.headroom) == ()
    assert shortfalls({"cpu": 6_001}, status.headroom) == (Shortfall("cpu", 6_001, 6_000),)
    # Memory is overused, but a job that asks for none is not held back by it.
    assert shortfalls({"cpu": 1_000, "memory": 0, "pods": 99}, status.headroom) == ()
    assert shortfalls({GPU: 1_000}, status.headroom) == (Shortfall(GPU, 1_000, 0),)


def test_inqueue_counts_only_admitted_podgroups_and_skips_gated_pods() -> None:
    minimum = {"cpu": 4_000, "memory": 4 * GIB}
    assert podgroup_inqueue(OvercommitPodGroup("a", "q", "Pending", 1, minimum)) == {}
    assert podgroup_inqueue(OvercommitPodGroup("a", "q", "Inqueue", 1, None)) == {}
    running_short = OvercommitPodGroup("a", "q", "Running", 4, minimum, allocated_pods=3)
    assert podgroup_inqueue(running_short) == {}
    running = OvercommitPodGroup(
        "a",
        "q",
        "Running",
        2,
        minimum,
        allocated={"cpu": 2_000, "memory": 4 * GIB},
        allocated_pods=2,
    )
    assert podgroup_inqueue(running) == {"cpu": 2_000}
    gated = OvercommitPodGroup("a", "q", "Inqueue", 2, minimum, gated={"cpu": 1_000})
    assert podgroup_inqueue(gated) == {"cpu": 3_000, "memory": 4 * GIB}


def test_inqueue_podgroup_with_bound_pods_is_not_counted_twice() -> None:
    # Volcano's overcommit plugin would hold back the full 3 cores on top of the 3 in use.
    pg = OvercommitPodGroup(
        "ns/a", "q", "Inqueue", 3, {"cpu": 3_000}, allocated={"cpu": 3_000}, allocated_pods=3
    )
    status = overcommit_status(
        OvercommitSnapshot(OvercommitSpec(Fraction(1)), {"cpu": 4_000}, {"cpu": 3_000}, [pg])
    )
    assert status.inqueue == {}
    assert status.headroom == {"cpu": 1_000}


def test_queue_admission_names_why_not() -> None:
    podgroups = [
        OvercommitPodGroup("ns/old", "q", "Pending", 1, {"cpu": 3_000}, created=_ts(1)),
        OvercommitPodGroup("ns/new", "q", "Pending", 1, {"cpu": 1_000}, created=_ts(2)),
        OvercommitPodGroup("ns/urgent", "q", "Pending", 1, {"cpu": 9_000}, priority=5),
        OvercommitPodGroup("ns/free", "p", "Pending", 1, None),
    ]
    queues = [
        OvercommitQueue("q", real_capability={"cpu": 4_000}),
        OvercommitQueue("p"),
        OvercommitQueue("idle", open=False),
    ]
    verdicts = queue_admissions(queues, podgroups, headroom={"cpu": 2_000})
    assert list(verdicts) == ["idle", "p", "q"]
    assert verdicts["q"].podgroup == "ns/urgent"
    assert verdicts["q"].overcommit == (Shortfall("cpu", 9_000, 2_000),)
    assert verdicts["q"].quota == (Shortfall("cpu", 9_000, 4_000),)
    assert not verdicts["q"].admitted
    assert verdicts["p"].admitted  # no minResources: admitted without a check
    assert verdicts["idle"].podgroup is None
    assert not verdicts["idle"].admitted
    without_urgent = [pg for pg in podgroups if pg.name != "ns/urgent"]
    assert queue_admissions(queues, without_urgent, {"cpu": 2_000})["q"].podgroup == "ns/old"


def test_quota_check_subtracts_elastic_and_adds_inqueue() -> None:
    running = OvercommitPodGroup(
        "ns/run", "q", "Running", 1, {"cpu": 1_000}, allocated={"cpu": 3_000}, allocated_pods=1
    )
    inqueue = OvercommitPodGroup("ns/inq", "q", "Inqueue", 1, {"cpu": 1_000})
    pending = OvercommitPodGroup("ns/next", "q", "Pending", 1, {"cpu": 2_000})
    queue = OvercommitQueue(
        "q",
        allocated={"cpu": 3_000},
        inqueue=inqueue_resources([running, inqueue, pending]),
        elastic={"cpu": 2_000},
        real_capability={"cpu": 4_000},
    )
    assert queue.inqueue == {"cpu": 1_000}
    # committed = 3 allocated + 1 inqueue - 2 elastic = 2; 2 + 2 <= 4 fits exactly.
    assert queue_admission(queue, [running, inqueue, pending], {"cpu": 10_000}).admitted
    tighter = replace(queue, real_capability={"cpu": 3_999})
    verdict = queue_admission(tighter, [running, inqueue, pending], {"cpu": 10_000})
    assert verdict.quota == (Shortfall("cpu", 2_000, 1_999),)


def _ts(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


# --- properties --------------------------------------------------------------------------------

amounts = st.integers(min_value=0, max_value=10**15)
factors = st.fractions(min_value=1, max_value=10, max_denominator=1000)
names = st.sampled_from(["cpu", "memory", "pods", "ephemeral-storage", GPU])


@given(
    st.dictionaries(names, amounts), st.one_of(st.none(), factors), st.dictionaries(names, factors)
)
def test_overcommitted_between_allocatable_and_promise(
    allocatable: dict[str, int], factor: Fraction | None, per_resource: dict[str, Fraction]
) -> None:
    spec = OvercommitSpec(factor, per_resource)
    scaled = overcommitted_allocatable(allocatable, spec)
    assert scaled.keys() == allocatable.keys()
    for name, amount in allocatable.items():
        assert amount <= scaled[name] <= amount * effective_factor(name, spec)
        assert scaled[name] + 1 > amount * effective_factor(name, spec)


@given(
    st.dictionaries(names, amounts),
    st.dictionaries(names, amounts),
    st.dictionaries(names, amounts),
    st.dictionaries(names, amounts),
)
def test_headroom_never_negative_and_decides_admission(
    total: dict[str, int], used: dict[str, int], inqueue: dict[str, int], job: dict[str, int]
) -> None:
    headroom = enqueue_headroom(total, used, inqueue)
    assert all(amount >= 0 for amount in headroom.values())
    admitted = not shortfalls(job, headroom)
    # Volcano's rule, stated directly: inqueue + job <= total - used on requested dimensions.
    expected = all(
        inqueue.get(n, 0) + job[n] <= total.get(n, 0) - used.get(n, 0)
        for n in job
        if n != "pods" and job[n] > 0
    )
    assert admitted is expected


@given(
    st.dictionaries(names, amounts),
    st.dictionaries(names, amounts),
    st.dictionaries(names, amounts),
    st.sampled_from(["Inqueue", "Running", "Pending"]),
)
def test_inqueue_never_exceeds_minimum(
    minimum: dict[str, int], allocated: dict[str, int], gated: dict[str, int], phase: str
) -> None:
    pg = OvercommitPodGroup("a", "q", phase, 1, minimum, allocated, 1, gated)
    for name, amount in podgroup_inqueue(pg).items():
        assert 0 < amount <= minimum[name]


@given(
    st.integers(0, 10**18),
    st.fractions(min_value=0, max_value=1000, max_denominator=10**6),
)
def test_an_overcommitted_amount_is_the_exact_product_floored(
    amount: int, factor: Fraction
) -> None:
    """Scaled in integers, as exactly as the Fraction product floored: never a unit more."""
    assert overcommitted_amount(amount, factor) == math.floor(amount * factor)
