"""Queue shares: every queue's deserved resources under the SchedulerPolicy that governs it.

Belongs here: the share policies (one file each), the water-filling and rounding they share,
pod and PodGroup accounting per queue, and which policy governs what.
Does not belong: overcommit, proportional reservation or QoS (their own engines), parsing
Kubernetes objects (``model``), clocks and global randomness. Imports only ``engine``.

``deserved_shares`` is the one entry point: the operator's recompute loop and ``simulate``
both call it; the loop hands it a ``ShareMemo`` from round to round, so that what the specs
alone decide is read again only once they change.
"""

from sharekeeper.engine.shares.computing import ShareMemo, deserved_shares
from sharekeeper.engine.shares.snapshot import (
    Charges,
    GroupPods,
    PodGroupSnapshot,
    PodSnapshot,
    PodTotals,
    PolicyShare,
    PolicySnapshot,
    QueueShare,
    QueueSnapshot,
    Reason,
    ShareNode,
    ShareResult,
    ShareSnapshot,
    Sharing,
)

__all__ = [
    "Charges",
    "GroupPods",
    "PodGroupSnapshot",
    "PodSnapshot",
    "PodTotals",
    "PolicyShare",
    "PolicySnapshot",
    "QueueShare",
    "QueueSnapshot",
    "Reason",
    "ShareMemo",
    "ShareNode",
    "ShareResult",
    "ShareSnapshot",
    "Sharing",
    "deserved_shares",
]
