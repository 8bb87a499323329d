"""JSON text at a cluster's size: parsed as the standard library parses it, written indented."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharekeeper.model.jsontext import parse, pretty


def json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.text() | scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=30,
    )


# What JSON holds, with floats that have a spelling in it.
VALUES = json_values(st.floats(allow_nan=False, allow_infinity=False))


@given(VALUES)
def test_what_is_written_parses_back_to_the_same_value(value: Any) -> None:
    text = pretty(value)
    assert text.endswith("\n")
    assert parse(text) == value
    assert json.loads(text) == value


@given(json_values(st.nothing()))
def test_the_layout_is_the_standard_librarys_indented_and_sorted_one(value: Any) -> None:
    """Without floats (whose shortest spelling differs: 1e-7 against 1e-07) and with text
    unescaped, the lines are those of ``json.dumps(indent=2, sort_keys=True)``."""
    expected = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert pretty(value) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "List", "items": [{"a": 1}, {"b": [true, null, 2.5]}]}',
        "123456789012345678901234567890",
        '{"a": 1, "a": 2}',
        # Only the standard library reads these; the answer is still its answer.
        "NaN",
        "[1e400, -Infinity]",
        '"\\ud800"',
    ],
)
def test_a_text_parses_as_json_loads_parses_it(text: str) -> None:
    expected = json.loads(text)
    for given_text in (text, text.encode("utf-8", "surrogatepass")):
        got = parse(given_text)
        # NaN is not equal to itself: compare the spellings.
        assert repr(got) == repr(expected)


@pytest.mark.parametrize("text", ['{"a": 1,}', "[1, 2", '{"a" 1}', ""])
def test_a_text_that_is_not_json_gets_the_standard_librarys_message(text: str) -> None:
    with pytest.raises(json.JSONDecodeError, match="line 1 column") as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError, match="line 1 column") as refused:
        parse(text)
    assert str(refused.value) == str(expected.value)


def test_a_float_with_no_json_spelling_is_written_as_null() -> None:
    assert parse(pretty({"a": math.inf, "b": math.nan})) == {"a": None, "b": None}
