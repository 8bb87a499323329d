"""Reading fields of Kubernetes objects (plain dicts, as the API or ``kubectl get -o yaml``
gives them), and ``ObjectError``: the one error type for an object that cannot be read, ours
(``api``) or Kubernetes' (the trimmed Pod/Node/PodGroup readers here), naming the object, the
field and the value."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sharekeeper.model.quantities import QuantityError, to_internal

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing's own from Python 3.13

Obj = Mapping[str, Any]
"""A JSON object as read: a Kubernetes object (or any part of one) from the API or a file."""
MutableObj = dict[str, Any]
"""A JSON object being built or changed: what is written (status, patches, reports)."""


_NO_VALUE: Any = object()
_NO_KIND = "<no kind>"


@dataclass(frozen=True, slots=True)
class Problem:
    """One field that cannot be read: where (``spec.capability.cpu``, ``""`` for the object
    itself), what is wrong, and the value found (absent when there is none to show)."""

    path: str
    message: str
    value: Any = _NO_VALUE

    def __str__(self) -> str:
        shown = "" if self.value is _NO_VALUE else f" (got {self.value!r:.80})"
        return f"{self.path + ': ' if self.path else ''}{self.message}{shown}"


class ObjectError(ValueError):
    """An object that cannot be read: ``Kind namespace/name: path: problem (got value)``.

    The one error type for everything the operator and ``simulate`` read; whoever catches it
    reports it on that object and goes on with the others."""

    def __init__(self, kind: str, name: str, problems: Sequence[Problem]) -> None:
        self.kind = kind
        self.name = name
        self.problems = tuple(problems)
        # Without a name it stands for several objects, whose problems name them.
        prefix = f"{kind} {name}: " if name else ""
        super().__init__(prefix + "; ".join(map(str, self.problems)))

    @property
    def path(self) -> str:
        return self.problems[0].path if self.problems else ""


def of_kind(kind: str, error: ObjectError) -> ObjectError:
    """``error`` naming ``kind`` when the object carried none (the items of a LIST)."""
    if error.kind != _NO_KIND:
        return error
    return ObjectError(kind, error.name, error.problems)


def identify(obj: Obj, kind: str | None = None) -> tuple[str, str]:
    """``(kind, "namespace/name" or "name")`` of an object, for messages. ``kind`` stands in
    when the object has none (the items of a LIST carry no kind)."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = metadata.get("name") or "<unnamed>"
    namespace = metadata.get("namespace")
    found = obj.get("kind") or kind or _NO_KIND
    return str(found), f"{namespace + '/' if namespace else ''}{name}"


def fail(
    obj: Obj, path: str, problem: str, value: Any = _NO_VALUE, *, kind: str | None = None
) -> ObjectError:
    return ObjectError(*identify(obj, kind), [Problem(path, problem, value)])


def is_mapping(value: object) -> TypeIs[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, answered at once for a ``dict``: what JSON and YAML give,
    checked millions of times while 150,000 pods are read (the abstract class's check is the
    slow path, for the other mappings, such as kopf's bodies)."""
    return type(value) is dict or isinstance(value, Mapping)


@functools.lru_cache(maxsize=1024)  # the paths are the readers' constants
def _steps(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def at(obj: Obj, path: str) -> Any:
    """The value at a dotted ``path``, or ``None`` when any step is missing."""
    value: Any = obj
    for step in _steps(path):
        if type(value) is not dict and not isinstance(value, Mapping):  # is_mapping, inlined
            return None
        value = value.get(step)
    return value


def name_of(obj: Obj) -> str:
    name = at(obj, "metadata.name")
    if not isinstance(name, str) or not name:
        raise fail(obj, "metadata.name", "is required")
    return name


_EMPTY: Obj = MappingProxyType({})


def section(obj: Obj, key: str) -> Obj:
    """``obj[key]`` when it is a mapping, else an empty one: a first step read once for the
    fields below it (``section(obj, "spec").get("nodeName")`` is ``at(obj, "spec.nodeName")``)."""
    value = obj.get(key)
    return value if is_mapping(value) else _EMPTY


def mapping_at(obj: Obj, path: str) -> Obj:
    return as_mapping(obj, path, at(obj, path))


def as_mapping(obj: Obj, path: str, value: Any) -> Obj:
    """``value``, found at ``path`` in ``obj``, when it is a mapping; empty when it is absent."""
    if value is None:
        return {}
    if not is_mapping(value):
        raise fail(obj, path, "must be a mapping", value)
    return value


def as_list(obj: Obj, path: str, value: Any, *, kind: str | None = None) -> list[Any]:
    """``value``, found at ``path`` in ``obj``, when it is a list; empty when it is absent."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(obj, path, "must be a list", value, kind=kind)
    return value


def labels_of(obj: Obj, path: str = "metadata.labels") -> dict[str, str]:
    return {str(key): str(value) for key, value in mapping_at(obj, path).items()}


def resources_at(obj: Obj, path: str) -> dict[str, int]:
    """The ResourceList at dotted ``path`` in internal units."""
    return resource_list(obj, mapping_at(obj, path), path)


def resource_list(obj: Obj, resources: Obj, path: str) -> dict[str, int]:
    """``resources`` (found at ``path`` in ``obj``) in internal units."""
    if not is_mapping(resources):
        raise fail(obj, path, "must be a mapping", resources)
    amounts: dict[str, int] = {}
    for resource, quantity in resources.items():
        name = str(resource)
        try:
            amounts[name] = to_internal(name, quantity)
        except QuantityError as error:
            raise fail(obj, f"{path}.{resource}", str(error)) from error
    return amounts


def int_at(obj: Obj, path: str, default: int, *, low: int, high: int) -> int:
    value = at(obj, path)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(obj, path, f"must be an integer from {low} to {high}", value)
    return value


def rfc3339(seconds: float) -> str:
    """Unix seconds as the RFC 3339 UTC time Kubernetes writes (``2026-01-01T00:00:00Z``)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_seconds(value: object) -> float:
    """An RFC 3339 time (``2026-01-01T00:00:00Z``, as Kubernetes writes them) as Unix seconds;
    one without a zone is taken as UTC, never as the machine's local time. ``ValueError`` when
    it is not a time: each reader decides what that means for its field."""
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def timestamp_at(obj: Obj, path: str) -> float:
    """An RFC 3339 timestamp as Unix seconds; 0 when absent (files written by hand)."""
    value = at(obj, path)
    if value in (None, ""):
        return 0.0
    try:
        return rfc3339_seconds(value)
    except ValueError as error:
        raise fail(obj, path, "is not an RFC 3339 time", value) from error
