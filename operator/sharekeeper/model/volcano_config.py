"""A Volcano scheduler configuration (``actions``/``tiers``/``plugins``/``arguments``) ->
a SchedulerPolicy manifest, for ``sharekeeper convert``.

Translated: the share plugin (``proportion``, ``capacity``, ``proportion_optimize`` with its
``proportion_optimize.*`` arguments, ``guaranteequota``), ``overcommit`` (``overcommit-factor``
and ``overcommit-factor.<resource>``), and the proportional predicate (``predicates`` with
``predicate.ProportionalEnable``/``predicate.resources``/``predicate.resources.<name>.cpu|memory``,
or v1.13+ ``resource-strategy-fit`` with ``proportional``). Everything else is listed as not
translated. Memory rates are in decimal GB per unit, as Volcano reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from sharekeeper.model.objects import ObjectError, Problem

SHARE_PLUGINS = {
    "proportion": "Proportion",
    "capacity": "Capacity",
    "proportion_optimize": "ProportionOptimize",
    "guaranteequota": "GuaranteeQuota",
}
_OPTIMIZE_KEYS = {
    "proportion_optimize.GuaranteeEnable": "guaranteeEnable",
    "proportion_optimize.ElasticEnable": "elasticEnable",
    "proportion_optimize.PriorityType": "priorityType",
}


@dataclass
class Conversion:
    manifest: dict[str, Any]
    untranslated: list[str] = field(default_factory=list)


def scheduler_policy(text: str, *, name: str = "default") -> Conversion:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise _error("", str(error)) from error
    if not isinstance(config, Mapping) or not isinstance(config.get("tiers"), list):
        raise _error("tiers", "must be a list of {plugins: [...]}")
    spec: dict[str, Any] = {"queueSelector": {}, "nodeSelector": {}, "sharing": {}}
    conversion = Conversion(
        {
            "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
            "kind": "SchedulerPolicy",
            "metadata": {"name": name},
            "spec": spec,
        }
    )
    for tier, entry in enumerate(config["tiers"]):
        for index, plugin in enumerate((entry or {}).get("plugins") or []):
            where = f"tiers[{tier}].plugins[{index}]"
            if not isinstance(plugin, Mapping) or not isinstance(plugin.get("name"), str):
                raise _error(f"{where}.name", "is required")
            _plugin(plugin["name"], plugin.get("arguments") or {}, spec, conversion, where)
    if not spec["sharing"]:
        conversion.untranslated.append("no share plugin found; the default (Proportion) applies")
        spec["sharing"]["policy"] = "Proportion"
    return conversion


def _plugin(
    plugin: str,
    arguments: Mapping[str, Any],
    spec: dict[str, Any],
    conversion: Conversion,
    where: str,
) -> None:
    if plugin in SHARE_PLUGINS:
        if spec["sharing"]:
            conversion.untranslated.append(
                f"{where} {plugin}: a second share plugin; {spec['sharing']['policy']} is kept"
            )
            return
        spec["sharing"]["policy"] = SHARE_PLUGINS[plugin]
        for key, value in arguments.items():
            if key in _OPTIMIZE_KEYS and plugin == "proportion_optimize":
                spec["sharing"][_OPTIMIZE_KEYS[key]] = (
                    _flag(value) if key.endswith("Enable") else str(value)
                )
            else:
                conversion.untranslated.append(f"{where} {plugin}: argument {key}")
    elif plugin == "overcommit":
        _overcommit(arguments, spec, conversion, where)
    elif plugin == "predicates":
        _legacy_proportional(arguments, spec, conversion, where)
    elif plugin == "resource-strategy-fit" and "proportional" in arguments:
        _proportional(arguments["proportional"], spec)
    else:
        conversion.untranslated.append(f"{where} {plugin}")


def _overcommit(
    arguments: Mapping[str, Any], spec: dict[str, Any], conversion: Conversion, where: str
) -> None:
    overcommit: dict[str, Any] = {}
    for key, value in arguments.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            conversion.untranslated.append(f"{where} overcommit: {key}: {value!r} is not a number")
        elif key == "overcommit-factor":
            overcommit["factor"] = value
        elif key.startswith("overcommit-factor."):
            overcommit.setdefault("factors", {})[key.removeprefix("overcommit-factor.")] = value
        else:
            conversion.untranslated.append(f"{where} overcommit: argument {key}")
    spec["overcommit"] = overcommit


def _legacy_proportional(
    arguments: Mapping[str, Any], spec: dict[str, Any], conversion: Conversion, where: str
) -> None:
    names = [
        n.strip() for n in str(arguments.get("predicate.resources", "")).split(",") if n.strip()
    ]
    rates = {
        key.removeprefix("predicate.resources."): value
        for key, value in arguments.items()
        if key.startswith("predicate.resources.")
    }
    _proportional(
        {
            "enable": _flag(arguments.get("predicate.ProportionalEnable", False)),
            "resources": ",".join(names),
            "resourceProportion": rates,
        },
        spec,
    )
    translated = {"predicate.ProportionalEnable", "predicate.resources"} | {
        f"predicate.resources.{key}" for key in rates
    }
    conversion.untranslated += [
        f"{where} predicates: argument {key}" for key in arguments if key not in translated
    ]


def _proportional(config: Mapping[str, Any], spec: dict[str, Any]) -> None:
    names = [n.strip() for n in str(config.get("resources", "")).split(",") if n.strip()]
    rates = config.get("resourceProportion") or {}
    resources = {}
    for resource in names:
        cpu, memory = (_rate(rates.get(f"{resource}.{kind}")) for kind in ("cpu", "memory"))
        resources[resource] = {"cpu": str(cpu), "memory": f"{memory}G"}
    spec["proportional"] = {"enable": _flag(config.get("enable", False)), "resources": resources}


def _rate(value: Any) -> int | float:
    """Volcano reads a missing or negative rate as 1."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value
    return 1


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _error(path: str, message: str) -> ObjectError:
    return ObjectError("scheduler", "configuration", [Problem(path, message)])
