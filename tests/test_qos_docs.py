"""docs/qos.md (and the references of docs/policies.md) cite only files the repository has.

Found: docs/qos.md pointed readers at ``reference/crane.md`` and cited "crane.md §12.4", and
docs/policies.md "volcano.md §2-§3"; none of these files is in the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

LINK = re.compile(r"\]\(([^)\s]+)\)")
"""A Markdown link's target."""
FILE_MENTION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:md|yaml|py|json))\b")
"""A file named in the prose, ``reference/crane.md`` or ``crane.md``."""


def exists(target: str, doc: Path) -> bool:
    path = target.split("#", 1)[0]
    return not path or (doc.parent / path).exists() or (ROOT / path).exists()


@pytest.mark.parametrize("name", ["qos.md", "policies.md", "reclaim.md"])
def test_every_file_the_doc_names_exists(name: str) -> None:
    doc = DOCS / name
    text = doc.read_text()
    links = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in links if not exists(t, doc)]
    prose = LINK.sub("]()", re.sub(r"https?://\S+", "", text))
    missing += [m for m in FILE_MENTION.findall(prose) if not exists(m, doc)]
    assert missing == [], f"{name} names files the repository does not have"
