"""CustomResourceDefinitions generated from the models: ``sharekeeper crds`` writes ``crds/``.

The generator reads the models (each root model's ``__resource__``, a ``base.Resource``, says
how it is served); no model reads the generator (an import-linter contract).

The structural ``openAPIV3Schema`` follows the model field by field: camelCase names, types,
``description`` (the field's, or its model's docstring), ``default``, ``enum`` (``Literal``),
bounds (``ge``/``le``/``min_length``/``max_length``/``pattern``, and the range of a
``FixedWidth`` integer), the ``Schema`` keys a type or field adds (``format``,
``x-kubernetes-*``), each model's CEL rules and each ``StringRule`` (on a map's key type, a rule
over the map's keys). A field with a model default (``default_factory=Sharing``) gets
``default: {}`` so that the API server fills in the nested defaults, exactly as reading a
hand-written file through the model does.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sharekeeper.api.base import VERSION, ApiModel, FixedWidth, RootModel, Schema, StringRule
from sharekeeper.api.policy import SchedulerPolicy
from sharekeeper.api.qos import NodeQosEnsurancePolicy
from sharekeeper.api.queue import Queue

LABELS = {"app.kubernetes.io/name": "sharekeeper", "app.kubernetes.io/part-of": "sharekeeper"}


# --- the schema walker --------------------------------------------------------------------------

_ORDER = (
    "type", "format", "anyOf", "description", "enum", "default", "minimum", "maximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "minProperties", "maxProperties",
    "required", "properties", "additionalProperties", "items",
)  # fmt: skip


def model_schema(model: type[BaseModel], description: str | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for name, info in model.model_fields.items():
        alias = info.alias or name
        properties[alias] = field_schema(info)
        if info.is_required():
            required.append(alias)
    out: dict[str, Any] = {"type": "object", "description": description or docstring(model)}
    if required:
        out["required"] = required
    out["properties"] = properties
    if issubclass(model, ApiModel):
        out.update(model.__schema__)
        if model.__cel__:
            out["x-kubernetes-validations"] = [rule.schema() for rule in model.__cel__]
    return ordered(out)


def field_schema(info: FieldInfo) -> dict[str, Any]:
    schema = type_schema(info.annotation, info.metadata, info.description)
    if info.default not in (PydanticUndefined, None):
        schema["default"] = info.default
    elif info.default_factory is not None and _model_of(info.annotation) is not None:
        schema["default"] = {}  # the API server fills in the nested defaults
    return ordered(schema)


def type_schema(
    annotation: Any, metadata: Iterable[Any] = (), description: str | None = None
) -> dict[str, Any]:
    metadata = list(metadata)
    while get_origin(annotation) is Annotated:
        annotation, *more = get_args(annotation)
        metadata = [*more, *metadata]
    extras: dict[str, Any] = {}
    replacement: dict[str, Any] | None = None
    constraints: list[Any] = []
    rules: list[dict[str, str]] = []
    width: FixedWidth | None = None
    for item in metadata:
        if isinstance(item, Schema):
            if item.replace:
                replacement = dict(item)
            else:
                extras.update(item)
        elif isinstance(item, StringRule):
            rules.append(item.on_value().schema())
        elif isinstance(item, FixedWidth):
            width = item
        elif isinstance(item, FieldInfo):
            description = item.description or description
            constraints.extend(item.metadata)
        else:
            constraints.append(item)
    schema = replacement if replacement is not None else _bare_schema(annotation, description)
    if description is not None:
        schema["description"] = description
    kind = schema.get("type")
    for constraint in constraints:
        schema.update(_constraint(constraint, kind))
    if width is not None:
        schema["format"] = f"int{width.bits}"
        if width.needs_bounds:  # the field's own bounds, if any, are tighter
            schema.setdefault("minimum", width.minimum)
            schema.setdefault("maximum", width.maximum)
    if rules:
        schema["x-kubernetes-validations"] = [*schema.get("x-kubernetes-validations", []), *rules]
    schema.update(extras)
    return ordered(schema)


def _bare_schema(annotation: Any, description: str | None) -> dict[str, Any]:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        if len(present) != 1:
            raise TypeError(f"{annotation}: a union needs a Schema(replace=True)")
        return type_schema(present[0], (), description)
    if origin is Literal:
        return {"type": "string", "enum": list(args)}
    if origin is dict:
        schema: dict[str, Any] = {"type": "object", "additionalProperties": type_schema(args[1])}
        keys = [
            item.on_keys().schema() for item in _metadata(args[0]) if isinstance(item, StringRule)
        ]
        if keys:
            schema["x-kubernetes-validations"] = keys
        return schema
    if origin is list:
        return {"type": "array", "items": type_schema(args[0])}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_schema(annotation, description)
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation in simple:
        return {"type": simple[annotation]}
    raise TypeError(f"no OpenAPI schema for {annotation!r}")


def _constraint(constraint: Any, kind: str | None) -> dict[str, Any]:
    sizes = {"string": "Length", "array": "Items", "object": "Properties"}
    size = sizes.get(kind or "", "Length")
    if isinstance(constraint, annotated_types.Ge):
        return {"minimum": constraint.ge}
    if isinstance(constraint, annotated_types.Le):
        return {"maximum": constraint.le}
    if isinstance(constraint, annotated_types.MinLen):
        return {f"min{size}": constraint.min_length}
    if isinstance(constraint, annotated_types.MaxLen):
        return {f"max{size}": constraint.max_length}
    pattern = getattr(constraint, "pattern", None)  # pydantic's Field(pattern=...)
    if isinstance(pattern, str):
        return {"pattern": pattern}
    return {}


def _metadata(annotation: Any) -> list[Any]:
    """The ``Annotated`` metadata of a type (none for a bare type)."""
    metadata: list[Any] = []
    while get_origin(annotation) is Annotated:
        annotation, *more = get_args(annotation)
        metadata = [*more, *metadata]
    return metadata


def _model_of(annotation: Any) -> type[BaseModel] | None:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def docstring(model: type[BaseModel]) -> str:
    return " ".join(inspect.cleandoc(model.__doc__ or "").split())


def ordered(schema: Mapping[str, Any]) -> dict[str, Any]:
    rank = {key: index for index, key in enumerate(_ORDER)}
    return dict(sorted(schema.items(), key=lambda item: rank.get(item[0], len(rank))))


# --- the CRD ------------------------------------------------------------------------------------


def crd(model: type[RootModel]) -> dict[str, Any]:
    resource = model.__resource__
    schema = model_schema(model)
    properties = {
        "apiVersion": {
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of "
            "an object.",
        },
        "kind": {
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object "
            "represents.",
        },
        "metadata": {"type": "object"},
        **{k: v for k, v in schema["properties"].items() if k != "metadata"},
    }
    required = [name for name in schema.get("required", []) if name != "metadata"]
    root = ordered(
        {"type": "object", "description": schema["description"], "properties": properties}
        | ({"required": required} if required else {})
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.crd_name, "labels": dict(LABELS)},
        "spec": {
            "group": resource.group,
            "scope": "Cluster",
            "names": {
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
                "plural": resource.plural,
                "singular": resource.kind.lower(),
                "shortNames": list(resource.short_names),
                "categories": ["sharekeeper"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [c.schema() for c in resource.columns],
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def render(model: type[RootModel]) -> str:
    """The CRD file's text: what ``make crds`` writes and the drift test compares."""
    header = (
        f"# {model.__resource__.comment}\n"
        "# Generated from operator/sharekeeper/api/ by `make crds`: edit the models, not this.\n"
    )
    body = yaml.dump(crd(model), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    return header + body


class _Dumper(yaml.SafeDumper):
    """No anchors and aliases: every schema node is spelled out, as ``kubectl explain`` and
    a reader of the file see it."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def resources() -> tuple[type[RootModel], ...]:
    return (Queue, SchedulerPolicy, NodeQosEnsurancePolicy)


def generated() -> dict[str, str]:
    """File name -> text, for every CRD."""
    return {f"{model.__resource__.crd_name}.yaml": render(model) for model in resources()}


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generated().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
