"""Documents from files nobody vouches for: UTF-8 text, JSON or YAML read within budgets; the
names Kubernetes gives objects; messages that stay on one line.

A file is refused, with a one-line message, when it is not UTF-8 text (binary, or another
encoding), when it nests deeper than ``MAX_DEPTH``, or when its YAML aliases go beyond their
budget: a kilobyte of nested anchors and aliases ("billion laughs") stands for a billion nodes,
and whatever walks them (a message, the output) runs out of memory. ``kubectl`` prints no
aliases and hand-written manifests use a few, so the budget costs nobody anything.

The messages are ours whatever the YAML library does: when it refuses a file by a limit of its
own before our scan reaches ours (libyaml stops at 1,000 levels of nesting, reading ahead of the
events our scan counts), the part it read is scanned again, so a budget of ours crossed there is
named in our words; any other refusal is "invalid YAML" at the line and column it names.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.reader import ReaderError

from sharekeeper.model import jsontext
from sharekeeper.model.objects import ObjectError, Problem

MAX_DEPTH = 64
"""Mappings and lists inside each other. A Pod nests about 8 deep."""
MAX_ALIASES = 100
"""Alias uses (``*name``) per file."""
MAX_ALIASED_NODES = 10_000
"""Nodes the aliases of a file stand for in all: 81 aliases in 9 levels already stand for
nearly 400 million."""

# libyaml's loader when PyYAML was built with it: an order of magnitude faster on big files.
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_JSON_OBJECT = re.compile(r"\s*\{")


class DocumentError(ValueError):
    """Bytes that are not documents we read; the message is one line."""


def read_documents(path: Path) -> list[Any]:
    """Every document of the file at ``path``; ``ObjectError`` naming the file otherwise."""
    try:
        return parse_documents(path.read_bytes())
    except OSError as error:
        raise ObjectError("file", str(path), [Problem("", error.strerror or str(error))]) from None
    except DocumentError as error:
        raise ObjectError("file", str(path), [Problem("", str(error))]) from None


def parse_documents(data: bytes) -> list[Any]:
    """The documents of a JSON object or a (multi-document) YAML stream."""
    if b"\0" in data:
        raise DocumentError("is binary, not UTF-8 text (it contains NUL bytes)")
    _check_utf8(data)
    # JSON (what `kubectl get -o json` prints) parses several times faster than YAML, and is
    # parsed from the bytes: a decoded copy would be 190 MiB more at 150,000 pods. The text up
    # to the first "{" says whether it is JSON ("{" is never part of another character's UTF-8).
    if _JSON_OBJECT.match(data[: data.find(b"{") + 1].decode()):
        return [_json(data)]
    text = data.decode()
    _check_yaml_budget(data, text)
    try:
        return list(yaml.load_all(data, Loader=LOADER))
    except yaml.YAMLError as error:
        raise DocumentError(_yaml_message(error, text)) from None
    # Constructors raise ValueError for values that only look like their type: 2026-13-45 as a
    # date, an integer of more than 4300 digits.
    except ValueError as error:
        raise DocumentError(one_line(str(error))) from None


def _check_utf8(data: bytes) -> None:
    """Refuse bytes that are not UTF-8 text; ASCII (most files) is, without a decoded copy."""
    if data.isascii():
        return
    try:
        data.decode()
    except UnicodeDecodeError as error:
        byte = data[error.start]
        raise DocumentError(
            f"is not UTF-8 text (byte 0x{byte:02x} at offset {error.start})"
        ) from None


_NESTING = frozenset({dict, list})
"""What JSON nests: one set look-up per value is cheaper than two identity tests."""
_WALKED_TOGETHER = 1000
"""How many containers the depth walk takes one level down at a time. A whole level of a big
file (a million mappings at 150,000 pods) is out of the processor's caches by the time the
walk comes back for the level below; the level below a slice of it is walked while the slice
is still in them (a fifth faster)."""


def _json(data: bytes) -> Any:
    try:
        document = jsontext.parse(data)
    except RecursionError:
        raise DocumentError(f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise DocumentError(str(error)) from None
    # Slices of one nesting level each, with their depth: the walk runs in comprehensions.
    pending = [([document], 1)]
    while pending:
        level, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise DocumentError(f"nests deeper than {MAX_DEPTH} levels")
        inner = [
            value
            for container in level
            for value in (container.values() if type(container) is dict else container)
            if type(value) in _NESTING
        ]
        pending += (
            (inner[start : start + _WALKED_TOGETHER], depth + 1)
            for start in range(0, len(inner), _WALKED_TOGETHER)
        )
    return document


def _check_yaml_budget(data: bytes, text: str) -> None:
    """Refuse deep nesting, recursive aliases and aliases beyond their budget from the parser's
    events, before anything is built: libyaml's parser keeps its own stack, while the composer
    that builds nodes recurses in C and crashes the process on a file of 100,000 ``[``."""
    try:
        _scan_budget(data)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        if mark is not None:  # what the library read before it refused, within our budgets?
            with contextlib.suppress(yaml.YAMLError):
                _scan_budget(_before(text, mark.line, mark.column))
        raise DocumentError(_yaml_message(error, text)) from None


def _before(text: str, line: int, column: int) -> str:
    """``text`` up to (0-based) ``line`` and ``column``."""
    start = 0
    for _ in range(line):
        start = text.find("\n", start) + 1
        if start == 0:
            return text
    return text[: start + column]


def _scan_budget(data: bytes | str) -> None:
    loader = LOADER(data)
    open_collections: list[tuple[str | None, int]] = []  # (anchor, node count at its start)
    sizes: dict[str, int] = {}  # per anchor, the nodes it stands for
    nodes = aliases = aliased_nodes = 0
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is ScalarEvent:
                nodes += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                nodes += 1
                open_collections.append((event.anchor, nodes))
                if len(open_collections) > MAX_DEPTH:
                    raise _at(event, f"nests deeper than {MAX_DEPTH} levels")
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                anchor, start = open_collections.pop()
                if anchor is not None:
                    sizes[anchor] = nodes - start + 1
            elif kind is AliasEvent:
                if any(anchor == event.anchor for anchor, _ in open_collections):
                    raise _at(event, f"alias *{event.anchor} is inside the collection it names")
                size = sizes.get(event.anchor, 1)  # an undefined one is the composer's error
                aliases += 1
                aliased_nodes += size
                nodes += size
                if aliases > MAX_ALIASES:
                    raise _at(event, f"has more than {MAX_ALIASES} aliases")
                if aliased_nodes > MAX_ALIASED_NODES:
                    raise _at(event, f"has aliases standing for over {MAX_ALIASED_NODES} nodes")
            elif kind is StreamEndEvent:
                return
    finally:
        loader.dispose()


def _at(event: Any, problem: str) -> DocumentError:
    return DocumentError(f"line {event.start_mark.line + 1}: {problem}")


def _yaml_message(error: yaml.YAMLError, text: str) -> str:
    """``line 3, column 5: invalid YAML: expected <block end>, but found '-' (while parsing a
    block mapping)``: the library's message spans several lines and names the stream, not the
    file; its words after ours say what it found."""
    if isinstance(error, ReaderError):
        line = text.count("\n", 0, error.position)
        column = error.position - (text.rfind("\n", 0, error.position) + 1)
        return (
            f"line {line + 1}, column {column + 1}: "
            f"character #x{error.character:04x} is not allowed in YAML"
        )
    if not isinstance(error, yaml.MarkedYAMLError):
        return one_line(f"invalid YAML: {error}")
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = f" ({error.context})" if error.context and error.problem else ""
    return one_line(f"{where}invalid YAML: {error.problem or error.context}{context}")


# --- names --------------------------------------------------------------------------------------

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL)
_DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
DNS_LABEL = (
    "must be a lowercase RFC 1123 label: at most 63 characters, a-z, 0-9 and '-', starting "
    "and ending with a letter or digit"
)
DNS_SUBDOMAIN = (
    "must be a lowercase RFC 1123 subdomain: at most 253 characters, a-z, 0-9, '-' and '.', "
    "starting and ending with a letter or digit"
)


def is_dns_label(name: object) -> bool:
    """A Namespace's name, for example."""
    return isinstance(name, str) and len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: object) -> bool:
    """The name of most kinds: Nodes, Pods, custom resources."""
    return isinstance(name, str) and len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


# --- messages -----------------------------------------------------------------------------------


def one_line(message: str) -> str:
    """``message`` with every unprintable character escaped (``\\n``, ``\\x1b``): what a file
    says is echoed in messages, and must neither break the line nor drive the terminal."""
    if message.isprintable():
        return message
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in message)
