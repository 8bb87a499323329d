"""Reading Kubernetes objects from YAML or JSON files: multi-document streams and ``kind: List``.

Every object is parsed up front, so bad input fails before anything is computed or printed.
Nodes, pods, PodGroups and namespaces go into the operator's own cluster store, through the
same code the operator's watches feed, so simulate reads 150,000 pods the way the operator does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.shares import PolicySnapshot, QueueSnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.objects import ModelError, Obj, describe, name_of
from sharekeeper.model.policies import node_policy, policy_snapshot
from sharekeeper.model.queues import queue_snapshot

STORED = frozenset({"Node", "Pod", "PodGroup", "Namespace"})
"""Kinds the operator's watches feed: read into the same store, by the same code."""
PASSED_THROUGH = frozenset({"NodeQosEnsurancePolicy", "NodeMetrics", "PodMetrics"})
"""Kinds other engines read as objects."""


@dataclass(frozen=True, slots=True)
class Inputs:
    store: ClusterStore = field(default_factory=ClusterStore)
    """Nodes, pods, PodGroups and namespaces, as the operator's store holds them."""
    queues: tuple[QueueSnapshot, ...] = ()
    policies: tuple[PolicySnapshot, ...] = ()
    node_policies: Mapping[PolicyName, NodePolicy] = field(default_factory=dict)
    """Each SchedulerPolicy's overcommit and proportional settings."""
    raw: Mapping[str, tuple[Obj, ...]] = field(default_factory=dict)
    """The objects of the kinds in ``PASSED_THROUGH``, by kind."""


_PARSERS: Mapping[str, tuple[str, Callable[[Obj], Any]]] = {
    "Queue": ("queues", queue_snapshot),
    "SchedulerPolicy": ("policies", policy_snapshot),
}


def read_files(paths: Iterable[Path]) -> Inputs:
    """Parse every file; a directory stands for its *.yaml, *.yml and *.json files, as with
    ``kubectl apply -f``."""
    files = [file for path in paths for file in _files(path)]
    return parse_objects(obj for file in files for obj in _documents(file))


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml", ".json"})


def parse_objects(objects: Iterable[Obj]) -> Inputs:
    parsed: dict[str, list[Any]] = {attribute: [] for attribute, _ in _PARSERS.values()}
    raw: dict[str, list[Obj]] = {}
    store = ClusterStore()
    seen: set[tuple[str, str, str]] = set()
    known = {*_PARSERS, *STORED, *PASSED_THROUGH}
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in known:
            raise ModelError(
                f"{describe(obj)}: kind {kind!r} is not one of {', '.join(sorted(known))}"
            )
        key = (kind, str(_meta(obj, "namespace")), str(_meta(obj, "name")))
        if key in seen:
            raise ModelError(f"{describe(obj)}: appears twice in the input")
        seen.add(key)
        if kind in STORED:
            store.load((obj,))
        elif kind in _PARSERS:
            attribute, parser = _PARSERS[kind]
            parsed[attribute].append(parser(obj))
            raw.setdefault(kind, []).append(obj)
        else:
            raw.setdefault(kind, []).append(obj)
    problems = [
        problem
        for kind_store in (store.nodes, store.pods, store.pod_groups, store.namespaces)
        for problem in kind_store.problems.values()
    ]
    if problems:
        raise ModelError("; ".join(problems))
    return Inputs(
        store=store,
        **{attribute: tuple(values) for attribute, values in parsed.items()},
        node_policies={
            PolicyName(name_of(obj)): node_policy(obj) for obj in raw.get("SchedulerPolicy", [])
        },
        raw={kind: tuple(values) for kind, values in raw.items() if kind in PASSED_THROUGH},
    )


def _documents(path: Path) -> Iterator[Obj]:
    try:
        text = path.read_text()
        # JSON (what `kubectl get -o json` prints) parses several times faster than YAML.
        documents = [json.loads(text)] if text.lstrip().startswith("{") else _yaml(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise ModelError(f"{path}: {error}") from error
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ModelError(f"{path}: a document is not a Kubernetes object: {document!r:.60}")
        if str(document.get("kind", "")).endswith("List"):
            items = document.get("items") or []
            yield from (item for item in items if isinstance(item, dict))
        else:
            yield document


def _yaml(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_LOADER))


# libyaml's loader when PyYAML was built with it: an order of magnitude faster on big files.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _meta(obj: Obj, key: str) -> Any:
    metadata = obj.get("metadata")
    return metadata.get(key) if isinstance(metadata, dict) else None
