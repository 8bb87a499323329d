"""A pod's own constraints on the nodes it may run on, as kube-scheduler's filters read them: its
``nodeSelector`` (NodeAffinity), its required node affinity (NodeAffinity) and its tolerations
of the node's ``NoSchedule`` and ``NoExecute`` taints (TaintToleration). Pure values and
matching; ``model.pods`` reads a pod's, ``model.nodes`` a node's taints.

Not read: preferred affinity and ``PreferNoSchedule`` taints (they rank, never refuse), pod
(anti-)affinity, topology spread, volumes and ports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from sharekeeper.engine.selectors import Requirement

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""The taint effects that keep a pod that does not tolerate them off a node."""
NAME_FIELD = "metadata.name"
"""The one field ``matchFields`` may name."""
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    """Empty (with ``Exists``): every key."""
    operator: Literal["Equal", "Exists"]
    value: str
    effect: str
    """Empty: every effect."""

    def tolerates(self, taint: Taint) -> bool:
        """``v1.Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Comparison:
    """A ``Gt`` or ``Lt`` node selector requirement: the label, read as an integer, is greater
    (less) than ``value``; a node without the label, or whose value is no integer, does not
    match."""

    key: str
    operator: Literal["Gt", "Lt"]
    value: int

    def matches(self, labels: Mapping[str, str]) -> bool:
        found = labels.get(self.key)
        if found is None or _INTEGER.fullmatch(found) is None:
            return False
        number = int(found)
        return number > self.value if self.operator == "Gt" else number < self.value


NodeRequirement = Requirement | Comparison


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Its ``matchExpressions`` (on node labels) and ``matchFields`` (on the node's name) are
    ANDed; a term with neither matches no node."""

    expressions: tuple[NodeRequirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        if not all(requirement.matches(labels) for requirement in self.expressions):
            return False
        return not self.fields or all(f.matches({NAME_FIELD: name}) for f in self.fields)


@dataclass(frozen=True, slots=True)
class NodeConstraints:
    """What a pod asks of a node before anything of its resources."""

    selector: tuple[tuple[str, str], ...]
    """``spec.nodeSelector``: every label, with that value."""
    terms: tuple[NodeSelectorTerm, ...] | None
    """The required node affinity's ``nodeSelectorTerms``, ORed; None: it has none (every
    node); empty: no node (what an unreadable affinity is taken for)."""
    tolerations: tuple[Toleration, ...]

    def allows(self, name: str, labels: Mapping[str, str], taints: Iterable[Taint]) -> bool:
        """Whether a node of this name, labels and taints passes the pod's filters."""
        if not all(labels.get(key) == value for key, value in self.selector):
            return False
        if self.terms is not None and not any(t.matches(name, labels) for t in self.terms):
            return False
        return all(self.tolerates(taint) for taint in taints)

    def tolerates(self, taint: Taint) -> bool:
        """Whether the pod may go where ``taint`` is (one that does not keep pods off: yes)."""
        return taint.effect not in SCHEDULING_EFFECTS or any(
            toleration.tolerates(taint) for toleration in self.tolerations
        )

    @property
    def by_labels(self) -> bool:
        """Whether it looks at labels or names at all (else only taints matter)."""
        return bool(self.selector) or self.terms is not None


ANY_NODE = NodeConstraints((), None, ())
"""A pod that asks nothing of a node (and tolerates no taint that keeps pods off)."""
NO_NODE = NodeConstraints((), (), ())
"""A pod whose constraints could not be read: it is planned on no node."""
