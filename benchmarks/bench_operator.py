"""The operator at scale on the local control plane: how fast a change shows, and what it costs.

    .venv/bin/python benchmarks/bench_operator.py [--nodes 1000] [--queues 200] [--pods 5000]

Starts etcd + kube-apiserver (e2e/controlplane.py), creates the nodes, queues, one policy and
bound pods, runs `sharekeeper run` as its ServiceAccount, and reports:

- the time from the operator's start until every queue's status is published;
- the latency from a queue's weight change to its new deserved share in status (several
  changes, each measured by polling the API server every 20 ms);
- the operator's writes per change and while idle, from the API server's audit log.

Timings are reported, never asserted (tests assert behaviour; this measures it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "e2e"))

import controlplane  # noqa: E402
from clusters import CRDS, MANIFESTS, Cluster  # noqa: E402
from objects import node, pod, policy, queue  # noqa: E402
from operating import eventually, operator_writes, start_operator  # noqa: E402


def create(cluster: Cluster, items: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    for chunk in range(0, len(items), 500):
        listing = {"apiVersion": "v1", "kind": "List", "items": items[chunk : chunk + 500]}
        cluster.kubectl("create", "-f", "-", input=json.dumps(listing), timeout=600)
    return time.perf_counter() - started


def deserved_cpu(cluster: Cluster, name: str) -> str | None:
    status = cluster.get("queue", name).get("status", {})
    value: str | None = status.get("deserved", {}).get("cpu")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=200)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--log", type=Path, help="keep the operator's log here")
    args = parser.parse_args()

    with controlplane.running() as plane, tempfile.TemporaryDirectory() as scratch:
        cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)
        cluster.kubectl("apply", "-f", str(CRDS))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.kubectl("apply", "-k", str(MANIFESTS))
        cluster.kubectl("create", "namespace", "team")
        names = [f"q-{i:04d}" for i in range(args.queues)]
        setup = create(cluster, [node(f"n-{i:04d}") for i in range(args.nodes)])
        setup += create(cluster, [queue(q, weight=1 + i % 7) for i, q in enumerate(names)])
        cluster.apply(policy("all"))
        # Demand is three times the 8 cpu per node: every queue asks for more than its share,
        # so every weight change moves deserved.
        cpu = str(max(1, 24 * args.nodes // args.pods))
        pods = [
            pod(f"p-{i:05d}", names[i % len(names)], cpu, "1Gi",
                node_name=f"n-{i % args.nodes:04d}" if i % 2 else None)
            for i in range(args.pods)
        ]  # fmt: skip
        setup += create(cluster, pods)
        token = cluster.kubectl(
            "create", "token", "sharekeeper", "-n", "sharekeeper", "--duration=2h"
        ).stdout.strip()
        kubeconfig = controlplane.write_token_kubeconfig(
            plane, Path(scratch) / "kubeconfig", token, "sharekeeper"
        )

        started = time.perf_counter()
        operator = start_operator(kubeconfig, args.log or Path(scratch) / "operator.log")
        try:

            def all_published() -> bool:
                items = cluster.get("queues")["items"]
                return all(i.get("status", {}).get("policy") == "all" for i in items)

            eventually(all_published, timeout=600, interval=0.5)
            first_sync = time.perf_counter() - started
            time.sleep(3)
            idle_from = len(operator_writes(plane.audit_log))
            time.sleep(10)
            idle_writes = len(operator_writes(plane.audit_log)) - idle_from

            latencies, writes = [], []
            for change in range(args.changes):
                target = names[change]
                before = deserved_cpu(cluster, target)
                written_before = len(operator_writes(plane.audit_log))
                cluster.kubectl(
                    "patch", "queue", target, "--type=merge",
                    "-p", json.dumps({"spec": {"weight": 200 + change}}),
                )  # fmt: skip
                changed_at = time.perf_counter()
                eventually(lambda t=target, b=before: deserved_cpu(cluster, t) != b,
                           timeout=60, interval=0.02)  # fmt: skip
                latencies.append(time.perf_counter() - changed_at)
                time.sleep(3)  # let the round's writes land before counting them
                writes.append(len(operator_writes(plane.audit_log)) - written_before)
        finally:
            operator.stop()

    print(f"cluster: {args.nodes} nodes, {args.queues} queues, {args.pods} pods "
          f"(created in {setup:.0f} s)")  # fmt: skip
    print(f"operator start -> every queue status published: {first_sync:.1f} s")
    print(f"writes in 10 s of an idle cluster: {idle_writes}")
    print(
        "weight change -> new deserved in status: "
        f"median {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s "
        f"({args.changes} changes)"
    )
    print(f"writes per weight change (every queue's deserved moves): {writes}")


if __name__ == "__main__":
    main()
