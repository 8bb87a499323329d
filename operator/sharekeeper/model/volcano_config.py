"""A Volcano scheduler configuration (``actions``/``tiers``/``plugins``/``arguments``) ->
a SchedulerPolicy manifest, for ``sharekeeper convert``.

Translated: the share plugin (``proportion``, ``capacity``, ``proportion_optimize`` with its
``proportion_optimize.*`` arguments, ``guaranteequota``), ``overcommit`` (``overcommit-factor``
and ``overcommit-factor.<resource>``), and the proportional predicate (``predicates`` with
``predicate.ProportionalEnable``/``predicate.resources``/``predicate.resources.<name>.cpu|memory``,
or v1.13+ ``resource-strategy-fit`` with ``proportional``). Everything else is listed as not
translated. Memory rates are in decimal GB per unit, as Volcano reads them. An overcommit factor
below 1 becomes 1.2, with a warning, as Volcano does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharekeeper.model.documents import DNS_SUBDOMAIN, is_dns_subdomain, read_documents
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


DEFAULT_FACTOR = 1.2
"""Volcano's overcommit factor, which also stands in for one below 1."""


@dataclass
class Conversion:
    manifest: dict[str, Any]
    untranslated: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What was translated differently from how it is written, as Volcano reads it."""


def read_config(path: Path) -> Any:
    """The one YAML document of the configuration file at ``path``."""
    documents = read_documents(path)
    if len(documents) != 1:
        found = f"{len(documents)} documents" if documents else "nothing"
        raise ObjectError("file", str(path), [Problem("", f"must hold one document, not {found}")])
    return documents[0]


def scheduler_policy(config: Any, *, name: str = "default") -> Conversion:
    """``config``: a Volcano scheduler configuration as YAML reads it."""
    if not is_dns_subdomain(name):
        raise ObjectError("option", "--name", [Problem("", DNS_SUBDOMAIN, name)])
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
        plugins = _mapping(entry, f"tiers[{tier}]").get("plugins") or []
        if not isinstance(plugins, list):
            raise _error(f"tiers[{tier}].plugins", "must be a list", plugins)
        for index, item in enumerate(plugins):
            where = f"tiers[{tier}].plugins[{index}]"
            plugin = _mapping(item, where)
            if not isinstance(plugin.get("name"), str):
                raise _error(f"{where}.name", "must be a string", plugin.get("name"))
            arguments = _mapping(plugin.get("arguments"), f"{where}.arguments")
            _plugin(plugin["name"], arguments, spec, conversion, where)
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
        path = f"{where}.arguments.proportional"
        _proportional(_mapping(arguments["proportional"], path), spec, path)
    else:
        conversion.untranslated.append(f"{where} {plugin}")


def _overcommit(
    arguments: Mapping[str, Any], spec: dict[str, Any], conversion: Conversion, where: str
) -> None:
    overcommit: dict[str, Any] = {}
    for key, value in arguments.items():
        if key != "overcommit-factor" and not key.startswith("overcommit-factor."):
            conversion.untranslated.append(f"{where} overcommit: argument {key}")
        elif not isinstance(value, int | float) or isinstance(value, bool):
            conversion.untranslated.append(f"{where} overcommit: {key}: {value!r} is not a number")
        else:
            if value < 1:
                conversion.warnings.append(
                    f"{where} overcommit: {key}: {value!r} is below 1, which Volcano replaces "
                    f"with its default {DEFAULT_FACTOR}; so does this policy"
                )
            factor = DEFAULT_FACTOR if value < 1 else value
            if key == "overcommit-factor":
                overcommit["factor"] = factor
            else:
                factors = overcommit.setdefault("factors", {})
                factors[key.removeprefix("overcommit-factor.")] = factor
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
        f"{where}.arguments",
    )
    translated = {"predicate.ProportionalEnable", "predicate.resources"} | {
        f"predicate.resources.{key}" for key in rates
    }
    conversion.untranslated += [
        f"{where} predicates: argument {key}" for key in arguments if key not in translated
    ]


def _proportional(config: Mapping[str, Any], spec: dict[str, Any], path: str) -> None:
    """``config`` (found at ``path``): ``enable``, ``resources`` and ``resourceProportion``."""
    names = [n.strip() for n in str(config.get("resources", "")).split(",") if n.strip()]
    rates = _mapping(config.get("resourceProportion"), f"{path}.resourceProportion")
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


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    """``value``, which must be a mapping, with its keys as strings (Volcano reads the YAML as
    JSON, whose keys are strings); absent (``None``) is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _error(path, "must be a mapping", value)
    return {str(key): item for key, item in value.items()}


def _error(path: str, message: str, *value: Any) -> ObjectError:
    return ObjectError("scheduler", "configuration", [Problem(path, message, *value)])
