"""Usage on its way out: what the node's usage sample still counts, but not for long.

An accepted eviction frees its pod's usage only once the pod's containers stop, and the node's
usage shows it only from the first sample whose window starts after that (metrics-server
samples every 15 s by default, over a window about as long). A check that read the usage as it
is would find the gap it has just closed still open, and evict the next pods, once per check,
until the sample caught up. So the gaps of evict and throttle-down waterlines leave out:

- a terminating pod's usage (whoever deleted it): the pod is leaving. Until its deletion
  deadline (``metadata.deletionTimestamp``, when the kubelet kills it), ``LEAVING_SECONDS``
  after its deletion at most, plus ``STUCK_AFTER_SECONDS``; a pod still running after that is
  stuck (or a tenant's pod given a day to stop, which must not hold the node's evictions for a
  day), and counts again;
- the usage, as it was when evicted, of a pod this operator evicted (a ``Release``), from the
  eviction until the first sample whose window starts after the pod stopped: after the check
  that found it gone, or after its deletion deadline (``KILL_SECONDS`` later), whichever comes
  first. Before that the sample may still hold some of it. ``RELEASE_RECORD_SECONDS`` at most.

Hysteresis (hot or calm) and a restore's headroom read the usage as sampled: a rule stays
triggered until the usage shows it calm, and nothing is given back on the strength of usage
that has not left yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos.inputs import QosNode, QosPod
from sharekeeper.engine.qos.metrics import Resource

if TYPE_CHECKING:  # planning's gaps are measured here first: no import at run time
    from sharekeeper.engine.qos.planning import QosAction

LEAVING_SECONDS = 120
"""The longest a terminating pod's usage is taken to be leaving, from its deletion, whatever
its grace period."""
STUCK_AFTER_SECONDS = 30
"""A terminating pod still on the node this long after its deletion deadline is stuck: its
usage is no longer on its way out."""
KILL_SECONDS = 5
"""How long after its deletion deadline a gone pod's containers may still have run (the kubelet
kills them then, and takes a moment)."""
RELEASE_RECORD_SECONDS = 300
"""A ``Release`` is forgotten this long after its eviction, settled or not (a usage sample that
stays older than that is not one to wait for)."""
MAX_RELEASES = 100
"""Releases kept per node, the most recent."""


@dataclass(frozen=True, slots=True)
class Release:
    """A pod this operator evicted (the eviction accepted) whose usage the node's sample may
    still show. Persisted with the node's state."""

    pod: PodKey
    uid: str
    cpu_milli: int
    memory_bytes: int
    """The pod's usage when it was evicted (0 when unknown)."""
    evicted_at: int
    deadline: int | None = None
    """When the kubelet kills what is left of the pod: the eviction's grace period (the pod's
    own if the eviction gives none) after it, or the pod's ``deletionTimestamp`` once seen."""
    gone_at: int | None = None
    """The first check that found the pod gone from the node."""

    def usage(self, resource: Resource) -> int:
        return self.cpu_milli if resource == "cpu" else self.memory_bytes


@dataclass(frozen=True, slots=True)
class Leaving:
    """Usage on its way out of a node, per resource."""

    cpu_milli: int = 0
    memory_bytes: int = 0

    def of(self, resource: Resource) -> int:
        return self.cpu_milli if resource == "cpu" else self.memory_bytes


NOTHING_LEAVING = Leaving()


def _identity(pod: PodKey, uid: str) -> str:
    # A re-created pod of the same name (a new UID) is not the one we evicted.
    return uid or str(pod)


def _pods_by_identity(node: QosNode) -> Mapping[str, QosPod]:
    return {_identity(p.key, p.uid): p for p in node.pods}


def _draining(pod: QosPod, now: int) -> bool:
    deadline = pod.deletion_deadline
    if deadline is None:
        return False
    grace = pod.deletion_grace_seconds
    if grace is not None and grace > LEAVING_SECONDS:
        deadline += LEAVING_SECONDS - grace  # deleted at deadline - grace
    return now <= deadline + STUCK_AFTER_SECONDS


def _known(value: int | None, otherwise: int) -> int:
    return value if value is not None else otherwise


def _settled(release: Release, node: QosNode) -> bool:
    """The pod is gone, and the sample's window began after it stopped."""
    stopped = [
        t
        for t in (
            release.gone_at,
            None if release.deadline is None else release.deadline + KILL_SECONDS,
        )
        if t is not None
    ]
    return bool(stopped) and node.usage_since is not None and node.usage_since > min(stopped)


def leaving(node: QosNode, releases: Iterable[Release], now: int) -> Leaving:
    """What ``node``'s usage sample counts that is on its way out (see the module)."""
    remembered = {_identity(r.pod, r.uid): r for r in releases}
    cpu = memory = 0
    for pod in node.pods:
        if _draining(pod, now):
            # Our own record stands in for a sample the pod has none in.
            mine = remembered.get(_identity(pod.key, pod.uid))
            cpu += _known(pod.cpu_usage_milli, mine.cpu_milli if mine else 0)
            memory += _known(pod.memory_usage_bytes, mine.memory_bytes if mine else 0)
    if remembered:
        pods = _pods_by_identity(node)
        for identity, release in remembered.items():
            found = pods.get(identity)
            # Found terminating: counted above (or stuck). Found running: the watch has not
            # shown the accepted eviction yet.
            if (found is None and not _settled(release, node)) or (
                found is not None and not found.terminating
            ):
                cpu += release.cpu_milli
                memory += release.memory_bytes
    return Leaving(cpu, memory) if cpu or memory else NOTHING_LEAVING


def carried(node: QosNode, releases: Iterable[Release], now: int) -> tuple[Release, ...]:
    """The releases still to remember after this check: not settled and not too old; a pod
    found gone gets its ``gone_at``."""
    pods = _pods_by_identity(node) if releases else {}
    kept = []
    for release in releases:
        found = pods.get(_identity(release.pod, release.uid))
        if now - release.evicted_at > RELEASE_RECORD_SECONDS or (
            found is None and _settled(release, node)
        ):
            continue
        if found is None and release.gone_at is None:
            kept.append(replace(release, gone_at=now))
        elif found is not None and found.deletion_deadline is not None:
            kept.append(replace(release, deadline=found.deletion_deadline))
        else:
            kept.append(release)
    return tuple(kept)


def with_evictions(
    node: QosNode, releases: Iterable[Release], accepted: Iterable[QosAction], now: int
) -> tuple[Release, ...]:
    """``releases`` and one for each eviction of a pod of ``node`` among ``accepted`` (a
    check's accepted actions), with its usage as the check read it; the newest
    ``MAX_RELEASES``."""
    by_key = {p.key: p for p in node.pods}
    kept = {_identity(r.pod, r.uid): r for r in releases}
    for action in accepted:
        pod = by_key.get(action.pod)
        if action.kind != "evict" or pod is None:
            continue
        grace = action.grace_period_seconds
        grace = pod.grace_period_seconds if grace is None else grace
        kept[_identity(pod.key, pod.uid)] = Release(
            pod.key,
            pod.uid,
            pod.cpu_usage_milli or 0,
            pod.memory_usage_bytes or 0,
            evicted_at=now,
            deadline=None if grace is None else now + grace,
        )
    newest = sorted(kept.values(), key=lambda r: (-r.evicted_at, r.pod))[:MAX_RELEASES]
    return tuple(sorted(newest, key=lambda r: (r.pod, r.uid)))
