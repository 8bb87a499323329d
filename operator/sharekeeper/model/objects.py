"""Reading fields of Kubernetes objects (plain dicts, as the API or ``kubectl get -o yaml``
gives them) with errors that name the object and the field."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sharekeeper.model.quantities import QuantityError, parse_resources

Obj = Mapping[str, Any]


class ModelError(ValueError):
    """Bad input; the message names the object and the field."""


def describe(obj: Obj) -> str:
    """``Kind namespace/name`` or ``Kind name``, for messages."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name", "<unnamed>")
    namespace = metadata.get("namespace")
    return f"{obj.get('kind', '<no kind>')} {namespace + '/' if namespace else ''}{name}"


def fail(obj: Obj, path: str, problem: str) -> ModelError:
    return ModelError(f"{describe(obj)}: {path}: {problem}")


def at(obj: Obj, path: str) -> Any:
    """The value at a dotted ``path``, or ``None`` when any step is missing."""
    value: Any = obj
    for step in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def name_of(obj: Obj) -> str:
    name = at(obj, "metadata.name")
    if not isinstance(name, str) or not name:
        raise fail(obj, "metadata.name", "is required")
    return name


def mapping_at(obj: Obj, path: str) -> Mapping[str, Any]:
    value = at(obj, path)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(obj, path, f"must be a mapping, got {value!r}")
    return value


def labels_of(obj: Obj, path: str = "metadata.labels") -> dict[str, str]:
    return {str(key): str(value) for key, value in mapping_at(obj, path).items()}


def resources_at(obj: Obj, path: str) -> dict[str, int]:
    """The ResourceList at dotted ``path`` in internal units."""
    return resource_list(obj, mapping_at(obj, path), path)


def resource_list(obj: Obj, resources: Mapping[str, Any], path: str) -> dict[str, int]:
    """``resources`` (found at ``path`` in ``obj``) in internal units."""
    if not isinstance(resources, Mapping):
        raise fail(obj, path, f"must be a mapping, got {resources!r}")
    amounts: dict[str, int] = {}
    for resource, quantity in resources.items():
        try:
            amounts.update(parse_resources({str(resource): quantity}))
        except QuantityError as error:
            raise fail(obj, f"{path}.{resource}", str(error)) from error
    return amounts


def int_at(obj: Obj, path: str, default: int, *, low: int, high: int) -> int:
    value = at(obj, path)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(obj, path, f"must be an integer from {low} to {high}, got {value!r}")
    return value


def bool_at(obj: Obj, path: str, default: bool) -> bool:
    value = at(obj, path)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise fail(obj, path, f"must be true or false, got {value!r}")
    return value


def choice_at(obj: Obj, path: str, default: str, choices: tuple[str, ...]) -> str:
    value = at(obj, path)
    if value is None:
        return default
    if value not in choices:
        raise fail(obj, path, f"must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def rfc3339(seconds: float) -> str:
    """Unix seconds as the RFC 3339 UTC time Kubernetes writes (``2026-01-01T00:00:00Z``)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def timestamp_at(obj: Obj, path: str) -> float:
    """An RFC 3339 timestamp as Unix seconds; 0 when absent (files written by hand)."""
    value = at(obj, path)
    if value in (None, ""):
        return 0.0
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError as error:
        raise fail(obj, path, f"{value!r} is not an RFC 3339 time") from error
