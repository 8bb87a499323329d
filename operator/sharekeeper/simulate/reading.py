"""Reading Kubernetes objects from YAML or JSON files: multi-document streams and ``kind: List``.

Every object is parsed up front, so bad input fails before anything is computed or printed.
Every kind the operator watches (Nodes, Pods, PodGroups, Namespaces, DaemonSets and our own
resources) goes into the operator's own cluster store, through the same code the operator's
watches feed: our resources are read by the same models (``api``) with the same defaults
whether a file was written by hand or printed by ``kubectl get``, and 150,000 pods are read the
way the operator reads them.

What the API server does before the operator sees an object, simulate does for files: it checks
every object's version, name and the types the trimmed readers rely on, and gives a pod without
``spec.priority`` the value of its PriorityClass, as the Priority admission plugin does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharekeeper.api.crds import resources
from sharekeeper.cluster.snapshots import node_policies, specs
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.qos.inputs import HIGHEST_USER_PRIORITY
from sharekeeper.engine.shares import PolicySnapshot, QueueSnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.kube import kinds
from sharekeeper.model.documents import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    is_dns_label,
    is_dns_subdomain,
    read_documents,
)
from sharekeeper.model.objects import (
    Obj,
    ObjectError,
    Problem,
    fail,
    identify,
    is_mapping,
    name_of,
    section,
)

STORED = frozenset(resource.kind for resource in kinds.STORED)
"""Kinds the operator's watches feed: read into the same store, by the same code."""
PASSED_THROUGH = frozenset({"NodeMetrics", "PodMetrics"})
"""Usage, which the QoS check reads as objects."""
API_VERSIONS = {
    **{resource.kind: resource.api_version for resource in kinds.STORED},
    "NodeMetrics": "metrics.k8s.io/v1beta1",
    "PodMetrics": "metrics.k8s.io/v1beta1",
    "PriorityClass": "scheduling.k8s.io/v1",
}
"""Every kind read, with the one version read of it (the one the operator watches)."""
_READ_BY_MODELS = frozenset(model.__resource__.kind for model in resources())
_NAMESPACED = frozenset({r.kind for r in kinds.STORED if r.namespaced} | {"PodMetrics"})
BUILT_IN_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
"""The classes every API server creates, with their values."""


@dataclass(frozen=True, slots=True)
class Inputs:
    store: ClusterStore = field(default_factory=ClusterStore)
    """Every watched kind, as the operator's store holds them."""
    queues: tuple[QueueSnapshot, ...] = ()
    policies: tuple[PolicySnapshot, ...] = ()
    node_policies: Mapping[PolicyName, NodePolicy] = field(default_factory=dict)
    """Each SchedulerPolicy's overcommit and proportional settings."""
    raw: Mapping[str, tuple[Obj, ...]] = field(default_factory=dict)
    """The objects of the kinds in ``PASSED_THROUGH``, by kind."""


def read_objects(paths: Iterable[Path]) -> list[Obj]:
    """The objects of every file, each checked as the API server would check it (``Inputs``
    are ``parse_objects``' to make of them); a directory stands for its *.yaml, *.yml and *.json
    files, as with ``kubectl apply -f``. A file that holds no object (empty, or only comments)
    is warned about on stderr: a mistyped path or an unfinished export would otherwise be an
    empty report."""
    objects: list[Obj] = []
    for file in (file for path in paths for file in _files(path)):
        found = list(_documents(file))
        if not found:
            print(
                f"sharekeeper simulate: warning: file {file} holds no object "
                "(it is empty or only comments)",
                file=sys.stderr,
            )
        objects += found
    return objects


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml", ".json"})


def parse_objects(objects: Iterable[Obj], *, strict: bool = True) -> Inputs:
    """``Inputs`` from object dicts: read from files (``read_objects``) or listed from a cluster
    (``cluster.listing``). ``strict``: refuse the whole input when one object cannot be read,
    as simulate does; otherwise leave it out, as the operator does (the store keeps the
    problem, in ``problems`` of its kind)."""
    objects = list(objects)
    seen: set[tuple[str, str, str]] = set()
    for obj in objects:
        kind = obj.get("kind")
        if not isinstance(kind, str) or kind not in API_VERSIONS:
            known = ", ".join(sorted(API_VERSIONS))
            raise ObjectError(*identify(obj), [Problem("kind", f"must be one of {known}", kind)])
        meta = section(obj, "metadata")
        namespace = str(meta.get("namespace") or "default") if kind in _NAMESPACED else ""
        key = (kind, namespace, str(meta.get("name")))
        if key in seen:
            raise ObjectError(*identify(obj), [Problem("", "appears twice in the input")])
        seen.add(key)
    priorities = _priority_classes([obj for obj in objects if obj["kind"] == "PriorityClass"])
    store = ClusterStore()
    store.load(
        _with_priority(obj, priorities) if obj["kind"] == "Pod" else obj
        for obj in objects
        if obj["kind"] in STORED
    )
    raw: dict[str, list[Obj]] = {}
    for obj in objects:
        if obj["kind"] in PASSED_THROUGH:
            raw.setdefault(obj["kind"], []).append(obj)
    problems = [
        problem
        for kind_store in (
            store.nodes, store.pods, store.pod_groups, store.namespaces, store.daemonsets,
            store.queues, store.policies, store.qos_policies,
        )
        for problem in kind_store.problems.values()
    ]  # fmt: skip
    if problems and strict:
        raise ObjectError("input", "", [Problem("", problem) for problem in problems])
    policies = store.policies.sorted_records()
    return Inputs(
        store=store,
        queues=tuple(specs(store.queues.sorted_records())),
        policies=tuple(spec.shares for spec in specs(policies)),
        node_policies=node_policies(policies),
        raw={kind: tuple(values) for kind, values in raw.items()},
    )


def _documents(path: Path) -> Iterator[Obj]:
    """The objects of a file, each one checked as the API server would check it."""
    for document in read_documents(path):
        if document is None:
            continue
        _check_envelope(path, document)
        if not document["kind"].endswith("List"):
            yield _checked(document)
            continue
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ObjectError("file", str(path), [Problem("items", "must be a list", items)])
        for index, item in enumerate(items):
            _check_envelope(path, item, f"items[{index}]")
            yield _checked(item)


def _check_envelope(path: Path, document: Any, where: str = "") -> None:
    """What every object in a file carries, a List and its items alike: a mapping with a
    ``kind`` and an ``apiVersion``."""
    if not is_mapping(document):
        what = "is not a Kubernetes object" if where else "a document is not a Kubernetes object"
        raise ObjectError("file", str(path), [Problem(where, what, document)])
    for key in ("kind", "apiVersion"):
        if not isinstance(document.get(key), str) or not document[key]:
            field_path = f"{where}.{key}" if where else key
            problem = Problem(field_path, "must be a non-empty string", document.get(key))
            raise ObjectError("file", str(path), [problem])


def _checked(obj: Obj) -> Obj:
    """``obj`` if its apiVersion, name and namespace are what the API server would accept for
    its kind, and its parts have the shape every kind has (unknown kinds are
    ``parse_objects``' to refuse). YAML and JSON give dicts, and ``dict`` is a cheaper check than
    ``Mapping`` for 150,000 objects."""
    kind, metadata = obj["kind"], obj.get("metadata")
    # First, for every other message names the object by it.
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    if namespace is not None and not is_dns_label(namespace):
        problem = Problem("metadata.namespace", DNS_LABEL, namespace)
        raise ObjectError(kind, "with an invalid namespace", [problem])
    if kind not in API_VERSIONS:
        return obj
    if not isinstance(metadata, dict):
        raise fail(obj, "metadata", "must be a mapping with a name", metadata)
    name = metadata.get("name")
    if name is None:
        raise fail(obj, "metadata.name", "is required")
    valid, rule = (
        (is_dns_label, DNS_LABEL) if kind == "Namespace" else (is_dns_subdomain, DNS_SUBDOMAIN)
    )
    if not valid(name):
        raise ObjectError(kind, "with an invalid name", [Problem("metadata.name", rule, name)])
    if obj["apiVersion"] != API_VERSIONS[kind]:
        raise fail(
            obj, "apiVersion", f"must be {API_VERSIONS[kind]} for a {kind}", obj["apiVersion"]
        )
    status = obj.get("status")
    if status is not None and not isinstance(status, dict):
        raise fail(obj, "status", "must be a mapping", status)
    if kind not in _READ_BY_MODELS:  # whose models check the rest
        _check_schema(obj, kind)
    return obj


_STRING_FIELDS = {"Pod": (("spec", "nodeName"),), "PodGroup": (("spec", "queue"),)}
_RESOURCE_LISTS = {
    "Node": (("status", "allocatable"), ("status", "capacity")),
    "Pod": (("spec", "overhead"),),
    "PodGroup": (("spec", "minResources"),),
}
"""The fields checked, each as (section, key): looked up in the section found once, not from
the object's root per field."""
_QUANTITY_TYPES = (str, int, float)
"""What a quantity may be; a tuple, which ``isinstance`` checks faster than a union."""


def _check_schema(obj: Obj, kind: str) -> None:
    """What the API server's schema guarantees the trimmed readers (``model``), which read
    150,000 pods and so check only what it does not: the types of the fields they read. A file
    has no API server in front of it. ``_checked`` has found ``metadata`` a mapping and
    ``status`` a mapping or absent; ``spec`` is checked here."""
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise fail(obj, "spec", "must be a mapping", spec)
    metadata = obj["metadata"]
    for key in ("labels", "annotations"):
        values = metadata.get(key)
        if values is not None and not (
            isinstance(values, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())
        ):
            raise fail(obj, f"metadata.{key}", "must map strings to strings", values)
    for part, key in _STRING_FIELDS.get(kind, ()):
        value = (obj.get(part) or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise fail(obj, f"{part}.{key}", "must be a string", value)
    for part, key in _RESOURCE_LISTS.get(kind, ()):
        _check_amounts(obj, f"{part}.{key}", (obj.get(part) or {}).get(key))
    if kind == "Pod" and spec is not None:
        _check_container_resources(obj, spec)


def _check_container_resources(pod: Obj, spec: Obj) -> None:
    """Every container's requests and limits; a path is spelled only for a list that fails."""
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for index, container in enumerate(containers if isinstance(containers, list) else ()):
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for part in ("requests", "limits"):
                amounts = resources.get(part)
                if isinstance(amounts, dict) and not all(
                    isinstance(quantity, _QUANTITY_TYPES) for quantity in amounts.values()
                ):
                    _check_amounts(pod, f"spec.{key}[{index}].resources.{part}", amounts)


def _check_amounts(obj: Obj, path: str, amounts: Any) -> None:
    if isinstance(amounts, dict):  # the readers refuse anything else
        for resource, quantity in amounts.items():
            if not isinstance(quantity, _QUANTITY_TYPES):
                raise fail(obj, f"{path}.{resource}", "must be a string or a number", quantity)


@dataclass(slots=True)
class PriorityClasses:
    """What the Priority admission plugin reads: every PriorityClass there is."""

    values: dict[str, int]
    """Priority by class name."""
    default: str | None = None
    """The class with ``globalDefault: true``."""


def _priority_classes(objects: Iterable[Obj]) -> PriorityClasses:
    """The classes the input declares, with the built-in ones, checked as the API server
    checks them."""
    classes = PriorityClasses(dict(BUILT_IN_PRIORITY_CLASSES))
    for obj in objects:
        name, value = name_of(obj), obj.get("value")
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(obj, "value", "must be an integer", value)
        if name.startswith("system-"):
            if BUILT_IN_PRIORITY_CLASSES.get(name) != value:
                built_in = ", ".join(f"{n}: {v}" for n, v in BUILT_IN_PRIORITY_CLASSES.items())
                raise fail(
                    obj, "", f"the system- prefix is reserved for the built-ins ({built_in})"
                )
        elif not -(2**31) <= value <= HIGHEST_USER_PRIORITY:
            raise fail(obj, "value", f"must be from {-(2**31)} to {HIGHEST_USER_PRIORITY}", value)
        classes.values[name] = value
        global_default = obj.get("globalDefault")
        if global_default is not None and not isinstance(global_default, bool):
            raise fail(obj, "globalDefault", "must be true or false", global_default)
        if global_default:
            if classes.default is not None:
                raise fail(
                    obj, "globalDefault", f"PriorityClass {classes.default} is the default already"
                )
            classes.default = name
    return classes


def _with_priority(pod: Obj, classes: PriorityClasses) -> Obj:
    """``pod`` with the ``spec.priority`` the API server's Priority admission gives a pod
    created without one: its class's value, or the default class's; a pod naming a class that
    does not exist is refused, as the API server refuses it."""
    spec = pod.get("spec")
    if not is_mapping(spec) or spec.get("priority") is not None:
        return pod
    named = spec.get("priorityClassName")
    if named is not None and not isinstance(named, str):
        raise fail(pod, "spec.priorityClassName", "must be a string", named)
    name = named or classes.default
    if name is None:
        return pod
    if name not in classes.values:
        raise fail(pod, "spec.priorityClassName", "names no PriorityClass of the input", name)
    return {**pod, "spec": {**spec, "priority": classes.values[name]}}
