"""What every model of ours is made of: the base model, the root model of a custom resource and
how it is served (``Resource``: group, names, printer columns), quantity and selector types, CEL
rules, and ``read``, which turns an object into a model or an ``ObjectError``.

The models read objects the way the API server stores them: unknown fields are ignored (the
API server prunes them), ``null`` counts as absent (and is then defaulted, as the API server
does for fields that are not nullable), types are strict (``"5"`` is not an integer), and the
defaults are the CRD's, because the CRD is generated from these very models.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PlainValidator,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema, ErrorDetails, core_schema

from sharekeeper.engine.selectors import LabelSelector as EngineSelector
from sharekeeper.engine.selectors import Requirement as EngineRequirement
from sharekeeper.model.objects import MutableObj, Obj, ObjectError, Problem
from sharekeeper.model.quantities import MAX_QUANTITY_TEXT, QuantityError, to_internal


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


@dataclass(frozen=True, slots=True)
class StringRule:
    """A CEL rule on a string, written for any CEL expression naming it: on a string field it
    applies to ``self``, on the key type of a map to every key (``self.all(k, ...)`` on the
    map: a structural schema constrains keys no other way). The model checks the same thing in
    a validator next to it."""

    check: Callable[[str], str]
    """The rule for the string named by the argument."""
    message: str

    def on_value(self) -> Cel:
        return Cel(self.check("self"), self.message)

    def on_keys(self) -> Cel:
        return Cel(f"self.all(k, {self.check('k')})", self.message)


@dataclass(frozen=True, slots=True)
class FixedWidth:
    """A signed integer of ``bits`` bits (``format: int32``/``int64``). The model refuses
    values outside the range. The API server refuses integers outside int64 itself but does not
    enforce ``format``: a narrower CRD integer gets its range as ``minimum``/``maximum`` where
    the field has no bound of its own."""

    bits: int

    @property
    def needs_bounds(self) -> bool:
        # Only below 64 bits: the API server reads bounds as float64, and 2^63 - 1 rounds up
        # to 2^63, which it then takes for -2^63.
        return self.bits < 64

    @property
    def minimum(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def maximum(self) -> int:
        return (1 << (self.bits - 1)) - 1

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._in_range, handler(source))

    def _in_range(self, value: int) -> int:
        if not self.minimum <= value <= self.maximum:
            raise ValueError(f"must be a {self.bits}-bit integer, {self.minimum} to {self.maximum}")
        return value


class Schema(dict[str, Any]):
    """OpenAPI keys added to a type's or a field's generated schema (``format``,
    ``x-kubernetes-*``). With ``replace=True`` the schema is exactly this (an int-or-string)."""

    def __init__(self, keys: Obj | None = None, /, *, replace: bool = False, **more: Any) -> None:
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
    __schema__: ClassVar[Obj] = {}

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


# --- custom resources ---------------------------------------------------------------------------

VERSION = "v1alpha1"
"""The version every resource of ours is served at."""


@dataclass(frozen=True, slots=True)
class Column:
    """An ``additionalPrinterColumns`` entry (``kubectl get``)."""

    name: str
    type: str
    json_path: str
    description: str | None = None
    priority: int | None = None
    """1: shown only with ``-o wide``."""

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.priority is not None:
            out["priority"] = self.priority
        if self.description is not None:
            out["description"] = self.description
        return out


AGE = Column("Age", "date", ".metadata.creationTimestamp")


@dataclass(frozen=True, slots=True)
class Resource:
    """How a root model is served: group, names, printer columns."""

    group: str
    kind: str
    plural: str
    short_names: tuple[str, ...]
    columns: tuple[Column, ...]
    comment: str
    """The first line of the generated file."""

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{VERSION}"


class RootModel(ApiModel):
    """A custom resource: ``__resource__`` says how it is served."""

    __resource__: ClassVar[Resource]


# --- names --------------------------------------------------------------------------------------

# Kubernetes' qualified names (resource names, label keys): an optional DNS subdomain prefix and
# "/", then a name. The patterns read the same in Python and in CEL (RE2): no escapes.
MAX_PREFIX_LENGTH = 253
MAX_NAME_LENGTH = 63
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME = "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
QUALIFIED_NAME_PATTERN = f"^({_DNS_LABEL}([.]{_DNS_LABEL})*/)?{_NAME}$"
QUALIFIED_NAME_MESSAGE = (
    f"must be a qualified name: an optional DNS subdomain prefix (at most {MAX_PREFIX_LENGTH} "
    f"characters) and '/', then at most {MAX_NAME_LENGTH} letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit (for example cpu, nvidia.com/gpu or "
    "app.kubernetes.io/name)"
)
LABEL_VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"


def _qualified_name_rule(name: str) -> str:
    # indexOf is -1 without a prefix: the name part is then the whole string.
    return (
        f"{name}.matches('{QUALIFIED_NAME_PATTERN}') && "
        f"{name}.indexOf('/') <= {MAX_PREFIX_LENGTH} && "
        f"size({name}) - {name}.indexOf('/') - 1 <= {MAX_NAME_LENGTH}"
    )


def _qualified_name(name: str) -> str:
    slash = name.find("/")
    if not (
        re.fullmatch(QUALIFIED_NAME_PATTERN, name)
        and slash <= MAX_PREFIX_LENGTH
        and len(name) - slash - 1 <= MAX_NAME_LENGTH
    ):
        raise ValueError(QUALIFIED_NAME_MESSAGE)
    return name


QualifiedName = Annotated[
    str,
    Field(max_length=MAX_PREFIX_LENGTH + 1 + MAX_NAME_LENGTH),
    AfterValidator(_qualified_name),
    StringRule(_qualified_name_rule, QUALIFIED_NAME_MESSAGE),
]
"""A resource name or a label key (``cpu``, ``nvidia.com/gpu``); as the key type of a map, it
constrains the map's keys."""

_DNS_SUBDOMAIN = f"^{_DNS_LABEL}([.]{_DNS_LABEL})*$"
QueueReference = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PREFIX_LENGTH,
        pattern=_DNS_SUBDOMAIN,
        description="The name of a Queue (a DNS subdomain).",
    ),
]
SchedulerName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PREFIX_LENGTH,
        pattern=_DNS_SUBDOMAIN,
        description="A scheduler's name as pods give it in spec.schedulerName: a DNS subdomain.",
    ),
]

LabelValue = Annotated[
    str,
    Field(
        max_length=MAX_NAME_LENGTH,
        pattern=LABEL_VALUE_PATTERN,
        description=f"A label value: empty, or at most {MAX_NAME_LENGTH} letters, digits, '-', "
        "'_' or '.', starting and ending with a letter or digit.",
    ),
]


# --- quantities ---------------------------------------------------------------------------------

_QUANTITY_SCHEMA: MutableObj = {
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
    False: f"must be a non-negative Kubernetes quantity of at most {MAX_QUANTITY_TEXT}, for "
    "example 500m, 4 or 8Gi",
    True: f"must be a positive Kubernetes quantity of at most {MAX_QUANTITY_TEXT}, for example "
    "6, 5500m or 12Gi",
}
_AT_MOST = f'quantity(string(self)).compareTo(quantity("{MAX_QUANTITY_TEXT}")) <= 0'
_NON_NEGATIVE = (
    'isQuantity(string(self)) && !quantity(string(self)).isLessThan(quantity("0")) && ' + _AT_MOST
)
_POSITIVE = (
    'isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity("0")) && ' + _AT_MOST
)

Quantity = Annotated[
    int | str,
    PlainValidator(lambda value: _quantity(value, positive=False)),
    Schema(
        {
            **_QUANTITY_SCHEMA,
            "description": "A non-negative Kubernetes quantity of at most "
            f"{MAX_QUANTITY_TEXT}, for example 500m, 4 or 8Gi.",
            "x-kubernetes-validations": [Cel(_NON_NEGATIVE, _QUANTITY_MESSAGE[False]).schema()],
        },
        replace=True,
    ),
]
"""A non-negative Kubernetes quantity as written (``"500m"``, ``4``, ``"8Gi"``), at most
``MAX_QUANTITY_TEXT``."""

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
"""A Kubernetes quantity above zero, at most ``MAX_QUANTITY_TEXT``."""

ResourceList = Annotated[dict[QualifiedName, Quantity], Field(max_length=32)]
"""Resource name -> non-negative quantity."""

Int32 = Annotated[int, FixedWidth(32)]
Int64 = Annotated[int, FixedWidth(64)]
DateTime = Annotated[str, Schema(format="date-time")]
STATUS_QUANTITY = "A Kubernetes quantity in whole internal units (millicores, bytes, milli-units)."
StatusResources = dict[str, Annotated[str, Field(description=STATUS_QUANTITY)]]
"""Status amounts: resource name -> quantity in whole internal units."""


def in_internal_units(resources: Mapping[str, int | str]) -> dict[str, int]:
    """A validated ResourceList in internal units (the value was checked by ``Quantity``)."""
    return {name: to_internal(name, value) for name, value in resources.items()}


# --- label selectors ----------------------------------------------------------------------------

MAX_SELECTOR_TERMS = 32
"""The most matchLabels entries, and the most matchExpressions, of a selector."""
MAX_SELECTOR_VALUES = 128
"""The most values of one matchExpressions requirement."""


class Requirement(ApiModel):
    """A label requirement."""

    __cel__ = (
        Cel(
            "self.operator in ['In', 'NotIn'] ? size(self.values) > 0 : "
            "!has(self.values) || size(self.values) == 0",
            "In and NotIn need values; Exists and DoesNotExist take none",
        ),
    )

    key: QualifiedName = Field(description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values."
    )
    values: Annotated[list[LabelValue], Schema({"x-kubernetes-list-type": "atomic"})] = Field(
        default_factory=list,
        max_length=MAX_SELECTOR_VALUES,
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

    match_labels: dict[QualifiedName, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_SELECTOR_TERMS,
        description="Labels that must all be present with these values.",
    )
    match_expressions: Annotated[
        list[Requirement], Schema({"x-kubernetes-list-type": "atomic"})
    ] = Field(
        default_factory=list,
        max_length=MAX_SELECTOR_TERMS,
        description="Requirements that must all hold.",
    )

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


def read(model: type[M], obj: Obj, kind: str | None = None) -> M:
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


_KEY = "[key]"
"""Follows a map key in a pydantic error location when the key itself was refused."""


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("spec", "capability", "cpu")`` -> ``spec.capability.cpu``; list indexes, keys that
    contain dots or slashes and refused keys in brackets: ``spec.actions[0]``,
    ``spec.overcommit.factors[nvidia.com/gpu]``, ``spec.capability[has space]``."""
    path = ""
    for index, step in enumerate(loc):
        if step == _KEY:
            continue
        refused_key = loc[index + 1 : index + 2] == (_KEY,)
        if isinstance(step, int) or refused_key or "." in step or "/" in step:
            path += f"[{step}]"
        else:
            path += f".{step}" if path else step
    return path
