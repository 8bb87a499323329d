"""Usage on its way out: what the node's usage sample still counts, but not for long.

An accepted eviction frees its pod's usage only once the pod's containers stop, a throttle
once the kubelet has applied the lower CPU limit, and the node's usage shows either only from
the first sample whose window starts after that (metrics-server samples every 15 s by default,
over a window about as long). A check that read the usage as it is would find the gap it has
just closed still open, and evict or throttle the next pods, once per check, until the sample
caught up. So the gaps of evict and throttle-down waterlines leave out:

- a terminating pod's usage (whoever deleted it): the pod is leaving. Until its deletion
  deadline (``metadata.deletionTimestamp``, when the kubelet kills it), ``LEAVING_SECONDS``
  after its deletion at most, plus ``STUCK_AFTER_SECONDS``; a pod still running after that is
  stuck (or a tenant's pod given a day to stop, which must not hold the node's evictions for a
  day), and counts again;
- what our own accepted actions free (a ``Release``): an eviction, the pod's usage as it was
  when evicted, until the first sample whose window starts after the pod stopped (after the
  check that found it gone, or after its deletion deadline, ``SETTLE_SECONDS`` later,
  whichever comes first); a throttle, what the lower limit frees, until the first sample whose
  window starts ``SETTLE_SECONDS`` after it. ``RELEASE_RECORD_SECONDS`` at most.

The other way round, a restore lets its pods take more CPU only once the higher limit applies:
a restore's headroom leaves out what our restores gave back that no sample shows yet (the same
records and the same settling as a throttle's), or stale samples would restore twice as fast
and overshoot the waterline.

Hysteresis (hot or calm) reads the usage as sampled: a rule stays triggered until the usage
shows it calm, and nothing is given back on the strength of usage that has not left yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

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
SETTLE_SECONDS = 5
"""How long after its deletion deadline a gone pod's containers may still have run (the kubelet
kills them then, and takes a moment), and after an accepted resize the old limit may still
have held."""
RELEASE_RECORD_SECONDS = 300
"""A ``Release`` is forgotten this long after its action, settled or not (a usage sample that
stays older than that is not one to wait for)."""
MAX_RELEASES = 100
"""Releases kept per node, the most recent."""

ReleaseKind = Literal["evict", "throttle", "restore"]


@dataclass(frozen=True, slots=True)
class Release:
    """An accepted action of ours whose effect the node's usage sample may not show yet.
    Persisted with the node's state."""

    kind: ReleaseKind
    pod: PodKey
    uid: str
    cpu_milli: int
    memory_bytes: int
    """Evict: the pod's usage when evicted; throttle: what the lower limit frees; restore: what
    the higher limit lets the pod take back (CPU only). 0 when unknown."""
    at: int
    """When the action was accepted."""
    deadline: int | None = None
    """Evict: when the kubelet kills what is left of the pod, the eviction's grace period (the
    pod's own if the eviction gives none) after it, or the pod's ``deletionTimestamp`` once
    seen."""
    gone_at: int | None = None
    """Evict: the first check that found the pod gone from the node."""


@dataclass(frozen=True, slots=True)
class Unsampled:
    """What the node's usage sample shows that is changing: usage on its way out, and CPU our
    restores let throttled pods take back (``arriving``), which it does not show yet."""

    leaving_cpu_milli: int = 0
    leaving_memory_bytes: int = 0
    arriving_cpu_milli: int = 0

    def leaving(self, resource: Resource) -> int:
        return self.leaving_cpu_milli if resource == "cpu" else self.leaving_memory_bytes

    def arriving(self, resource: Resource) -> int:
        return self.arriving_cpu_milli if resource == "cpu" else 0


NOTHING_UNSAMPLED = Unsampled()


def _identity(pod: PodKey, uid: str) -> str:
    # A re-created pod of the same name (a new UID) is not the one we acted on.
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


def sample_start(node: QosNode, now: int) -> int | None:
    """When ``node``'s usage sample began, by our clock as far as the sample tells: a sample
    stamped after ``now`` comes from a clock ahead of ours, and is taken to have begun that
    much earlier (so a clock ahead settles a record early by no more than the sample's age)."""
    since = node.usage_since
    if since is None:
        return None
    ahead = _known(node.usage_at, now) - now
    return since - ahead if ahead > 0 else since


def _settled(release: Release, found: QosPod | None, node: QosNode, now: int) -> bool:
    """The sample's window began after the action took effect: the evicted pod stopped, the
    lower limit applied. A throttled pod that is gone takes its record with it."""
    since = sample_start(node, now)
    if release.kind != "evict":
        return found is None or (since is not None and since > release.at + SETTLE_SECONDS)
    if found is not None:
        return False
    stopped = [
        t
        for t in (
            release.gone_at,
            None if release.deadline is None else release.deadline + SETTLE_SECONDS,
        )
        if t is not None
    ]
    return bool(stopped) and since is not None and since > min(stopped)


def unsampled(node: QosNode, releases: Iterable[Release], now: int) -> Unsampled:
    """What ``node``'s usage sample counts that is on its way out, and what our restores let
    its pods take back that it does not count yet (see the module)."""
    remembered = {_identity(r.pod, r.uid): r for r in releases}
    cpu = memory = arriving = 0
    for pod in node.pods:
        if _draining(pod, now):
            # Our own record of its eviction stands in for a sample the pod has none in.
            mine = remembered.get(_identity(pod.key, pod.uid))
            mine = mine if mine is not None and mine.kind == "evict" else None
            cpu += _known(pod.cpu_usage_milli, mine.cpu_milli if mine else 0)
            memory += _known(pod.memory_usage_bytes, mine.memory_bytes if mine else 0)
    if remembered:
        pods = _pods_by_identity(node)
        for identity, release in remembered.items():
            found = pods.get(identity)
            # Found terminating: counted above, whole (or stuck). Evicted but found running:
            # the watch has not shown the accepted eviction yet.
            if (found is not None and found.terminating) or _settled(release, found, node, now):
                continue
            if release.kind == "restore":
                arriving += release.cpu_milli
            else:
                cpu += release.cpu_milli
                memory += release.memory_bytes
    if not (cpu or memory or arriving):
        return NOTHING_UNSAMPLED
    return Unsampled(cpu, memory, arriving)


def carried(node: QosNode, releases: Iterable[Release], now: int) -> tuple[Release, ...]:
    """The releases still to remember after this check: not settled and not too old; an
    evicted pod found gone gets its ``gone_at``, found terminating its ``deadline``."""
    pods = _pods_by_identity(node) if releases else {}
    kept = []
    for release in releases:
        found = pods.get(_identity(release.pod, release.uid))
        if now - release.at > RELEASE_RECORD_SECONDS or _settled(release, found, node, now):
            continue
        if release.kind == "evict" and found is None and release.gone_at is None:
            kept.append(replace(release, gone_at=now))
        elif release.kind == "evict" and found is not None and found.deletion_deadline is not None:
            kept.append(replace(release, deadline=found.deletion_deadline))
        else:
            kept.append(release)
    return tuple(kept)


def with_releases(
    node: QosNode, releases: Iterable[Release], accepted: Iterable[QosAction], now: int
) -> tuple[Release, ...]:
    """``releases`` and one for each action on a pod of ``node`` among ``accepted`` (a check's
    accepted actions): an eviction with the pod's usage as the check read it (in place of
    anything remembered of the pod), a throttle with what it frees, a restore with what it lets
    the pod take back (each added to what earlier ones of the same kind still do). The newest
    ``MAX_RELEASES``."""
    by_key = {p.key: p for p in node.pods}
    kept = {_identity(r.pod, r.uid): r for r in releases}
    for action in accepted:
        pod = by_key.get(action.pod)
        if pod is None:
            continue
        identity = _identity(pod.key, pod.uid)
        if action.kind != "evict":
            earlier = kept.get(identity)
            pending = earlier.cpu_milli if earlier and earlier.kind == action.kind else 0
            kept[identity] = Release(
                action.kind, pod.key, pod.uid, pending + action.released, 0, at=now
            )
            continue
        grace = action.grace_period_seconds
        grace = pod.grace_period_seconds if grace is None else grace
        kept[identity] = Release(
            "evict",
            pod.key,
            pod.uid,
            pod.cpu_usage_milli or 0,
            pod.memory_usage_bytes or 0,
            at=now,
            deadline=None if grace is None else now + grace,
        )
    newest = sorted(kept.values(), key=lambda r: (-r.at, r.pod))[:MAX_RELEASES]
    return tuple(sorted(newest, key=lambda r: (r.pod, r.uid)))
