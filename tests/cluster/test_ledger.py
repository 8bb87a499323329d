"""The pod ledger and the store's indexes against a from-scratch recount.

Random sequences of watch events and relists go into a ``ClusterStore`` while the test keeps
its own truth: the objects the API server holds. After every step the running totals, the
per-queue accounting built on them, ``on_node`` and the indexes the admission gate and reclaim
read (the held pods, the released ones not bound, the pods waiting to be scheduled, the bound
pods of each claim and their change counts) must equal a plain loop over those objects, read
here with a small quantity table of our own (no ``model``, ``ledger`` or ``accounting`` code).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from hypothesis import event, given, settings, target
from hypothesis import strategies as st

from sharekeeper.cluster.store import ClusterStore, Listeners
from sharekeeper.engine.shares import Charges, GroupPods, PodTotals
from sharekeeper.engine.shares.accounting import QueueUsage, queue_usage
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.model.objects import MutableObj

Key = tuple[str, str]
Amounts = dict[str, int]

QUEUE_LABEL = "sharekeeper.io/queue"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
ADMISSION_GATE = "sharekeeper.io/admission"
ADMITTED_ANNOTATION = "sharekeeper.io/admitted"

# Quantity string -> internal units (cpu millicores, memory bytes, GPUs milli-units).
QUANTITIES: dict[str, dict[str, int]] = {
    "cpu": {"0": 0, "250m": 250, "1": 1000, "1500m": 1500},
    "memory": {"0": 0, "100M": 10**8, "512Mi": 2**29, "1Gi": 2**30},
    "nvidia.com/gpu": {"0": 0, "1": 1000, "2": 2000},
}
NAMESPACES = ("ns", "other")
POD_KEYS = tuple((ns, f"p{i}") for ns in NAMESPACES for i in range(5))
GROUP_NAMES = ("g0", "g1", "g2")
GROUP_KEYS = tuple((ns, name) for ns in NAMESPACES for name in GROUP_NAMES)
NODES = ("n0", "n1", "n2")
QUEUE_SETS: tuple[tuple[str, ...], ...] = (("q0", "q1"), ("default", "q0", "q1"))
"""Queues that exist, checked both without and with ``default``; pods also name ``ghost``."""
NAMED = st.sampled_from([None, None, "", "q0", "q1", "default", "ghost"])
TERMINAL = ("Succeeded", "Failed")
GROUP_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")


# --- what the API server holds ---


@dataclass(frozen=True)
class PodParams:
    containers: tuple[tuple[tuple[str, str], ...], ...] = ()
    queue_label: str | None = None
    queue_annotation: str | None = None
    group: str | None = None
    node: str | None = None
    phase: str | None = "Pending"
    gated: bool = False
    """A scheduling gate of someone else's."""
    held: bool = False
    """Our admission gate."""
    admitted: str | None = None
    """The annotation our release writes (its value a time, or not)."""
    scheduled: str | None = None
    """The reason of a ``PodScheduled`` condition that is False ("True": one that is True)."""
    scheduler: str | None = None
    unreadable: bool = False
    """A request no one can read (``cpu: lots``)."""
    bad_start_time: bool = False
    """A throttle annotation that is not JSON: the QoS view is lost, the share view is not."""
    noise: int = 0
    """An unrelated label and a status condition."""


@dataclass(frozen=True)
class GroupParams:
    queue: str | None = None
    phase: str | None = "Pending"
    min_member: int = 0
    min_resources: tuple[tuple[str, str], ...] | None = None


resource_vectors = st.fixed_dictionaries(
    {}, optional={name: st.sampled_from(sorted(table)) for name, table in QUANTITIES.items()}
).map(lambda resources: tuple(sorted(resources.items())))

POD_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "containers": st.lists(resource_vectors, max_size=2).map(tuple),
    "queue_label": NAMED,
    "queue_annotation": NAMED,
    "group": st.sampled_from([None, "g0", "g0", "g1", "g2"]),
    "node": st.sampled_from([None, "", *NODES]),
    "phase": st.sampled_from([None, "Pending", "Running", *TERMINAL]),
    "gated": st.booleans(),
    "held": st.booleans(),
    "admitted": st.sampled_from([None, None, "2026-01-01T00:00:00Z", "not a time"]),
    "scheduled": st.sampled_from([None, None, "Unschedulable", "SchedulerError", "True"]),
    "scheduler": st.sampled_from([None, "volcano", "other"]),
    "unreadable": st.sampled_from([False] * 7 + [True]),  # the exception, not half of them
    "bad_start_time": st.booleans(),
    "noise": st.integers(0, 3),
}
pod_params = st.builds(PodParams, **POD_FIELDS)

GROUP_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "queue": st.sampled_from([None, "", "q0", "q0", "q1", "default", "ghost"]),
    "phase": st.sampled_from([None, *GROUP_PHASES, "Inqueue", "Running", "Bogus"]),
    "min_member": st.integers(0, 2),
    "min_resources": st.sampled_from([None, ()]) | resource_vectors | resource_vectors,
}
group_params = st.builds(GroupParams, **GROUP_FIELDS)


@dataclass
class World:
    """The test's truth: every object the API server holds, readable or not."""

    pods: dict[Key, MutableObj] = field(default_factory=dict)
    pod_params: dict[Key, PodParams] = field(default_factory=dict)
    groups: dict[Key, MutableObj] = field(default_factory=dict)
    group_params: dict[Key, GroupParams] = field(default_factory=dict)
    version: int = 0

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)


def pod_object(key: Key, params: PodParams, version: str) -> MutableObj:
    labels = {"app": f"v{params.noise}"}
    if params.queue_label is not None:
        labels[QUEUE_LABEL] = params.queue_label
    annotations: dict[str, str] = {}
    if params.queue_annotation is not None:
        annotations[QUEUE_ANNOTATION] = params.queue_annotation
    if params.group is not None:
        annotations[GROUP_ANNOTATION] = params.group
    if params.admitted is not None:
        annotations[ADMITTED_ANNOTATION] = params.admitted
    containers: list[MutableObj] = [
        {"name": f"c{index}", "resources": {"requests": dict(requests)}}
        for index, requests in enumerate(params.containers)
    ]
    if params.unreadable:
        containers.append({"name": "bad", "resources": {"requests": {"cpu": "lots"}}})
    spec: MutableObj = {"containers": containers}
    if params.node is not None:
        spec["nodeName"] = params.node
    gates = [name for name, on in (("wait", params.gated), (ADMISSION_GATE, params.held)) if on]
    if gates:
        spec["schedulingGates"] = [{"name": name} for name in gates]
    if params.scheduler is not None:
        spec["schedulerName"] = params.scheduler
    status: MutableObj = {"conditions": [{"type": "Ready", "status": str(params.noise % 2 == 0)}]}
    if params.scheduled == "True":
        status["conditions"].append({"type": "PodScheduled", "status": "True"})
    elif params.scheduled is not None:
        status["conditions"].append(
            {"type": "PodScheduled", "status": "False", "reason": params.scheduled}
        )
    if params.phase is not None:
        status["phase"] = params.phase
    if params.bad_start_time:
        status["startTime"] = "not a time"  # the QoS view cannot be read; the share view can
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": key[1],
            "namespace": key[0],
            "resourceVersion": version,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
        "status": status,
    }


def group_object(key: Key, params: GroupParams, version: str) -> MutableObj:
    spec: MutableObj = {"minMember": params.min_member}
    if params.queue is not None:
        spec["queue"] = params.queue
    if params.min_resources is not None:
        spec["minResources"] = dict(params.min_resources)
    status: MutableObj = {} if params.phase is None else {"phase": params.phase}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": key[1], "namespace": key[0], "resourceVersion": version},
        "spec": spec,
        "status": status,
    }


# --- the operations ---


def _kind(
    world: World, pods: bool
) -> tuple[tuple[Key, ...], dict[Key, MutableObj], dict[Key, Any]]:
    """The keys one kind may use, its objects and the parameters they were built from."""
    if pods:
        return POD_KEYS, world.pods, world.pod_params
    return GROUP_KEYS, world.groups, world.group_params


def _sink(store: ClusterStore, pods: bool) -> Any:
    return store.pods if pods else store.pod_groups


def _put(world: World, store: ClusterStore, data: st.DataObject, pods: bool) -> None:
    """An ADDED or MODIFIED event: a fresh object, or one field of an existing one changed."""
    keys, truth, params = _kind(world, pods)
    key = data.draw(st.sampled_from(keys), label="key")
    new = _changed(params.get(key), data, pods)
    obj = _object(key, new, world.next_version(), pods)
    kind = "MODIFIED" if key in truth else "ADDED"
    truth[key], params[key] = obj, new
    _sink(store, pods).event(kind, obj)


def _changed(old: Any, data: st.DataObject, pods: bool) -> Any:
    """A whole new object, or (for an existing one, mostly) the old one with one field moved."""
    if old is None or data.draw(st.integers(0, 3), label="fresh") == 0:
        return data.draw(pod_params if pods else group_params, label="params")
    strategies = POD_FIELDS if pods else GROUP_FIELDS
    name = data.draw(st.sampled_from(sorted(strategies)), label="field")
    return replace(old, **{name: data.draw(strategies[name], label=name)})


def _object(key: Key, params: Any, version: str, pods: bool) -> MutableObj:
    return pod_object(key, params, version) if pods else group_object(key, params, version)


def _delete(world: World, store: ClusterStore, data: st.DataObject, pods: bool) -> None:
    """A DELETED event, carrying the object's last state (or a bare key when it is unknown)."""
    keys, truth, params = _kind(world, pods)
    key = data.draw(st.sampled_from(keys), label="key")
    obj = truth.pop(key, None) or {"metadata": {"namespace": key[0], "name": key[1]}}
    params.pop(key, None)
    _sink(store, pods).event("DELETED", obj)


def _relist(world: World, store: ClusterStore, data: st.DataObject, pods: bool) -> None:
    """A complete LIST in pages: some objects kept, some changed, some gone, some new, a few
    delivered twice (a LIST restarted after an expired continue token)."""
    keys, truth, params = _kind(world, pods)
    listing: list[tuple[Key, Any]] = []
    for key in keys:
        action = data.draw(st.sampled_from(["keep", "keep", "change", "drop"]), label="action")
        if key not in truth and action != "drop":
            action = data.draw(st.sampled_from(["absent", "new"]), label="new")
        if action == "keep":
            listing.append((key, params[key]))
        elif action in ("change", "new"):
            listing.append((key, _changed(params.get(key), data, pods)))
    listing = list(data.draw(st.permutations(listing), label="order"))
    twice: bool = data.draw(st.booleans(), label="twice")
    if listing and twice:
        key, old = data.draw(st.sampled_from(listing), label="again")
        listing.append((key, _changed(old, data, pods)))
    objects = [_object(key, new, world.next_version(), pods) for key, new in listing]
    truth.clear()
    params.clear()
    for (key, new), obj in zip(listing, objects, strict=True):
        truth[key], params[key] = obj, new
    page = data.draw(st.integers(1, 4), label="page")
    sink = _sink(store, pods)
    sink.list_started()
    for start in range(0, len(objects), page):
        sink.listed(objects[start : start + page])
    sink.list_finished()


# --- reading the truth, independently ---


def _nonzero(amounts: Mapping[str, int]) -> Amounts:
    return {name: amount for name, amount in amounts.items() if amount}


def _plus(into: Amounts, amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + amount


def _counted(amounts: Mapping[str, int], pods: int) -> Amounts:
    """``amounts`` with one ``pods`` a pod, as a queue counts them."""
    counted = dict(amounts)
    _plus(counted, {"pods": pods})
    return _nonzero(counted)


def _amounts(resources: Mapping[str, str]) -> Amounts | None:
    total: Amounts = {}
    for name, quantity in resources.items():
        if quantity not in QUANTITIES[name]:
            return None
        _plus(total, {name: QUANTITIES[name][quantity]})
    return total


@dataclass(frozen=True)
class Pod:
    """A readable, non-terminal pod as the test reads its dict."""

    key: Key
    request: Amounts
    node: str | None
    gated: bool
    held: bool
    """Held by our admission gate."""
    admitted: bool
    """Released by it (the annotation, and not held)."""
    unschedulable: bool
    """Found Unschedulable by the scheduler (neither held nor bound)."""
    named: str | None
    group: str | None
    bad_start_time: bool
    scheduler: str


def live_pods(world: World) -> list[Pod]:
    pods = []
    for key, obj in sorted(world.pods.items()):
        request: Amounts = {}
        readable = True
        for container in obj["spec"]["containers"]:
            amounts = _amounts(container["resources"]["requests"])
            if amounts is None:
                readable = False
                break
            _plus(request, amounts)
        if not readable or obj["status"].get("phase") in TERMINAL:
            continue
        labels, annotations = obj["metadata"]["labels"], obj["metadata"]["annotations"]
        gates = obj["spec"].get("schedulingGates") or []
        held = {"name": ADMISSION_GATE} in gates
        node = obj["spec"].get("nodeName") or None
        scheduled = [c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled"]
        pods.append(
            Pod(
                key=key,
                request=request,
                node=node,
                gated=bool(gates),
                held=held,
                admitted=not held and ADMITTED_ANNOTATION in annotations,
                unschedulable=not held
                and node is None
                and any(
                    c["status"] == "False" and c["reason"] == "Unschedulable" for c in scheduled
                ),
                named=labels.get(QUEUE_LABEL) or annotations.get(QUEUE_ANNOTATION) or None,
                group=annotations.get(GROUP_ANNOTATION),
                bad_start_time=obj["status"].get("startTime") == "not a time",
                scheduler=obj["spec"].get("schedulerName") or "default-scheduler",
            )
        )
    return pods


def unreadable_pods(world: World) -> set[Key]:
    return {
        key
        for key, obj in world.pods.items()
        if any(
            _amounts(container["resources"]["requests"]) is None
            for container in obj["spec"]["containers"]
        )
    }


@dataclass(frozen=True)
class Group:
    queue: str | None
    phase: str
    min_member: int
    min_resources: Amounts | None


def readable_groups(world: World) -> dict[Key, Group]:
    groups = {}
    for key, obj in world.groups.items():
        phase = obj["status"].get("phase", "Pending")
        minimum = obj["spec"].get("minResources")
        min_resources = None if minimum is None else _amounts(minimum)
        if phase not in GROUP_PHASES or (minimum is not None and min_resources is None):
            continue
        groups[key] = Group(
            obj["spec"].get("queue") or None, phase, obj["spec"]["minMember"], min_resources
        )
    return groups


# --- the recounts ---


@dataclass
class _Charge:
    allocated: Amounts = field(default_factory=dict)
    request: Amounts = field(default_factory=dict)
    pods: int = 0
    allocated_pods: int = 0
    held: Amounts = field(default_factory=dict)
    admitted_pods: int = 0

    def charges(self) -> Charges:
        return Charges(
            _counted(self.allocated, self.allocated_pods),
            _counted(self.request, self.pods),
            self.pods,
            self.allocated_pods,
            _nonzero(self.held),
            self.admitted_pods,
        )


@dataclass
class _Members:
    allocated: Amounts = field(default_factory=dict)
    allocated_pods: int = 0
    gated: Amounts = field(default_factory=dict)


def recount(pods: list[Pod]) -> PodTotals:
    named: dict[str, dict[str, _Charge]] = {}
    grouped: dict[Key, _Charge] = {}
    unnamed: dict[str, dict[str, _Charge]] = {}
    unnamed_bound: dict[str, dict[str, Amounts]] = {}
    groups: dict[Key, _Members] = {}
    node_used: dict[str, Amounts] = {}
    node_pods: dict[str, int] = {}
    for pod in pods:
        if pod.named:
            bucket = named.setdefault(pod.named, {}).setdefault(pod.key[0], _Charge())
        elif pod.group:
            bucket = grouped.setdefault((pod.key[0], pod.group), _Charge())
        else:
            bucket = unnamed.setdefault(pod.scheduler, {}).setdefault(pod.key[0], _Charge())
            if pod.node:
                bound = unnamed_bound.setdefault(pod.scheduler, {}).setdefault(pod.node, {})
                _plus(bound, {**pod.request, "pods": 1})
        bucket.pods += 1
        _plus(bucket.request, pod.request)
        if pod.held:
            _plus(bucket.held, {**pod.request, "pods": 1})
        bucket.admitted_pods += pod.admitted
        if pod.node:
            _plus(bucket.allocated, pod.request)
            bucket.allocated_pods += 1
        if pod.group:
            members = groups.setdefault((pod.key[0], pod.group), _Members())
            if pod.node:
                _plus(members.allocated, pod.request)
                members.allocated_pods += 1
            elif pod.gated:
                _plus(members.gated, pod.request)
        if pod.node:
            _plus(node_used.setdefault(pod.node, {}), pod.request)
            node_pods[pod.node] = node_pods.get(pod.node, 0) + 1
    return PodTotals(
        named={
            name: {namespace: charge.charges() for namespace, charge in by_namespace.items()}
            for name, by_namespace in named.items()
        },
        grouped={key: charge.charges() for key, charge in grouped.items()},
        unnamed={
            scheduler: {namespace: charge.charges() for namespace, charge in by_ns.items()}
            for scheduler, by_ns in unnamed.items()
        },
        unnamed_bound={
            scheduler: {node: _nonzero(used) for node, used in by_node.items()}
            for scheduler, by_node in unnamed_bound.items()
        },
        groups={
            key: GroupPods(_nonzero(m.allocated), m.allocated_pods, _nonzero(m.gated))
            for key, m in groups.items()
        },
        node_used={name: _nonzero(used) for name, used in node_used.items()},
        node_pods=node_pods,
    )


def without_zeros(totals: PodTotals) -> PodTotals:
    def charges(value: Charges) -> Charges:
        return Charges(
            _nonzero(value.allocated),
            _nonzero(value.request),
            value.pods,
            value.allocated_pods,
            _nonzero(value.held),
            value.admitted_pods,
        )

    return PodTotals(
        named={
            name: {namespace: charges(value) for namespace, value in by_namespace.items()}
            for name, by_namespace in totals.named.items()
        },
        grouped={key: charges(value) for key, value in totals.grouped.items()},
        unnamed={
            scheduler: {namespace: charges(value) for namespace, value in by_ns.items()}
            for scheduler, by_ns in totals.unnamed.items()
        },
        unnamed_bound={
            scheduler: {node: _nonzero(used) for node, used in by_node.items()}
            for scheduler, by_node in totals.unnamed_bound.items()
        },
        groups={
            key: GroupPods(_nonzero(g.allocated), g.allocated_pods, _nonzero(g.gated))
            for key, g in totals.groups.items()
        },
        node_used={name: _nonzero(used) for name, used in totals.node_used.items()},
        node_pods=dict(totals.node_pods),
    )


@dataclass
class Usage:
    allocated: Amounts = field(default_factory=dict)
    request: Amounts = field(default_factory=dict)
    inqueue: Amounts = field(default_factory=dict)
    elastic: Amounts = field(default_factory=dict)


def per_queue(
    queues: tuple[str, ...], pods: list[Pod], groups: dict[Key, Group]
) -> tuple[dict[str, Usage], dict[str, int]]:
    """Each queue's usage, one pod and one PodGroup at a time; pods naming missing queues."""
    usage = {name: Usage() for name in queues}
    unknown: dict[str, int] = {}
    default = "default" if "default" in queues else None
    for pod in pods:
        queue = pod.named
        if queue is None and pod.group is not None:
            group = groups.get((pod.key[0], pod.group))
            queue = group.queue if group is not None else None
        if queue is None and pod.group is None and pod.scheduler != "volcano":
            continue  # unmanaged: the default scheduler names of queue_usage are [volcano]
        queue = queue or default
        if queue is None:
            continue
        if queue not in usage:
            unknown[queue] = unknown.get(queue, 0) + 1
            continue
        _plus(usage[queue].request, {**pod.request, "pods": 1})
        if pod.node:
            _plus(usage[queue].allocated, {**pod.request, "pods": 1})
    for (namespace, name), group in sorted(groups.items()):
        entry = usage.get(group.queue or "default")
        if entry is None:
            continue
        members = [pod for pod in pods if pod.key[0] == namespace and pod.group == name]
        allocated: Amounts = {}
        gated: Amounts = {}
        for pod in members:
            if pod.node:
                _plus(allocated, pod.request)
            elif pod.gated:
                _plus(gated, pod.request)
        minimum = group.min_resources or {}
        _plus(
            entry.elastic,
            {dim: max(amount - minimum.get(dim, 0), 0) for dim, amount in allocated.items()},
        )
        allocated_pods = sum(1 for pod in members if pod.node)
        admitted = group.phase == "Inqueue" or (
            group.phase == "Running" and allocated_pods >= group.min_member
        )
        if group.min_resources is not None and admitted:
            for dim, amount in group.min_resources.items():
                missing = max(amount - allocated.get(dim, 0), 0)
                if missing > 0:
                    _plus(entry.inqueue, {dim: max(missing - gated.get(dim, 0), 0)})
    return usage, unknown


UNKNOWN_REASON = re.compile(r"(\d+) pods? names? queue '(.*)'")


# --- the test ---


def observed(store: ClusterStore) -> tuple[object, ...]:
    """What a share round reads of the pods and PodGroups: a change must wake one."""
    waiting = {
        key: (record.share, record.constraints, record.unschedulable_since)
        for key, record in store.pods.unscheduled().items()
    }
    return without_zeros(store.totals()), store.pod_groups.snapshots(), waiting


def waiting_in_reserving_groups(pods: list[Pod], groups: dict[Key, Group]) -> int:
    """Gated pending pods of PodGroups that reserve (the rarest case; the search aims at it)."""
    return sum(
        1
        for pod in pods
        if pod.gated
        and not pod.node
        and pod.group is not None
        and (group := groups.get((pod.key[0], pod.group))) is not None
        and group.min_resources
        and group.phase in ("Inqueue", "Running")
    )


def claim_of(pod: Pod) -> tuple[str, ...]:
    """What the pod's charges go to, as the store's per-claim index keys it."""
    if pod.named:
        return ("named", pod.named)
    if pod.group:
        return ("grouped", pod.key[0], pod.group)
    return ("unnamed", pod.scheduler)


CLAIMS = (
    *(("named", name) for name in ("q0", "q1", "default", "ghost")),
    *(("grouped", namespace, name) for namespace, name in GROUP_KEYS),
    *(("unnamed", scheduler) for scheduler in ("default-scheduler", "volcano", "other")),
)
"""Every claim a generated pod can have."""


@dataclass
class Counted:
    """Every (claim, change count) reclaim has been handed, with the bound records it went
    with: reclaim reads a claim's pods again only when its count moves, so one count must
    never stand for two different sets of records."""

    seen: dict[tuple[tuple[str, ...], int], list[Any]] = field(default_factory=dict)

    def check(self, store: ClusterStore) -> None:
        for claim in CLAIMS:
            count, records = store.pods.bound_changed(claim), store.pods.bound_claiming(claim)
            if not records:
                assert count == 0, claim
                continue
            before = self.seen.setdefault((claim, count), records)
            same = len(before) == len(records) and all(
                old is new for old, new in zip(before, records, strict=True)
            )
            assert same, f"{claim}: count {count} stands for other pods than before"


def check(world: World, store: ClusterStore, counted: Counted) -> int:
    """Compare everything; returns ``waiting_in_reserving_groups`` for the search."""
    pods = live_pods(world)
    groups = readable_groups(world)
    totals = store.totals()

    expected = recount(pods)
    actual = without_zeros(totals)
    assert actual.named == expected.named
    assert actual.grouped == expected.grouped
    assert actual.unnamed == expected.unnamed
    assert actual.unnamed_bound == expected.unnamed_bound
    assert actual.groups == expected.groups
    assert actual.node_used == expected.node_used
    assert actual.node_pods == expected.node_pods

    event(f"pods counted: {min(len(pods), 5)}+")
    unreadable = unreadable_pods(world)
    if unreadable:
        event("unreadable pods")
    assert set(store.pods.records) == set(world.pods) - unreadable
    assert set(store.pod_groups.records) == set(groups)
    qos_unreadable = {pod.key for pod in pods if pod.node and pod.bad_start_time}
    assert set(store.pods.problems) == unreadable | qos_unreadable

    for node in NODES:
        here = [pod for pod in pods if pod.node == node]
        records = list(store.pods.on_node(node))
        assert sorted((r.share.namespace, r.share.name) for r in records) == [p.key for p in here]
        used: Amounts = {}
        for record in records:
            _plus(used, record.share.request)
        assert _nonzero(used) == _nonzero(totals.node_used.get(node, {}))
        keys_with_qos = {
            (view.key.namespace, view.key.name) for view in store.pods.qos_views_on(node)
        }
        assert keys_with_qos == {pod.key for pod in here if not pod.bad_start_time}

    def keys(snapshots: Any) -> set[Key]:
        return {(pod.namespace, pod.name) for pod in snapshots}

    assert keys(store.pods.held()) == {pod.key for pod in pods if pod.held}
    assert keys(store.pods.released_unbound()) == {
        pod.key for pod in pods if pod.admitted and not pod.node
    }
    waiting = store.pods.unscheduled()
    assert {(key.namespace, key.name) for key in waiting} == {
        pod.key for pod in pods if not pod.node and (pod.held or pod.unschedulable)
    }
    assert keys(record.share for record in waiting.values()) == set(map(tuple, waiting))
    if any(pod.unschedulable for pod in pods):
        event("Unschedulable pods")
    for claim in CLAIMS:
        bound = store.pods.bound_claiming(claim)
        assert [(r.share.namespace, r.share.name) for r in bound] == [
            pod.key for pod in pods if pod.node and claim_of(pod) == claim
        ], claim
    counted.check(store)

    for queues in QUEUE_SETS:
        accounting = queue_usage(
            [QueueName(name) for name in queues],
            totals,
            {(g.namespace, g.name): g for g in store.pod_groups.snapshots()},
        )
        usage, unknown = per_queue(queues, pods, groups)
        assert set(accounting.usage) <= set(queues)
        for name in queues:
            # A queue that uses nothing may be left out of ``usage``.
            got, want = accounting.usage.get(QueueName(name), QueueUsage()), usage[name]
            for part in (item.name for item in fields(Usage)):
                assert _nonzero(getattr(got, part)) == _nonzero(getattr(want, part)), (name, part)
        if any(entry.inqueue for entry in usage.values()):
            event("some queue has inqueue")
        if any(entry.elastic for entry in usage.values()):
            event("some queue has elastic")
        if unknown:
            event("pods name a missing queue")
        reported: dict[str, int] = {}
        for reason in accounting.reasons:
            assert reason.kind == "UnknownQueue"
            match = UNKNOWN_REASON.fullmatch(reason.message)
            assert match is not None, reason.message
            reported[match.group(2)] = int(match.group(1))
        assert reported == unknown
    return waiting_in_reserving_groups(pods, groups)


OPERATIONS = ("put", "put", "put", "delete", "relist")


@settings(max_examples=200)
@given(st.data())
def test_the_totals_equal_a_recount_after_any_events(data: st.DataObject) -> None:
    world = World()
    calls: list[None] = []
    store = ClusterStore(Listeners(change=lambda: calls.append(None)))
    # The operator starts with a complete LIST of each kind; then events and relists follow.
    _relist(world, store, data, pods=False)
    _relist(world, store, data, pods=True)
    counted = Counted()
    aim = check(world, store, counted)
    for _ in range(data.draw(st.integers(0, 28), label="operations")):
        pods = data.draw(st.sampled_from([True, True, False]), label="pods")
        operation = data.draw(st.sampled_from(OPERATIONS), label="operation")
        before, called = observed(store), len(calls)
        if operation == "put":
            _put(world, store, data, pods)
        elif operation == "delete":
            _delete(world, store, data, pods)
        else:
            _relist(world, store, data, pods)
        if observed(store) != before:
            assert len(calls) > called, "what a share round reads changed without on_change"
        # After every step: a wrong value that a later step cancels out is still caught.
        aim = max(aim, check(world, store, counted))
    target(aim, label="gated pods of reserving PodGroups")
