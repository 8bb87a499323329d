"""The reference cases in ``tests/cases/`` (see its README), loaded once per test session."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

CASES = Path(__file__).resolve().parent / "cases"


@cache
def volcano_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((CASES / "volcano_cases.json").read_text())["cases"]
    return cases


@cache
def crane_cases() -> dict[str, Any]:
    cases: dict[str, Any] = json.loads((CASES / "crane_cases.json").read_text())
    return cases
