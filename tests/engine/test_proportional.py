"""Proportional reservation: Volcano's predicate cases, the 74-CPU node, properties."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference
from sharekeeper.engine.proportional import (
    NodeReservation,
    NodeUsage,
    PendingPod,
    Proportion,
    ProportionalRefusal,
    proportional_fit,
    proportional_placements,
    proportional_reservation,
)

GPU = "nvidia.com/gpu"
V100 = "nvidia.com/v100-sxm2-16gb"
G = 10**9
EIGHT_PER_GPU = {GPU: Proportion(cpu_milli=8_000, memory_bytes=8 * G)}  # {cpu: "8", memory: 8G}


def _predicate_cases() -> list[Any]:
    return [
        pytest.param(case, id=case["id"])
        for case in reference.volcano_cases()
        if case["plugin"] == "proportional-predicate"
    ]


def internal(plain: dict[str, Any]) -> dict[str, int]:
    """The cases' plain units (GPUs as counts) to internal units (GPUs in milli)."""
    scale = {"cpu": 1, "memory": 1, "pods": 1}
    return {name: int(Fraction(str(v)) * scale.get(name, 1000)) for name, v in plain.items()}


def proportions_from_volcano(arguments: dict[str, Any]) -> dict[str, Proportion]:
    """Volcano's ``resourceProportion`` is cores and decimal GB per unit; ours is internal."""
    rates = arguments["resourceProportion"]
    return {
        name.strip(): Proportion(
            cpu_milli=int(Fraction(str(rates[f"{name.strip()}.cpu"])) * 1000),
            memory_bytes=int(Fraction(str(rates[f"{name.strip()}.memory"])) * G),
        )
        for name in arguments["resources"].split(",")
    }


@pytest.mark.parametrize("case", _predicate_cases())
def test_predicate_reference(case: dict[str, Any]) -> None:
    proportions = proportions_from_volcano(
        case["config"]["resource_strategy_fit_args"]["proportional"]
    )
    node = NodeUsage("n", allocatable=internal(case["node_idle"]), used={})
    refusals = proportional_fit(internal(case["task_request"]), node, proportions)
    assert (not refusals) is case["expected"]["fit"]
    if error := case["expected"].get("error"):
        assert {f"proportional of resource {r.resource} check failed" for r in refusals} == {error}
    reservation = proportional_reservation(node, proportions)
    assert reservation is not None
    assert reservation.reserved == {
        "cpu": case["derived"]["reserved_cpu_milli"],
        "memory": case["derived"]["reserved_memory_bytes"],
    }


# --- the seed's example: 8 GPUs, 74 CPU, 128G, pods of 8 CPU / 8G without GPUs ----------------

NODE_74 = {"cpu": 74_000, "memory": 128 * G, GPU: 8_000}
POD_8 = {"cpu": 8_000, "memory": 8 * G}


def test_second_cpu_pod_is_refused_to_keep_the_gpus_usable() -> None:
    empty = NodeUsage("gpu-1", NODE_74, used={})
    assert proportional_reservation(empty, EIGHT_PER_GPU) == NodeReservation(
        reserved={"cpu": 64_000, "memory": 64 * G}, available={"cpu": 10_000, "memory": 64 * G}
    )
    assert proportional_fit(POD_8, empty, EIGHT_PER_GPU) == ()

    after_first = NodeUsage("gpu-1", NODE_74, used=POD_8)
    assert proportional_reservation(after_first, EIGHT_PER_GPU) == NodeReservation(
        reserved={"cpu": 64_000, "memory": 64 * G}, available={"cpu": 2_000, "memory": 56 * G}
    )
    assert proportional_fit(POD_8, after_first, EIGHT_PER_GPU) == (
        ProportionalRefusal(GPU, "cpu", requested=8_000, idle=66_000, reserved=64_000),
    )


def test_a_gpu_pod_frees_its_share() -> None:
    one_gpu_used = NodeUsage("gpu-1", NODE_74, used={"cpu": 8_000, "memory": 8 * G, GPU: 1_000})
    reservation = proportional_reservation(one_gpu_used, EIGHT_PER_GPU)
    assert reservation is not None
    assert reservation.reserved == {"cpu": 56_000, "memory": 56 * G}
    assert reservation.available == {"cpu": 10_000, "memory": 64 * G}


def test_placements_list_nodes_and_reasons() -> None:
    nodes = [
        NodeUsage("gpu-1", NODE_74, used=POD_8),
        NodeUsage("cpu-1", {"cpu": 16_000, "memory": 64 * G}, used={}),
        NodeUsage("gpu-2", NODE_74, used={}),
    ]
    pods = [
        PendingPod("ns/web", POD_8),
        PendingPod("ns/train", {"cpu": 60_000, GPU: 8_000}),  # asks for GPUs: unrestricted
    ]
    placements = proportional_placements(pods, nodes, EIGHT_PER_GPU)
    assert list(placements) == ["ns/web"]
    assert placements["ns/web"].nodes == ("cpu-1", "gpu-2")
    assert placements["ns/web"].refused == {
        "gpu-1": (ProportionalRefusal(GPU, "cpu", 8_000, 66_000, 64_000),)
    }


def test_equality_fits() -> None:
    node = NodeUsage("n", {"cpu": 16_000, "memory": 16 * G, GPU: 1_000}, used={})
    assert proportional_fit({"cpu": 8_000, "memory": 8 * G}, node, EIGHT_PER_GPU) == ()
    refusals = proportional_fit({"cpu": 8_001, "memory": 8 * G + 1}, node, EIGHT_PER_GPU)
    assert [r.dimension for r in refusals] == ["cpu", "memory"]


def test_nodes_without_the_resource_get_nothing() -> None:
    node = NodeUsage("cpu-1", {"cpu": 4_000, "memory": 4 * G}, used={})
    assert proportional_reservation(node, EIGHT_PER_GPU) is None
    assert proportional_fit({"cpu": 4_000}, node, EIGHT_PER_GPU) == ()


def test_no_idle_gpus_reserves_nothing() -> None:
    node = NodeUsage("n", NODE_74, used={GPU: 8_000, "cpu": 70_000})
    assert proportional_reservation(node, EIGHT_PER_GPU) == NodeReservation(
        reserved={"cpu": 0, "memory": 0}, available={"cpu": 4_000, "memory": 128 * G}
    )


def test_several_resources_are_checked_one_by_one() -> None:
    proportions = {**EIGHT_PER_GPU, V100: Proportion(16_000, 16 * G)}
    node = NodeUsage("n", {"cpu": 64_000, "memory": 256 * G, GPU: 2_000, V100: 2_000}, {})
    reservation = proportional_reservation(node, proportions)
    assert reservation is not None
    assert reservation.reserved == {"cpu": 32_000, "memory": 32 * G}  # the larger, not the sum
    refusals = proportional_fit({"cpu": 40_000}, node, proportions)
    assert [(r.resource, r.dimension) for r in refusals] == [(V100, "cpu")]


def test_fractional_units_round_the_reservation_up() -> None:
    node = NodeUsage("n", {"cpu": 1_000, "memory": G, GPU: 1}, used={})  # 0.001 GPU idle
    reservation = proportional_reservation(node, {GPU: Proportion(1_500, 3)})
    assert reservation is not None
    assert reservation.reserved == {"cpu": 2, "memory": 1}  # 1.5 millicores, 0.003 bytes


# --- properties --------------------------------------------------------------------------------

amounts = st.integers(min_value=0, max_value=10**14)
node_amounts = st.fixed_dictionaries(
    {"cpu": amounts, "memory": amounts, GPU: st.integers(min_value=0, max_value=64_000)}
)
rates = st.builds(Proportion, st.integers(0, 10**6), st.integers(0, 10**11))
requests = st.fixed_dictionaries({"cpu": amounts, "memory": amounts})


@given(node_amounts, node_amounts, rates, requests)
def test_reservation_agrees_with_the_predicate(
    allocatable: dict[str, int], used: dict[str, int], rate: Proportion, request: dict[str, int]
) -> None:
    proportions = {GPU: rate}
    node = NodeUsage("n", allocatable, used)
    reservation = proportional_reservation(node, proportions)
    assert reservation is not None
    idle = {d: max(allocatable[d] - used[d], 0) for d in ("cpu", "memory", GPU)}
    for dimension in ("cpu", "memory"):
        reserved = reservation.reserved[dimension]
        available = reservation.available[dimension]
        # Never less than the exact share, never a whole unit more.
        exact = Fraction(idle[GPU] * rate.per_unit(dimension), 1000)
        assert exact <= reserved < exact + 1
        assert available == max(idle[dimension] - reserved, 0)
        if reserved <= idle[dimension]:
            assert available + reserved == idle[dimension]
    fits = not proportional_fit(request, node, proportions)
    assert fits is all(request[d] <= idle[d] - reservation.reserved[d] for d in ("cpu", "memory"))
