"""Kubernetes LabelSelector matching (``metav1.LabelSelector`` semantics), pure.

An empty selector matches everything; requirements are ANDed. ``NotIn`` and ``DoesNotExist``
match objects that lack the key, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server sets on every namespace: its own name."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case "In":
                return present and labels[self.key] in self.values
            case "NotIn":
                return not present or labels[self.key] not in self.values
            case "Exists":
                return present
            case "DoesNotExist":
                return not present


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        # Loops, not all() over generators (three times slower): this runs per queue and per
        # node every round.
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for requirement in self.requirements:
            if not requirement.matches(labels):
                break
        else:
            return True
        return False


MATCH_ALL = LabelSelector()
