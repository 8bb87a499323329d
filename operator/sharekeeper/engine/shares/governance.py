"""Which SchedulerPolicy governs which queues and nodes.

A queue or node matched by exactly one policy belongs to it. One matched by several belongs to
none of them (guessing would silently move resources between policies) and is reported, as is
a queue matched by none. Complexity: O(policies · (queues + nodes)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from sharekeeper.engine.selectors import LabelSelector
from sharekeeper.engine.shares.snapshot import PolicyName, PolicySnapshot


@dataclass(frozen=True, slots=True)
class Governance:
    owner: Mapping[str, PolicyName]
    """Object name -> its only matching policy."""
    contested: Mapping[str, tuple[PolicyName, ...]]
    """Object name -> the (sorted) policies that all match it."""


def governance(
    policies: Sequence[PolicySnapshot],
    labels_by_name: Mapping[str, Mapping[str, str]],
    selector_of: Literal["queue", "node"],
) -> Governance:
    """``selector_of``: ``"queue"`` or ``"node"``, which selector of each policy applies."""
    owner: dict[str, PolicyName] = {}
    contested: dict[str, tuple[PolicyName, ...]] = {}
    ordered = sorted(policies, key=lambda policy: policy.name)
    selectors = [(policy.name, _selector(policy, selector_of)) for policy in ordered]
    everywhere = tuple(name for name, selector in selectors if selector.empty)
    picky = [(name, selector) for name, selector in selectors if not selector.empty]
    for name, labels in labels_by_name.items():
        matching = everywhere
        if picky:
            matching = tuple(
                policy
                for policy, selector in selectors
                if selector.empty or selector.matches(labels)
            )
        if len(matching) == 1:
            owner[name] = matching[0]
        elif matching:
            contested[name] = matching
    return Governance(owner, contested)


def _selector(policy: PolicySnapshot, selector_of: Literal["queue", "node"]) -> LabelSelector:
    return policy.queue_selector if selector_of == "queue" else policy.node_selector
