"""Overcommit and GPU-proportional reservation on a real API server: node annotations and the
policy's status.overcommit, written by the operator under its own RBAC, and nothing more.

Node patches are counted from the API server's audit log. The GPU node is the seed example:
8 GPUs, 74 CPU, 128G, keeping 8 CPU and 8G idle per idle GPU.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from clusters import TARGET, Cluster
from objects import node, pod, policy, queue, status
from operating import Operator, eventually, operator_writes

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts the operator as a process; kind runs the deployed one"
)

GPU = "nvidia.com/gpu"
OURS = "sharekeeper.io/"


def gpu_node(name: str) -> dict[str, Any]:
    obj = node(name, cpu="74", memory="128G", pool="gpu")
    obj["status"]["allocatable"][GPU] = obj["status"]["capacity"][GPU] = "8"
    obj["metadata"]["annotations"] = {"example.com/owner": "someone else"}
    return obj


def gpu_policy(factor: float = 1.5) -> dict[str, Any]:
    return policy(
        "gpu",
        nodeSelector={"matchLabels": {"pool": "gpu"}},
        overcommit={"factor": factor, "factors": {GPU: 1}},
        proportional={"enable": True, "resources": {GPU: {"cpu": "8", "memory": "8G"}}},
    )


def annotations(cluster: Cluster, name: str) -> dict[str, Any]:
    raw = cluster.get("node", name)["metadata"].get("annotations", {})
    return {k: (json.loads(v) if v.startswith("{") else v) for k, v in raw.items()}


def node_patches(cluster: Cluster, since: int) -> list[str]:
    assert cluster.plane is not None
    return [
        entry["objectRef"]["name"]
        for entry in operator_writes(cluster.plane.audit_log)[since:]
        if entry["verb"] == "patch" and entry["objectRef"].get("resource") == "nodes"
    ]


def write_count(cluster: Cluster) -> int:
    assert cluster.plane is not None
    return len(operator_writes(cluster.plane.audit_log))


@pytest.fixture
def two_policies(cluster_with: Cluster, operator: Operator) -> Cluster:
    cluster_with.apply(
        gpu_node("g1"),
        node("c1", cpu="16", memory="64Gi", pool="cpu"),
        node("c2", cpu="16", memory="64Gi", pool="cpu"),
        gpu_policy(),
        policy("cpu", nodeSelector={"matchLabels": {"pool": "cpu"}}, queueSelector={}),
        queue("train"),
    )
    eventually(lambda: OURS + "proportional-available" in annotations(cluster_with, "g1"))
    eventually(lambda: annotations(cluster_with, "c2").get(OURS + "policy") == "cpu")
    return cluster_with


def test_annotations_carry_factors_overcommitted_allocatable_and_reservation(
    two_policies: Cluster,
) -> None:
    g1 = annotations(two_policies, "g1")
    assert g1[OURS + "policy"] == "gpu"
    assert g1[OURS + "overcommit-factors"] == {"cpu": 1.5, "memory": 1.5, GPU: 1, "pods": 1.5}
    assert g1[OURS + "overcommit-allocatable"] == {
        "cpu": "111", "memory": "192G", GPU: "8", "pods": "750",
    }  # fmt: skip
    # 8 idle GPUs keep 64 CPU and 64G idle; 74 CPU and 128G are idle.
    assert g1[OURS + "proportional-reserved"] == {"cpu": "64", "memory": "64G"}
    assert g1[OURS + "proportional-available"] == {"cpu": "10", "memory": "64G"}
    assert g1["example.com/owner"] == "someone else"
    c1 = annotations(two_policies, "c1")
    assert c1[OURS + "overcommit-factors"] == {"cpu": 1.2, "memory": 1.2, "pods": 1.2}
    assert OURS + "proportional-reserved" not in c1  # the cpu policy keeps no reservation


def test_binding_pods_updates_reservation_and_policy_headroom(two_policies: Cluster) -> None:
    two_policies.apply(pod("cpu-job", "train", "8", "8G", node_name="g1"))
    # Idle 66 CPU / 120G, still 8 idle GPUs: 2 CPU and 56G left for pods without GPUs.
    eventually(
        lambda: (
            annotations(two_policies, "g1")[OURS + "proportional-available"]
            == {"cpu": "2", "memory": "56G"}
        )
    )
    overcommit = status(two_policies, "schedulerpolicy", "gpu")["overcommit"]
    assert overcommit["used"] == {"cpu": "8", "memory": "8G"}
    assert overcommit["headroom"]["cpu"] == "103"  # 74 x 1.5 - 8
    gpu_job = pod("gpu-job", "train", "8", "8G", node_name="g1")
    gpu_job["spec"]["containers"][0]["resources"]["requests"][GPU] = "1"
    gpu_job["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    two_policies.apply(gpu_job)
    # 7 idle GPUs keep 56 CPU / 56G; 58 CPU / 112G idle.
    eventually(
        lambda: (
            annotations(two_policies, "g1")[OURS + "proportional-reserved"]
            == {"cpu": "56", "memory": "56G"}
        )
    )
    assert annotations(two_policies, "g1")[OURS + "proportional-available"] == {
        "cpu": "2", "memory": "56G",
    }  # fmt: skip
    eventually(
        lambda: status(two_policies, "schedulerpolicy", "gpu")["overcommit"]["headroom"][GPU] == "7"
    )


def test_a_factor_change_patches_each_node_of_that_policy_once(two_policies: Cluster) -> None:
    time.sleep(2)  # let the first round's echoes settle
    before = write_count(two_policies)
    two_policies.apply(gpu_policy(factor=2))
    eventually(
        lambda: annotations(two_policies, "g1")[OURS + "overcommit-allocatable"]["cpu"] == "148"
    )
    time.sleep(2)
    assert node_patches(two_policies, before) == ["g1"]


def test_removing_a_policy_removes_only_our_annotations(two_policies: Cluster) -> None:
    two_policies.kubectl("delete", "schedulerpolicy", "gpu")
    eventually(lambda: not any(k.startswith(OURS) for k in annotations(two_policies, "g1")))
    assert annotations(two_policies, "g1")["example.com/owner"] == "someone else"
    assert annotations(two_policies, "c1")[OURS + "policy"] == "cpu"


def test_a_thousand_idle_nodes_cost_no_writes_and_a_change_one_each(
    cluster_with: Cluster, operator: Operator
) -> None:
    names = [f"bulk-{i:04d}" for i in range(1000)]
    bulk = policy(
        "bulk", nodeSelector={"matchLabels": {"pool": "bulk"}}, overcommit={"factor": 1.5}
    )
    listing = {"apiVersion": "v1", "kind": "List", "items": [node(n, pool="bulk") for n in names]}
    cluster_with.kubectl("create", "-f", "-", input=json.dumps(listing), timeout=300)
    cluster_with.apply(bulk, node("other", pool="elsewhere"))

    def annotated(cpu: str) -> bool:
        items = cluster_with.get("nodes", "-l", "pool=bulk")["items"]
        values = [
            i["metadata"].get("annotations", {}).get(OURS + "overcommit-allocatable") for i in items
        ]
        return len(items) == 1000 and all(v and json.loads(v)["cpu"] == cpu for v in values)

    eventually(lambda: annotated("12"), timeout=180)  # 8 cpu x 1.5
    time.sleep(3)
    idle_from = write_count(cluster_with)
    time.sleep(5)
    assert node_patches(cluster_with, idle_from) == [], "an unchanged cluster writes nothing"

    bulk["spec"]["overcommit"]["factor"] = 2
    cluster_with.apply(bulk)
    eventually(lambda: annotated("16"), timeout=180)
    time.sleep(3)
    patched = node_patches(cluster_with, idle_from)
    assert sorted(patched) == names, "one patch per affected node, none for any other"
