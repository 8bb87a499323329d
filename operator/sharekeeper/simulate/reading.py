"""Reading Kubernetes objects from YAML files: multi-document streams and ``kind: List``.

Every object is parsed up front, so bad input fails before anything is computed or printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.shares import (
    NodeSnapshot,
    PodGroupSnapshot,
    PodSnapshot,
    PolicySnapshot,
    QueueSnapshot,
)
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.nodes import node_snapshot
from sharekeeper.model.objects import ModelError, Obj, describe, name_of
from sharekeeper.model.pods import pod_group_snapshot, pod_snapshot
from sharekeeper.model.policies import node_policy, policy_snapshot
from sharekeeper.model.queues import queue_snapshot

PASSED_THROUGH = frozenset({"NodeQosEnsurancePolicy", "NodeMetrics", "PodMetrics", "Namespace"})
"""Kinds other engines read (namespace labels select QoS candidates); kept as raw objects."""


@dataclass(frozen=True, slots=True)
class Inputs:
    nodes: tuple[NodeSnapshot, ...] = ()
    pods: tuple[PodSnapshot, ...] = ()
    queues: tuple[QueueSnapshot, ...] = ()
    policies: tuple[PolicySnapshot, ...] = ()
    pod_groups: tuple[PodGroupSnapshot, ...] = ()
    node_policies: Mapping[PolicyName, NodePolicy] = field(default_factory=dict)
    """Each SchedulerPolicy's overcommit and proportional settings."""
    raw: Mapping[str, tuple[Obj, ...]] = field(default_factory=dict)
    """Every object read, by kind, for engines that parse their own kinds."""


_PARSERS: Mapping[str, tuple[str, Callable[[Obj], Any]]] = {
    "Node": ("nodes", node_snapshot),
    "Pod": ("pods", pod_snapshot),
    "Queue": ("queues", queue_snapshot),
    "SchedulerPolicy": ("policies", policy_snapshot),
    "PodGroup": ("pod_groups", pod_group_snapshot),
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
    seen: set[tuple[str, str, str]] = set()
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in _PARSERS and kind not in PASSED_THROUGH:
            known = ", ".join(sorted({*_PARSERS, *PASSED_THROUGH}))
            raise ModelError(f"{describe(obj)}: kind {kind!r} is not one of {known}")
        key = (kind, str(_meta(obj, "namespace")), str(_meta(obj, "name")))
        if key in seen:
            raise ModelError(f"{describe(obj)}: appears twice in the input")
        seen.add(key)
        raw.setdefault(kind, []).append(obj)
        if kind in _PARSERS:
            attribute, parser = _PARSERS[kind]
            parsed[attribute].append(parser(obj))
    return Inputs(
        **{attribute: tuple(values) for attribute, values in parsed.items()},
        node_policies={
            PolicyName(name_of(obj)): node_policy(obj) for obj in raw.get("SchedulerPolicy", [])
        },
        raw={kind: tuple(values) for kind, values in raw.items()},
    )


def _documents(path: Path) -> Iterator[Obj]:
    try:
        documents = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as error:
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


def _meta(obj: Obj, key: str) -> Any:
    metadata = obj.get("metadata")
    return metadata.get(key) if isinstance(metadata, dict) else None
