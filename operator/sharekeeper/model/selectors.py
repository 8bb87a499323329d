"""``metav1.LabelSelector`` dicts -> engine selectors."""

from __future__ import annotations

from typing import get_args

from sharekeeper.engine.selectors import LabelSelector, Operator, Requirement
from sharekeeper.model.objects import Obj, at, fail, labels_of

_OPERATORS: tuple[Operator, ...] = get_args(Operator)


def label_selector(obj: Obj, path: str) -> LabelSelector:
    expressions = at(obj, f"{path}.matchExpressions") or []
    if not isinstance(expressions, list):
        raise fail(obj, f"{path}.matchExpressions", "must be a list")
    requirements = []
    for index, expression in enumerate(expressions):
        where = f"{path}.matchExpressions[{index}]"
        operator = expression.get("operator") if isinstance(expression, dict) else None
        if operator not in _OPERATORS:
            raise fail(obj, f"{where}.operator", f"must be one of {', '.join(_OPERATORS)}")
        values = expression.get("values") or []
        if operator in ("In", "NotIn") and not values:
            raise fail(obj, f"{where}.values", f"must not be empty for {operator}")
        requirements.append(
            Requirement(str(expression.get("key", "")), operator, frozenset(map(str, values)))
        )
    return LabelSelector(labels_of(obj, f"{path}.matchLabels"), tuple(requirements))
