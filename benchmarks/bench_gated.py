"""What pods held behind a scheduling gate cost kube-scheduler while other pods come and go.

    PYTHONPATH=$PWD/operator .venv/bin/python benchmarks/bench_gated.py \\
        --out /tmp/gated.json --profile-dir /tmp/gated-profiles

Our admission gate holds a Job's pods as pods (``schedulingGates``), so kube-scheduler has every
held pod in its queue; Kueue holds a Job suspended, so its pods do not exist until admitted.
This measures what the difference costs the scheduler, on the full local control plane
(``e2e/controlplane.py``: kube-scheduler and kube-controller-manager without client rate
limits, as in ``bench_kueue.py``) with ``--nodes`` kwok nodes:

1. for each count of ``--gated`` in turn (ascending), bare pods with a scheduling gate are
   added in one namespace until that many wait, and the scheduler's own
   ``scheduler_pending_pods{queue="gated"}`` says so;
2. then ``--rounds`` times: ``--churn`` ungated pods (1 cpu each, so they all fit) are created,
   waited for until Running, deleted, and waited for until gone;
3. kube-scheduler's CPU seconds over step 2 (``/proc/<pid>/stat``) and the wall time are
   recorded; with ``--profile-dir`` a CPU profile of the scheduler (its ``/debug/pprof``) is
   taken over the same churn, and ``go tool pprof -top`` of it written beside.

Reported: per gated count, the scheduler's CPU over the churn and per churned pod, and in each
profile the share of samples under the scheduling queue's walk of its unschedulable pods
(``MoveAllToActiveOrBackoffQueue``). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "e2e"))

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
from bench_kueue import cpu_seconds, scheduler_client, start_cluster  # noqa: E402
from clusters import Cluster  # noqa: E402
from fakenodes import fake_node, wait_nodes_ready  # noqa: E402
from figures import provenance  # noqa: E402

Json = dict[str, Any]
NAMESPACE = "gated-bench"
GATE = "example.com/hold"
ROLE = "bench.sharekeeper.io/role"
WALK = ".MoveAllToActiveOrBackoffQueue"
"""The scheduling queue's pass over its unschedulable pods (gated ones included) on a cluster
event that may make them schedulable."""


def progress(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S} bench-gated] {message}", file=sys.stderr, flush=True)


def bare_pod(name: str, role: str, *, gated: bool) -> Json:
    spec: Json = {
        "containers": [
            {"name": "main", "image": "example/app:1",
             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ],
        "terminationGracePeriodSeconds": 0,
    }  # fmt: skip
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {ROLE: role}},
        "spec": spec,
    }


class Scheduler:
    """kube-scheduler of the plane: its process and its HTTPS endpoints on loopback."""

    def __init__(self, plane: controlplane.ControlPlane) -> None:
        self.plane = plane
        self.client = scheduler_client(plane)

    @property
    def pid(self) -> int:
        pid: int = self.plane.pids["kube-scheduler"]
        return pid

    def gated(self) -> int:
        found = re.search(
            r'^scheduler_pending_pods\{queue="gated"\} (\S+)$',
            self.client.get("/metrics").raise_for_status().text,
            re.MULTILINE,
        )
        return int(float(found.group(1))) if found else 0

    def profile(self, seconds: int, into: Path) -> None:
        kubeapi.cpu_profile(self.client, seconds, into)


def wait_for(what: str, done: Callable[[], bool], timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def pods_path() -> str:
    return kubeapi.collection_path("v1", "pods", NAMESPACE)


def pods_of(client: httpx.Client, role: str, *, running: bool = False) -> int:
    params = {"labelSelector": f"{ROLE}={role}"}
    if running:
        params["fieldSelector"] = "status.phase=Running"
    return len(client.get(pods_path(), params=params).raise_for_status().json()["items"])


def churn(access: kubeapi.ApiAccess, client: httpx.Client, size: int, tag: str) -> None:
    """``size`` ungated pods created, Running, deleted and gone."""
    kubeapi.create_all(access, (bare_pod(f"{tag}-{i:05d}", tag, gated=False) for i in range(size)))
    wait_for(f"{tag} Running", lambda: pods_of(client, tag, running=True) == size)
    client.delete(
        pods_path(), params={"labelSelector": f"{ROLE}={tag}", "gracePeriodSeconds": "0"}
    ).raise_for_status()
    wait_for(f"{tag} gone", lambda: pods_of(client, tag) == 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--node-cpu", type=int, default=32)
    parser.add_argument("--gated", default="0,5000,10000", help="gated counts, ascending")
    parser.add_argument("--churn", type=int, default=300, help="ungated pods a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile-dir", type=Path, help="kube-scheduler CPU profiles go here")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    levels = [int(level) for level in args.gated.split(",")]
    if levels != sorted(levels) or levels[0] < 0:
        parser.error("--gated: counts ascending, from 0")
    if args.churn > args.nodes * min(args.node_cpu, 110):
        parser.error("--churn: more pods than the nodes hold at once")
    if args.profile_dir:
        args.profile_dir.mkdir(parents=True, exist_ok=True)

    results: list[Json] = []
    with tempfile.TemporaryDirectory(prefix="sk-gated-") as workdir:
        plane = start_cluster(Path(workdir))
        try:
            cluster = Cluster(plane.kubeconfig, str(plane.kubectl), plane)
            access = kubeapi.ApiAccess.from_kubeconfig(plane.kubeconfig)
            nodes = [fake_node(f"gated-node-{i:03d}", cpu=str(args.node_cpu), memory="256Gi")
                     for i in range(args.nodes)]  # fmt: skip
            kubeapi.create_all(access, nodes)
            wait_nodes_ready(cluster, [node["metadata"]["name"] for node in nodes], timeout=120)
            cluster.kubectl("create", "namespace", NAMESPACE)
            scheduler = Scheduler(plane)
            waiting = 0
            with access.client(timeout=600) as client:
                for level in levels:
                    held = (bare_pod(f"held-{i:06d}", "held", gated=True)
                            for i in range(waiting, level))  # fmt: skip
                    kubeapi.create_all(access, held)
                    waiting = level
                    wait_for(f"{level} gated", lambda level=level: scheduler.gated() == level)
                    progress(f"{level} gated pods wait; churning")
                    profiler: threading.Thread | None = None
                    profile = None
                    started = time.monotonic()
                    cpu_before = cpu_seconds(scheduler.pid)
                    if args.profile_dir:
                        # The profile's length must be given up front: long enough for the churn
                        # (read as shares of its samples, idle time adds none).
                        profile = args.profile_dir / f"kube-scheduler-{level}-gated.pprof"
                        profiler = threading.Thread(
                            target=scheduler.profile, args=(20 * args.rounds, profile)
                        )
                        profiler.start()
                    for round_ in range(args.rounds):
                        churn(access, client, args.churn, f"churn-{level}-{round_}")
                    cpu = cpu_seconds(scheduler.pid) - cpu_before
                    wall = time.monotonic() - started
                    entry: Json = {
                        "gated": level,
                        "churned_pods": args.churn * args.rounds,
                        "scheduler_cpu_seconds": round(cpu, 3),
                        "scheduler_cpu_ms_per_churned_pod": round(
                            cpu * 1000 / (args.churn * args.rounds), 3
                        ),
                        "wall_seconds": round(wall, 1),
                    }
                    if profiler is not None and profile is not None:
                        profiler.join()
                        text = kubeapi.pprof_top(profile)
                        profile.with_suffix(".top.txt").write_text(text)
                        entry["profile"] = str(profile)
                        entry["walk_share_percent"] = kubeapi.cumulative_share(text, WALK)
                    results.append(entry)
                    progress(json.dumps(entry))
        finally:
            plane.stop()
    output = {
        "meta": {**provenance(REPO), "nodes": args.nodes, "node_cpu": args.node_cpu,
                 "churn": args.churn, "rounds": args.rounds},
        "results": results,
    }  # fmt: skip
    args.out.write_text(json.dumps(output, indent=2) + "\n")
    print(report(output))
    return 0


def report(output: Json) -> str:
    lines = ["| gated pods | scheduler CPU over the churn (s) | per churned pod (ms) | walk |",
             "|---:|---:|---:|---:|"]  # fmt: skip
    for entry in output["results"]:
        walk = entry.get("walk_share_percent")
        lines.append(
            f"| {entry['gated']:,} | {entry['scheduler_cpu_seconds']:.2f} | "
            f"{entry['scheduler_cpu_ms_per_churned_pod']:.2f} | "
            f"{'' if walk is None else f'{walk:.1f} %'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
