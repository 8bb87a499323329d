"""Kubernetes quantities into internal units: every spelling the API server accepts."""

from __future__ import annotations

import pytest

from sharekeeper.model.quantities import QuantityError, to_internal


@pytest.mark.parametrize(
    ("quantity", "cpu_milli", "memory_bytes"),
    [
        ("2", 2000, 2),
        ("1500m", 1500, 2),  # 1.5 bytes round up, as Kubernetes' Value() does
        ("8Gi", 8 * 2**30 * 1000, 8 * 2**30),
        ("1e3", 1_000_000, 1000),
        # n and u: Kubernetes and the CRDs' CEL accept them; lightkube's parser does not.
        ("250000000n", 250, 1),
        ("1500u", 2, 1),
        ("0n", 0, 0),
        ("4P", 4 * 10**18, 4 * 10**15),
    ],
)
def test_every_suffix_the_api_server_accepts_is_read(
    quantity: str, cpu_milli: int, memory_bytes: int
) -> None:
    assert to_internal("cpu", quantity) == cpu_milli
    assert to_internal("memory", quantity) == memory_bytes


@pytest.mark.parametrize(
    ("quantity", "message"),
    [
        ("lots", "is not a Kubernetes quantity"),
        ("u", "is not a Kubernetes quantity"),
        ("1.2.3n", "is not a Kubernetes quantity"),
        ("-1u", "is negative"),
        ("5P", "is above 4P, the largest quantity read"),
        ("8Ei", "is above 4P"),
    ],
)
def test_malformed_negative_and_huge_quantities_are_refused(quantity: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        to_internal("cpu", quantity)
