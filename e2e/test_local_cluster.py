"""The local control plane itself: it starts, it is real, and it leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import controlplane
from clusters import TARGET, Cluster

pytestmark = pytest.mark.skipif(TARGET != "local", reason="only for the local control plane")
LOCAL_CLUSTER = Path(__file__).parent / "local-cluster"


def test_the_api_server_is_a_real_kube_apiserver(cluster: Cluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert (version["major"], version["minor"]) == (
        "1",
        controlplane.KUBERNETES_VERSION.split(".")[1],
    )
    assert version["gitVersion"] == f"v{controlplane.KUBERNETES_VERSION}"
    # RBAC is on: an unknown user is refused instead of being let in.
    denied = cluster.kubectl("get", "nodes", "--as=nobody", check=False)
    assert "Forbidden" in denied.stderr


def test_stop_leaves_no_process_and_no_files(tmp_path: Path) -> None:
    plane = controlplane.start(tmp_path / "plane")
    pids = dict(plane.pids)
    assert all(controlplane._pid_alive(pid) for pid in pids.values())
    plane.stop()
    assert not any(controlplane._pid_alive(pid) for pid in pids.values())
    assert not (tmp_path / "plane").exists()


def test_ports_handed_out_are_never_the_same_twice() -> None:
    """The kernel offers a closed probe socket's port again (about one in ten of 3,000 asks here),
    which once gave a node's kubelet and metrics-server the same port."""
    ports = [controlplane.free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)


def test_local_cluster_command_up_and_down(tmp_path: Path) -> None:
    env = {**os.environ, "SHAREKEEPER_LOCAL_CLUSTER_DIR": str(tmp_path / "lc")}
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, str(LOCAL_CLUSTER), *args], check=False, env=env, capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    started = run("up")
    assert started.returncode == 0, started.stderr
    shell = f'eval "{started.stdout}" && kubectl get namespace default -o name'
    listed = subprocess.run(
        ["bash", "-c", shell], check=False, env=env, capture_output=True, text=True
    )
    assert listed.stdout.strip() == "namespace/default", listed.stderr
    state = json.loads((tmp_path / "lc" / "state.json").read_text())
    assert run("up").stdout == started.stdout  # idempotent: reuses the running one
    assert run("down").returncode == 0
    assert not any(controlplane._pid_alive(int(pid)) for pid in state["pids"].values())
    assert not (tmp_path / "lc").exists()
    assert run("status").stdout.strip() == "down"


def local_cluster(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHAREKEEPER_LOCAL_CLUSTER_DIR": str(directory)}
    return subprocess.run(
        [sys.executable, str(LOCAL_CLUSTER), *args], check=False, env=env, capture_output=True,
        text=True, timeout=180,
    )  # fmt: skip


def test_local_cluster_command_up_full_replaces_a_plain_one(tmp_path: Path) -> None:
    directory, alive = tmp_path / "lc", controlplane._pid_alive
    state = directory / "state.json"
    assert local_cluster(directory, "up").returncode == 0
    plain = json.loads(state.read_text())
    started = local_cluster(directory, "up", "--full")
    assert started.returncode == 0, started.stderr
    assert "restarting it full" in started.stderr
    assert not any(alive(int(pid)) for pid in plain["pids"].values())
    full = json.loads(state.read_text())
    assert full["full"] is True
    assert set(full["pids"]) == set(controlplane.PROCESSES)
    assert local_cluster(directory, "status").stdout.split()[-1] == "mode=full"
    reused = local_cluster(directory, "up")  # a full one serves a plain `up` too
    assert "reusing the full local cluster" in reused.stderr
    assert reused.stdout == started.stdout
    assert local_cluster(directory, "down").returncode == 0
    assert not any(alive(int(pid)) for pid in full["pids"].values())
    assert not directory.exists()
