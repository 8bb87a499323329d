"""What a tenant writes on its own pods exempts nothing from QoS: a system priority class named
outside kube-system counts as priority 0 (for exemption, ``maxPriority`` and sorting), and a
DaemonSet owner reference exempts a pod only when that DaemonSet exists.

Pods are read the way the operator reads them (``model.qos``, the cluster store), so the engine
sees what it would see in a cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.qos import QosNode
from sharekeeper.engine.qos.candidates import candidate_pods, protected
from sharekeeper.engine.qos.inputs import (
    HIGHEST_USER_PRIORITY,
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NAMESPACES,
)
from sharekeeper.engine.qos.sorting import CPU_SORTER, GENERAL_SORTER
from sharekeeper.model.qos import effective_priority, pod_view, with_usage

from .builders import candidates_with

NODE_CRITICAL = 2_000_001_000
DS_UID = "0f3c1a52-6d0e-4b8e-9d0a-3b1f2e4c5d6a"


def k8s_pod(
    name: str,
    namespace: str = "team-b",
    *,
    priority: int = 0,
    qos: str = "BestEffort",
    owners: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "ownerReferences": owners or [],
        },
        "spec": {
            "nodeName": "n1",
            "priority": priority,
            "containers": [{"name": "main", "resources": {}}],
        },
        "status": {"phase": "Running", "qosClass": qos, "startTime": "2026-01-01T00:00:00Z"},
    }


def daemonset_owner(api_version: str = "apps/v1", uid: str = DS_UID, name: str = "agent") -> Any:
    return {
        "apiVersion": api_version,
        "kind": "DaemonSet",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def daemonset(name: str = "agent", namespace: str = "team-b", uid: str = DS_UID) -> Any:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"selector": {"matchLabels": {"app": name}}},
    }


# --- the effective priority -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "priority", "effective"),
    [
        ("team-b", SYSTEM_CLUSTER_CRITICAL, 0),  # system-cluster-critical, named by a tenant
        ("team-b", NODE_CRITICAL, 0),  # system-node-critical
        ("team-b", 2**31 - 1, 0),
        ("team-b", HIGHEST_USER_PRIORITY, HIGHEST_USER_PRIORITY),  # an admin's class: as is
        ("team-b", SYSTEM_CLUSTER_CRITICAL - 1, SYSTEM_CLUSTER_CRITICAL - 1),
        ("team-b", -5, -5),
        ("kube-system", SYSTEM_CLUSTER_CRITICAL, SYSTEM_CLUSTER_CRITICAL),
        ("kube-system", NODE_CRITICAL, NODE_CRITICAL),
    ],
)
def test_a_system_priority_counts_only_in_a_system_namespace(
    namespace: str, priority: int, effective: int
) -> None:
    assert effective_priority(namespace, priority) == effective
    assert pod_view(k8s_pod("p", namespace, priority=priority)).priority == effective


def test_the_system_namespaces_are_one_set() -> None:
    assert frozenset({"kube-system"}) == SYSTEM_NAMESPACES


def test_a_forged_system_priority_exempts_nothing_and_sorts_as_zero() -> None:
    """Attack: a tenant pod names system-cluster-critical; before, it was never evicted and the
    check evicted another team's Guaranteed pod instead while the tenant kept its CPU."""
    forged = pod_view(k8s_pod("hog", priority=SYSTEM_CLUSTER_CRITICAL))
    victim = pod_view(k8s_pod("train-0", "team-a", qos="Guaranteed"))
    system = pod_view(k8s_pod("dns", "kube-system", priority=SYSTEM_CLUSTER_CRITICAL))
    assert not protected(forged)
    assert protected(system)
    n = with_usage(QosNode("n1"), [forged, victim, system])
    # maxPriority (default 999) lets the forged pod in: it is priority 0 to us.
    candidates = candidate_pods([candidates_with()], n)
    assert [str(p.key) for p in candidates] == ["team-a/train-0", "team-b/hog"]
    # A policy that allows every priority still never gets the kube-system pod.
    everything = candidate_pods([candidates_with(max_priority=2**31 - 1)], n)
    assert [p.key.name for p in everything] == ["train-0", "hog"]
    # BestEffort first, and its priority does not push it behind anyone.
    assert [p.key.name for p in CPU_SORTER.sort(candidates)] == ["hog", "train-0"]


def test_among_equals_the_forged_pod_does_not_go_last() -> None:
    """Same QoS class: sorted by priority, a forged system priority would have put the tenant's
    pod after every other; read as 0, it goes before a pod of priority 100."""
    views = [
        pod_view(k8s_pod("hog", priority=SYSTEM_CLUSTER_CRITICAL)),
        pod_view(k8s_pod("batch", "team-a", priority=100)),
    ]
    assert [p.key.name for p in GENERAL_SORTER.sort(views)] == ["hog", "batch"]
    # Under maxPriority 50, the pod with priority 100 is out; the forged one is in.
    n = with_usage(QosNode("n1"), views)
    assert [p.key.name for p in candidate_pods([candidates_with(max_priority=50)], n)] == ["hog"]


# --- DaemonSet pods: only a DaemonSet that exists ----------------------------------------------


@pytest.mark.parametrize(
    ("owner", "exempt"),
    [
        # The garbage collector cannot resolve apps/v1beta2 (not served since 1.16): the pod stays.
        (daemonset_owner("apps/v1beta2"), False),
        (daemonset_owner("extensions/v1beta1"), False),
        (daemonset_owner(uid="no-such-uid"), False),  # no DaemonSet has this UID
        (daemonset_owner(name="other"), False),  # the UID is a DaemonSet of another name
        ({**daemonset_owner(), "controller": False}, False),  # an owner, not the controller
        ({**daemonset_owner(), "uid": None}, False),
        (daemonset_owner(), True),  # the DaemonSet controller's own reference
    ],
)
def test_a_daemonset_owner_exempts_only_when_the_daemonset_exists(
    owner: dict[str, Any], exempt: bool
) -> None:
    obj = k8s_pod("p", owners=[owner])
    known = {("team-b", "agent", DS_UID)}
    assert protected(pod_view(obj, daemonsets=known)) is exempt
    store = ClusterStore()
    store.load([daemonset(), obj])
    (view,) = store.pods.qos_views_on("n1")
    assert view.daemonset is exempt


def test_a_daemonset_of_another_namespace_exempts_nothing() -> None:
    """Owner references do not cross namespaces: claiming kube-system's DaemonSet by its UID
    (which any reader of DaemonSets can see) does not make a tenant's pod one of its."""
    obj = k8s_pod("p", owners=[daemonset_owner()])
    store = ClusterStore()
    store.load([daemonset(namespace="kube-system"), obj])
    (view,) = store.pods.qos_views_on("n1")
    assert not view.daemonset
    assert not protected(view)


def test_the_store_follows_daemonsets_as_they_come_and_go() -> None:
    """Lists arrive in any order, and DaemonSets are deleted and created again."""
    store = ClusterStore()
    obj = k8s_pod("p", owners=[daemonset_owner()])
    store.pods.listed([copy.deepcopy(obj)])
    assert not store.pods.qos_views_on("n1")[0].daemonset  # its DaemonSet is not known yet
    store.daemonsets.listed([daemonset()])
    assert store.pods.qos_views_on("n1")[0].daemonset
    record = store.pods.records[("team-b", "p")]
    assert record.qos is not None
    assert record.qos.daemonset
    # An update of the pod keeps what the store knows.
    obj["metadata"]["labels"] = {"x": "y"}
    store.pods.event("MODIFIED", copy.deepcopy(obj))
    assert store.pods.qos_views_on("n1")[0].daemonset
    store.daemonsets.event("DELETED", daemonset())
    assert not store.pods.qos_views_on("n1")[0].daemonset
    # Another DaemonSet of the same name is another UID: the pod is not its.
    store.daemonsets.event("ADDED", daemonset(uid="a-new-uid"))
    assert not store.pods.qos_views_on("n1")[0].daemonset
    # A relist that finds the original again.
    store.daemonsets.list_started()
    store.daemonsets.listed([daemonset()])
    store.daemonsets.list_finished()
    assert store.pods.qos_views_on("n1")[0].daemonset
    assert store.daemonsets.ids == {("team-b", "agent", DS_UID)}
    store.pods.event("DELETED", obj)
    assert store.pods.qos_views_on("n1") == []
    # Nothing is left indexed for the pod that is gone.
    store.daemonsets.event("DELETED", daemonset())
    assert store.daemonsets.ids == set()


def test_a_daemonset_without_a_uid_is_unreadable() -> None:
    store = ClusterStore()
    store.daemonsets.listed([{"metadata": {"name": "agent", "namespace": "team-b"}}])
    assert store.daemonsets.ids == set()
    assert "metadata.uid: is required" in store.daemonsets.problems[("team-b", "agent")]


def test_the_qos_check_evicts_the_tenant_not_the_victim() -> None:
    """The whole attack on one node: a forged system priority and a forged DaemonSet owner
    (apps/v1beta2) on a tenant's busy BestEffort pods; another team's Guaranteed pod. Only the
    tenant's pods are candidates ahead of the victim, busiest first."""
    store = ClusterStore()
    store.load([
        daemonset(),
        k8s_pod("critical", priority=SYSTEM_CLUSTER_CRITICAL),
        k8s_pod("fake-ds", owners=[daemonset_owner("apps/v1beta2")]),
        k8s_pod("real-ds", owners=[daemonset_owner()]),
        k8s_pod("train-0", "team-a", qos="Guaranteed"),
    ])  # fmt: skip
    views = store.pods.qos_views_on("n1")
    n = with_usage(QosNode("n1"), views)
    order = CPU_SORTER.sort(candidate_pods([candidates_with()], n))
    assert [p.key.name for p in order] == ["critical", "fake-ds", "train-0"]
