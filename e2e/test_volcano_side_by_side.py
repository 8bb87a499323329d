"""Volcano side by side: Volcano's Queue CRD (``queues.scheduling.volcano.sh``, the stand-in in
e2e/volcano/queues.yaml) installed next to ours, on the real API server and kubectl.

1. What ``kubectl get queues`` means then (ours, whichever CRD came first), and the names that
   say which: ``skq`` and the ``sharekeeper`` category for ours, ``queues.scheduling.volcano.sh``
   for Volcano's.
2. ``SchedulerPolicy.spec.queueSource: Volcano``: the operator keeps one Queue per Volcano Queue
   (labelled, owned by it), copies every change over and puts hand edits back, deletes the
   mirror with its Volcano Queue (this control plane runs no garbage collector: the operator
   does it), never touches a Queue people made of the same name (it says so instead), mirrors
   nothing it would have to make up, and writes nothing once the mirrors are current.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import CRDS, TARGET, Cluster
from objects import NAMESPACE, node, pod, policy, queue, status, true_condition
from operating import Operator, eventually, operator_writes, start_operator

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts the operator as a process on 127.0.0.1"
)

VOLCANO_QUEUE_CRD = Path(__file__).parent / "volcano" / "queues.yaml"
VOLCANO_CRD_NAME = "queues.scheduling.volcano.sh"
OUR_QUEUE_CRD = CRDS / "queues.scheduling.sharekeeper.io.yaml"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
SOURCE_LABEL = "sharekeeper.io/source"
LEFT_OUT = "sharekeeper.io/volcano-left-out"
FAST_DISCOVERY = {"SHAREKEEPER_DISCOVERY_INTERVAL": "1"}
SETTLE = 60.0  # generous: two cores run the API server, etcd, the operator and the test


def volcano_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def install_volcano_queue_crd(cluster: Cluster) -> None:
    cluster.install_crds(VOLCANO_QUEUE_CRD, VOLCANO_CRD_NAME)


def remove_volcano_queue_crd(cluster: Cluster) -> None:
    """Gone, with every Volcano Queue, before returning: the session's cluster is shared."""
    cluster.kubectl("delete", "-f", str(VOLCANO_QUEUE_CRD), "--ignore-not-found", "--wait=true")


def install_our_queue_crd(cluster: Cluster) -> None:
    cluster.install_crds(OUR_QUEUE_CRD, OUR_QUEUE_CRD.stem)


@pytest.fixture
def side_by_side(cluster_with: Cluster) -> Iterator[Cluster]:
    """The session's cluster, emptied, with Volcano's Queue CRD next to ours (removed after)."""
    cluster_with.kubectl("create", "namespace", NAMESPACE, check=False)
    install_volcano_queue_crd(cluster_with)
    try:
        yield cluster_with
    finally:
        remove_volcano_queue_crd(cluster_with)


@pytest.fixture
def without_volcano(cluster_with: Cluster) -> Iterator[Cluster]:
    cluster_with.kubectl("create", "namespace", NAMESPACE, check=False)
    remove_volcano_queue_crd(cluster_with)
    try:
        yield cluster_with
    finally:
        remove_volcano_queue_crd(cluster_with)


def names(cluster: Cluster, resource: str, cache: Path) -> list[str]:
    """``kubectl get RESOURCE -o name`` with a discovery cache of its own (never a stale one)."""
    out = cluster.kubectl("get", resource, "-o", "name", f"--cache-dir={cache}").stdout
    return sorted(out.split())


# --- the stand-in CRD ---------------------------------------------------------------------


def test_the_volcano_queue_crd_takes_volcano_queues(side_by_side: Cluster) -> None:
    """e2e/volcano/queues.yaml applies, a Volcano Queue with every field Sharekeeper reads is
    stored as written, and a mistyped weight is refused."""
    cluster = side_by_side
    cluster.apply(
        volcano_queue(
            "full", weight=2, capability={"cpu": 8, "memory": "32Gi"}, deserved={"cpu": "4"},
            guarantee={"resource": {"cpu": "1"}}, parent="root", reclaimable=False,
            extendClusters=[{"name": "kept"}],
        )
    )  # fmt: skip
    stored = cluster.get("queues.scheduling.volcano.sh", "full")
    assert stored["spec"] == {
        "weight": 2, "capability": {"cpu": 8, "memory": "32Gi"}, "deserved": {"cpu": "4"},
        "guarantee": {"resource": {"cpu": "1"}}, "parent": "root", "reclaimable": False,
        "extendClusters": [{"name": "kept"}],
    }  # fmt: skip
    mistyped = yaml.safe_dump(volcano_queue("bad", weight="heavy"))
    refused = cluster.kubectl("apply", "-f", "-", input=mistyped, check=False)
    assert refused.returncode != 0
    assert "spec.weight" in refused.stderr


# --- kubectl ------------------------------------------------------------------------------


def test_kubectl_get_queues_is_ours_skq_and_the_category_say_so(
    side_by_side: Cluster, tmp_path: Path
) -> None:
    """Both CRDs have the plural ``queues`` (and the singular ``queue``). kubectl takes the
    group the API server lists first; CRD groups all have the same priority (1000) and are
    listed by the name of their APIService (``v1alpha1.scheduling.sharekeeper.io`` before
    ``v1beta1.scheduling.volcano.sh``), so ``queues`` is ours whichever CRD was installed
    first, and a Volcano Queue is NotFound by that name. ``skq`` and the ``sharekeeper``
    category name ours alone; ``queues.scheduling.volcano.sh`` (or Volcano's ``q``) theirs."""
    cluster = side_by_side
    for installed in ("ours first", "Volcano's first"):
        if installed == "Volcano's first":
            cluster.kubectl("delete", "crd", OUR_QUEUE_CRD.stem, "--wait=true")
            install_our_queue_crd(cluster)
        cluster.apply(queue("ours"), policy("shares"), volcano_queue("theirs", weight=2))
        cache = tmp_path / installed.replace(" ", "-")
        assert names(cluster, "queues", cache) == ["queue.scheduling.sharekeeper.io/ours"]
        assert names(cluster, "queue", cache) == ["queue.scheduling.sharekeeper.io/ours"]
        assert names(cluster, "skq", cache) == ["queue.scheduling.sharekeeper.io/ours"]
        assert names(cluster, "queues.scheduling.volcano.sh", cache) == [
            "queue.scheduling.volcano.sh/theirs"
        ]
        assert names(cluster, "q", cache) == ["queue.scheduling.volcano.sh/theirs"]
        assert names(cluster, "sharekeeper", cache) == [
            "queue.scheduling.sharekeeper.io/ours",
            "schedulerpolicy.scheduling.sharekeeper.io/shares",
        ]
        missing = cluster.kubectl("get", "queue", "theirs", f"--cache-dir={cache}", check=False)
        assert missing.returncode != 0
        assert 'queues.scheduling.sharekeeper.io "theirs" not found' in missing.stderr
        table = cluster.kubectl("get", "skq", f"--cache-dir={cache}").stdout.splitlines()
        assert table[0].split()[:3] == ["NAME", "WEIGHT", "STATE"]
        assert table[1].split()[:2] == ["ours", "1"]
    found = cluster.get("apiservices")["items"]
    priorities = {
        item["metadata"]["name"]: item["spec"]["groupPriorityMinimum"]
        for item in found
        if item["spec"].get("group") in ("scheduling.sharekeeper.io", "scheduling.volcano.sh")
    }
    assert priorities == {
        "v1alpha1.scheduling.sharekeeper.io": 1000,
        "v1beta1.scheduling.volcano.sh": 1000,
    }


# --- the operator ---------------------------------------------------------------------------


def skq(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """Our Queue ``name``, or None."""
    got = cluster.kubectl("get", "skq", name, "-o", "json", "--ignore-not-found").stdout
    return json.loads(got) if got.strip() else None


def deserved_cpu(cluster: Cluster, name: str) -> str | None:
    got: str | None = status(cluster, "skq", name).get("deserved", {}).get("cpu")
    return got


def events_on_volcano_queue(cluster: Cluster, name: str) -> list[tuple[str, str]]:
    items = cluster.get("events", "-n", "default")["items"]
    return [
        (item["reason"], item["message"])
        for item in items
        if item["involvedObject"].get("apiVersion") == VOLCANO_API
        and item["involvedObject"].get("kind") == "Queue"
        and item["involvedObject"]["name"] == name
    ]


def queue_writes(cluster: Cluster, since: int) -> list[str]:
    """The operator's writes to Queues themselves (not their status) since ``since``."""
    assert cluster.plane is not None
    found = []
    for write in operator_writes(cluster.plane.audit_log)[since:]:
        ref = write.get("objectRef", {})
        if ref.get("resource") == "queues" and not ref.get("subresource"):
            found.append(f"{write['verb']} {ref.get('apiGroup')}/{ref.get('name', '')}")
    return found


@pytest.fixture
def mirroring(
    side_by_side: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> Iterator[Operator]:
    operator = start_operator(operator_kubeconfig, tmp_path / "operator.log", env=FAST_DISCOVERY)
    try:
        operator.wait_rounds(0)
        yield operator
    finally:
        operator.stop(signal.SIGKILL)


def test_volcano_queues_are_mirrored_shared_followed_and_deleted(
    side_by_side: Cluster, mirroring: Operator
) -> None:
    cluster = side_by_side
    assert cluster.plane is not None
    writes_at_start = len(operator_writes(cluster.plane.audit_log))
    # 8 cpu; a (weight 1) and b (weight 3) each ask for all of it: a deserves 2, b 6.
    cluster.apply(
        node("n1"), policy("volcano", queueSource="Volcano"),
        pod("pa", "a", "8", "1Gi"), pod("pb", "b", "8", "1Gi"),
        volcano_queue("a", weight=1, capability={"cpu": 8}),
        volcano_queue("b", weight=3, parent="root"),
    )  # fmt: skip
    eventually(lambda: deserved_cpu(cluster, "a") == "2", timeout=SETTLE)
    eventually(lambda: deserved_cpu(cluster, "b") == "6", timeout=SETTLE)
    source_a = cluster.get("queues.scheduling.volcano.sh", "a")
    mirror_a, mirror_b = skq(cluster, "a"), skq(cluster, "b")
    assert mirror_a is not None
    assert mirror_b is not None
    assert mirror_a["metadata"]["labels"] == {SOURCE_LABEL: "volcano"}
    assert mirror_a["metadata"]["ownerReferences"] == [
        {"apiVersion": VOLCANO_API, "kind": "Queue", "name": "a",
         "uid": source_a["metadata"]["uid"], "controller": True}
    ]  # fmt: skip
    assert mirror_a["spec"] == {
        "weight": 1, "capability": {"cpu": 8}, "priority": 0, "reclaimable": True,
        "state": "Open",
    }  # fmt: skip
    assert mirror_b["spec"]["parent"] == "root"  # copied: queue trees are read
    assert LEFT_OUT not in mirror_b["metadata"].get("annotations", {})
    assert status(cluster, "skq", "a")["policy"] == "volcano"

    # A change on the Volcano side is copied, and shared: 4 and 4.
    cluster.kubectl(
        "patch", "queues.scheduling.volcano.sh", "b", "--type=merge", "-p",
        '{"spec": {"weight": 1}}',
    )  # fmt: skip
    eventually(lambda: deserved_cpu(cluster, "b") == "4", timeout=SETTLE)
    assert deserved_cpu(cluster, "a") == "4"
    assert (skq(cluster, "b") or {})["spec"]["weight"] == 1

    # A hand edit of a mirror is put back.
    cluster.kubectl("patch", "skq", "a", "--type=merge", "-p", '{"spec": {"weight": 5}}')
    eventually(lambda: (skq(cluster, "a") or {})["spec"]["weight"] == 1, timeout=SETTLE)

    # Once current, the mirrors are not written again.
    time.sleep(3)
    before = len(operator_writes(cluster.plane.audit_log))
    time.sleep(3)  # several debounce windows
    assert queue_writes(cluster, before) == []

    # The Volcano Queue deleted: its mirror too, by the operator (no garbage collector here).
    cluster.kubectl("delete", "queues.scheduling.volcano.sh", "b")
    eventually(lambda: skq(cluster, "b") is None, timeout=SETTLE)
    # Every write the operator made to a Queue itself, in order (the two creates in either).
    writes = queue_writes(cluster, writes_at_start)
    assert sorted(writes[:2]) == [
        "create scheduling.sharekeeper.io/a", "create scheduling.sharekeeper.io/b"
    ]  # fmt: skip
    assert writes[2:] == [
        "patch scheduling.sharekeeper.io/b", "patch scheduling.sharekeeper.io/a",
        "delete scheduling.sharekeeper.io/b",
    ]  # fmt: skip
    assert skq(cluster, "a") is not None


def test_a_queue_people_made_is_left_alone_and_says_it_shadows_the_volcano_queue(
    side_by_side: Cluster, mirroring: Operator
) -> None:
    cluster = side_by_side
    assert cluster.plane is not None
    writes_at_start = len(operator_writes(cluster.plane.audit_log))
    cluster.apply(node("n1"), policy("volcano", queueSource="Volcano"), queue("c", weight=7))
    made = skq(cluster, "c")
    assert made is not None
    cluster.apply(volcano_queue("c", weight=2), volcano_queue("ok", weight=2))
    shadowed = eventually(
        lambda: true_condition(cluster, "skq", "c", "VolcanoQueueShadowed"), timeout=SETTLE
    )
    assert shadowed["message"].startswith(
        "Volcano Queue c is not mirrored: this Queue has its name"
    )
    eventually(lambda: skq(cluster, "ok") is not None, timeout=SETTLE)
    conflict = eventually(lambda: events_on_volcano_queue(cluster, "c"), timeout=SETTLE)
    assert [reason for reason, _ in conflict] == ["MirrorConflict"]
    time.sleep(3)
    after = skq(cluster, "c")
    assert after is not None
    assert after["spec"] == made["spec"]
    assert after["metadata"].get("labels", {}) == made["metadata"].get("labels", {})
    assert "ownerReferences" not in after["metadata"]
    assert [w for w in queue_writes(cluster, writes_at_start) if w.endswith("/c")] == []


def test_a_volcano_queue_our_model_refuses_is_not_mirrored_and_told(
    side_by_side: Cluster, mirroring: Operator
) -> None:
    cluster = side_by_side
    cluster.apply(
        node("n1"), policy("volcano", queueSource="Volcano"),
        volcano_queue("zero", weight=0),
        volcano_queue("huge", capability={"memory": "9Ei"}),
        volcano_queue("upside-down", capability={"cpu": "1"}, guarantee={"resource": {"cpu": "2"}}),
        volcano_queue("fine"),
    )  # fmt: skip
    eventually(lambda: skq(cluster, "fine") is not None, timeout=SETTLE)
    for name, field in (
        ("zero", "spec.weight"), ("huge", "spec.capability"), ("upside-down", "guarantee")
    ):  # fmt: skip
        told = eventually(lambda n=name: events_on_volcano_queue(cluster, n), timeout=SETTLE)
        assert [reason for reason, _ in told] == ["NotMirrored"], told
        assert field in told[0][1]
        assert skq(cluster, name) is None
    assert "recomputeRounds" in mirroring.health()


def test_without_volcanos_queue_crd_nothing_is_mirrored_until_it_is_installed(
    without_volcano: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    """The policy asks for Volcano Queues where Volcano is not installed: one log line, the
    operator runs on (its own queues get their status); once the CRD is installed, Volcano
    Queues are mirrored without a restart."""
    cluster = without_volcano
    cluster.apply(node("n1"), policy("volcano", queueSource="Volcano"), queue("mine"))
    log = tmp_path / "operator.log"
    operator = start_operator(operator_kubeconfig, log, env=FAST_DISCOVERY)
    try:
        eventually(lambda: status(cluster, "skq", "mine").get("conditions"), timeout=SETTLE)
        eventually(lambda: "queues.scheduling.volcano.sh: not served" in log.read_text())
        time.sleep(3)  # a few discovery intervals (1 s): still one line
        said = [line for line in log.read_text().splitlines() if "volcano.sh: not served" in line]
        assert len(said) == 1, said
        code, body = operator.ready()
        assert code == 200
        assert "queues.scheduling.volcano.sh" in body["notServed"]

        install_volcano_queue_crd(cluster)
        cluster.apply(volcano_queue("late", weight=4))
        mirror = eventually(lambda: skq(cluster, "late"), timeout=SETTLE)
        assert mirror["spec"]["weight"] == 4
        assert operator.process.poll() is None, operator.tail()
    finally:
        operator.stop(signal.SIGKILL)
