"""A Volcano scheduler configuration (``actions``/``tiers``/``configurations``) -> a
SchedulerPolicy manifest, for ``sharekeeper convert``.

The input is the configuration file itself, or the ConfigMap that holds it as the text of its
``data`` entry ``volcano-scheduler.conf`` (what ``kubectl get configmap -n volcano-system
volcano-scheduler-configmap -o yaml`` prints).

Translated: the share plugin (``proportion``, ``capacity``, ``proportion_optimize`` with its
``proportion_optimize.*`` arguments, ``guaranteequota``), ``overcommit`` (``overcommit-factor``
and ``overcommit-factor.<resource>``), and the proportional predicate (``predicates`` with
``predicate.ProportionalEnable``/``predicate.resources``/``predicate.resources.<name>.cpu|memory``,
or v1.13+ ``resource-strategy-fit`` with ``proportional``). Memory rates are in decimal GB per
unit, as Volcano reads them. An overcommit factor below 1 becomes 1.2, with a warning, as
Volcano does.

Everything else is listed as not translated, one line each: the other plugins (with their
arguments and options), the other arguments and options of the translated ones,
``enableHierarchy: true`` on a plugin other than capacity, the actions other than
``enqueue`` and ``allocate`` (whose checks the policy stands for), every ``configurations`` entry
(no action argument has a SchedulerPolicy counterpart), ``metrics``, unknown top-level keys and
the ConfigMap's other entries. Warnings name what the policy does differently from Volcano.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sharekeeper.model.documents import (
    DNS_SUBDOMAIN,
    DocumentError,
    is_dns_subdomain,
    parse_documents,
    read_documents,
)
from sharekeeper.model.objects import MutableObj, Obj, ObjectError, Problem

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
POLICY_DEFAULT_FACTOR = 1.2
"""A SchedulerPolicy's ``spec.overcommit.factor`` when the policy leaves it out (the API's
default, ``OvercommitSettings``; a test holds the two equal)."""

CONFIGMAP_KEY = "volcano-scheduler.conf"
"""The ConfigMap entry Volcano's installation mounts as the scheduler's configuration file."""
_MODELLED_ACTIONS = frozenset({"enqueue", "allocate"})
"""Actions whose checks a SchedulerPolicy stands for: admission (overcommit, queue quota) and
allocation (deserved shares, the proportional predicate)."""
_PLUGIN_FIELDS = frozenset({"name", "arguments"})


@dataclass
class Conversion:
    manifest: MutableObj
    untranslated: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What was translated differently from how it is written, as Volcano reads it."""


def read_config(path: Path) -> Any:
    """The one YAML document of the file at ``path``: a configuration, or its ConfigMap."""
    documents = read_documents(path)
    if len(documents) != 1:
        found = _count(documents)
        raise ObjectError("file", str(path), [Problem("", f"must hold one document, not {found}")])
    return documents[0]


def scheduler_policy(document: Any, *, name: str = "default") -> Conversion:
    """``document``: a Volcano scheduler configuration as YAML reads it, or the ConfigMap that
    holds one as the text of its ``data`` entry ``volcano-scheduler.conf``."""
    if not is_dns_subdomain(name):
        raise ObjectError("option", "--name", [Problem("", DNS_SUBDOMAIN, name)])
    if isinstance(document, Mapping) and "kind" in document:
        return _from_configmap(document, name)
    return _from_configuration(document, name)


def _from_configmap(configmap: Obj, name: str) -> Conversion:
    if configmap["kind"] != "ConfigMap":
        raise _error(
            "kind",
            f"must be ConfigMap (holding {CONFIGMAP_KEY}), or absent in the configuration file",
            configmap["kind"],
        )
    label, entry = _configmap_label(configmap), f"data[{CONFIGMAP_KEY}]"

    def refused(path: str, message: str, *value: Any) -> ObjectError:
        return ObjectError("ConfigMap", label, [Problem(path, message, *value)])

    data = configmap.get("data")
    if not isinstance(data, Mapping) or CONFIGMAP_KEY not in data:
        keys = ", ".join(sorted(map(str, data))) if isinstance(data, Mapping) else ""
        raise refused("data", f"must hold the entry {CONFIGMAP_KEY} (found: {keys or 'none'})")
    text = data[CONFIGMAP_KEY]
    if not isinstance(text, str):
        raise refused(entry, "must be the scheduler configuration as text", text)
    try:
        documents = parse_documents(text.encode(errors="surrogatepass"))
    except DocumentError as error:
        raise refused(entry, str(error)) from None
    if len(documents) != 1:
        raise refused(entry, f"must hold one document, not {_count(documents)}")
    try:
        conversion = _from_configuration(documents[0], name)
    except ObjectError as error:  # the configuration's paths, inside the entry
        raise ObjectError(
            "ConfigMap",
            label,
            [replace(p, path=f"{entry}: {p.path}" if p.path else entry) for p in error.problems],
        ) from None
    binary = configmap.get("binaryData")
    others = [f"ConfigMap data entry {key}" for key in map(str, data) if key != CONFIGMAP_KEY]
    if isinstance(binary, Mapping):
        others += [f"ConfigMap binaryData entry {key}" for key in map(str, binary)]
    return Conversion(conversion.manifest, others + conversion.untranslated, conversion.warnings)


def _configmap_label(configmap: Obj) -> str:
    """``namespace/name`` for messages, from metadata nobody checked."""
    metadata = configmap.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    name = name[:253] if isinstance(name, str) and name else "<unnamed>"
    return f"{namespace[:63]}/{name}" if isinstance(namespace, str) and namespace else name


def _from_configuration(config: Any, name: str) -> Conversion:
    if not isinstance(config, Mapping) or not isinstance(config.get("tiers"), list):
        raise _error("tiers", "must be a list of {plugins: [...]}")
    spec: MutableObj = {"queueSelector": {}, "nodeSelector": {}, "sharing": {}}
    conversion = Conversion(
        {
            "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
            "kind": "SchedulerPolicy",
            "metadata": {"name": name},
            "spec": spec,
        }
    )
    actions = _actions(config.get("actions"))
    conversion.untranslated += [
        f"top-level key {key}" if key != "metrics" else "metrics (the scheduler's own metrics)"
        for key in map(str, config)
        if key not in ("actions", "tiers", "configurations")
    ]
    for tier, entry in enumerate(config["tiers"]):
        plugins = _mapping(entry, f"tiers[{tier}]").get("plugins") or []
        if not isinstance(plugins, list):
            raise _error(f"tiers[{tier}].plugins", "must be a list", plugins)
        for index, item in enumerate(plugins):
            where = f"tiers[{tier}].plugins[{index}]"
            name, arguments, options = _named_entry(item, where)
            _plugin(name, arguments, spec, conversion, where, options=options)
    conversion.untranslated += _configurations(config.get("configurations"))
    conversion.untranslated += [
        f"action {action}" for action in actions or () if action not in _MODELLED_ACTIONS
    ]
    if not spec["sharing"]:
        conversion.untranslated.append("no share plugin found; the default (Proportion) applies")
        spec["sharing"]["policy"] = "Proportion"
    if "overcommit" not in spec:
        conversion.warnings.append(
            "no overcommit plugin, so Volcano admits jobs without an overcommit limit; the "
            "policy leaves spec.overcommit out, and its default factor "
            f"{POLICY_DEFAULT_FACTOR} applies"
        )
    if actions is not None and "enqueue" not in actions:
        conversion.warnings.append(
            "actions: no enqueue, so Volcano admits every job unchecked; the policy's admission "
            "headroom and Enqueueable conditions still check overcommit and queue quotas"
        )
    return conversion


def _named_entry(item: Any, where: str) -> tuple[str, Obj, MutableObj]:
    """A ``{name, arguments, ...}`` entry (a plugin, or a configuration of an action): its
    name, its arguments, and its other fields."""
    entry = _mapping(item, where)
    name = entry.get("name")
    if not isinstance(name, str):
        raise _error(f"{where}.name", "must be a string", name)
    arguments = _mapping(entry.get("arguments"), f"{where}.arguments")
    return (
        name,
        arguments,
        {key: value for key, value in entry.items() if key not in _PLUGIN_FIELDS},
    )


def _actions(value: Any) -> list[str] | None:
    """The action names of ``actions`` (``"enqueue, allocate, backfill"``); ``None`` when the
    configuration has none."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _error("actions", 'must be a string such as "enqueue, allocate, backfill"', value)
    return list(dict.fromkeys(a.strip() for a in value.split(",") if a.strip()))


def _configurations(value: Any) -> list[str]:
    """One line per entry of ``configurations`` (arguments per action): none is translated."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _error(
            "configurations", "must be a list of {name: <action>, arguments: {...}}", value
        )
    notes = []
    for index, item in enumerate(value):
        where = f"configurations[{index}]"
        name, arguments, others = _named_entry(item, where)
        note = f"{where} {name}{_contents(arguments, others)}"
        if name == "enqueue" and "overcommit-factor" in arguments:
            note += (
                "; Volcano read overcommit-factor here up to v1.1 only, since v1.2 it is an "
                "argument of the overcommit plugin"
            )
        notes.append(note)
    return notes


def _plugin(
    plugin: str,
    arguments: Obj,
    spec: MutableObj,
    conversion: Conversion,
    where: str,
    *,
    options: Obj,
) -> None:
    """``options``: the plugin's fields besides ``name`` and ``arguments`` (``enableHierarchy``,
    ``enableJobOrder``, ...)."""
    hierarchy = options.get("enableHierarchy")
    if hierarchy is not None and not isinstance(hierarchy, bool):
        raise _error(f"{where}.enableHierarchy", "must be true or false", hierarchy)
    if hierarchy and plugin != "capacity":
        conversion.untranslated.append(
            f"{where} {plugin}: enableHierarchy: true; only the capacity plugin's queue tree "
            "is modelled (a SchedulerPolicy reads spec.parent under Capacity and Proportion)"
        )
    options = {key: value for key, value in options.items() if key != "enableHierarchy"}
    if plugin in SHARE_PLUGINS and spec["sharing"]:
        conversion.untranslated.append(
            f"{where} {plugin}{_contents(arguments, options)}: a second share plugin; "
            f"{spec['sharing']['policy']} is kept"
        )
        return
    if plugin in SHARE_PLUGINS:
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
        unread = _proportional(_mapping(arguments["proportional"], path), spec, path)
        conversion.untranslated += [
            f"{where} {plugin}: argument {key}" for key in arguments if key != "proportional"
        ] + [f"{where} {plugin}: argument proportional.{key}" for key in unread]
    else:
        conversion.untranslated.append(f"{where} {plugin}{_contents(arguments, options)}")
        return
    conversion.untranslated += [
        f"{where} {plugin}: option {key}: {_shown(value)}" for key, value in options.items()
    ]


def _overcommit(arguments: Obj, spec: MutableObj, conversion: Conversion, where: str) -> None:
    overcommit: MutableObj = {}
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
    arguments: Obj, spec: MutableObj, conversion: Conversion, where: str
) -> None:
    names = [
        n.strip() for n in str(arguments.get("predicate.resources", "")).split(",") if n.strip()
    ]
    rates = {
        key.removeprefix("predicate.resources."): value
        for key, value in arguments.items()
        if key.startswith("predicate.resources.")
    }
    unread = _proportional(
        {
            "enable": _flag(arguments.get("predicate.ProportionalEnable", False)),
            "resources": ",".join(names),
            "resourceProportion": rates,
        },
        spec,
        f"{where}.arguments",
    )
    unlisted = [key.removeprefix("resourceProportion.") for key in unread]
    translated = {"predicate.ProportionalEnable", "predicate.resources"} | {
        f"predicate.resources.{key}" for key in rates
    }
    conversion.untranslated += [
        f"{where} predicates: argument {key}" for key in arguments if key not in translated
    ] + [f"{where} predicates: argument predicate.resources.{key}" for key in unlisted]


def _proportional(config: Obj, spec: MutableObj, path: str) -> list[str]:
    """``config`` (found at ``path``): ``enable``, ``resources`` and ``resourceProportion``.
    Returns what it does not read: other keys, and rates of resources not listed (as
    ``resourceProportion.<resource>.<kind>``)."""
    names = [n.strip() for n in str(config.get("resources", "")).split(",") if n.strip()]
    rates = _mapping(config.get("resourceProportion"), f"{path}.resourceProportion")
    resources = {}
    for resource in names:
        cpu, memory = (_rate(rates.get(f"{resource}.{kind}")) for kind in ("cpu", "memory"))
        resources[resource] = {"cpu": str(cpu), "memory": f"{memory}G"}
    spec["proportional"] = {"enable": _flag(config.get("enable", False)), "resources": resources}
    read = {f"{resource}.{kind}" for resource in names for kind in ("cpu", "memory")}
    return [
        str(key) for key in config if key not in ("enable", "resources", "resourceProportion")
    ] + [f"resourceProportion.{key}" for key in rates if key not in read]


def _rate(value: Any) -> int | float:
    """Volcano reads a missing or negative rate as 1."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value
    return 1


def _contents(arguments: Obj, options: Obj) -> str:
    """`` (with enablePreemptable: false; arguments a, b)``: what comes with something left out,
    to name it on the same line; empty when nothing does."""
    parts = [f"{key}: {_shown(value)}" for key, value in options.items()]
    if arguments:
        parts.append(f"argument{'s' if len(arguments) > 1 else ''} {', '.join(arguments)}")
    return f" (with {'; '.join(parts)})" if parts else ""


def _shown(value: Any) -> str:
    """A scalar as YAML writes it; anything else shortened."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value!r:.80}"


def _count(documents: list[Any]) -> str:
    return f"{len(documents)} documents" if documents else "nothing"


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _mapping(value: Any, path: str) -> Obj:
    """``value``, which must be a mapping, with its keys as strings (Volcano reads the YAML as
    JSON, whose keys are strings); absent (``None``) is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _error(path, "must be a mapping", value)
    return {str(key): item for key, item in value.items()}


def _error(path: str, message: str, *value: Any) -> ObjectError:
    return ObjectError("scheduler", "configuration", [Problem(path, message, *value)])
