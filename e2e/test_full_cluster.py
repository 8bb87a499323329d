"""The full control plane: the real scheduler and controllers, and kwok running fake nodes.

The full cluster is shared by the session, so these tests keep their pods on their own nodes
(a node selector) and remove their nodes and namespace when done.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import controlplane
from clusters import TARGET, Cluster, Installed
from fakenodes import fake_node, job, wait_job_complete, wait_nodes_ready
from operating import eventually

pytestmark = pytest.mark.skipif(TARGET != "local", reason="only for the local control plane")
NAMESPACE = "full-cluster"
NODES = ("full-cluster-1", "full-cluster-2")
ON_OUR_NODES = {"e2e.sharekeeper.io/nodes": "full-cluster"}
# Any gate holds a pod; not Sharekeeper's, which only namespaces that opted in to admission may
# carry (manifests/admission-policies.yaml).
GATE = "e2e.sharekeeper.io/hold"


@pytest.fixture(scope="module")
def full(full_cluster: Cluster) -> Iterator[Cluster]:
    """The full cluster with two fake nodes and the tests' namespace."""
    full_cluster.apply(
        *(fake_node(name, cpu="4", memory="16Gi", **ON_OUR_NODES) for name in NODES),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    yield full_cluster
    full_cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    full_cluster.kubectl("delete", "nodes", *NODES)


def pod(name: str, cpu: str, gates: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": ON_OUR_NODES,
        "containers": [
            {"name": "main", "image": "example/app:1",
             "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
        ],
    }  # fmt: skip
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def get_pod(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.get("pod", name, "-n", NAMESPACE)
    return got


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions", [])}


def test_fake_nodes_become_ready_and_keep_a_lease(full: Cluster) -> None:
    wait_nodes_ready(full, NODES)

    def leases() -> list[str]:
        held = full.get("leases", "-n", "kube-node-lease")["items"]
        names = sorted(lease["metadata"]["name"] for lease in held)
        assert set(NODES) <= set(names), names
        return names

    eventually(leases, timeout=10)
    node = full.get("node", NODES[0])
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "16Gi", "pods": "110"}


def test_a_job_is_scheduled_onto_fake_nodes_runs_and_completes(full: Cluster) -> None:
    wait_nodes_ready(full, NODES)
    # 3 x 2 CPUs on two 4-CPU nodes: the scheduler has to use both.
    batch = job("batch", NAMESPACE, completions=3, parallelism=3, cpu="2", run_for="2s")
    batch["spec"]["template"]["spec"]["nodeSelector"] = ON_OUR_NODES
    full.apply(batch)

    def running() -> list[dict[str, Any]]:
        pods = full.get("pods", "-n", NAMESPACE, "-l", "batch.kubernetes.io/job-name=batch")
        phases = [p["status"].get("phase") for p in pods["items"]]
        assert len(phases) == 3, phases
        assert all(phase in {"Running", "Succeeded"} for phase in phases), phases
        return list(pods["items"])

    pods = eventually(running, timeout=20)
    assert {p["spec"]["nodeName"] for p in pods} == set(NODES)
    assert all(p["status"]["podIP"] for p in pods)
    done = wait_job_complete(full, NAMESPACE, "batch", timeout=30)
    assert done["status"]["succeeded"] == 3
    pods = full.get("pods", "-n", NAMESPACE, "-l", "batch.kubernetes.io/job-name=batch")
    assert [p["status"]["phase"] for p in pods["items"]] == ["Succeeded"] * 3


def test_a_pod_that_fits_no_node_stays_pending(full: Cluster) -> None:
    wait_nodes_ready(full, NODES)
    full.apply(pod("too-big", cpu="64"))

    def unschedulable() -> dict[str, Any]:
        got = get_pod(full, "too-big")
        scheduled = conditions(got).get("PodScheduled", {})
        assert scheduled.get("reason") == "Unschedulable", got["status"]
        return got

    got = eventually(unschedulable, timeout=20)
    assert got["status"]["phase"] == "Pending"
    assert conditions(got)["PodScheduled"]["status"] == "False"
    assert "nodeName" not in got["spec"]

    def failed_scheduling() -> bool:
        selector = "--field-selector=involvedObject.name=too-big"
        events = full.get("events", "-n", NAMESPACE, selector)["items"]
        return "FailedScheduling" in {event["reason"] for event in events}

    eventually(failed_scheduling, timeout=10)  # events are recorded asynchronously


def test_a_scheduling_gate_holds_a_pod_until_it_is_removed(full: Cluster) -> None:
    wait_nodes_ready(full, NODES)
    full.apply(pod("gated", cpu="100m", gates=(GATE,)))

    def gated() -> dict[str, Any]:
        got = get_pod(full, "gated")
        assert conditions(got).get("PodScheduled", {}).get("reason") == "SchedulingGated"
        return got

    eventually(gated, timeout=10)
    time.sleep(2)  # the scheduler, which has a free node, leaves it alone
    held = gated()
    assert conditions(held)["PodScheduled"]["status"] == "False"
    assert "nodeName" not in held["spec"]

    patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
    full.kubectl("patch", "pod", "gated", "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch))

    def running() -> dict[str, Any]:
        got = get_pod(full, "gated")
        assert got["status"].get("phase") == "Running", got["status"]
        return got

    got = eventually(running, timeout=20)
    assert got["spec"]["nodeName"] in NODES
    assert conditions(got)["Ready"]["status"] == "True"
    assert got["status"]["podIP"]


def test_sharekeeper_installs_on_the_full_cluster(full_installed: Installed) -> None:
    admin = full_installed.cluster
    as_operator = Cluster(full_installed.operator_kubeconfig, admin.kubectl_path, admin.plane)
    assert as_operator.get("queues")["items"] == []


def test_stop_leaves_no_process_and_no_files(tmp_path: Path) -> None:
    plane = controlplane.start(tmp_path / "plane", full=True)
    try:
        assert set(plane.pids) == set(controlplane.PROCESSES)
        # A component stops and starts again as etcd and kube-apiserver do. Without leader
        # election the scheduler exits 1 on SIGTERM ("finished without leader elect").
        assert plane.stop_process("kube-scheduler") == 1
        plane.start_process("kube-scheduler")
        pids = dict(plane.pids)
        assert all(controlplane._pid_alive(pid) for pid in pids.values())
    finally:
        plane.stop()
    assert not any(controlplane._pid_alive(pid) for pid in pids.values())
    assert not (tmp_path / "plane").exists()
