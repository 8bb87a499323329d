"""What our ValidatingAdmissionPolicies cost kube-apiserver on every pod update.

    PYTHONPATH=$PWD/operator .venv/bin/python benchmarks/bench_policies.py \\
        --policies none,manifests/admission-policies.yaml --out /tmp/policies.json

The policies of ``manifests/admission-policies.yaml`` match updates of every pod of the cluster
(and, in namespaces that opted in to admission, more of them), and the API server evaluates each
matching policy's CEL with the old and the new pod converted to unstructured form, per policy,
per request. This measures that cost on the local control plane (``e2e/controlplane.py``: etcd
and kube-apiserver alone): ``--pods`` pods in a namespace labelled for admission and as many in
one that is not, each merge-patched ``--rounds`` times by the admin (an annotation, as a
controller's bookkeeping would), ``--in-flight`` patches at a time; kube-apiserver's CPU seconds
over the patches (``/proc/<pid>/stat``) per patch. Each file of ``--policies`` (``none``: no
policy) is applied in turn, alone, ``--repeat`` times, alternating. Timings are reported, never
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "e2e"))

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
from bench_kueue import cpu_seconds  # noqa: E402
from clusters import Cluster  # noqa: E402
from figures import provenance  # noqa: E402
from sharekeeper.model.pods import ADMISSION_GATE  # noqa: E402

Json = dict[str, Any]
OPTED_IN, PLAIN = "policies-opted-in", "policies-plain"
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def progress(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S} bench-policies] {message}", file=sys.stderr, flush=True)


def pod(namespace: str, index: int) -> Json:
    """A pod as our webhook leaves it: naming a queue, and gated where admission is on."""
    spec: Json = {
        "containers": [{"name": "main", "image": "example/app:1",
                        "resources": {"requests": {"cpu": "100m"}}}],
    }  # fmt: skip
    if namespace == OPTED_IN:
        spec["schedulingGates"] = [{"name": ADMISSION_GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{index:05d}", "namespace": namespace,
                     "labels": {"sharekeeper.io/queue": "bench"}},
        "spec": spec,
    }  # fmt: skip


def documents(source: str) -> list[Json]:
    if source == "none":
        return []
    found = [d for d in yaml.safe_load_all(Path(source).read_text()) if d]
    return [d for d in found if d["kind"] in POLICY_KINDS]


def install(cluster: Cluster, source: str) -> int:
    """The policies of ``source`` alone in force; how many."""
    cluster.kubectl("delete", "validatingadmissionpolicybindings,validatingadmissionpolicies",
                    "--all", "--wait=true")  # fmt: skip
    wanted = documents(source)
    if wanted:
        cluster.apply(*wanted)
    # The API server reads policies through an informer: give it time to see the change.
    time.sleep(5.0)
    return sum(1 for d in wanted if d["kind"] == POLICY_KINDS[0])


async def patch_all(access: kubeapi.ApiAccess, paths: list[str], rounds: int, flight: int) -> int:
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for round_ in range(rounds):
        for path in paths:
            queue.put_nowait((path, round_))
    headers = {"Content-Type": "application/merge-patch+json"}
    done = 0

    async def worker(client: Any) -> None:
        nonlocal done
        while not queue.empty():
            path, round_ = queue.get_nowait()
            body = {"metadata": {"annotations": {"bench.sharekeeper.io/round": str(round_)}}}
            response = await client.patch(path, content=json.dumps(body), headers=headers)
            response.raise_for_status()
            done += 1

    async with access.async_client(flight) as client:
        await asyncio.gather(*(worker(client) for _ in range(flight)))
    return done


def measure(
    plane: controlplane.ControlPlane, access: kubeapi.ApiAccess, namespace: str, args: Any
) -> float:
    """kube-apiserver's CPU milliseconds per patch, patching every pod of ``namespace``."""
    base = kubeapi.collection_path("v1", "pods", namespace)
    paths = [f"{base}/pod-{i:05d}" for i in range(args.pods)]
    pid = plane.pids["kube-apiserver"]
    before = cpu_seconds(pid)
    patched = asyncio.run(patch_all(access, paths, args.rounds, args.in_flight))
    return (cpu_seconds(pid) - before) * 1000 / patched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policies",
        default="none,manifests/admission-policies.yaml",
        help="policy files to compare, comma-separated; none: no policy",
    )
    parser.add_argument("--pods", type=int, default=500, help="pods in each namespace")
    parser.add_argument("--rounds", type=int, default=10, help="patches of each pod")
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sources = args.policies.split(",")
    for source in sources:
        documents(source)  # a missing or broken file fails here, before the control plane
    samples: dict[str, dict[str, list[float]]] = {s: {OPTED_IN: [], PLAIN: []} for s in sources}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="sk-policies-") as workdir:
        plane = controlplane.start(Path(workdir))
        try:
            cluster = Cluster(plane.kubeconfig, str(plane.kubectl), plane)
            access = kubeapi.ApiAccess.from_kubeconfig(plane.kubeconfig)
            cluster.apply(
                {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": OPTED_IN, "labels": {"sharekeeper.io/admission": "enabled"}}},
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLAIN}},
            )  # fmt: skip
            for namespace in (OPTED_IN, PLAIN):
                kubeapi.create_all(access, (pod(namespace, i) for i in range(args.pods)))
            for repetition in range(args.repeat):
                for source in sources if repetition % 2 == 0 else reversed(sources):
                    counts[source] = install(cluster, source)
                    for namespace in (OPTED_IN, PLAIN):
                        milli = measure(plane, access, namespace, args)
                        samples[source][namespace].append(round(milli, 3))
                        progress(f"{source} {namespace}: {milli:.3f} ms a patch")
        finally:
            plane.stop()
    output = {
        "meta": {**provenance(REPO), "pods": args.pods, "rounds": args.rounds,
                 "in_flight": args.in_flight, "kubernetes": controlplane.KUBERNETES_VERSION},
        "policies": {source: {"count": counts[source],
                              "apiserver_cpu_ms_per_patch": samples[source]}
                     for source in sources},
    }  # fmt: skip
    args.out.write_text(json.dumps(output, indent=2) + "\n")
    print(report(output))
    return 0


def report(output: Json) -> str:
    lines = ["| policies | count | opted-in namespace (ms a patch) | other namespace |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for source, entry in output["policies"].items():
        per = entry["apiserver_cpu_ms_per_patch"]
        cells = [f"{statistics.median(per[n]):.3f} ({', '.join(f'{x:.3f}' for x in per[n])})"
                 for n in (OPTED_IN, PLAIN)]  # fmt: skip
        lines.append(f"| {source} | {entry['count']} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
