"""Volcano's Resource arithmetic cases (volcano.md §1.3) for the operations our integer model
keeps. Cases whose outcome hinges on Go's nil-versus-empty scalar map, on the 0.1 epsilon
between non-integers, or on operations the engine does not use are left out by op name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from sharekeeper.engine.resources import (
    UNLIMITED,
    add,
    at_least,
    capability_bounds,
    capped,
    dense,
    dense_again,
    exceeded_part,
    inqueue_reservation,
    sparse_rows,
)
from sharekeeper.model.quantities import parse_resources

CASES_FILE = Path(os.environ.get("SHAREKEEPER_CASES", "/work/shared/cases/volcano_cases.json"))
CASES = json.loads(CASES_FILE.read_text())["cases"] if CASES_FILE.exists() else []
OPS = {"Add", "Sub", "MinDimensionResource", "helpers.Max", "SetMaxResource"}


def _amounts(resource: dict[str, Any] | None) -> dict[str, int]:
    resource = resource or {}
    amounts = {"cpu": int(resource.get("MilliCPU", 0)), "memory": int(resource.get("Memory", 0))}
    amounts |= {name: int(value) for name, value in (resource.get("ScalarResources") or {}).items()}
    return amounts


def _same(left: dict[str, int], right: dict[str, int]) -> bool:
    return all(left.get(name, 0) == right.get(name, 0) for name in {*left, *right})


ARITHMETIC = [case for case in CASES if case.get("op") in OPS]
INQUEUE = [case for case in CASES if case["kind"] == "inqueue-resource"]


@pytest.mark.parametrize("case", ARITHMETIC, ids=[case["id"] for case in ARITHMETIC])
def test_resource_arithmetic(case: dict[str, Any]) -> None:
    left, right = _amounts(case["args"][0]), _amounts(case["args"][1])
    match case["op"]:
        case "Add":
            actual = add(left, right)
        case "Sub":  # every Sub case has right <= left, where Sub and ExceededPart agree
            actual = exceeded_part(left, right)
        case "MinDimensionResource":
            actual = capped(left, right, missing=0 if case["args"][2] == "Zero" else UNLIMITED)
        case _:
            actual = at_least(left, right)
    assert _same(actual, _amounts(case["expected"]))


@pytest.mark.parametrize("case", INQUEUE, ids=[case["id"] for case in INQUEUE])
def test_inqueue_reservation(case: dict[str, Any]) -> None:
    reserved = inqueue_reservation(
        parse_resources(case["args"]["minResources"]), _amounts(case["args"]["allocated"])
    )
    expected = _amounts(case["expected"])
    assert all(reserved.get(name, 0) == amount for name, amount in expected.items())


def test_sparse_rows_read_each_dense_row_back_in_the_order_of_the_names() -> None:
    names = ("cpu", "memory", "pods")
    matrix = np.array([[1, 0, 2], [0, 0, 0], [5, UNLIMITED, 7]], dtype=np.int64)
    rows = sparse_rows(matrix, names)
    assert rows == [
        {"cpu": 1, "memory": 0, "pods": 2},
        {"cpu": 0, "memory": 0, "pods": 0},
        {"cpu": 5, "memory": UNLIMITED, "pods": 7},
    ]
    assert all(list(row) == list(names) for row in rows)
    assert all(type(amount) is int for row in rows for amount in row.values())
    assert sparse_rows(np.zeros((2, 0), dtype=np.int64), ()) == [{}, {}]
    assert sparse_rows(np.zeros((0, 3), dtype=np.int64), names) == []


def test_sparse_rows_equal_to_the_common_row_are_one_mapping() -> None:
    names = ("cpu", "memory")
    matrix = np.array([[1, 2], [3, 4], [1, 2]], dtype=np.int64)
    rows = sparse_rows(matrix, names, common=np.array([1, 2], dtype=np.int64))
    assert rows == [{"cpu": 1, "memory": 2}, {"cpu": 3, "memory": 4}, {"cpu": 1, "memory": 2}]
    assert rows[0] is rows[2]
    assert all(type(amount) is int for row in rows for amount in row.values())
    unshared = sparse_rows(matrix, names, common=np.array([9, 9], dtype=np.int64))
    assert unshared == rows
    assert unshared[0] is not unshared[2]


def test_sparse_rows_that_repeat_the_row_before_share_its_mapping() -> None:
    matrix = np.array([[1], [1], [2], [2], [1]], dtype=np.int64)
    rows = sparse_rows(matrix, ("cpu",))
    assert rows == [{"cpu": 1}, {"cpu": 1}, {"cpu": 2}, {"cpu": 2}, {"cpu": 1}]
    assert [id(row) for row in rows] == [id(rows[0])] * 2 + [id(rows[2])] * 2 + [id(rows[4])]
    assert len({id(row) for row in rows}) == 3


def test_dense_reads_any_mapping_as_it_reads_dicts() -> None:
    names = ("cpu", "gpu", "memory")
    rows = [{"cpu": 1, "memory": 2}, {}, {"gpu": 3, "other": 9}]
    matrix = dense(rows, names, missing=UNLIMITED)
    assert matrix.tolist() == [[1, UNLIMITED, 2], [UNLIMITED] * 3, [UNLIMITED, 3, UNLIMITED]]
    assert matrix.flags.c_contiguous
    proxied = [MappingProxyType(row) for row in rows]
    assert dense(proxied, names, missing=UNLIMITED).tolist() == matrix.tolist()
    assert dense([], names).shape == (0, 3)


def test_capability_bounds_read_cpu_or_memory_at_zero_as_no_limit() -> None:
    names = ("cpu", "gpu", "memory")
    bounds = capability_bounds([{"cpu": 0, "gpu": 0, "memory": 5}, {}, {"memory": -1}], names)
    assert bounds.tolist() == [
        [UNLIMITED, 0, 5],
        [UNLIMITED, UNLIMITED, UNLIMITED],
        [UNLIMITED, UNLIMITED, UNLIMITED],
    ]


def test_dense_again_reads_only_the_rows_that_are_new_objects() -> None:
    names = ("cpu", "memory")
    kept, other = {"cpu": 1}, {"cpu": 2}
    first = dense_again([kept, other], names, None)
    assert first[1].tolist() == [[1, 0], [2, 0]]
    # A row that is a new object is read again; the same object is not.
    again = dense_again([kept, {"cpu": 2, "memory": 5}], names, first)
    assert again[1].tolist() == [[1, 0], [2, 5]]
    assert first[1].tolist() == [[1, 0], [2, 0]]  # the last matrix is left as it was
    same = dense_again(again[0], names, again)
    assert same[1] is again[1]
    assert not same[1].flags.writeable
    # Rows of another count: all read.
    assert dense_again([other], names, again)[1].tolist() == [[2, 0]]
