"""Volcano's own test cases (``tests/cases/volcano_cases.json``) converted to Kubernetes
objects and run through simulate's path: every proportion and capacity case whose ``derived``
block gives per-queue values, and the capacity share cases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import reference
from builders import node, pod_group, policy, queue, shares
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.quantities import scale

CASES = reference.volcano_cases()
POLICY_OF = {"proportion": "Proportion", "capacity": "Capacity"}
DERIVED_FIELDS = ("deserved", "realCapability", "allocated", "request", "inqueue")


def _internal(amounts: Mapping[str, int] | None) -> dict[str, int]:
    """Case units (cpu in millicores, other scalars as plain counts) -> internal units."""
    return {
        name: value * (1 if name == "cpu" else scale(name))
        for name, value in (amounts or {}).items()
    }


def _quantities(amounts: Mapping[str, int] | None) -> dict[str, str]:
    return {
        name: str(value) + ("m" if name == "cpu" else "") for name, value in (amounts or {}).items()
    }


def _objects(case: dict[str, Any]) -> list[MutableObj]:
    objects: list[MutableObj] = [policy("volcano", POLICY_OF[case["plugin"]])]
    for entry in case["nodes"]:
        objects.append(node(entry["name"], entry.get("labels")))
        objects[-1]["status"]["allocatable"] = _quantities(entry["allocatable"])
    for entry in case["queues"]:
        objects.append(
            queue(
                entry["name"],
                weight=entry.get("weight"),
                capability=_quantities(entry.get("capability"))
                if entry.get("capability")
                else None,
                guarantee=_quantities(entry.get("guarantee")) if entry.get("guarantee") else None,
                deserved=_quantities(entry.get("deserved")) if entry.get("deserved") else None,
                state=entry.get("state"),
            )
        )
    for entry in case.get("podgroups", []):
        objects.append(
            pod_group(
                entry["name"],
                entry["queue"],
                phase=entry["phase"],
                min_member=entry["minMember"],
                min_resources=_quantities(entry["minResources"])
                if "minResources" in entry
                else None,
                namespace=entry["namespace"],
            )
        )
    for entry in case.get("pods", []):
        objects.append(_pod(entry))
    return objects


def _pod(entry: dict[str, Any]) -> MutableObj:
    spec: MutableObj = {
        "containers": [{"name": "c", "resources": {"requests": _quantities(entry["request"])}}]
    }
    if entry.get("node"):
        spec["nodeName"] = entry["node"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": entry["name"],
            "namespace": entry["namespace"],
            "annotations": {"scheduling.k8s.io/group-name": entry["podgroup"]},
        },
        "spec": spec,
        "status": {"phase": entry.get("phase", "Running" if entry.get("node") else "Pending")},
    }


# The ``derived`` values were worked out from Volcano's code without its count of pods (its
# GetPodResourceRequest adds ``pods: 1`` per pod), so they say nothing about the ``pods``
# dimension; every other dimension is shared out on its own, so they hold unchanged.
# ``tests/engine/test_accounting.py`` checks the count of pods.


def _derived_queues(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    derived = case.get("derived") or {}
    if "queues" in derived:
        return dict(derived["queues"])
    return {
        name: values
        for name, values in derived.items()
        if name in {q["name"] for q in case["queues"]}
    }


QUEUE_CASES = [
    case
    for case in CASES
    if case["plugin"] in POLICY_OF and case.get("nodes") and _derived_queues(case)
]
SHARE_CASES = [case for case in CASES if case["plugin"] == "capacity" and case["kind"] == "share"]


def test_the_cases_are_there() -> None:
    assert len(QUEUE_CASES) >= 12
    assert len(SHARE_CASES) == 8


@pytest.mark.parametrize("case", QUEUE_CASES, ids=[case["id"] for case in QUEUE_CASES])
def test_derived_queue_values(case: dict[str, Any]) -> None:
    result = shares(*_objects(case))
    for name, expected in _derived_queues(case).items():
        actual = result.queues[name]
        values = {
            "deserved": actual.deserved,
            "realCapability": actual.real_capability,
            "allocated": actual.allocated,
            "request": actual.request,
            "inqueue": actual.inqueue,
        }
        for field in DERIVED_FIELDS:
            if field not in expected:
                continue
            want = _internal(expected[field])
            got = dict(values[field])
            for dimension in sorted((set(want) | set(got)) - {"pods"}):
                assert got.get(dimension, 0) == want.get(dimension, 0), (name, field, dimension)
        if "share" in expected:
            assert float(actual.share) == pytest.approx(expected["share"]), name


@pytest.mark.parametrize("case", SHARE_CASES, ids=[case["id"] for case in SHARE_CASES])
def test_capacity_share(case: dict[str, Any]) -> None:
    (entry,) = case["queues"]
    allocated = _quantities(entry["allocated"])
    bound = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "running", "namespace": "ns", "labels": {"sharekeeper.io/queue": "q"}},
        "spec": {
            "nodeName": "n",
            "containers": [{"name": "c", "resources": {"requests": allocated}}],
        },
        "status": {"phase": "Running"},
    }
    result = shares(
        policy("volcano", "Capacity"),
        node("n", cpu=1000, memory="1Ti"),
        queue("q", deserved=_quantities(entry["deserved"])),
        bound,
    )
    assert float(result.queues["q"].share) == pytest.approx(case["expected"]["share"])
