"""Reclaim on the full local cluster: how long from a reclaimer's ``afterSeconds`` to its pod
running.

    .venv/bin/python benchmarks/bench_reclaim_cluster.py [--nodes 4] [--wanted 8] [--runs 3]

The cluster in a box (``controlplane.start(full=True)``: kube-scheduler, kube-controller-manager
and kwok), Sharekeeper's CRDs and manifests, and the operator serving the admission webhook
(``e2e/admitting.py``). Each run, in a namespace of its own: queue a (the policy borrows) fills
``--nodes`` kwok nodes of 8 cpu with a Job of 1-cpu pods that run for 10 minutes; queue b, of
equal weight, then submits a Job of ``--wanted`` 1-cpu pods. Reclaim is On with
``afterSeconds`` AFTER and a bound of ``--wanted`` evictions a round, so every one of b's pods
is a reclaimer as soon as it has waited AFTER.

The benchmark polls the namespace's pods every POLL seconds (one LIST) and keeps, for each
pod, when it was first seen in each state: created (first seen), evicted (a deletion
timestamp, or gone from the list), released (the admission gate gone), bound (a node) and
running (phase Running).
Per reclaimer, the figure is ``running - (created + AFTER)``: what reclaim adds to the wait
the policy asks for, including the victims' eviction, kwok deleting them, the gate's release,
kube-scheduler's binding and kwok starting the pod; split at the gate's release. Each instant
is seen up to POLL late.
Nothing is asserted: the figures go to ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "e2e"))

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
import objects  # noqa: E402
from admitting import RECLAIM_AFTER_SECONDS as AFTER  # noqa: E402
from admitting import admitting_operator, held, reclaim_policy  # noqa: E402
from clusters import Cluster, Installed, install_sharekeeper  # noqa: E402
from fakenodes import fake_node, job  # noqa: E402
from figures import nearest_rank  # noqa: E402
from tenants import ADMISSION_LABEL  # noqa: E402

POLL = 0.25  # seconds between two LISTs of the namespace's pods
QUEUE_LABEL = "sharekeeper.io/queue"


@dataclass
class Seen:
    """When a pod was first seen in each state (monotonic seconds)."""

    queue: str
    created: float
    states: dict[str, float] = field(default_factory=dict)


def states_of(pod: dict[str, Any]) -> list[str]:
    found = []
    if pod["metadata"].get("deletionTimestamp"):
        found.append("evicted")
    if not held(pod):
        found.append("released")
    if pod["spec"].get("nodeName"):
        found.append("bound")
    if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp"):
        found.append("running")
    return found


class Watcher:
    """The namespace's pods, polled: first-seen instants per pod and state."""

    def __init__(self, access: kubeapi.ApiAccess, namespace: str) -> None:
        self.client = access.client()
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.pods: dict[str, Seen] = {}

    def poll(self) -> None:
        now = time.monotonic()
        listed = set()
        for pod in kubeapi.items(self.client, self.path):
            name = pod["metadata"]["name"]
            listed.add(name)
            seen = self.pods.setdefault(
                name, Seen(pod["metadata"].get("labels", {}).get(QUEUE_LABEL, ""), now)
            )
            for state in states_of(pod):
                seen.states.setdefault(state, now)
        # kwok deletes an evicted pod at once: gone between two polls is evicted too.
        for name, seen in self.pods.items():
            if name not in listed:
                seen.states.setdefault("evicted", now)

    def until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if done(self):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not done after {timeout:.0f} s")
            time.sleep(POLL)

    def running(self, queue: str) -> list[Seen]:
        return [s for s in self.pods.values() if s.queue == queue and "running" in s.states]


@contextmanager
def cluster_in_a_box(directory: Path, nodes: int, wanted: int) -> Iterator[Installed]:
    with controlplane.running(full=True) as plane:
        cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl),
                          plane=plane)  # fmt: skip
        installed = install_sharekeeper(cluster, directory)
        with admitting_operator(
            installed,
            directory / "operator.log",
            nodes=[fake_node(f"kwok-{i}", cpu="8", memory="64Gi") for i in range(nodes)],
            apply=[reclaim_policy("On", max_evictions=wanted)],
        ):
            yield installed


def one_run(installed: Installed, run: int, nodes: int, wanted: int) -> dict[str, float]:
    cluster = installed.cluster
    namespace = f"reclaim-{run}"
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("label", "namespace", namespace, ADMISSION_LABEL)
    cluster.apply(objects.queue("a"), objects.queue("b"))
    watcher = Watcher(kubeapi.ApiAccess.from_kubeconfig(Path(cluster.kubeconfig)), namespace)
    fill = 8 * nodes
    cluster.apply(job("fill", namespace, completions=fill, parallelism=fill, cpu="1",
                      memory="64Mi", run_for="600s", labels={QUEUE_LABEL: "a"}))  # fmt: skip
    watcher.until(lambda w: len(w.running("a")) == fill, timeout=180)
    cluster.apply(job("want", namespace, completions=wanted, parallelism=wanted, cpu="1",
                      memory="64Mi", run_for="600s", labels={QUEUE_LABEL: "b"}))  # fmt: skip
    watcher.until(lambda w: len(w.running("b")) == wanted, timeout=300)
    reclaimers = [s for s in watcher.pods.values() if s.queue == "b"]
    victims = [s for s in watcher.pods.values() if s.queue == "a" and "evicted" in s.states]

    def spread(values: list[float]) -> tuple[float, float]:
        """Median and 99th percentile (nearest rank)."""
        return statistics.median(values), nearest_rank(values, 0.99)

    created = [s.created for s in reclaimers]
    total = spread([s.states["running"] - (s.created + AFTER) for s in reclaimers])
    to_release = spread([s.states["released"] - (s.created + AFTER) for s in reclaimers])
    to_run = spread([s.states["running"] - s.states["released"] for s in reclaimers])
    figures = {
        "evictions": float(len(victims)),
        "b's pods created over": max(created) - min(created),
        "after -> running, p50": total[0],
        "after -> running, p99": total[1],
        "after -> released, p50": to_release[0],
        "after -> released, p99": to_release[1],
        "released -> running, p50": to_run[0],
        "released -> running, p99": to_run[1],
    }
    cluster.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=120s")
    cluster.kubectl("delete", "queues", "--all", "--wait=false")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4, help="kwok nodes of 8 cpu")
    parser.add_argument("--wanted", type=int, default=8, help="queue b's pods (1 cpu each)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-reclaim-") as work,
        cluster_in_a_box(Path(work), args.nodes, args.wanted) as installed,
    ):
        runs = [one_run(installed, run, args.nodes, args.wanted) for run in range(args.runs)]
    print(f"\n{args.nodes} nodes x 8 cpu filled by queue a; queue b wants {args.wanted} x 1 cpu; "
          f"afterSeconds {AFTER}; polled every {POLL} s")  # fmt: skip
    names = list(runs[0])
    print("| figure (s) | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    for name in names:
        cells = " | ".join(f"{r[name]:.0f}" if name == "evictions" else f"{r[name]:.2f}"
                           for r in runs)  # fmt: skip
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()
