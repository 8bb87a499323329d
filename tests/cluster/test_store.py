"""The cluster store, one behaviour at a time: unreadable objects, what wakes a round, relists,
deletions and the pods-by-node index."""

from __future__ import annotations

import copy
import gc
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from builders import node, pod, pod_group, queue, unschedulable
from sharekeeper.cluster.store import ClusterStore, Listeners
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.shares import Charges, PodGroupSnapshot
from sharekeeper.engine.shares.accounting import QueueUsage, queue_usage
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.model.objects import MutableObj


class Recorder:
    """A store whose ``on_change`` calls are counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        self.store = ClusterStore(Listeners(change=self._changed, status=self._seen))

    def _changed(self) -> None:
        self.calls += 1

    def _seen(self, kind: str, name: str, value: Any) -> None:
        self.seen.append((kind, name, dict(value)))

    def woken_by(self, sink: Any, kind: str, obj: MutableObj) -> bool:
        """Whether one event called ``on_change``."""
        before = self.calls
        sink.event(kind, obj)
        return self.calls > before


def unreadable_gauge(kind: str = "Pod") -> float | None:
    value: float | None = REGISTRY.get_sample_value(
        "sharekeeper_unreadable_objects", {"kind": kind}
    )
    return value


def changed(obj: MutableObj, path: str, value: Any) -> MutableObj:
    """A deep copy of ``obj`` with the dotted ``path`` set to ``value``."""
    result = copy.deepcopy(obj)
    *parents, last = path.split(".")
    target = result
    for step in parents:
        target = target.setdefault(step, {})
    target[last] = value
    return result


def requests_of(obj: MutableObj, **requests: str) -> MutableObj:
    return changed(obj, "spec.containers", [{"name": "main", "resources": {"requests": requests}}])


def keys_on(store: ClusterStore, node_name: str) -> set[tuple[str, str]]:
    return {(r.share.namespace, r.share.name) for r in store.pods.on_node(node_name)}


# --- objects that cannot be read ---


def bound_charges(cpu: int, pods: int) -> Charges:
    """What ``pods`` bound pods asking for ``cpu`` in all charge their queue (pods counted in)."""
    amounts = {"cpu": cpu, "pods": pods}
    return Charges(amounts, amounts, pods, pods)


def test_an_unreadable_pod_is_left_out_and_reported_until_it_is_fixed() -> None:
    store = ClusterStore()
    store.pods.event("ADDED", pod("good", "q", node="n", cpu="1"))
    bad = pod("bad", "q", node="n", cpu="lots")

    store.pods.event("ADDED", bad)

    assert ("ns", "bad") not in store.pods.records
    assert "lots" in store.pods.problems[("ns", "bad")]
    assert unreadable_gauge() == 1
    assert store.totals().named == {"q": {"ns": bound_charges(1000, 1)}}
    assert keys_on(store, "n") == {("ns", "good")}

    store.pods.event("MODIFIED", requests_of(bad, cpu="2"))

    assert ("ns", "bad") in store.pods.records
    assert store.pods.problems == {}
    assert unreadable_gauge() == 0
    assert store.totals().named == {"q": {"ns": bound_charges(3000, 2)}}
    assert keys_on(store, "n") == {("ns", "good"), ("ns", "bad")}


def test_totals_in_other_resource_names_are_copied_again() -> None:
    """A bucket keeps the copy it made for a round until a pod changes it; a round that reads
    other resource names gets copies in those."""
    store = ClusterStore()
    store.pods.event("ADDED", pod("p", "q", node="n", cpu="1", memory="1Gi"))
    cpu_only = bound_charges(1000, 1)
    both = Charges(
        {"cpu": 1000, "memory": 2**30, "pods": 1}, {"cpu": 1000, "memory": 2**30, "pods": 1}, 1, 1
    )
    assert store.totals(["cpu"]).named == {"q": {"ns": cpu_only}}
    assert store.totals(["cpu"]).named["q"]["ns"] is store.totals(["cpu"]).named["q"]["ns"]
    assert store.totals(["cpu", "memory"]).named == {"q": {"ns": both}}
    assert store.totals(["cpu"]).node_used == {"n": {"cpu": 1000}}
    assert store.totals(["cpu"]).named == {"q": {"ns": cpu_only}}


@pytest.mark.parametrize("path", ["spec.containers", "spec.initContainers"])
def test_a_container_that_is_not_a_mapping_makes_its_pod_unreadable_not_the_page(
    path: str,
) -> None:
    store = ClusterStore()
    bad = changed(pod("p", "q", cpu="1"), path, ["c"])
    store.pods.listed([bad, pod("later", "q", cpu="1")])
    assert ("ns", "p") not in store.pods.records
    assert "must be a mapping" in store.pods.problems[("ns", "p")]
    assert ("ns", "later") in store.pods.records  # the rest of the page is read


def test_each_distinct_problem_of_an_object_is_reported_once() -> None:
    """What the operator turns into one Warning Event per problem, not one per watch event."""
    reported: list[tuple[str, object, str]] = []
    store = ClusterStore(
        Listeners(problem=lambda kind, key, problem: reported.append((kind, key, problem)))
    )
    bad = requests_of(pod("p", "q"), cpu="lots")
    store.pods.event("ADDED", bad)
    store.pods.event("MODIFIED", changed(bad, "metadata.resourceVersion", "2"))
    worse = requests_of(pod("p", "q"), cpu="1", memory="plenty")
    store.pods.event("MODIFIED", worse)
    assert [(kind, key) for kind, key, _ in reported] == [("Pod", ("ns", "p"))] * 2
    assert "cpu" in reported[0][2]
    assert "memory" in reported[1][2]


def test_a_pod_that_becomes_unreadable_leaves_the_totals_without_a_stale_value() -> None:
    recorder = Recorder()
    store = recorder.store
    good = pod("p", "q", node="n", group="job", cpu="1", memory="1Gi")
    store.pods.event("ADDED", good)

    assert recorder.woken_by(store.pods, "MODIFIED", requests_of(good, cpu="1", memory="huge"))

    totals = store.totals()
    assert totals.named == {}
    assert totals.groups == {}
    assert totals.node_used == {}
    assert list(store.pods.on_node("n")) == []
    assert set(store.pods.problems) == {("ns", "p")}
    assert unreadable_gauge() == 1


def test_a_relisted_unreadable_pod_is_removed_too() -> None:
    store = ClusterStore()
    good = pod("p", "q", cpu="1")
    store.pods.event("ADDED", good)

    store.pods.list_started()
    store.pods.listed([requests_of(good, cpu="-1")])
    store.pods.list_finished()

    assert store.totals().named == {}
    assert set(store.pods.problems) == {("ns", "p")}


def test_a_bound_pod_with_a_malformed_qos_field_counts_in_its_queue_but_is_never_acted_on() -> None:
    store = ClusterStore()
    broken = pod("broken", "q", node="n", cpu="1")
    broken["status"]["startTime"] = "not a time"
    store.pods.event("ADDED", broken)
    store.pods.event("ADDED", pod("fine", "q", node="n", cpu="2"))

    record = store.pods.records[("ns", "broken")]
    assert record.qos is None
    assert record.problem is not None
    assert "status.startTime" in record.problem
    assert store.pods.problems == {("ns", "broken"): record.problem}
    assert unreadable_gauge() == 1
    # It still counts: in its queue, on its node ...
    assert store.totals().named == {"q": {"ns": bound_charges(3000, 2)}}
    assert store.totals().node_used == {"n": {"cpu": 3000}}
    usage = queue_usage([QueueName("q")], store.totals(), {}).usage.get(QueueName("q"))
    assert usage is not None
    assert usage.allocated == {"cpu": 3000, "pods": 2}
    # ... but the QoS engine sees only the other pod, which it can still act on.
    assert keys_on(store, "n") == {("ns", "broken"), ("ns", "fine")}
    assert [view.key.name for view in store.pods.qos_views_on("n")] == ["fine"]

    fixed = copy.deepcopy(broken)
    fixed["status"]["startTime"] = "2026-01-01T00:00:00Z"
    store.pods.event("MODIFIED", fixed)

    assert store.pods.records[("ns", "broken")].qos is not None
    assert store.pods.problems == {}
    assert unreadable_gauge() == 0


# --- what wakes a round ---


def test_a_pod_change_that_shares_read_wakes_a_round() -> None:
    recorder = Recorder()
    pods = recorder.store.pods
    base = pod("p", "q", cpu="1")
    assert recorder.woken_by(pods, "ADDED", base)

    assert recorder.woken_by(pods, "MODIFIED", requests_of(base, cpu="2"))
    assert recorder.woken_by(pods, "MODIFIED", changed(base, "metadata.labels", {}))
    assert recorder.woken_by(
        pods,
        "MODIFIED",
        changed(base, "metadata.annotations", {"scheduling.k8s.io/group-name": "g"}),
    )
    assert recorder.woken_by(
        pods, "MODIFIED", changed(base, "spec.schedulingGates", [{"name": "x"}])
    )
    assert recorder.woken_by(pods, "MODIFIED", changed(base, "spec.nodeName", "n"))
    assert recorder.woken_by(pods, "MODIFIED", changed(base, "status.phase", "Succeeded"))
    assert recorder.woken_by(pods, "DELETED", base)


def test_a_pod_change_that_shares_do_not_read_does_not_wake_a_round() -> None:
    recorder = Recorder()
    pods = recorder.store.pods
    base = pod("p", "q", node="n", phase="Pending", cpu="1")
    pods.event("ADDED", base)

    ready = changed(base, "status.conditions", [{"type": "Ready", "status": "True"}])
    assert not recorder.woken_by(pods, "MODIFIED", ready)
    running = changed(ready, "status.phase", "Running")  # both hold their request
    assert not recorder.woken_by(pods, "MODIFIED", running)
    relabelled = changed(running, "metadata.labels", {"sharekeeper.io/queue": "q", "app": "web"})
    assert not recorder.woken_by(pods, "MODIFIED", relabelled)
    assert not recorder.woken_by(
        pods, "MODIFIED", changed(relabelled, "metadata.resourceVersion", "42")
    )
    # Unchanged, the store kept the newest record all along.
    assert recorder.store.pods.records[("ns", "p")].share.node_name == "n"


def heartbeat_node(version: str, beat: str) -> MutableObj:
    obj = node("n", {"zone": "a"}, cpu="8", memory="16Gi")
    obj["metadata"]["resourceVersion"] = version
    obj["metadata"]["annotations"] = {"node.alpha.kubernetes.io/ttl": "0"}
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": beat}]
    return obj


def test_a_node_heartbeat_does_not_wake_a_round() -> None:
    recorder = Recorder()
    nodes = recorder.store.nodes
    assert recorder.woken_by(nodes, "ADDED", heartbeat_node("1", "2026-01-01T00:00:00Z"))

    beat = heartbeat_node("2", "2026-01-01T00:00:10Z")
    assert not recorder.woken_by(nodes, "MODIFIED", beat)
    other = changed(beat, "metadata.annotations", {"node.alpha.kubernetes.io/ttl": "30"})
    assert not recorder.woken_by(nodes, "MODIFIED", other)
    # The record is the newest one: a taint patch must carry this resourceVersion.
    assert nodes.records["n"].resource_version == "2"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("status.allocatable", {"cpu": "4", "memory": "16Gi"}),
        ("metadata.labels", {"zone": "b"}),
    ],
    ids=["allocatable", "label"],
)
def test_a_node_change_that_shares_read_wakes_a_round(path: str, value: Any) -> None:
    recorder = Recorder()
    nodes = recorder.store.nodes
    nodes.event("ADDED", heartbeat_node("1", "2026-01-01T00:00:00Z"))

    update = changed(heartbeat_node("2", "2026-01-01T00:00:10Z"), path, value)
    assert recorder.woken_by(nodes, "MODIFIED", update)


def test_a_change_of_our_node_annotations_is_handed_over_for_the_echo_check() -> None:
    """Our own annotation write comes back through the watch: only the recompute loop knows
    whether it is that echo (no round needed) or someone else's change (restore it)."""
    recorder = Recorder()
    nodes = recorder.store.nodes
    nodes.event("ADDED", heartbeat_node("1", "2026-01-01T00:00:00Z"))
    annotated = changed(
        heartbeat_node("2", "2026-01-01T00:00:10Z"),
        "metadata.annotations",
        {"node.alpha.kubernetes.io/ttl": "0", "sharekeeper.io/policy": "gpu"},
    )
    assert not recorder.woken_by(nodes, "MODIFIED", annotated)
    assert recorder.seen == [("Node", "n", {"sharekeeper.io/policy": "gpu"})]


def test_a_pod_group_wakes_a_round_only_when_it_changes() -> None:
    recorder = Recorder()
    groups = recorder.store.pod_groups
    job = pod_group("job", "q", min_resources={"cpu": "2"})
    assert recorder.woken_by(groups, "ADDED", job)
    assert not recorder.woken_by(groups, "MODIFIED", changed(job, "metadata.resourceVersion", "9"))
    assert recorder.woken_by(groups, "MODIFIED", changed(job, "status.phase", "Inqueue"))
    assert groups.snapshots() == (PodGroupSnapshot("ns", "job", "q", "Inqueue", 1, {"cpu": 2000}),)


# --- our own objects ---


def stored_queue(**spec: Any) -> MutableObj:
    """A Queue as the API server sends it: with a UID, generation and resourceVersion."""
    obj = queue("a", **spec)
    obj["metadata"] |= {"uid": "u1", "generation": 1, "resourceVersion": "1"}
    return obj


def status_write(obj: MutableObj, version: str, **status: Any) -> MutableObj:
    """``obj`` after a write of its status subresource: what the echo of our write brings."""
    written = changed(obj, "status", status)
    written["metadata"] |= {"resourceVersion": version, "managedFields": [{"manager": version}]}
    return written


def test_a_status_write_keeps_the_reading_of_the_rest() -> None:
    recorder = Recorder()
    queues = recorder.store.queues
    obj = stored_queue(weight=2)
    queues.event("ADDED", obj)
    first = queues.records["a"]

    assert not recorder.woken_by(queues, "MODIFIED", status_write(obj, "2", admitted=3))
    after = queues.records["a"]
    assert after.spec is first.spec  # not read again
    assert (after.uid, after.generation, after.status) == ("u1", 1, {"admitted": 3})
    assert recorder.seen == [("Queue", "a", {"admitted": 3})]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.weight", 5),
        ("metadata.labels", {"team": "b"}),
        ("metadata.ownerReferences", [{"kind": "Queue", "name": "a", "uid": "v"}]),
        ("metadata.uid", "u2"),
        ("apiVersion", "scheduling.sharekeeper.io/v1beta1"),
    ],
)
def test_a_write_of_anything_but_the_status_is_read_again(path: str, value: Any) -> None:
    queues = ClusterStore().queues
    obj = stored_queue(weight=2)
    queues.event("ADDED", obj)
    first = queues.records["a"]

    queues.event("MODIFIED", status_write(changed(obj, path, value), "2", admitted=3))

    after = queues.records["a"]
    assert after.spec is not first.spec  # read again (None: read, and refused)
    assert after.status == {"admitted": 3}


def test_an_unreadable_queue_stays_unreadable_through_status_writes() -> None:
    queues = ClusterStore().queues
    obj = stored_queue(weight=-1)
    queues.event("ADDED", obj)
    error = queues.records["a"].error
    assert error is not None
    assert "weight" in error

    queues.event("MODIFIED", status_write(obj, "2", admitted=0))

    assert queues.records["a"].spec is None
    assert queues.records["a"].error == error


def test_a_queue_that_is_not_json_is_read_every_time(caplog: pytest.LogCaptureFixture) -> None:
    queues = ClusterStore().queues
    obj = stored_queue(weight=2)
    obj["metadata"]["labels"] = {1: "b"}  # a YAML file's integer key: simulate's input
    queues.event("ADDED", obj)
    first = queues.records["a"]

    queues.event("MODIFIED", status_write(obj, "2", admitted=1))

    after = queues.records["a"]
    assert after.status == {"admitted": 1}
    assert after.spec is None or after.spec is not first.spec
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


# --- relists and deletions ---


def test_a_relist_that_omits_an_object_deletes_it() -> None:
    recorder = Recorder()
    store = recorder.store
    kept, gone = pod("kept", "q", node="n", cpu="1"), pod("gone", "q", node="n", cpu="2")
    unreadable = pod("unreadable", "q", cpu="lots")
    store.pods.listed([kept, gone, unreadable])
    store.nodes.listed([node("n", cpu="8"), node("m", cpu="8")])
    store.pod_groups.listed([pod_group("job", "q")])
    assert unreadable_gauge() == 1

    for sink, survivors in (
        (store.pods, [kept]),
        (store.nodes, [node("n", cpu="8")]),
        (store.pod_groups, []),
    ):
        before = recorder.calls
        sink.list_started()
        sink.listed(survivors)
        sink.list_finished()
        assert recorder.calls > before

    assert set(store.pods.records) == {("ns", "kept")}
    assert store.totals().named == {"q": {"ns": bound_charges(1000, 1)}}
    assert store.totals().node_used == {"n": {"cpu": 1000}}
    assert keys_on(store, "n") == {("ns", "kept")}
    assert set(store.nodes.records) == {"n"}
    assert store.pod_groups.snapshots() == ()
    assert store.pods.problems == {}  # the unreadable pod is gone from the API too
    assert unreadable_gauge() == 0


def test_a_relist_of_the_same_objects_changes_nothing() -> None:
    recorder = Recorder()
    store = recorder.store
    objects = [pod("a", "q", node="n", cpu="1"), pod("b", group="job", memory="1Gi")]
    store.pods.listed(objects)
    totals, calls = store.totals(), recorder.calls

    store.pods.list_started()
    store.pods.listed(objects[:1])
    store.pods.listed(objects[1:])
    store.pods.list_finished()

    assert store.totals() == totals
    assert recorder.calls == calls


@pytest.mark.parametrize(
    "body",
    [
        pod("stranger", "q", cpu="1"),
        {"metadata": {"name": "stranger"}},
        {"metadata": {}},
        {},
    ],
    ids=["unknown pod", "bare key", "no name", "empty"],
)
def test_a_deletion_of_an_unknown_object_is_harmless(body: MutableObj) -> None:
    recorder = Recorder()
    store = recorder.store
    store.pods.event("ADDED", pod("p", "q", node="n", cpu="1"))
    store.pod_groups.event("ADDED", pod_group("job", "q"))
    totals, groups, calls = store.totals(), store.pod_groups.snapshots(), recorder.calls

    store.pods.event("DELETED", body)
    store.pod_groups.event("DELETED", body)
    store.nodes.event("DELETED", body)

    assert store.totals() == totals
    assert store.pod_groups.snapshots() == groups
    assert recorder.calls == calls
    assert keys_on(store, "n") == {("ns", "p")}


def test_a_deletion_removes_the_problem_of_an_unreadable_pod() -> None:
    store = ClusterStore()
    bad = pod("bad", "q", cpu="lots")
    store.pods.event("ADDED", bad)
    assert unreadable_gauge() == 1

    store.pods.event("DELETED", bad)

    assert store.pods.problems == {}
    assert unreadable_gauge() == 0


# --- the pods on each node ---


def test_a_pod_that_moves_between_nodes_moves_in_the_index() -> None:
    store = ClusterStore()
    on_a = pod("p", "q", node="a", cpu="1")
    store.pods.event("ADDED", on_a)
    store.pods.event("ADDED", pod("neighbour", "q", node="a", cpu="2"))
    assert keys_on(store, "a") == {("ns", "p"), ("ns", "neighbour")}

    store.pods.event("MODIFIED", changed(on_a, "spec.nodeName", "b"))

    assert keys_on(store, "a") == {("ns", "neighbour")}
    assert keys_on(store, "b") == {("ns", "p")}
    assert store.totals().node_used == {"a": {"cpu": 2000}, "b": {"cpu": 1000}}
    assert [view.key.name for view in store.pods.qos_views_on("b")] == ["p"]


def test_a_pod_leaves_its_node_when_it_ends_or_is_unbound() -> None:
    store = ClusterStore()
    running = pod("p", "q", node="a", cpu="1")
    store.pods.event("ADDED", running)

    store.pods.event("MODIFIED", changed(running, "status.phase", "Succeeded"))
    assert keys_on(store, "a") == set()
    assert store.totals().node_used == {}
    assert store.totals().named == {}

    store.pods.event("MODIFIED", running)
    assert keys_on(store, "a") == {("ns", "p")}

    store.pods.event("MODIFIED", changed(running, "spec.nodeName", None))
    assert keys_on(store, "a") == set()
    assert store.totals().named == {"q": {"ns": Charges({}, {"cpu": 1000, "pods": 1}, 1)}}


def test_a_pod_has_one_key_object_for_the_collector_to_walk() -> None:
    """The records' key is the record's and its QoS view's (kept through updates, a pod first
    seen pending included), and the indexes hold plain tuples, which the collector stops
    tracking: at 150,000 pods, 150,000 PodKeys, not 300,000."""
    store = ClusterStore()
    running = pod("one-key-p", "q", node="a", cpu="1")
    store.pods.event("ADDED", running)
    store.pods.event("MODIFIED", changed(running, "metadata.labels.release", "2"))
    pending = pod("one-key-w", "q", cpu="1")
    store.pods.event("ADDED", pending)
    store.pods.event("MODIFIED", changed(pending, "spec.nodeName", "a"))

    keys = {key.name: key for key in store.pods.records}
    for key, record in store.pods.records.items():
        assert record.key is key
        assert record.qos is not None
        assert record.qos.key is key
    gc.collect()
    tracked = [
        key for key in gc.get_objects() if isinstance(key, PodKey) and key.name in keys
    ]  # fmt: skip
    assert sorted(map(id, tracked)) == sorted(map(id, keys.values()))


def test_pods_of_the_same_name_in_two_namespaces_are_two_pods() -> None:
    store = ClusterStore()
    store.pods.event("ADDED", pod("p", "q", node="a", cpu="1"))
    store.pods.event("ADDED", pod("p", "q", node="a", namespace="other", cpu="1"))

    store.pods.event("DELETED", pod("p", "q", node="a", cpu="1"))

    assert keys_on(store, "a") == {("other", "p")}
    assert store.totals().named == {"q": {"other": bound_charges(1000, 1)}}


def test_no_usage_stays_behind_once_every_pod_is_gone() -> None:
    store = ClusterStore()
    objects = [
        pod("a", "q", node="n", cpu="1"),
        pod("b", group="job", gated=True, memory="1Gi"),
        pod("c", node="m", gpu="1"),
    ]
    for obj in objects:
        store.pods.event("ADDED", obj)
    for obj in objects:
        store.pods.event("DELETED", obj)

    totals = store.totals()
    assert (totals.named, totals.grouped, totals.groups, totals.node_used) == ({}, {}, {}, {})
    assert totals.unnamed == {}
    usage = queue_usage([QueueName("default"), QueueName("q")], totals, {}).usage
    assert all(entry == QueueUsage() for entry in usage.values())


def test_the_bound_pods_of_a_queue_are_indexed_by_key_and_leave_when_unbound_or_done() -> None:
    store = ClusterStore()
    store.load([
        pod("a1", "a", node="n1", cpu="1"),
        pod("a2", "a", cpu="1"),  # pending: not indexed
        pod("g1", node="n1", group="pg", cpu="1"),
        pod("u1", node="n1", scheduler="volcano", cpu="1"),
    ])  # fmt: skip
    names = lambda claim: [r.share.name for r in store.pods.bound_claiming(claim)]  # noqa: E731
    assert names(("named", "a")) == ["a1"]
    assert names(("grouped", "ns", "pg")) == ["g1"]
    assert names(("unnamed", "volcano")) == ["u1"]
    store.pods.event("MODIFIED", pod("a1", "a", node="n1", phase="Succeeded", cpu="1"))
    store.pods.event("DELETED", pod("g1", node="n1", group="pg", cpu="1"))
    assert names(("named", "a")) == []
    assert names(("grouped", "ns", "pg")) == []
    assert store.pods._by_claim.keys() == {("unnamed", "volcano")}


def test_a_claims_bound_pods_count_their_changes_and_a_claim_back_never_counts_as_before() -> None:
    store = ClusterStore()
    changes = lambda: store.pods.bound_changed(("named", "a"))  # noqa: E731
    assert changes() == 0
    store.load([pod("a1", "a", node="n1", cpu="1"), pod("b1", "b", node="n1", cpu="1")])
    first = changes()
    assert first > 0
    store.pods.event("MODIFIED", pod("a2", "a", cpu="1"))  # pending: not among the bound
    store.pods.event("MODIFIED", pod("b1", "b", node="n1", cpu="2"))  # another claim's
    assert changes() == first
    store.pods.event("MODIFIED", pod("a1", "a", node="n1", cpu="2"))
    second = changes()
    assert second > first
    store.pods.event("DELETED", pod("a1", "a", node="n1", cpu="2"))
    assert changes() == 0
    store.pods.event("MODIFIED", pod("a2", "a", node="n2", cpu="1"))
    assert changes() > second


def test_pods_that_wait_to_be_scheduled_are_indexed_until_they_are_bound_or_gone() -> None:
    recorder = Recorder()
    pods = recorder.store.pods
    waiting = lambda: sorted(r.share.name for r in pods.unscheduled().values())  # noqa: E731
    held = pod("h", "a", held=True, cpu="1")
    pending = pod("u", "a", cpu="1")
    pods.listed([held, pending, pod("r", "a", node="n", cpu="1")])
    assert waiting() == ["h"]
    # Found Unschedulable: it waits now, and a round is woken (reclaim may serve it).
    assert recorder.woken_by(pods, "MODIFIED", unschedulable(pending))
    assert waiting() == ["h", "u"]
    # Tried again, the scheduler rewrites only the message: nothing reclaim reads changed.
    again = unschedulable(pending)
    again["status"]["conditions"][-1]["message"] = "0/3 nodes are available"
    assert not recorder.woken_by(pods, "MODIFIED", again)
    assert recorder.woken_by(pods, "MODIFIED", unschedulable(pending, "2026-01-01T00:05:00Z"))
    # Bound, it no longer waits; a held pod released and bound neither.
    pods.event("MODIFIED", changed(unschedulable(pending), "spec.nodeName", "n"))
    pods.event("DELETED", held)
    assert waiting() == []
    assert [p.name for p in pods.held()] == []
    assert pods.unscheduled_claims() == {}


def test_pods_that_wait_to_be_scheduled_are_indexed_by_claim_with_a_count_of_changes() -> None:
    """Reclaim reads a claim's waiting pods again only once its count moved."""
    pods = Recorder().store.pods
    names = lambda claim: sorted(r.share.name for r in pods.unscheduled_claiming(claim))  # noqa: E731
    pods.listed([pod("h", "a", held=True, cpu="1"), unschedulable(pod("u", "a", cpu="1"))])
    pods.event("ADDED", unschedulable(pod("v", "b", cpu="1")))
    first = pods.unscheduled_claims()
    assert first.keys() == {("named", "a"), ("named", "b")}
    assert names(("named", "a")) == ["h", "u"]
    # Another claim's pod changes: a's count stays; a pod of a changes: a's count grows.
    pods.event("MODIFIED", unschedulable(pod("v", "b", cpu="2")))
    assert pods.unscheduled_claims()[("named", "a")] == first[("named", "a")]
    assert pods.unscheduled_claims()[("named", "b")] > first[("named", "b")]
    pods.event("MODIFIED", unschedulable(pod("u", "a", cpu="2")))
    assert pods.unscheduled_claims()[("named", "a")] > first[("named", "a")]
    # Moved to another queue, a pod leaves its claim; the last one gone, the claim goes.
    pods.event("MODIFIED", unschedulable(pod("v", "a", cpu="2")))
    assert names(("named", "a")) == ["h", "u", "v"]
    assert ("named", "b") not in pods.unscheduled_claims()
    assert names(("named", "b")) == []


def test_a_pods_uid_is_known_while_it_is_bound_or_waits_and_not_once_it_is_gone() -> None:
    """Events about a pod name its UID (``kubectl describe pod`` asks for that UID's)."""
    store = ClusterStore(Listeners(change=lambda: None))
    objects = {
        "bound": pod("bound", "q", node="n", cpu="1"),
        "held": pod("held", "q", held=True, cpu="1"),
        "released": pod("released", "q", admitted=True, cpu="1"),
        "done": pod("done", "q", phase="Succeeded", cpu="1"),
    }
    for name, obj in objects.items():
        obj["metadata"]["uid"] = f"uid-{name}"
        store.pods.event("ADDED", obj)
    uids = {name: store.pods.uid(("ns", name)) for name in objects}
    assert uids == {"bound": "uid-bound", "held": "uid-held", "released": "uid-released",
                    "done": ""}  # fmt: skip
    store.pods.event("DELETED", objects["held"])
    assert store.pods.uid(("ns", "held")) == ""
