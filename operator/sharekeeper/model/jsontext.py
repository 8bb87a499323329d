"""JSON text in and out at a whole cluster's size: 150,000 pods in one file, one list or one
report.

msgspec (lightkube's own dependency) parses JSON about twice as fast as the standard library
and writes indented JSON ten times as fast (the standard library's indenting encoder is pure
Python). The standard library stays the judge of what a text means: whatever msgspec refuses
is parsed again by ``json``, whose value or message is the answer, so a text reads exactly as
``json.loads`` reads it (``NaN``, a lone surrogate escape, a number beyond a float are its to
accept, and its messages name a line and column).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_DECODE = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder(order="sorted")


def parse(text: bytes | str) -> Any:
    """The value of a JSON text, as ``json.loads`` gives it; ``ValueError`` (``json``'s) when it
    is not JSON."""
    try:
        return _DECODE.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(text)


def canonical(value: Any) -> bytes:
    """``value`` as compact JSON, keys sorted: the same bytes for equal values, whatever the
    order of their keys."""
    return _ENCODE.encode(value)


def pretty(value: Any) -> str:
    """``value`` as indented JSON (two spaces, keys sorted), ending in a newline. Floats are in
    their shortest form (``1e-7``), text is UTF-8 and not escaped, and a float that is not a
    number is ``null``: JSON has no spelling for it."""
    return msgspec.json.format(_ENCODE.encode(value), indent=2).decode() + "\n"
