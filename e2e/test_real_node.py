"""The real node (``realnode.py``): pods run in containers, an in-place resize reaches the
container's CFS quota, metrics-server measures them, and the node, stopped or crashed, leaves
the host as it was.

Figures (pod start, resize to quota, node Ready) are printed, not asserted beyond generous
bounds: the machine is shared."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import realnode
from clusters import Cluster, NodeCluster, RealNodeBox
from nodepods import (
    BURN,
    busybox_pod,
    cfs_quota_cores,
    container_cgroup,
    wait_pod_usage,
    wait_running,
)
from operating import eventually

NAMESPACE = "default"
LOCAL_CLUSTER = Path(__file__).parent / "local-cluster"


@pytest.fixture
def pods(real_node: NodeCluster) -> Iterator[Cluster]:
    """The real node's cluster; the test's pods in ``default`` are deleted at the end."""
    yield real_node.cluster
    if real_node.cluster.plane is not None and real_node.cluster.plane.alive():
        real_node.cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--wait=true",
                                  "--timeout=60s", check=False)  # fmt: skip


def test_a_pod_runs_is_resized_in_place_and_measured(real_node: NodeCluster, pods: Cluster) -> None:
    """A burner limited to 500m runs (its container's CFS quota 0.5 core); resized to 300m
    through ``pods/resize`` its quota follows without a restart, and metrics-server, through
    the API server, reports its usage near the new limit."""
    node = real_node.node
    print(f"\nnode Ready {node.ready_seconds:.1f}s after the kubelet started")
    pods.apply(busybox_pod("burn", NAMESPACE, BURN, cpu_request="100m", cpu_limit="500m"))
    started = wait_running(pods, NAMESPACE, "burn")
    print(f"pod Running and Ready {started:.1f}s after it was created")
    cgroup = container_cgroup(pods, node, NAMESPACE, "burn")
    assert cfs_quota_cores(cgroup) == pytest.approx(0.5)

    resize = {"spec": {"containers": [{"name": "main", "resources": {
        "requests": {"cpu": "100m", "memory": "32Mi"},
        "limits": {"cpu": "300m", "memory": "32Mi"}}}]}}  # fmt: skip
    asked = time.monotonic()
    pods.kubectl("patch", "pod", "burn", "-n", NAMESPACE, "--subresource=resize",
                 "--type=strategic", "-p", json.dumps(resize))  # fmt: skip
    eventually(lambda: cfs_quota_cores(cgroup) == pytest.approx(0.3), timeout=20, interval=0.05)
    print(f"resize 500m -> 300m in the container's CFS quota after {time.monotonic() - asked:.2f}s")
    pod = pods.get("pod", "burn", "-n", NAMESPACE)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

    def measured_at_new_limit() -> float:
        usage = wait_pod_usage(pods, NAMESPACE, "burn")
        assert 0.15 < usage < 0.36, f"burn uses {usage:.3f} cores, limited to 0.3"
        return usage

    usage = eventually(measured_at_new_limit, timeout=90, interval=2)
    print(f"metrics-server: burn uses {usage * 1000:.0f}m, limited to 300m")


def test_a_stopped_node_leaves_the_host_as_it_was(real_node_box: RealNodeBox) -> None:
    """With a pod running the host has changed (processes, cgroups, sysctls, the bridge and the
    pod's veth, its network namespace; the mounts are in the node's own mount namespace); once
    the node is stopped, nothing of it is left (the next test to ask gets a new node)."""
    running = real_node_box.get()
    running.cluster.apply(busybox_pod("sleeper", NAMESPACE, "sleep 3600"))
    wait_running(running.cluster, NAMESPACE, "sleeper")
    during = realnode.host_changes(real_node_box.before, realnode.host_snapshot())
    # The kubelet's sysctls change nothing on a host that has them already.
    kubelet_sysctls = {"vm/overcommit_memory=1", "kernel/panic=10", "kernel/panic_on_oops=1"}
    sysctls = {"sysctls"} if kubelet_sysctls - set(real_node_box.before["sysctls"]) else set()
    assert {"processes", "cgroups", "links", "netns", *sysctls} <= during.keys(), during
    stopped = time.monotonic()
    changes = real_node_box.close()
    print(f"\nnode and control plane stopped in {time.monotonic() - stopped:.1f}s")
    assert changes == {}


def test_a_crashed_node_is_cleaned_up_by_the_next_start(real_node_box: RealNodeBox) -> None:
    """containerd, the kubelet and metrics-server are killed (as when the test run dies), which
    leaves the node's namespaces, the shim and the containers running, their cgroups, network
    and the kubelet's sysctls; what the next start does first (``cleanup_crashed``, from the
    node's host-wide record) removes all of it. While the node ran, it refused: one node per
    host."""
    running = real_node_box.get()
    node = running.node
    running.cluster.apply(busybox_pod("sleeper", NAMESPACE, "sleep 3600"))
    wait_running(running.cluster, NAMESPACE, "sleeper")
    with pytest.raises(RuntimeError, match="only one node runs on a host"):
        realnode.cleanup_crashed()
    for pid in node.pids.values():
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    left = realnode.host_changes(real_node_box.before, realnode.host_snapshot())
    shims = [p for p in left["processes"]["new"] if "containerd-shim" in p]
    assert shims, f"no shim outlived containerd: {left}"
    realnode.cleanup_crashed()
    assert not node.state_dir.exists()
    assert not list(realnode.RECORDS.glob("*.json"))
    assert realnode.host_changes(real_node_box.before, realnode.host_snapshot()) == {}
    assert real_node_box.close() == {}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory short enough for the node's sockets (``realnode.SOCKET_PATH_MAX``), which a
    pytest-xdist worker's ``tmp_path`` is not."""
    directory = Path(tempfile.mkdtemp(prefix="sk-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_local_cluster_up_node_and_down(real_node_box: RealNodeBox, short_dir: Path) -> None:
    """``e2e/local-cluster up --node`` (the session's node stopped first: one node per host)
    starts a plain control plane with a Ready node, ``up --node`` again reuses both, and
    ``down`` leaves the host as it was."""
    assert real_node_box.close() == {}
    before = realnode.host_snapshot()
    env = {**os.environ, "SHAREKEEPER_LOCAL_CLUSTER_DIR": str(short_dir / "lc")}

    def local_cluster(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(LOCAL_CLUSTER), *args], check=False, env=env,
                              capture_output=True, text=True, timeout=180)  # fmt: skip

    try:
        started = local_cluster("up", "--node")
        assert started.returncode == 0, started.stderr
        assert "real node 127.0.0.1 Ready" in started.stderr
        again = local_cluster("up", "--node")
        assert "reusing the real node" in again.stderr, again.stderr
        assert local_cluster("status").stdout.endswith("node=127.0.0.1\n")
        shell = f'eval "{started.stdout}" && kubectl get node 127.0.0.1 --no-headers'
        listed = subprocess.run(["bash", "-c", shell], check=False, env=env,
                                capture_output=True, text=True)  # fmt: skip
        assert listed.stdout.split()[:2] == ["127.0.0.1", "Ready"], listed.stderr
    finally:
        stopped = local_cluster("down")
    assert stopped.returncode == 0, stopped.stderr
    assert not (short_dir / "lc").exists()
    assert realnode.host_changes(before, realnode.host_snapshot()) == {}


def test_a_node_directory_too_long_for_its_sockets_is_refused_before_anything_starts() -> None:
    reason = realnode.unavailable()
    if reason:
        pytest.skip(reason)
    too_long = Path(tempfile.gettempdir()) / ("d" * 90)
    with pytest.raises(RuntimeError, match="too long for containerd"):
        realnode.start(SimpleNamespace(workdir=too_long))  # type: ignore[arg-type]
    assert not too_long.exists()
