"""What one write costs the operator's own process: the writes' JSON path
(``sharekeeper.kube.transport``) against the same requests through lightkube's typed client.

    PYTHONPATH=$PWD/operator .venv/bin/python benchmarks/bench_client.py --out /tmp/client.json

On the local control plane (``e2e/controlplane.py``: etcd and kube-apiserver alone, TLS and a
bearer token as in every test), the three writes a busy gate makes most, ``--objects`` of each,
``--in-flight`` at a time as the writer sends them: a Queue's status merge-patched, a held pod
released (the strategic patch that removes our gate), and an ``AdmissionWaiting`` Event
created. "ours" is ``KubeWriter`` as the operator makes it (``kube.clients.connect``);
"lightkube" is lightkube's ``AsyncClient`` on httpx's own transport, the typed models built and
read as that library does (what the writer used before). This process's CPU seconds
(``time.process_time``) per write, for each path in turn, ``--repeat`` times, alternating.
The API server runs in its own processes: its CPU is not counted. Timings are reported, never
asserted.
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
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "e2e"))

from lightkube import AsyncClient  # noqa: E402
from lightkube.config.kubeconfig import KubeConfig  # noqa: E402
from lightkube.generic_resource import create_global_resource  # noqa: E402
from lightkube.models.core_v1 import EventSource, ObjectReference  # noqa: E402
from lightkube.models.meta_v1 import ObjectMeta  # noqa: E402
from lightkube.resources.core_v1 import Event, Pod  # noqa: E402
from lightkube.types import PatchType  # noqa: E402

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
from clusters import CRDS, Cluster  # noqa: E402
from figures import provenance  # noqa: E402
from sharekeeper.kube.clients import FIELD_MANAGER, connect  # noqa: E402
from sharekeeper.kube.kinds import QUEUES, reference  # noqa: E402
from sharekeeper.kube.writing import KubeWriter  # noqa: E402
from sharekeeper.model.pods import ADMISSION_GATE, release_patch  # noqa: E402

Json = dict[str, Any]
NAMESPACE = "bench"
WRITES = ("status", "release", "event")
Write = Callable[[int, int], Awaitable[Any]]
"""One write of object ``index`` in round ``round_``."""


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} bench-client] {message}", file=sys.stderr, flush=True)


def queue(index: int) -> Json:
    return {"apiVersion": "scheduling.sharekeeper.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": f"q-{index:05d}"}, "spec": {"weight": 1}}  # fmt: skip


def held_pod(index: int) -> Json:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p-{index:05d}", "namespace": NAMESPACE,
                     "labels": {"job-name": "train", "sharekeeper.io/queue": "q-00000"}},
        "spec": {"schedulingGates": [{"name": ADMISSION_GATE}],
                 "containers": [{"name": "main", "image": "train:1",
                                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }  # fmt: skip


def status(index: int, round_: int) -> Json:
    """A status as a weight change leaves it: deserved and share moved."""
    return {"deserved": {"cpu": str(round_ * 10 + index % 7), "memory": "64Gi"},
            "share": f"0.{round_ % 10}", "state": "Open"}  # fmt: skip


def stamp(round_: int) -> str:
    return f"2026-01-01T00:{round_ // 60 % 60:02d}:{round_ % 60:02d}Z"


def waiting(index: int, round_: int) -> str:
    return f"waits for cpu 1 in queue q-00000 (round {round_}); place {index + 1} in its line"


def ours() -> tuple[dict[str, Write], Callable[[], Awaitable[None]]]:
    clients = connect()
    writer = KubeWriter(clients.api)

    async def event(index: int, round_: int) -> None:
        target = reference("Pod", f"p-{index:05d}", namespace=NAMESPACE, uid=f"u-{index}")
        await writer.event(target, "AdmissionWaiting", waiting(index, round_), warning=False)

    writes: dict[str, Write] = {
        "status": lambda i, r: writer.patch_status("Queue", f"q-{i:05d}", status(i, r)),
        "release": lambda i, r: writer.release_pod(NAMESPACE, f"p-{i:05d}", stamp(r)),
        "event": event,
    }
    return writes, clients.close


QUEUE_STATUS = create_global_resource(QUEUES.group, QUEUES.version, "Queue", QUEUES.plural)


def typed() -> tuple[dict[str, Write], Callable[[], Awaitable[None]]]:
    client = AsyncClient(KubeConfig.from_env().get(), field_manager=FIELD_MANAGER)

    async def event(index: int, round_: int) -> None:
        at = datetime.now(UTC)
        await client.create(Event(
            metadata=ObjectMeta(generateName=f"p-{index:05d}.", namespace=NAMESPACE),
            involvedObject=ObjectReference(apiVersion="v1", kind="Pod", name=f"p-{index:05d}",
                                           namespace=NAMESPACE, uid=f"u-{index}"),
            type="Normal", reason="AdmissionWaiting", message=waiting(index, round_),
            source=EventSource(component=FIELD_MANAGER), reportingComponent=FIELD_MANAGER,
            reportingInstance=FIELD_MANAGER, firstTimestamp=at, lastTimestamp=at, count=1,
        ))  # fmt: skip

    writes: dict[str, Write] = {
        "status": lambda i, r: client.patch(
            QUEUE_STATUS.Status, f"q-{i:05d}", {"status": status(i, r)},
            patch_type=PatchType.MERGE,
        ),
        "release": lambda i, r: client.patch(
            Pod, f"p-{i:05d}", release_patch(stamp(r)), namespace=NAMESPACE,
            patch_type=PatchType.STRATEGIC,
        ),
        "event": event,
    }  # fmt: skip
    return writes, client.close


PATHS = {"ours": ours, "lightkube": typed}


async def write_all(path: str, objects: int, round_: int, flight: int) -> dict[str, float]:
    """CPU milliseconds of this process per write, for each write."""
    writes, close = PATHS[path]()
    slots = asyncio.Semaphore(flight)
    spent: dict[str, float] = {}
    for name in WRITES:
        write = writes[name]

        async def one(index: int, write: Write = write) -> None:
            async with slots:
                await write(index, round_)

        await one(0)  # the first connection, outside the figure
        before = time.process_time()
        await asyncio.gather(*(one(i) for i in range(objects)))
        spent[name] = round((time.process_time() - before) * 1000 / objects, 3)
    await close()
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000, help="Queues, pods and Events")
    parser.add_argument("--in-flight", type=int, default=16, help="as the outbox's workers")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {
        path: {name: [] for name in WRITES} for path in PATHS
    }
    with tempfile.TemporaryDirectory(prefix="sk-client-") as workdir:
        plane = controlplane.start(Path(workdir))
        try:
            cluster = Cluster(plane.kubeconfig, str(plane.kubectl), plane)
            cluster.kubectl("apply", "-f", str(CRDS))
            cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                            "crd/queues.scheduling.sharekeeper.io")  # fmt: skip
            access = kubeapi.ApiAccess.from_kubeconfig(plane.kubeconfig)
            cluster.kubectl("create", "namespace", NAMESPACE)
            kubeapi.create_all(access, (queue(i) for i in range(args.objects)))
            kubeapi.create_all(access, (held_pod(i) for i in range(args.objects)))
            os.environ["KUBECONFIG"] = str(plane.kubeconfig)
            round_ = 0
            for repetition in range(args.repeat):
                paths = list(PATHS) if repetition % 2 == 0 else list(reversed(PATHS))
                for path in paths:
                    round_ += 1
                    spent = asyncio.run(write_all(path, args.objects, round_, args.in_flight))
                    for name, milli in spent.items():
                        samples[path][name].append(milli)
                    progress(f"{path}: ms of CPU a write {spent}")
        finally:
            plane.stop()
    output = {
        "meta": {**provenance(REPO), "objects": args.objects, "in_flight": args.in_flight,
                 "kubernetes": controlplane.KUBERNETES_VERSION},
        "client_cpu_ms_per_write": samples,
    }  # fmt: skip
    args.out.write_text(json.dumps(output, indent=2) + "\n")
    print(report(output))
    return 0


def report(output: Json) -> str:
    per = output["client_cpu_ms_per_write"]
    lines = [
        "| write, client CPU ms: median (each run) | " + " | ".join(per) + " |",
        "|---|" + "---:|" * len(per),
    ]
    for name in WRITES:
        cells = [
            f"{statistics.median(runs[name]):.3f} ({', '.join(f'{x:.3f}' for x in runs[name])})"
            for runs in per.values()
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
