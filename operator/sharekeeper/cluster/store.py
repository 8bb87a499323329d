"""The cluster store: everything our watches deliver (Nodes, Pods, Volcano PodGroups and
Queues, Namespaces, DaemonSets, and our own Queues, SchedulerPolicies and
NodeQosEnsurancePolicies).

Each kind's store is a watch sink (``kube.watching.Sink``): every object is read into its
small frozen record once, on arrival (``model``), and the raw body is dropped; an update of
one of our own objects that moved nothing but its status (our writes' echoes) keeps the last
reading. The pod store keeps the running totals (``cluster.ledger``) and an index by node
current per event, so a share round reads O(queues + nodes) values and a QoS check reads each
node's own pods.

An object that cannot be read is kept out (as if absent), logged once per distinct problem and
counted in ``sharekeeper_unreadable_objects``; it never stops anything else. ``on_change`` is
called when something a share round reads changed (not for node heartbeats or a pod's status
conditions), so the recompute loop wakes only for news.

Does not belong: talking to the API server (``kube``), computing (``engine``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from sharekeeper import telemetry
from sharekeeper.api.mirroring import QueueOrigin, VolcanoQueue, queue_origin, volcano_queue
from sharekeeper.api.policy import policy_spec
from sharekeeper.api.qos import qos_policy_view
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.cluster.ledger import PodLedger
from sharekeeper.engine import qos
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.shares import PodGroupSnapshot, PodSnapshot, PodTotals, ShareNode
from sharekeeper.engine.shares.accounting import pod_claim
from sharekeeper.engine.shares.snapshot import GroupKey, QueueName
from sharekeeper.model import jsontext
from sharekeeper.model.nodes import node_record
from sharekeeper.model.objects import MutableObj, Obj, ObjectError, fail, is_mapping, labels_of
from sharekeeper.model.pods import claim_key, pod_group_snapshot, pod_record
from sharekeeper.model.qos import DaemonSetId, daemonset_id, with_daemonsets
from sharekeeper.model.records import (
    NodeRecord,
    OwnRecord,
    PodRecord,
    WaitingPodRecord,
    own_record,
    own_status,
)

logger = logging.getLogger(__name__)


class _Key(Hashable, Protocol):
    """A name, or a namespace and name: hashable and ordered."""

    def __lt__(self, other: Any, /) -> bool: ...


K = TypeVar("K", bound=_Key)
R = TypeVar("R")


def _name(obj: Obj) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise fail(obj, "metadata.name", "is required")
    return name


def _namespaced(obj: Obj) -> tuple[str, str]:
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    return (str(namespace), _name(obj))


def _pod_key(obj: Obj) -> PodKey:
    return PodKey(*_namespaced(obj))


class KindStore(Generic[K, R]):
    """One kind's records by key; a watch sink. Subclasses react to changes in ``changed``."""

    kind = "object"
    on_problem: Callable[[str, Hashable, str], None] | None = None
    """Told once per distinct problem of an object (kind, key, problem): the operator posts a
    Warning Event on it, since Pods and Nodes have no status of ours to carry a condition."""

    def __init__(self, read: Callable[[Obj], R], key: Callable[[Obj], K]) -> None:
        self._read = read
        self._key = key
        self.records: dict[K, R] = {}
        self._listing: set[K] | None = None
        self._problems: dict[K, str] = {}

    # --- the watch sink ---

    def list_started(self) -> None:
        self._listing = set()

    def listed(self, objects: list[MutableObj]) -> None:
        for obj in objects:
            key = self._upsert(obj)
            if key is not None and self._listing is not None:
                self._listing.add(key)

    def list_finished(self) -> None:
        listed = self._listing or set()
        for key in [key for key in self.records if key not in listed]:
            self._delete(key)
        for key in [key for key in self._problems if key not in listed]:
            self._forget_problem(key)
        self._listing = None

    def event(self, kind: str, obj: MutableObj) -> None:
        if kind == "DELETED":
            try:
                key = self._key(obj)
            except ObjectError:
                return
            self._delete(key)
            self._forget_problem(key)
        else:
            self._upsert(obj)

    # --- bookkeeping ---

    def _upsert(self, obj: Obj) -> K | None:
        try:
            key = self._key(obj)
        except ObjectError as error:
            logger.warning("ignoring a %s: %s", self.kind, error)
            return None
        try:
            record = self._read_keyed(obj, key)
        except ObjectError as error:
            return self._unreadable(key, str(error))
        except Exception as error:  # a reader's bug must not stop the watch of everyone else
            named = "/".join(key) if isinstance(key, tuple) else str(key)
            logger.exception("reading %s %s failed", self.kind, named)
            return self._unreadable(key, f"{self.kind} {named}: cannot be read: {error!r}")
        problem = self.problem_of(record)
        if problem is None:
            self._forget_problem(key)
        else:
            self._problem(key, problem)
        old = self.records.get(key)
        self.records[key] = record
        self.changed(old, record)
        return key

    def _read_keyed(self, obj: Obj, key: K) -> R:
        """``obj``'s record; ``key``: its key, read from it already."""
        return self._read(obj)

    def _delete(self, key: K) -> None:
        old = self.records.pop(key, None)
        if old is not None:
            self.changed(old, None)

    def _unreadable(self, key: K, problem: str) -> K:
        self._problem(key, problem)
        self._delete(key)  # a record we can no longer read is not kept at its old value
        return key

    def _problem(self, key: K, problem: str) -> None:
        if self._problems.get(key) != problem:
            logger.warning("cannot be read: %s", problem)  # the problem names the object
            self._problems[key] = problem
            telemetry.UNREADABLE.labels(self.kind).set(len(self._problems))
            if self.on_problem is not None:
                self.on_problem(self.kind, key, problem)

    def _forget_problem(self, key: K) -> None:
        if self._problems.pop(key, None) is not None:
            telemetry.UNREADABLE.labels(self.kind).set(len(self._problems))

    @property
    def problems(self) -> Mapping[K, str]:
        """Objects (or parts of them) that could not be read, with the reason."""
        return self._problems

    def problem_of(self, record: R) -> str | None:
        """A part of a kept record that could not be read."""
        return None

    def changed(self, old: R | None, new: R | None) -> None:
        """Called after every add, update and removal (``None`` for absent)."""

    def sorted_records(self) -> list[R]:
        """Every record, in key order: what a round reads, the same order every time."""
        return [self.records[key] for key in sorted(self.records)]


class NodeStore(KindStore[str, NodeRecord]):
    """Nodes. A change of what the engines read calls ``on_change``; a change of our
    annotations alone calls ``on_annotations`` (our own write's echo, or someone else's)."""

    kind = "Node"

    def __init__(
        self,
        on_change: Callable[[], None],
        on_annotations: Callable[[str, str, Obj], None],
        on_gone: Callable[[str, str], None],
    ) -> None:
        super().__init__(node_record, _name)
        self._on_change = on_change
        self._on_annotations = on_annotations
        self._on_gone = on_gone

    def changed(self, old: NodeRecord | None, new: NodeRecord | None) -> None:
        if old is not None and new is None:
            self._on_gone(self.kind, old.snapshot.name)
        if old is None or new is None or old.snapshot != new.snapshot:
            self._on_change()
        elif old.annotations != new.annotations:
            self._on_annotations(self.kind, new.snapshot.name, new.annotations)

    def snapshots(self) -> tuple[ShareNode, ...]:
        return tuple(record.snapshot for record in self.sorted_records())


class PodStore(KindStore[PodKey, PodRecord]):
    """Pods, with the running totals and the pods bound to each node kept current.

    A pod's QoS view says it is a DaemonSet's (exempt from QoS actions) only while the
    DaemonSet its controller reference names is in ``daemonsets`` (the DaemonSet store's live
    set): pods claiming a DaemonSet are indexed by its UID, so one coming or going updates its
    pods (``daemonset_changed``), in whichever order the two lists arrive."""

    kind = "Pod"

    def __init__(
        self,
        ledger: PodLedger,
        on_change: Callable[[], None],
        daemonsets: Collection[DaemonSetId] = frozenset(),
    ) -> None:
        super().__init__(pod_record, _pod_key)
        self._ledger = ledger
        self._on_change = on_change
        self._daemonsets = daemonsets
        # The indexes below key a pod by its record's key, the very object ``records`` has:
        # a key of their own would be a second object a pod for every full collection to walk
        # (the collector never stops tracking a tuple subclass's instance; 150,000 at the top
        # size).
        self._by_node: dict[str, dict[PodKey, PodRecord]] = {}
        self._by_claim: dict[tuple[str, ...], set[PodKey]] = {}
        """``pod_claim`` of a bound, non-terminal pod (named queue, PodGroup, or unnamed and
        its scheduler name) -> the keys of those pods: reclaim reads the pods of the queues
        that are overused, and only those (keys only, the records are in ``records``)."""
        self._bound_changes = 0
        self._bound_changed: dict[tuple[str, ...], int] = {}
        """A claim of ``_by_claim`` -> ``_bound_changes`` at its last change (a pod placed,
        unplaced, or its record replaced): reclaim reads a queue's pods again only then."""
        self._held: dict[PodKey, PodSnapshot] = {}
        self._unbound: dict[PodKey, PodSnapshot] = {}
        """Pods the gate released that are not bound yet (nor finished)."""
        self._unscheduled: dict[PodKey, WaitingPodRecord] = {}
        """The pods that wait to be scheduled (held, or Unschedulable): reclaim's reclaimers
        are among them."""
        self._unscheduled_by_claim: dict[tuple[str, ...], dict[PodKey, WaitingPodRecord]] = {}
        """``claim_key`` -> the pods of ``_unscheduled`` it names."""
        self._unscheduled_changes = 0
        self._unscheduled_changed: dict[tuple[str, ...], int] = {}
        """A claim of ``_unscheduled_by_claim`` -> ``_unscheduled_changes`` at its last change:
        reclaim reads a claim's waiting pods again only then."""
        self._claims: dict[str, set[PodKey]] = {}
        """DaemonSet UID -> the pods whose controller reference names it."""

    def _read_keyed(self, obj: Obj, key: PodKey) -> PodRecord:
        """The record, it and its QoS view holding the very PodKey ``records`` has for the pod:
        a new pod's entry takes ``key``, and an update keeps the last record's (a dict keeps
        the key it was first given). Their own keys would be a second object a bound pod for
        the collector to walk (75,000 at the top size)."""
        old = self.records.get(key)
        kept = old.key if old is not None else key
        return self._verified(pod_record(obj, key=kept))

    def _verified(self, record: PodRecord) -> PodRecord:
        """``record`` with its QoS view's ``daemonset`` as the known DaemonSets have it."""
        view = record.qos
        if view is None or view.claimed_daemonset is None:
            return record
        checked = with_daemonsets(view, self._daemonsets)
        return record if checked is view else replace(record, qos=checked)

    def changed(self, old: PodRecord | None, new: PodRecord | None) -> None:
        if old is not None:
            self._ledger.remove(old.share)
            self._unplace(old)
            self._held.pop(old.key, None)
            self._unbound.pop(old.key, None)
            if isinstance(old, WaitingPodRecord):
                self._unscheduled.pop(old.key, None)
                self._index_waiting(old, add=False)
            self._unclaim(old)
        if new is not None:
            self._ledger.add(new.share)
            self._place(new)
            if new.share.admission == "held" and not new.share.terminal:
                self._held[new.key] = new.share
            elif new.share.admission == "admitted" and new.share.pending:
                self._unbound[new.key] = new.share
            if isinstance(new, WaitingPodRecord):
                self._unscheduled[new.key] = new
                self._index_waiting(new, add=True)
            self._claim(new)
        if old is None or new is None or old.share != new.share or _waits(old) != _waits(new):
            self._on_change()

    def _index_waiting(self, record: WaitingPodRecord, *, add: bool) -> None:
        """``record`` added to its claim's waiting pods, or taken out of them."""
        claim = claim_key(record.share)
        claiming = self._unscheduled_by_claim.setdefault(claim, {})
        if add:
            claiming[record.key] = record
        else:
            claiming.pop(record.key, None)
        self._unscheduled_changes += 1
        if claiming:
            self._unscheduled_changed[claim] = self._unscheduled_changes
        else:
            del self._unscheduled_by_claim[claim]
            self._unscheduled_changed.pop(claim, None)

    def _claim(self, record: PodRecord) -> None:
        if record.qos is not None and record.qos.claimed_daemonset is not None:
            self._claims.setdefault(record.qos.claimed_daemonset[1], set()).add(record.key)

    def _unclaim(self, record: PodRecord) -> None:
        if record.qos is None or record.qos.claimed_daemonset is None:
            return
        uid = record.qos.claimed_daemonset[1]
        claiming = self._claims.get(uid)
        if claiming is not None:
            claiming.discard(record.key)
            if not claiming:
                del self._claims[uid]

    def daemonset_changed(self, uid: str) -> None:
        """The DaemonSet of this UID came or went: its pods' QoS views follow. Only QoS reads
        it, and the QoS loop is periodic: no share round is woken."""
        for key in list(self._claims.get(uid, ())):
            record = self.records.get(key)
            if record is None:
                continue
            verified = self._verified(record)
            if verified is not record:
                self.records[key] = verified
                self._unplace(record)
                self._place(verified)

    def problem_of(self, record: PodRecord) -> str | None:
        return record.problem

    def _place(self, record: PodRecord) -> None:
        if record.share.allocated and record.share.node_name is not None:
            self._by_node.setdefault(record.share.node_name, {})[record.key] = record
            claim = claim_key(record.share)
            self._by_claim.setdefault(claim, set()).add(record.key)
            self._bound_change(claim)

    def _unplace(self, record: PodRecord) -> None:
        claim = claim_key(record.share)
        claiming = self._by_claim.get(claim)
        if claiming is not None and record.key in claiming:
            claiming.remove(record.key)
            if claiming:
                self._bound_change(claim)
            else:
                del self._by_claim[claim]
                del self._bound_changed[claim]
        node = record.share.node_name
        if node is None or node not in self._by_node:
            return
        on_node = self._by_node[node]
        on_node.pop(record.key, None)
        if not on_node:
            del self._by_node[node]

    def uid(self, key: PodKey) -> str:
        """The pod's UID ("" once it is gone): an Event about a pod names it, so that
        ``kubectl describe pod``, which asks for the Events of that UID, shows ours."""
        record = self.records.get(key)
        if record is None:
            return ""
        return record.qos.uid if record.qos is not None else record.uid

    def held(self) -> list[PodSnapshot]:
        """The pods the admission gate holds: what a round decides on (never every pod)."""
        return list(self._held.values())

    def released_unbound(self) -> list[PodSnapshot]:
        """The pods the gate released that no scheduler has bound yet: the round times them
        out against ``bindTimeoutSeconds`` (never every pod)."""
        return list(self._unbound.values())

    def unscheduled(self) -> dict[PodKey, WaitingPodRecord]:
        """The pods that wait to be scheduled, by key: held by the admission gate, or found
        Unschedulable, each with its node constraints. Called from the round's worker thread:
        one C-level copy."""
        return dict(self._unscheduled)

    def unscheduled_claims(self) -> dict[tuple[str, ...], int]:
        """The claims (``claim_key``) of the pods that wait to be scheduled, each with a count
        that grows whenever those pods change (as ``bound_changed``). Called from the round's
        worker thread: one C-level copy."""
        return dict(self._unscheduled_changed)

    def unscheduled_claiming(self, claim: tuple[str, ...]) -> list[WaitingPodRecord]:
        """The pods that wait to be scheduled whose ``claim_key`` is ``claim``."""
        return list(self._unscheduled_by_claim.get(claim, {}).values())

    def on_node(self, node: str) -> list[PodRecord]:
        """The non-terminal pods bound to ``node``."""
        return list(self._by_node.get(node, {}).values())

    def bound_claiming(self, claim: tuple[str, ...]) -> list[PodRecord]:
        """The bound, non-terminal pods whose ``claim_key`` is ``claim``, by namespace and name.
        Called from the round's worker thread: the keys are copied and sorted at once (one
        C-level call under the GIL), and a pod gone since is skipped."""
        keys = sorted(self._by_claim.get(claim, ()))
        found = (self.records.get(key) for key in keys)
        return [record for record in found if record is not None and record.share.allocated]

    def bound_changed(self, claim: tuple[str, ...]) -> int:
        """A count that grows whenever the bound pods of ``claim`` change; 0 while it has none
        (a claim that comes back counts on from the store's count, never from an old one)."""
        return self._bound_changed.get(claim, 0)

    def bound_claims(self) -> dict[tuple[str, ...], int]:
        """Every claim with bound pods, with its ``bound_changed`` count. Called from the
        round's worker thread: one C-level copy."""
        return dict(self._bound_changed)

    def _bound_change(self, claim: tuple[str, ...]) -> None:
        self._bound_changes += 1
        self._bound_changed[claim] = self._bound_changes

    def qos_views_on(self, node: str) -> list[qos.QosPod]:
        return [record.qos for record in self.on_node(node) if record.qos is not None]


def _waits(record: PodRecord) -> tuple[object, ...] | None:
    """What reclaim reads of a waiting pod beyond its share view (None: it does not wait)."""
    if not isinstance(record, WaitingPodRecord):
        return None
    return (record.constraints, record.unschedulable_since)


class PodGroupStore(KindStore[GroupKey, PodGroupSnapshot]):
    kind = "PodGroup"

    def __init__(self, on_change: Callable[[], None]) -> None:
        super().__init__(pod_group_snapshot, _namespaced)
        self._on_change = on_change

    def changed(self, old: PodGroupSnapshot | None, new: PodGroupSnapshot | None) -> None:
        if old != new:
            self._on_change()

    def snapshots(self) -> tuple[PodGroupSnapshot, ...]:
        return tuple(self.sorted_records())


class DaemonSetStore(KindStore[tuple[str, str], DaemonSetId]):
    """DaemonSets: namespace, name and UID only (the rest of the object is dropped), for the
    one thing they are read for: a pod is a DaemonSet's, and so never acted on by QoS, only if
    the DaemonSet its controller reference names exists. ``ids`` is the live set, shared with
    the pod store; a change tells ``on_uid`` (the pod store's) which UID came or went."""

    kind = "DaemonSet"

    def __init__(self, ids: set[DaemonSetId], on_uid: Callable[[str], None]) -> None:
        super().__init__(daemonset_id, _namespaced)
        self.ids = ids
        self._on_uid = on_uid

    def changed(self, old: DaemonSetId | None, new: DaemonSetId | None) -> None:
        if old == new:
            return
        if old is not None:
            self.ids.discard(old)
        if new is not None:
            self.ids.add(new)
        for uid in {identity[2] for identity in (old, new) if identity is not None}:
            self._on_uid(uid)


class NamespaceStore(KindStore[str, Mapping[str, str]]):
    """Namespace labels, for QoS candidates' ``namespaceSelector``."""

    kind = "Namespace"

    def __init__(self) -> None:
        super().__init__(labels_of, _name)


class OwnStore(KindStore[str, OwnRecord[Any]]):
    """One kind of our own resources. A change of spec (or of whether it can be read) calls
    ``on_change``; a change of status alone calls ``on_status``, which decides whether it is
    news (another writer) or the echo of our own write."""

    def __init__(
        self,
        kind: str,
        read: Callable[[Obj], Any],
        on_change: Callable[[], None],
        on_status: Callable[[str, str, Obj], None],
        on_gone: Callable[[str, str], None],
    ) -> None:
        super().__init__(lambda obj: own_record(obj, read), _name)
        self.kind = kind
        self._on_change = on_change
        self._on_status = on_status
        self._on_gone = on_gone
        self._read_from: dict[str, bytes] = {}
        """Name -> what its record was read from (``_read_source``), where that is JSON."""

    def _read_keyed(self, obj: Obj, key: str) -> OwnRecord[Any]:
        """``obj``'s record. An update that moved nothing but the status (the echo of each of
        our status writes: 11,000 after a weight change at the top size) keeps the last
        record's reading, the very spec: reading a Queue through its model takes about 37 us,
        comparing what it is read from a tenth of that."""
        source = _read_source(obj)
        old = self.records.get(key)
        if old is not None and source is not None and self._read_from.get(key) == source:
            # Built whole: ``dataclasses.replace`` took a fifth of an echo.
            status = own_status(obj)
            return OwnRecord(old.name, old.uid, old.generation, old.spec, status, old.error)
        record = self._read(obj)
        if source is None:
            self._read_from.pop(key, None)
        else:
            self._read_from[key] = source
        return record

    def changed(self, old: OwnRecord[Any] | None, new: OwnRecord[Any] | None) -> None:
        if new is None and old is not None:
            self._read_from.pop(old.name, None)
        if old is not None and (new is None or new.uid != old.uid):
            self._on_gone(self.kind, old.name)  # a new object of the same name starts afresh
        if old is None or new is None or _spec_view(old) != _spec_view(new):
            self._on_change()
        elif old.status != new.status:
            self._on_status(self.kind, new.name, new.status)

    def problem_of(self, record: OwnRecord[Any]) -> str | None:
        return record.error


def _spec_view(record: OwnRecord[Any]) -> tuple[Any, ...]:
    return record.uid, record.generation, record.spec, record.error


_MOVED_BY_STATUS_WRITES = frozenset({"resourceVersion", "managedFields"})
"""What a write of the status subresource changes in ``metadata``, besides the status."""


def _read_source(obj: Obj) -> bytes | None:
    """All of ``obj`` but what a status write moves, as bytes (which the collector does not
    track, where a copy of the object's parts would be 10,000 more to walk): equal for two
    versions of an object that only a status write tells apart. The API server sends JSON, so
    the encoding loses nothing that could tell two such versions' readings apart; None for
    what is not JSON (a YAML file's integer key), which is read every time."""
    metadata = obj.get("metadata")
    if is_mapping(metadata):
        metadata = {k: v for k, v in metadata.items() if k not in _MOVED_BY_STATUS_WRITES}
    try:
        return jsontext.canonical({**obj, "status": None, "metadata": metadata})
    except TypeError:
        return None


OriginChange = Callable[[str, QueueOrigin | None, QueueOrigin | None], None]
"""A Queue's origin changed: its name, the old origin and the new (None: absent)."""


class QueueStore(OwnStore):
    """Our Queues; besides the records, what mirroring reads of each (``origins``: whether it is
    a mirror of a Volcano Queue, and a mirror's labels and spec), told to ``on_origin`` on
    every change."""

    def __init__(
        self,
        on_change: Callable[[], None],
        on_status: Callable[[str, str, Obj], None],
        on_gone: Callable[[str, str], None],
        on_origin: OriginChange,
    ) -> None:
        super().__init__("Queue", queue_snapshot, on_change, on_status, on_gone)
        self.origins: dict[str, QueueOrigin] = {}
        self._on_origin = on_origin

    def listed(self, objects: list[MutableObj]) -> None:
        super().listed(objects)
        for obj in objects:
            self._see(obj, deleted=False)

    def list_finished(self) -> None:
        listed = set(self._listing or ())
        super().list_finished()
        for name in [name for name in self.origins if name not in listed]:
            self._set_origin(name, None)

    def event(self, kind: str, obj: MutableObj) -> None:
        super().event(kind, obj)
        self._see(obj, deleted=kind == "DELETED")

    def _see(self, obj: Obj, *, deleted: bool) -> None:
        try:
            name = _name(obj)
        except ObjectError:
            return
        self._set_origin(name, None if deleted else queue_origin(obj))

    def _set_origin(self, name: str, new: QueueOrigin | None) -> None:
        old = self.origins.get(name)
        if new is None:
            self.origins.pop(name, None)
        else:
            self.origins[name] = new
        if old != new:
            self._on_origin(name, old, new)


class VolcanoQueueStore(KindStore[str, VolcanoQueue]):
    """Volcano Queues, read for mirroring; one whose spec our Queue model refuses is kept with
    its ``problem`` (logged once, counted as unreadable) and not mirrored.

    ``on_change`` is called when the Volcano Queues' names or UIDs changed (what the share
    engine reads); ``on_mirror`` on any change, and after every complete list (an empty list
    changes nothing, and still tells mirroring what is not there)."""

    kind = "VolcanoQueue"

    def __init__(self, on_change: Callable[[], None], on_mirror: Callable[[], None]) -> None:
        super().__init__(volcano_queue, _name)
        self._on_change = on_change
        self._on_mirror = on_mirror

    def changed(self, old: VolcanoQueue | None, new: VolcanoQueue | None) -> None:
        if old == new:
            return
        if old is None or new is None or old.uid != new.uid:
            self._on_change()
        self._on_mirror()

    def list_finished(self) -> None:
        super().list_finished()
        self._on_mirror()

    def problem_of(self, record: VolcanoQueue) -> str | None:
        return record.problem

    def uids(self) -> dict[QueueName, str]:
        """Name -> UID of every Volcano Queue: what the share engine reads."""
        return {QueueName(name): record.uid for name, record in sorted(self.records.items())}


def _nothing() -> None:
    """Nobody to tell."""


def _ignore_status(kind: str, name: str, status: Mapping[str, Any]) -> None:
    """Nobody to tell of a status."""


def _ignore_gone(kind: str, name: str) -> None:
    """Nobody to tell of an object gone."""


def _ignore_origin(name: str, old: QueueOrigin | None, new: QueueOrigin | None) -> None:
    """Nobody to tell of a Queue's origin."""


@dataclass(frozen=True, slots=True)
class Listeners:
    """Whom the store tells what changed (each, by default, nobody: ``simulate`` and tests)."""

    change: Callable[[], None] = _nothing
    """Something a share round reads changed (the recompute loop's ``wake``)."""
    status: Callable[[str, str, Mapping[str, Any]], None] = _ignore_status
    """The status of one of our objects, as the watch shows it."""
    gone: Callable[[str, str], None] = _ignore_gone
    """A node or one of our objects was deleted, or replaced by a new one of the same name:
    what the loops remember of their writes to it is void."""
    origin: OriginChange = _ignore_origin
    """A Queue's origin changed (the mirroring loop)."""
    mirror: Callable[[], None] = _nothing
    """Volcano Queues changed or were listed (the mirroring loop)."""
    policies: Callable[[], None] = _nothing
    """A SchedulerPolicy changed: whether Volcano Queues are needed may have too."""
    problem: Callable[[str, Hashable, str], None] | None = None
    """A Node, Pod or PodGroup cannot be read (``KindStore.on_problem``)."""


class ClusterStore:
    """Every kind our watches feed, and the pod totals; changes are told to ``listeners``."""

    def __init__(self, listeners: Listeners = Listeners()) -> None:
        self.ledger = PodLedger()
        self.nodes = NodeStore(listeners.change, listeners.status, listeners.gone)
        daemonset_ids: set[DaemonSetId] = set()
        self.pods = PodStore(self.ledger, listeners.change, daemonset_ids)
        self.daemonsets = DaemonSetStore(daemonset_ids, self.pods.daemonset_changed)
        self.pod_groups = PodGroupStore(listeners.change)
        for readable in (self.nodes, self.pods, self.pod_groups):
            readable.on_problem = listeners.problem
        self.namespaces = NamespaceStore()
        self.queues = QueueStore(
            listeners.change, listeners.status, listeners.gone, listeners.origin
        )

        def policies_changed() -> None:
            listeners.change()
            listeners.policies()

        self.policies = OwnStore(
            "SchedulerPolicy", policy_spec, policies_changed, listeners.status, listeners.gone
        )
        self.volcano_queues = VolcanoQueueStore(listeners.change, listeners.mirror)
        # The QoS loop is periodic: a change of its policies or their status needs no wake-up.
        self.qos_policies = OwnStore(
            "NodeQosEnsurancePolicy", qos_policy_view, _nothing, _ignore_status, listeners.gone
        )

    def mirroring_wanted(self) -> bool:
        """Whether a SchedulerPolicy that can be read has ``queueSource: Volcano``: Volcano
        Queues are then read and mirrored."""
        return any(
            record.spec is not None and record.spec.shares.queue_source == "Volcano"
            for record in self.policies.records.values()
        )

    def totals(self, names: Collection[str] | None = None) -> PodTotals:
        """The pod totals; only in the resource ``names`` (a round's: ``resource_names``) when
        given, at a cost per bucket of those names, not of what its pods ask for."""
        return self.ledger.totals(names)

    def resource_names(self) -> frozenset[str]:
        """Every resource name a round can publish: what some node offers (its allocatable)
        and what some Queue's spec names (each policy keeps to its own nodes' and queues',
        ``engine.shares.computing.queue_dimensions``). Never a name only a pod wrote.
        O(nodes x dimensions + queues x spec dimensions), as a round's snapshot."""
        names: set[str] = set()
        for node in self.nodes.records.values():
            names.update(node.snapshot.allocatable)
        for record in self.queues.records.values():
            spec = record.spec
            if spec is not None:
                names.update(spec.capability)
                names.update(spec.guarantee)
                names.update(spec.deserved)
        return frozenset(names)

    def misdirected_pods(
        self, refused: Mapping[QueueName, Mapping[str, int]], unknown: Mapping[str, int]
    ) -> list[tuple[PodKey, str]]:
        """The pods that name a queue (themselves or through their PodGroup) that does not
        exist or whose ``namespaces`` do not admit theirs, with that queue. One pass over every
        pod: the caller asks only when ``refused`` or ``unknown`` (``ShareResult``) changed."""
        found = []
        for key, record in self.pods.records.items():
            pod = record.share
            claim = pod_claim(pod)
            if claim[0] == "named":
                queue: str | None = claim[1]
            elif claim[0] == "grouped":
                # What the PodGroup names, not ``group_queue``: one that names none goes to the
                # default queue, which is no misdirection of the pod's.
                group = self.pod_groups.records.get(claim[1])
                queue = group.queue if group is not None else None
            else:
                continue
            if queue is not None and (
                queue in unknown or pod.namespace in refused.get(QueueName(queue), {})
            ):
                found.append((key, queue))
        return found

    @property
    def by_kind(self) -> dict[str, KindStore[Any, Any]]:
        """The store of each kind the watches always feed (Volcano's Queues are fed apart:
        only while mirroring wants them)."""
        return {
            "Node": self.nodes,
            "Pod": self.pods,
            "PodGroup": self.pod_groups,
            "Namespace": self.namespaces,
            "DaemonSet": self.daemonsets,
            "Queue": self.queues,
            "SchedulerPolicy": self.policies,
            "NodeQosEnsurancePolicy": self.qos_policies,
        }

    def load(self, objects: Iterable[Obj]) -> None:
        """Put whole objects in, by kind, as a complete list would (``simulate``, tests)."""
        stores = self.by_kind
        for obj in objects:
            stores[str(obj.get("kind"))].listed([dict(obj)])
