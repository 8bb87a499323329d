"""What one status write costs the operator's own process: the clients on httpx's transport and
on ours (``sharekeeper.kube.transport``).

    PYTHONPATH=$PWD/operator .venv/bin/python benchmarks/bench_client.py --out /tmp/client.json

On the local control plane (``e2e/controlplane.py``: etcd and kube-apiserver alone, TLS as in
every test), ``--queues`` Queues, each status merge-patched through ``KubeWriter.patch_status``
(the operator's write path: the client, its authentication, the retry policy), ``--in-flight``
at a time as the outbox sends them; this process's CPU seconds (``time.process_time``) per
patch, for each transport in turn, ``--repeat`` times, alternating. The API server runs in its
own processes: its CPU is not counted. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "e2e"))

import httpx2 as httpx  # noqa: E402
from lightkube import AsyncClient  # noqa: E402
from lightkube.config.client_adapter import AsyncClient as AsyncHttp  # noqa: E402
from lightkube.config.client_adapter import ConnectionParams  # noqa: E402
from lightkube.config.kubeconfig import KubeConfig  # noqa: E402

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
from clusters import CRDS, Cluster  # noqa: E402
from figures import provenance  # noqa: E402
from sharekeeper.kube.clients import FIELD_MANAGER, Clients, connect  # noqa: E402
from sharekeeper.kube.writing import KubeWriter  # noqa: E402

Json = dict[str, Any]


def _on_httpx() -> Clients:
    config = KubeConfig.from_env().get()
    return Clients(AsyncClient(config, field_manager=FIELD_MANAGER), AsyncHttp(config, PARAMS))


PARAMS = ConnectionParams(timeout=httpx.Timeout(60.0, connect=10.0))
TRANSPORTS: dict[str, Callable[[], Clients]] = {"httpx": _on_httpx, "aiohttp": connect}
"""The clients with httpx's own transport, and as the operator makes them (``kube.clients``)."""


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} bench-client] {message}", file=sys.stderr, flush=True)


def queue(index: int) -> Json:
    return {"apiVersion": "scheduling.sharekeeper.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": f"q-{index:05d}"}, "spec": {"weight": 1}}  # fmt: skip


def status(index: int, round_: int) -> Json:
    """A status as a weight change leaves it: deserved and share moved."""
    return {"deserved": {"cpu": str(round_ * 10 + index % 7), "memory": "64Gi"},
            "share": f"0.{round_ % 10}", "state": "Open"}  # fmt: skip


async def patch_all(make: Callable[[], Clients], queues: int, round_: int, flight: int) -> float:
    """CPU milliseconds of this process per status patch."""
    clients = make()
    writer = KubeWriter(clients.typed, clients.http)
    slots = asyncio.Semaphore(flight)

    async def write(index: int) -> None:
        async with slots:
            await writer.patch_status("Queue", f"q-{index:05d}", status(index, round_))

    await write(0)  # the first connection, outside the figure
    before = time.process_time()
    await asyncio.gather(*(write(i) for i in range(queues)))
    spent = time.process_time() - before
    await clients.close()
    return spent * 1000 / queues


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=16, help="as the outbox's workers")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    with tempfile.TemporaryDirectory(prefix="sk-client-") as workdir:
        plane = controlplane.start(Path(workdir))
        try:
            cluster = Cluster(plane.kubeconfig, str(plane.kubectl), plane)
            cluster.kubectl("apply", "-f", str(CRDS))
            cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                            "crd/queues.scheduling.sharekeeper.io")  # fmt: skip
            access = kubeapi.ApiAccess.from_kubeconfig(plane.kubeconfig)
            kubeapi.create_all(access, (queue(i) for i in range(args.queues)))
            os.environ["KUBECONFIG"] = str(plane.kubeconfig)
            round_ = 0
            for repetition in range(args.repeat):
                names = list(TRANSPORTS) if repetition % 2 == 0 else list(reversed(TRANSPORTS))
                for name in names:
                    round_ += 1
                    milli = asyncio.run(
                        patch_all(TRANSPORTS[name], args.queues, round_, args.in_flight)
                    )
                    samples[name].append(round(milli, 3))
                    progress(f"{name}: {milli:.3f} ms of CPU a patch")
        finally:
            plane.stop()
    output = {
        "meta": {**provenance(REPO), "queues": args.queues, "in_flight": args.in_flight,
                 "kubernetes": controlplane.KUBERNETES_VERSION},
        "client_cpu_ms_per_patch": samples,
    }  # fmt: skip
    args.out.write_text(json.dumps(output, indent=2) + "\n")
    print(report(output))
    return 0


def report(output: Json) -> str:
    lines = ["| transport | client CPU ms a status patch, median (each run) |", "|---|---:|"]
    for name, per in output["client_cpu_ms_per_patch"].items():
        runs = ", ".join(f"{x:.3f}" for x in per)
        lines.append(f"| {name} | {statistics.median(per):.3f} ({runs}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
