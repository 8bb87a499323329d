"""Kubernetes quantities into internal units: every spelling the API server accepts."""

from __future__ import annotations

import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lightkube.utils.quantity import parse_quantity as library_parse

from sharekeeper.model.quantities import MAX_QUANTITY, QuantityError, scale, to_internal


@pytest.mark.parametrize(
    ("quantity", "cpu_milli", "memory_bytes"),
    [
        ("2", 2000, 2),
        ("1500m", 1500, 2),  # 1.5 bytes round up, as Kubernetes' Value() does
        ("8Gi", 8 * 2**30 * 1000, 8 * 2**30),
        ("1e3", 1_000_000, 1000),
        ("1E3", 1_000_000, 1000),  # an exponent, as "e3" (a lone "E" is exa)
        ("+.5", 500, 1),
        ("1e-99999999", 1, 1),  # anything above zero is at least one internal unit
        ("0e99999999", 0, 0),
        # n and u: Kubernetes and the CRDs' CEL accept them (a client library's parser may not).
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
        ("1e99999999", "is above 4P"),
        ("1e99999999999999999999", "is not a Kubernetes quantity"),  # beyond a decimal
        # Kubernetes' grammar, not a library's: ASCII digits, one suffix or one exponent,
        # nothing past E and Ei.
        ("\u0663", "is not a Kubernetes quantity"),
        ("1e3k", "is not a Kubernetes quantity"),
        ("1Zi", "is not a Kubernetes quantity"),
        ("1 ", "is not a Kubernetes quantity"),
    ],
)
def test_malformed_negative_and_huge_quantities_are_refused(quantity: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        to_internal("cpu", quantity)


# What lightkube reads of the grammar: a sign only before digits, an exponent below 10^16 (it
# rounds every value to a thousandth within a decimal's 28 digits).
numbers = st.from_regex(r"(?:[+-]?[0-9]{1,7}(?:\.[0-9]{0,5})?|\.[0-9]{1,5})", fullmatch=True)
suffixes = st.sampled_from(
    ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
) | st.from_regex(r"e[+-]?(?:[0-9]|1[0-5])", fullmatch=True)


@given(numbers, suffixes)
def test_what_a_client_library_reads_is_read_the_same(number: str, suffix: str) -> None:
    """lightkube's parser (which the operator's client carries) as the reference, on the part
    of the grammar both read: the value rounded up to an internal unit, or refused."""
    text = number + suffix
    value = library_parse(text)
    assert value is not None
    for resource in ("cpu", "memory"):
        if value < 0 or value > MAX_QUANTITY:
            with pytest.raises(QuantityError):
                to_internal(resource, text)
        else:
            expected = (value * scale(resource)).to_integral_value(decimal.ROUND_CEILING)
            assert to_internal(resource, text) == int(expected)
