"""Which SchedulerPolicy governs which queues and nodes.

A queue or node matched by several policies stays with the oldest of them (creationTimestamp,
then name): a policy created later never takes anything from a running one, so nothing that
one publishes changes. Each newer policy learns what it was refused. Complexity:
O(policies · (queues + nodes)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Literal

from sharekeeper.engine.selectors import LabelSelector
from sharekeeper.engine.shares.snapshot import PolicyName, PolicySnapshot

NAMED_AT_MOST = 5
"""How many withheld queues and nodes an Overlapping message names; the rest are counted (a
mistaken policy may select 10,000 queues)."""


@dataclass(frozen=True, slots=True)
class Governance:
    owner: Mapping[str, PolicyName]
    """Object name -> the oldest policy that matches it."""
    withheld: Mapping[PolicyName, Mapping[str, PolicyName]]
    """Policy -> object it matches that an older policy keeps -> that older policy."""


def governance(
    policies: Sequence[PolicySnapshot],
    labels_by_name: Mapping[str, Mapping[str, str]],
    selector_of: Literal["queue", "node"],
) -> Governance:
    """``selector_of``: ``"queue"`` or ``"node"``, which selector of each policy applies."""
    owner: dict[str, PolicyName] = {}
    withheld: dict[PolicyName, dict[str, PolicyName]] = {}
    # Oldest first; None for a selector that matches everything (most node selectors).
    selectors = [
        (p.name, None if (chosen := _selector(p, selector_of)).empty else chosen)
        for p in sorted(policies, key=_seniority)
    ]
    for name, labels in labels_by_name.items():
        # No list of the matching policies per object: this runs per queue and node every round.
        oldest: PolicyName | None = None
        for policy, selector in selectors:
            if selector is None or selector.matches(labels):
                if oldest is None:
                    oldest = owner[name] = policy
                else:
                    withheld.setdefault(policy, {})[name] = oldest
    return Governance(owner, withheld)


def _seniority(policy: PolicySnapshot) -> tuple[float, str]:
    """Sort key of policies: the older first, then by name."""
    return policy.created_seconds, policy.name


def withheld_message(queues: Mapping[str, PolicyName], nodes: Mapping[str, PolicyName]) -> str:
    """``"queue q is kept by older policy a; node n1 is kept by older policy a"``: the first few
    queues, then nodes, by name, and how many in all when there are more."""
    withheld = (
        f"{kind} {name} is kept by older policy {older}"
        for kind, found in (("queue", queues), ("node", nodes))
        for name, older in sorted(found.items())
    )
    text = "; ".join(islice(withheld, NAMED_AT_MOST))
    more = len(queues) + len(nodes) - NAMED_AT_MOST
    if more > 0:
        counts = f"{_count(len(queues), 'queue')} and {_count(len(nodes), 'node')} in all"
        text += f"; and {more} more ({counts})"
    return text


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _selector(policy: PolicySnapshot, selector_of: Literal["queue", "node"]) -> LabelSelector:
    return policy.queue_selector if selector_of == "queue" else policy.node_selector
