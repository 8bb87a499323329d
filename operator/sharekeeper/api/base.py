"""What every model of ours is made of: the base model, quantity and selector types, CEL rules,
and ``read``, which turns an object into a model or an ``ObjectError``.

The models read objects the way the API server stores them: unknown fields are ignored (the
API server prunes them), ``null`` counts as absent (and is then defaulted, as the API server
does for fields that are not nullable), types are strict (``"5"`` is not an integer), and the
defaults are the CRD's, because the CRD is generated from these very models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from sharekeeper.engine.selectors import LabelSelector as EngineSelector
from sharekeeper.engine.selectors import Requirement as EngineRequirement
from sharekeeper.model.objects import ObjectError, Problem
from sharekeeper.model.quantities import QuantityError, to_internal


@dataclass(frozen=True, slots=True)
class Cel:
    """An ``x-kubernetes-validations`` rule. The model checks the same thing in Python (a
    validator next to the rule), so ``simulate`` refuses what ``kubectl apply`` refuses."""

    rule: str
    message: str
    field_path: str | None = None
    reason: str | None = None

    def schema(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class Schema(dict[str, Any]):
    """OpenAPI keys added to a type's or a field's generated schema (``format``,
    ``x-kubernetes-*``). With ``replace=True`` the schema is exactly this (an int-or-string)."""

    def __init__(
        self, keys: Mapping[str, Any] | None = None, /, *, replace: bool = False, **more: Any
    ) -> None:
        super().__init__({**(keys or {}), **more})
        self.replace = replace

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)  # typing hashes Annotated metadata; a Schema is never a key


class ApiModel(BaseModel):
    """The base of every model: camelCase aliases, strict types, frozen, unknown fields
    ignored. ``__cel__``: the object's CEL rules; ``__schema__``: extra OpenAPI keys."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        strict=True,
        frozen=True,
        extra="ignore",
    )
    __cel__: ClassVar[tuple[Cel, ...]] = ()
    __schema__: ClassVar[Mapping[str, Any]] = {}

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


# --- quantities ---------------------------------------------------------------------------------

_QUANTITY_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "maxLength": 64,
    "x-kubernetes-int-or-string": True,
}


def _quantity(value: Any, *, positive: bool) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be a Kubernetes quantity (a string or an integer)")
    try:
        amount = to_internal("cpu", value)
    except QuantityError:
        raise ValueError(_QUANTITY_MESSAGE[positive]) from None
    if positive and amount <= 0:
        raise ValueError(_QUANTITY_MESSAGE[positive])
    return value


_QUANTITY_MESSAGE = {
    False: "must be a non-negative Kubernetes quantity, for example 500m, 4 or 8Gi",
    True: "must be a positive Kubernetes quantity, for example 6, 5500m or 12Gi",
}
_NON_NEGATIVE = 'isQuantity(string(self)) && !quantity(string(self)).isLessThan(quantity("0"))'
_POSITIVE = 'isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity("0"))'

Quantity = Annotated[
    int | str,
    PlainValidator(lambda value: _quantity(value, positive=False)),
    Schema(
        {
            **_QUANTITY_SCHEMA,
            "description": "A non-negative Kubernetes quantity, for example 500m, 4 or 8Gi.",
            "x-kubernetes-validations": [Cel(_NON_NEGATIVE, _QUANTITY_MESSAGE[False]).schema()],
        },
        replace=True,
    ),
]
"""A non-negative Kubernetes quantity as written (``"500m"``, ``4``, ``"8Gi"``)."""

PositiveQuantity = Annotated[
    int | str,
    PlainValidator(lambda value: _quantity(value, positive=True)),
    Schema(
        {
            **_QUANTITY_SCHEMA,
            "x-kubernetes-validations": [Cel(_POSITIVE, _QUANTITY_MESSAGE[True]).schema()],
        },
        replace=True,
    ),
]
"""A Kubernetes quantity above zero."""

ResourceList = Annotated[dict[str, Quantity], Field(max_length=32)]
"""Resource name -> non-negative quantity."""

Int32 = Annotated[int, Schema(format="int32")]
Int64 = Annotated[int, Schema(format="int64")]
DateTime = Annotated[str, Schema(format="date-time")]
STATUS_QUANTITY = "A Kubernetes quantity in whole internal units (millicores, bytes, milli-units)."
StatusResources = dict[str, Annotated[str, Field(description=STATUS_QUANTITY)]]
"""Status amounts: resource name -> quantity in whole internal units."""


def in_internal_units(resources: Mapping[str, int | str]) -> dict[str, int]:
    """A validated ResourceList in internal units (the value was checked by ``Quantity``)."""
    return {name: to_internal(name, value) for name, value in resources.items()}


# --- label selectors ----------------------------------------------------------------------------


class Requirement(ApiModel):
    """A label requirement."""

    __cel__ = (
        Cel(
            "self.operator in ['In', 'NotIn'] ? size(self.values) > 0 : "
            "!has(self.values) || size(self.values) == 0",
            "In and NotIn need values; Exists and DoesNotExist take none",
        ),
    )

    key: str = Field(description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values."
    )
    values: Annotated[
        list[Annotated[str, Field(description="A label value.")]],
        Schema({"x-kubernetes-list-type": "atomic"}),
    ] = Field(
        default_factory=list,
        description="Values for In and NotIn; must be empty for Exists and DoesNotExist.",
    )

    @model_validator(mode="after")
    def _values_match_operator(self) -> Requirement:
        if (self.operator in ("In", "NotIn")) != bool(self.values):
            raise ValueError("In and NotIn need values; Exists and DoesNotExist take none")
        return self


class LabelSelector(ApiModel):
    """A label selector. Empty or absent selects everything."""

    __schema__ = {"x-kubernetes-map-type": "atomic"}

    match_labels: dict[str, Annotated[str, Field(description="Label value.")]] = Field(
        default_factory=dict, description="Labels that must all be present with these values."
    )
    match_expressions: Annotated[
        list[Requirement], Schema({"x-kubernetes-list-type": "atomic"})
    ] = Field(default_factory=list, max_length=32, description="Requirements that must all hold.")

    def engine(self) -> EngineSelector:
        return EngineSelector(
            dict(self.match_labels),
            tuple(
                EngineRequirement(r.key, r.operator, frozenset(r.values))
                for r in self.match_expressions
            ),
        )


# --- conditions and metadata --------------------------------------------------------------------


class Condition(ApiModel):
    """One aspect of the object's state, Kubernetes condition style."""

    type: str = Field(max_length=316, description="Type of condition in CamelCase.")
    status: Literal["True", "False", "Unknown"] = Field(
        description="Status of the condition, one of True, False, Unknown."
    )
    observed_generation: Int64 | None = Field(
        None, ge=0, description="The spec generation the condition was set for."
    )
    last_transition_time: DateTime = Field(description="Last time the condition changed status.")
    reason: str = Field(
        max_length=1024, description="Machine-readable CamelCase reason for the last transition."
    )
    message: str = Field(
        max_length=32768, description="Human-readable details about the last transition."
    )


Conditions = Annotated[
    list[Condition],
    Schema({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}),
]


class Metadata(ApiModel):
    """The part of ``metadata`` we read."""

    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)


# --- reading ------------------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def read(model: type[M], obj: Mapping[str, Any], kind: str | None = None) -> M:
    """``obj`` as ``model``, or an ``ObjectError`` naming the object, each bad field and its
    value. ``kind`` names the object in messages when ``obj`` has none (a status part)."""
    try:
        return model.model_validate(obj)
    except ValidationError as error:
        metadata = obj.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        raise ObjectError(
            str(obj.get("kind") or kind or model.__name__),
            str(name or "<unnamed>"),
            [_problem(detail) for detail in error.errors(include_url=False)],
        ) from None


def _problem(detail: ErrorDetails) -> Problem:
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] == "missing":
        return Problem(field_path(detail["loc"]), "is required")
    return Problem(field_path(detail["loc"]), message, detail["input"])


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("spec", "capability", "cpu")`` -> ``spec.capability.cpu``; list indexes and keys
    that contain dots or slashes in brackets: ``spec.actions[0]``,
    ``spec.overcommit.factors[nvidia.com/gpu]``."""
    path = ""
    for step in loc:
        if isinstance(step, int) or "." in step or "/" in step:
            path += f"[{step}]"
        else:
            path += f".{step}" if path else step
    return path
