"""pytest imports a test module outside a package by its file name alone, so two such modules of
one name anywhere under tests/ and e2e/ stop the collection of the whole suite (only a run of
both trees shows it). Names must be unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_test_modules_outside_packages_have_unique_names() -> None:
    modules = [
        path
        for tree in ("tests", "e2e")
        for path in (ROOT / tree).rglob("test_*.py")
        if not (path.parent / "__init__.py").exists()
    ]
    counts = Counter(path.name for path in modules)
    repeated = sorted(str(p.relative_to(ROOT)) for p in modules if counts[p.name] > 1)
    assert not repeated
    assert len(modules) > 50  # the walk found the suite
