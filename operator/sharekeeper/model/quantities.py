"""Kubernetes quantities <-> integer internal units, the one place the conversion happens.

Internal units follow Volcano's resource model (``reference/volcano.md`` §1.1) so that its
epsilon and comparison rules keep their meaning:

- ``cpu``: millicores;
- ``memory``: bytes;
- ``pods``: whole pods;
- everything else (``ephemeral-storage``, ``nvidia.com/gpu``, hugepages, ...): milli-units.

Fractions of an internal unit round up, as Kubernetes does for ``MilliValue()``/``Value()``.

Every quantity read is at most ``MAX_QUANTITY`` (4P) Kubernetes units, so one amount is at most
4 x 10^18 internal units, below ``2^62``: no single value a tenant writes can overflow the
engines' 64-bit arithmetic, and their sums are saturated there (``engine.resources``).
"""

from __future__ import annotations

import decimal
import functools
import re
from collections.abc import Mapping

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20),
                    ("Ki", 2**10))  # fmt: skip
_DECIMAL_SUFFIXES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6),
                     ("k", 10**3))  # fmt: skip


MAX_QUANTITY = 4 * 10**15
"""The largest quantity read, in Kubernetes units ("4P"): 4 x 10^15 cores, bytes or units."""
MAX_QUANTITY_TEXT = "4P"


class QuantityError(ValueError):
    """A quantity that is malformed, negative or above ``MAX_QUANTITY``; the message names the
    value."""


def scale(resource: str) -> int:
    """How many internal units make one Kubernetes unit of ``resource``."""
    if resource in (MEMORY, PODS):
        return 1
    return 1000


# Pods repeat the same few quantities ("250m", "4Gi") a hundred thousand times, and the results
# repeat the same amounts: both conversions are pure, so each distinct one is done once.
@functools.lru_cache(maxsize=1 << 16)
def to_internal(resource: str, quantity: str | int | float) -> int:
    """Parse a Kubernetes quantity into internal units; reject malformed or negative values."""
    try:
        value = parse_quantity(str(quantity))
    except decimal.InvalidOperation:  # an exponent beyond what a decimal holds (1e10^20)
        value = None
    if value is None:
        raise QuantityError(f"{quantity!r} is not a Kubernetes quantity")
    if value < 0:
        raise QuantityError(f"{quantity!r} is negative")
    if value > MAX_QUANTITY:
        raise QuantityError(f"{quantity!r} is above {MAX_QUANTITY_TEXT}, the largest quantity read")
    # Up to a nano first, exactly: a value that small times the scale would round to 0.
    scaled = value.quantize(_NANO, rounding=decimal.ROUND_CEILING) * scale(resource)
    return int(scaled.to_integral_value(rounding=decimal.ROUND_CEILING))


_NANO = decimal.Decimal("1e-9")


_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<suffix>[numkMGTPE]|[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+))?"
)
_FACTORS = {
    "n": _NANO, "u": decimal.Decimal("1e-6"), "m": decimal.Decimal("1e-3"),
    **{suffix: decimal.Decimal(factor) for suffix, factor in _DECIMAL_SUFFIXES},
    **{suffix: decimal.Decimal(factor) for suffix, factor in _BINARY_SUFFIXES},
}  # fmt: skip


def parse_quantity(text: str) -> decimal.Decimal | None:
    """The value of a quantity as the API server spells them (``resource.Quantity``: a signed
    decimal number, then a binary suffix ``Ki``..``Ei``, a decimal one ``n``..``E``, or an
    exponent ``e3``/``E3``), in Kubernetes units, exactly; None for any other text. Our own
    rather than a client library's: ``simulate`` and ``explain`` then start without one, and
    the grammar is Kubernetes' own (ASCII digits only, ``n`` and ``u`` included, nothing past
    ``E``/``Ei``)."""
    found = _QUANTITY.fullmatch(text)
    if found is None:
        return None
    number, suffix, exponent = found.group("number", "suffix", "exponent")
    if exponent is not None:
        # Read whole, not multiplied out: ``1e99999999`` is simply above 4P, never an
        # overflow (an exponent beyond a decimal's 10^18 raises ``decimal.InvalidOperation``).
        return decimal.Decimal(f"{number}e{exponent}")
    value = decimal.Decimal(number)
    return value if suffix is None else value * _FACTORS[suffix]


@functools.lru_cache(maxsize=1 << 16)
def to_quantity(resource: str, amount: int) -> str:
    """Format internal units as the shortest exact Kubernetes quantity string."""
    if scale(resource) == 1000:
        whole, milli = divmod(amount, 1000)
        return f"{amount}m" if milli else str(whole)
    if amount == 0:
        return "0"
    # Every exact spelling, the shortest wins (binary first on a tie): 8Gi, 192G, 1500M.
    spellings = [
        f"{amount // factor}{suffix}"
        for suffix, factor in (*_BINARY_SUFFIXES, *_DECIMAL_SUFFIXES)
        if amount % factor == 0
    ]
    return min([*spellings, str(amount)], key=len)


def parse_resources(resources: Mapping[str, str | int | float] | None) -> dict[str, int]:
    """A ResourceList (``{"cpu": "4", "memory": "8Gi"}``) in internal units."""
    return {name: to_internal(name, value) for name, value in (resources or {}).items()}


def format_resources(amounts: Mapping[str, int]) -> dict[str, str]:
    """Internal units back to a ResourceList, keys sorted for stable output."""
    if not amounts:  # a queue's guarantee, inqueue, elastic: mostly none
        return {}
    return {name: to_quantity(name, amounts[name]) for name in sorted(amounts)}
