"""Reading Kubernetes objects from YAML or JSON files: multi-document streams and ``kind: List``.

Every object is parsed up front, so bad input fails before anything is computed or printed.
Every kind the operator watches (Nodes, Pods, PodGroups, Namespaces and our own resources) goes
into the operator's own cluster store, through the same code the operator's watches feed: our
resources are read by the same models (``api``) with the same defaults whether a file was
written by hand or printed by ``kubectl get``, and 150,000 pods are read the way the operator
reads them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sharekeeper.cluster.snapshots import node_policies, specs
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.shares import PolicySnapshot, QueueSnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.model.objects import Obj, ObjectError, Problem, identify

STORED = frozenset(
    {"Node", "Pod", "PodGroup", "Namespace", "Queue", "SchedulerPolicy", "NodeQosEnsurancePolicy"}
)
"""Kinds the operator's watches feed: read into the same store, by the same code."""
PASSED_THROUGH = frozenset({"NodeMetrics", "PodMetrics"})
"""Usage, which the QoS check reads as objects."""


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
    raw: dict[str, list[Obj]] = {}
    store = ClusterStore()
    seen: set[tuple[str, str, str]] = set()
    known = {*STORED, *PASSED_THROUGH}
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in known:
            raise ObjectError(
                *identify(obj),
                [Problem("kind", f"must be one of {', '.join(sorted(known))}", kind)],
            )
        key = (kind, str(_meta(obj, "namespace")), str(_meta(obj, "name")))
        if key in seen:
            raise ObjectError(*identify(obj), [Problem("", "appears twice in the input")])
        seen.add(key)
        if kind in STORED:
            store.load((obj,))
        else:
            raw.setdefault(kind, []).append(obj)
    problems = [
        problem
        for kind_store in (
            store.nodes, store.pods, store.pod_groups, store.namespaces,
            store.queues, store.policies, store.qos_policies,
        )
        for problem in kind_store.problems.values()
    ]  # fmt: skip
    if problems:
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
    try:
        text = path.read_text()
        # JSON (what `kubectl get -o json` prints) parses several times faster than YAML.
        documents = [json.loads(text)] if text.lstrip().startswith("{") else _yaml(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise ObjectError("file", str(path), [Problem("", str(error))]) from error
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ObjectError(
                "file", str(path), [Problem("", "a document is not a Kubernetes object", document)]
            )
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
