"""Kueue and our admission gate side by side on one local cluster, with the same workload.

    PYTHONPATH=$PWD/operator .venv/bin/python benchmarks/bench_kueue.py \\
        --out /tmp/kueue-peer.json --plot /tmp/kueue-peer.png

One full local control plane (``e2e/controlplane.py``: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) with ``--nodes`` fake nodes, and on it both
controllers' objects for the same ``peers.workload.Shape``:

- ours: one SchedulerPolicy (Proportion; ``--our-sharing Capacity``: Capacity, each Queue's
  ``spec.deserved`` then Kueue's nominal quota; ``--borrow``: with ``admission.borrow: true``,
  so a queue may take what the others leave idle, as Kueue's cohort lets its queues;
  ``--overcommit-factor``: its ``overcommit.factor``, which bounds what is released) over every
  node, one Queue per queue (its weight), and the namespace ``sk-bench`` labelled
  ``sharekeeper.io/admission=enabled``; Jobs there label their pods ``sharekeeper.io/queue``,
  the webhook gates each pod at creation and the share round releases it (docs/admission.md);
- Kueue's (``peers/kueue.py``): one ResourceFlavor, one ClusterQueue per queue whose nominal
  quota is what our engine makes that queue deserve at saturation (computed in-process with
  ``sharekeeper.simulate``'s path: the nodes, the policy, the queues and one pod per queue
  asking for the whole cluster), all in one cohort (``--no-cohort``: none), and a LocalQueue
  per ClusterQueue in ``kueue-bench``; Jobs there are created suspended with the label
  ``kueue.x-k8s.io/queue-name``.

Then phases, alternating the controllers (K S, S K, K S, ... for ``--repeat``): only the phase's
controller runs (and our admission policies are installed only for ours); the same jobs are
submitted at the same times; the phase ends when every job is complete (or after
``--phase-timeout``); its jobs, pods and Workloads are deleted before the next phase starts.
With ``--cluster-per-phase`` each phase has a control plane of its own instead, set up as the
first and stopped (its files removed; the controllers' logs stay in ``--log-dir``) when the
phase ends: no clean-up, which took 12 to 15 minutes a phase at the large size, and no phase
starts on what another left in etcd.

Definitions (all times from the benchmark's monotonic clock; an event's time is when its watch
event reached the benchmark, which watches jobs, pods and Workloads of the phase's namespace):

created
    just before the Job's POST is sent.
admitted
    Kueue: the Job's Workload has condition ``Admitted`` True. Ours: the last pod of the Job
    has lost the gate ``sharekeeper.io/admission`` (every pod of the Job released; the first
    pod's release is reported too). Kueue admits a Job whole; we release pods one by one.
all running
    every pod of the Job has been seen Running (or already Succeeded).
saturation window
    from when the backlog (jobs created and not admitted) first reaches a quarter of its peak
    to when it last falls below that (``peers.workload.saturation_window``).
admissions per second
    jobs (and pods) admitted inside the saturation window, per second.
fair share at saturation
    every 2 s, each queue's cpu in Running pods (and in admitted, unfinished work: Kueue's
    admitted Jobs until complete, our released pods until finished), divided by its quota (=
    deserved); per queue the mean over the window; then the mean and largest distance from 1
    and Jain's index over the queues (``peers.workload.fairness``).
where the work waits
    the same samples summed over the queues: cpu Running and cpu admitted (as above), their
    means over the saturation window (``peers.workload.mean_in``); and in our phases, every
    10 s, our operator's ``sharekeeper_admission_unbound`` (cpu of released pods no scheduler
    has bound yet) and ``sharekeeper_admission_held_pods``. Admitted well above Running with
    little unbound: pods bound and not yet started (kwok's work); admitted below the cluster's
    cpu with nothing held: Jobs whose pods do not exist yet (the Job controller's).
CPU and memory
    utime + stime from ``/proc/<pid>/stat`` of the controller (ours: with its webhook's
    process, also reported apart), and of each control-plane process, from the start of
    submission to the end of the phase; the controller's VmRSS and VmHWM (peak) at the end (and
    its webhook process's), and its VmRSS every 10 s. Also the whole machine's busy CPU
    seconds (``/proc/stat``) and what of it none of those processes nor the benchmark spent
    (``everything_else``): another job sharing the machine shows there.
API requests
    the API server's audit log, with a policy (replacing the default one) that records every
    request of a ServiceAccount at the Metadata level once, when it completes: the
    controller's requests from its start to the end of the phase, by verb and resource. A
    watch is counted when it ends, so watches still open at the end are not in the count.

kube-controller-manager and kube-scheduler run with ``--kube-api-qps=5000 --kube-api-burst=10000``
(restarted with them after start, as kwokctl does for its clusters with QPS limits off): their
defaults (20 and 50 requests a second) would cap both controllers' throughput below this
workload's churn. Kueue keeps its shipped client limits (``peers/kueue.py``); ours has none.
Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx2 as httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "e2e"))
sys.path.insert(0, str(REPO / "operator"))

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
from admitting import admitting_operator  # noqa: E402
from bench_operator import children, memory_of  # noqa: E402
from clusters import Cluster, Installed, install_sharekeeper  # noqa: E402
from fakenodes import fake_node, job, wait_nodes_ready  # noqa: E402
from figures import provenance  # noqa: E402
from operating import SERVICE_ACCOUNT  # noqa: E402
from peers import kueue  # noqa: E402
from peers.workload import (  # noqa: E402
    JobSpec,
    Shape,
    fairness,
    job_cpu_milli,
    jobs,
    mean_in,
    rate_in,
    saturation_window,
    summary,
    summary_by_weight,
    unfit_jobs,
)
from sharekeeper.kube.transient import TRANSIENT_CODES, transient_reason  # noqa: E402
from sharekeeper.model.pods import ADMISSION_GATE  # noqa: E402

Json = dict[str, Any]
_T = TypeVar("_T")

KUEUE, OURS = "kueue", "sharekeeper"
NAMESPACES = {KUEUE: "kueue-bench", OURS: "sk-bench"}
OUR_QUEUE_LABEL = "sharekeeper.io/queue"
POLICY = "bench"
COHORT = "bench"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SAMPLE_SECONDS = 2.0
GATE_SAMPLE_SECONDS = 10.0
"""How often the controller's RSS, and our operator's metrics in its phases, are read (the
operator renders its queues' series once a round, however often they are read)."""
API_LATENCIES = {
    "pod_create_seconds": (
        "apiserver_request_duration_seconds",
        {"verb": "POST", "resource": "pods", "subresource": ""},
    ),
    "webhook_seconds": (
        "apiserver_admission_webhook_admission_duration_seconds",
        {"name": "gate.admission.sharekeeper.io", "operation": "CREATE"},
    ),
}
"""What the API server took over the phase, from its own histograms: creating a pod (the Job
controller's creations, whatever admits them), and of that our webhook (manifests/webhook.yaml)."""
QPS_FLAGS = ("--kube-api-qps=5000", "--kube-api-burst=10000")
OUR_POLICIES = REPO / "manifests" / "admission-policies.yaml"
SCHEDULER_OPEN_PATHS = (
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*"
)
"""kube-scheduler runs without an authorization kubeconfig (``controlplane``), so only these
paths answer, to anyone on loopback: its metrics and CPU profiles for the benchmarks."""
# Every request of a ServiceAccount, once, when it completes (see the module docstring).
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""


def progress(message: str) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp} bench-kueue] {message}", file=sys.stderr, flush=True)


# --- the cluster ---------------------------------------------------------------------------------


def start_cluster(workdir: Path) -> controlplane.ControlPlane:
    """The full control plane with our audit policy, then kube-controller-manager and
    kube-scheduler restarted without client rate limits (the scheduler with its metrics and
    profiles open on loopback). The API server deletes a collection with 4 workers instead of
    1: the clean-up between phases (24,000 objects at the large size) is not measured, and one
    worker left it unfinished after ten minutes."""
    audit = workdir / "bench-audit-policy.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    audit.write_text(AUDIT_POLICY)
    plane = controlplane.start(
        workdir / "plane",
        full=True,
        apiserver_flags=[
            f"--audit-policy-file={audit}",
            "--audit-log-maxsize=100000",
            "--delete-collection-workers=4",
        ],
    )
    try:
        for name in ("kube-controller-manager", "kube-scheduler"):
            plane.stop_process(name)
            argv, env, detached = plane.commands[name]
            extra = (*QPS_FLAGS, SCHEDULER_OPEN_PATHS) if name == "kube-scheduler" else QPS_FLAGS
            plane.commands[name] = ([*argv, *extra], env, detached)
            plane.start_process(name)
    except BaseException:
        plane.stop()
        raise
    return plane


def scheduler_client(plane: controlplane.ControlPlane, timeout: float = 600.0) -> httpx.Client:
    """A client of kube-scheduler's HTTPS port (the paths ``SCHEDULER_OPEN_PATHS`` opens)."""
    base = plane.health_urls["kube-scheduler"].rsplit("/", 1)[0]
    # Its serving certificate is one it made for itself: nothing to verify it against.
    return httpx.Client(base_url=base, verify=False, timeout=timeout)


def quantity_cpu(milli: int) -> str:
    return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"


def quota(deserved: dict[str, int]) -> dict[str, str]:
    """A queue's cpu and memory as quantities: Kueue's nominal quota, our Capacity deserved."""
    return {"cpu": quantity_cpu(deserved["cpu"]), "memory": str(deserved["memory"])}


def nodes_of(shape: Shape) -> list[Json]:
    return [
        fake_node(shape.node_name(i), cpu=str(shape.node_cpu), memory=f"{shape.node_memory_gib}Gi")
        for i in range(shape.nodes)
    ]


def our_policy(
    *, sharing: str = "Proportion", borrow: bool = False, overcommit: float | None = None
) -> Json:
    spec: Json = {"sharing": {"policy": sharing}}
    if borrow:
        spec["admission"] = {"borrow": True}
    if overcommit is not None:
        spec["overcommit"] = {"factor": overcommit}
    return {
        "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": POLICY},
        "spec": spec,
    }


def our_queues(shape: Shape, deserved: dict[int, dict[str, int]] | None = None) -> list[Json]:
    """Our Queues, with ``spec.deserved`` (for the Capacity policy) when ``deserved`` is given:
    Kueue's nominal quotas, the same numbers."""
    queues = []
    for q in range(shape.queues):
        spec: Json = {"weight": shape.weight(q)}
        if deserved is not None:
            spec["deserved"] = quota(deserved[q])
        queues.append({
            "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": shape.queue_name(q)},
            "spec": spec,
        })  # fmt: skip
    return queues


def deserved_at_saturation(shape: Shape) -> dict[int, dict[str, int]]:
    """What our engine makes each queue deserve when every queue asks for the whole cluster:
    cpu (milli) and memory (bytes), by queue index. Computed in-process on the objects the
    operator reads, through simulate's path."""
    from sharekeeper.engine.shares import deserved_shares
    from sharekeeper.simulate.reading import parse_objects
    from sharekeeper.simulate.report import Context, snapshot_of

    everything = {"cpu": str(shape.nodes * shape.node_cpu),
                  "memory": f"{shape.nodes * shape.node_memory_gib}Gi"}  # fmt: skip
    demand = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"demand-{q}", "namespace": "demand",
                         "labels": {OUR_QUEUE_LABEL: shape.queue_name(q)}},
            "spec": {"containers": [{"name": "main", "resources": {"requests": everything}}]},
            "status": {"phase": "Pending"},
        }
        for q in range(shape.queues)
    ]  # fmt: skip
    inputs = parse_objects([*nodes_of(shape), our_policy(), *our_queues(shape), *demand])
    result = deserved_shares(snapshot_of(inputs, Context(now_seconds=0.0, seed=0)))
    shares = {q: result.queues[shape.queue_name(q)].deserved for q in range(shape.queues)}
    return {q: {r: int(share.get(r, 0)) for r in ("cpu", "memory")} for q, share in shares.items()}


def kueue_objects(shape: Shape, deserved: dict[int, dict[str, int]], cohort: bool) -> list[Json]:
    namespace = NAMESPACES[KUEUE]
    out: list[Json] = [
        kueue.flavor(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    ]
    for q in range(shape.queues):
        name = shape.queue_name(q)
        out.append(kueue.cluster_queue(name, quota(deserved[q]), COHORT if cohort else None))
        out.append(kueue.local_queue(name, namespace, name))
    # The readiness probe's own queue, outside the cohort (see probe_kueue).
    out += [
        kueue.cluster_queue("probe", {"cpu": "1", "memory": "1Gi"}, None),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-probe"}},
        kueue.local_queue("probe", "kueue-probe", "probe"),
    ]
    return out


def job_object(shape: Shape, spec: JobSpec, side: str) -> Json:
    namespace = NAMESPACES[side]
    queue_name = shape.queue_name(spec.queue)
    built = job(
        spec.name,
        namespace,
        completions=spec.pods,
        parallelism=spec.pods,
        cpu=quantity_cpu(shape.pod_cpu_milli),
        memory=f"{shape.pod_memory_gib}Gi",
        run_for=f"{spec.run_seconds}s",
        labels={OUR_QUEUE_LABEL: queue_name} if side == OURS else {},
    )
    if side == KUEUE:
        built["metadata"]["labels"] = {kueue.QUEUE_LABEL: queue_name}
        built["spec"]["suspend"] = True
    return built


# --- counting what we see ------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def controller_cpu(phase: Json) -> float:
    """The controller's CPU seconds, with its webhook process's (ours)."""
    spent = phase["cpu_seconds"]
    return round(spent["controller"] + spent.get("webhook", 0.0), 2)


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core), from ``/proc/stat``."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass
class JobTrack:
    spec: JobSpec
    cpu_milli: int
    created: float | None = None
    first_admitted: float | None = None
    admitted: float | None = None
    unsuspended: float | None = None
    all_running: float | None = None
    completed: float | None = None
    released: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)


class Tracker:
    """Every job's milestones and each queue's cpu in use, from the watch events."""

    def __init__(self, shape: Shape, work: list[JobSpec], side: str, t0: float) -> None:
        self.shape, self.side, self.t0 = shape, side, t0
        self.lock = threading.Lock()
        self.jobs = {spec.name: JobTrack(spec, job_cpu_milli(shape, spec)) for spec in work}
        self.pods: dict[str, tuple[bool, bool, bool]] = {}  # name -> released, live, finished
        self.running_cpu: Counter[int] = Counter()
        self.admitted_cpu: Counter[int] = Counter()
        self.samples: list[tuple[float, dict[int, float], dict[int, float]]] = []
        self.completed = 0
        self.metric: Callable[..., float] | None = None
        """Ours: a sample of our operator's metrics by name (``Operator.metric``)."""
        self.gate_samples: list[tuple[float, float, float]] = []
        """Ours, every ``GATE_SAMPLE_SECONDS``: (time, cpu that released pods not bound yet
        hold, pods held), as the operator's last round counted them."""
        self.pid = 0
        """The controller's process."""
        self.rss_samples: list[tuple[float, float]] = []
        """Every ``GATE_SAMPLE_SECONDS``: (time, the controller's RSS in MiB)."""

    def now(self) -> float:
        return time.monotonic() - self.t0

    def on_pod(self, kind: str, pod: Json) -> None:
        t = self.now()
        meta = pod["metadata"]
        track = self.jobs.get((meta.get("labels") or {}).get(JOB_NAME_LABEL) or "")
        if track is None:
            return
        name, queue, pod_cpu = meta["name"], track.spec.queue, self.shape.pod_cpu_milli
        gates = {g.get("name") for g in pod.get("spec", {}).get("schedulingGates") or []}
        phase = pod.get("status", {}).get("phase")
        with self.lock:
            was_released, was_live, was_finished = self.pods.get(name, (False, False, False))
            released = was_released or (self.side == OURS and ADMISSION_GATE not in gates)
            finished = was_finished or phase in ("Succeeded", "Failed") or kind == "DELETED"
            live = phase == "Running" and not finished
            self.pods[name] = (released, live, finished)
            if released and not was_released:  # ours only: the gate is gone
                track.released.add(name)
                self.admitted_cpu[queue] += pod_cpu
                if track.first_admitted is None:
                    track.first_admitted = t
                if len(track.released) >= track.spec.pods and track.admitted is None:
                    track.admitted = t
            if released and finished and not was_finished:
                self.admitted_cpu[queue] -= pod_cpu
            if phase in ("Running", "Succeeded") and name not in track.running:
                track.running.add(name)
                if len(track.running) >= track.spec.pods and track.all_running is None:
                    track.all_running = t
            self.running_cpu[queue] += pod_cpu * (int(live) - int(was_live))

    def on_workload(self, kind: str, workload: Json) -> None:
        t = self.now()
        owners = workload["metadata"].get("ownerReferences") or []
        track = next((self.jobs[o["name"]] for o in owners if o.get("name") in self.jobs), None)
        if track is None or kind == "DELETED":
            return
        conditions = workload.get("status", {}).get("conditions") or []
        admitted = any(c.get("type") == "Admitted" and c.get("status") == "True"
                       for c in conditions)  # fmt: skip
        with self.lock:
            if admitted and track.admitted is None:
                track.admitted = track.first_admitted = t
                if track.completed is None:
                    self.admitted_cpu[track.spec.queue] += track.cpu_milli

    def on_job(self, kind: str, obj: Json) -> None:
        t = self.now()
        track = self.jobs.get(obj["metadata"]["name"])
        if track is None or kind == "DELETED":
            return
        spec, status = obj.get("spec", {}), obj.get("status", {})
        complete = any(c.get("type") == "Complete" and c.get("status") == "True"
                       for c in status.get("conditions") or [])  # fmt: skip
        with self.lock:
            if self.side == KUEUE and not spec.get("suspend") and track.unsuspended is None:
                track.unsuspended = t
            if complete and track.completed is None:
                track.completed = t
                self.completed += 1
                if self.side == KUEUE and track.admitted is not None:
                    self.admitted_cpu[track.spec.queue] -= track.cpu_milli

    def sample(self) -> None:
        with self.lock:
            self.samples.append((self.now(), dict(self.running_cpu), dict(self.admitted_cpu)))

    def sample_slowly(self) -> None:
        """The controller's RSS, and what our gate holds (``gate_samples``)."""
        t = self.now()
        try:  # a process gone, or a slow answer, costs a sample, not the phase
            if self.pid:
                self.rss_samples.append((t, memory_of(self.pid)["rss_mib"]))
            if self.metric is not None:
                unbound = self.metric("sharekeeper_admission_unbound", resource="cpu")
                held = self.metric("sharekeeper_admission_held_pods")
                self.gate_samples.append((t, unbound, held))
        except OSError:
            return


class Watch(threading.Thread):
    """List-then-watch one collection, handing every object to ``handle(kind, object)``; once
    the first list is in, ``listed`` is set. Reconnects where it left off."""

    def __init__(self, access: kubeapi.ApiAccess, path: str,
                 handle: Callable[[str, Json], None]) -> None:  # fmt: skip
        super().__init__(daemon=True, name=f"watch {path}")
        self.access, self.path, self.handle = access, path, handle
        self.listed = threading.Event()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        """Hand nothing on from now; the thread ends at its next event (the clean-up's
        deletions bring some at once). Its connection is not closed under its feet: closing
        it from another thread broke TLS reads elsewhere in the process."""
        self.stopping.set()

    def run(self) -> None:
        try:
            with self.access.client(timeout=None) as client:  # type: ignore[arg-type]
                version = self._list(client)
                self.listed.set()
                while not self.stopping.is_set():
                    version = self._watch(client, version)
        except BaseException as error:  # reported by the main thread
            if not self.stopping.is_set():
                self.error = error
                self.listed.set()

    def _list(self, client: httpx.Client) -> str:
        response = client.get(self.path)
        response.raise_for_status()
        body = response.json()
        for item in body.get("items") or []:
            self.handle("ADDED", item)
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, client: httpx.Client, version: str) -> str:
        params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": "600"}  # fmt: skip
        with client.stream("GET", self.path, params=params) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if self.stopping.is_set():
                    return version
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    return self._list(client)  # too old: list again, then watch on
                version = obj["metadata"].get("resourceVersion", version)
                if kind != "BOOKMARK":
                    self.handle(kind, obj)
        return version


# --- one phase -----------------------------------------------------------------------------------


@dataclass
class Bench:
    shape: Shape
    work: list[JobSpec]
    deserved: dict[int, dict[str, int]]
    plane: controlplane.ControlPlane
    cluster: Cluster
    installed: Installed
    access: kubeapi.ApiAccess
    kueue_binary: Path
    kueue_kubeconfig: Path
    logs: Path
    phase_timeout: float
    kueue_qps: float
    policy: Json
    """Our SchedulerPolicy, as ``--our-sharing``, ``--borrow`` and ``--overcommit-factor`` made
    it."""
    profiling: Profiling | None = None


@dataclass(frozen=True)
class Profiling:
    """CPU profiles of the Go components, ``seconds`` long, from ``at`` seconds after a phase's
    submission starts, written to ``into``."""

    at: float
    seconds: int
    into: Path


async def submit(access: kubeapi.ApiAccess, bench: Bench, side: str, tracker: Tracker) -> int:
    """POST every job at its time (``JobSpec.at`` after the start); returns the retries."""
    retries = 0
    started = time.monotonic()

    async def one(client: httpx.AsyncClient, spec: JobSpec) -> None:
        nonlocal retries
        body = json.dumps(job_object(bench.shape, spec, side)).encode()
        path = f"/apis/batch/v1/namespaces/{NAMESPACES[side]}/jobs"
        await asyncio.sleep(max(0.0, started + spec.at - time.monotonic()))
        tracker.jobs[spec.name].created = tracker.now()
        for attempt in range(8):
            try:
                response = await client.post(
                    path, content=body, headers={"Content-Type": "application/json"}
                )
            except httpx.TransportError:
                response = None
            if response is not None and (
                response.status_code == 201 or (response.status_code == 409 and attempt)
            ):
                return
            if response is not None and response.status_code not in TRANSIENT_CODES:
                answer = f"{response.status_code} {response.text[:300]}"
                raise RuntimeError(f"POST {spec.name}: {answer}")
            retries += 1
            await asyncio.sleep(min(5.0, 0.25 * 2**attempt))
        raise RuntimeError(f"POST {spec.name}: gave up")  # fmt: skip

    async with access.async_client(64) as client:
        await asyncio.gather(*(one(client, spec) for spec in bench.work))
    return retries


def count(client: httpx.Client, path: str) -> int:
    """How many objects a collection holds, from a one-item list."""
    response = client.get(path, params={"limit": 1})
    response.raise_for_status()
    body = response.json()
    items, more = len(body.get("items") or []), body["metadata"].get("remainingItemCount")
    if more is None and body["metadata"].get("continue"):
        return items + 1  # more, how many not said
    return items + int(more or 0)


def workloads_path(namespace: str) -> str:
    return kubeapi.collection_path(kueue.API, "workloads", namespace)


def release_workloads(client: httpx.Client, path: str) -> None:
    """Take Kueue's finalizer off each Workload being deleted: Kueue, stopped before the
    clean-up, would never take it off those still admitted (4,436 of a cut phase's). Read a
    page at a time: thousands of Workloads in one answer cost the API server seconds."""
    for item in kubeapi.items(client, path):
        meta = item["metadata"]
        if meta.get("deletionTimestamp") and meta.get("finalizers"):
            patched = client.patch(
                f"{path}/{meta['name']}",
                json={"metadata": {"finalizers": None}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            if patched.status_code != 404:  # gone meanwhile: what was wanted
                patched.raise_for_status()


RESEND_AFTER = 60.0
"""A collection delete that the API server gave up on (a 504 after its request timeout, or the
connection dropped) goes on inside it: the deletes are sent again only once no collection has
shrunk for this long. (Sent again at once, each new delete of 7,500 pods competed with the last
and none was seen to finish in 600 s.)"""


def clean_namespace(bench: Bench, side: str, timeout: float = 600.0) -> None:
    """Delete the phase's jobs, pods (and Workloads), each collection in one request, and
    wait until none is left. (``kubectl delete --all`` deletes one object per request: two
    thousand Jobs took more than a minute.)"""
    namespace = NAMESPACES[side]
    paths = [kubeapi.collection_path("batch/v1", "jobs", namespace),
             kubeapi.collection_path("v1", "pods", namespace)]  # fmt: skip
    workloads = workloads_path(namespace) if side == KUEUE else None
    if workloads is not None:
        paths.append(workloads)
    with bench.access.client(timeout=timeout) as client:
        empty_collections(client, paths, workloads=workloads, timeout=timeout)


def empty_collections(
    client: httpx.Client,
    paths: list[str],
    *,
    workloads: str | None,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Delete every object of ``paths`` and wait until they are empty; ``workloads``: the one
    of them whose Workloads need Kueue's finalizer taken off, each time its delete is sent. A
    busy API server drops a long collection delete, or gives up on it with a 5xx, at its
    request timeout, and stops where it was; it may fail a count too. So the counts are polled
    anyway, a collection's delete is sent again once that collection has not shrunk for
    ``RESEND_AFTER`` seconds (the Jobs can stand still while their pods go), and the clean-up is
    given up only after ``timeout`` seconds in which none shrank (at the large size, 24,000
    objects go at the API server's pace: more than 600 s on two cores, shrinking all along)."""
    last: dict[str, int] | None = None
    shrunk_at = dict.fromkeys(paths, clock())
    sent_at: dict[str, float] = {}
    while True:
        for path in paths:
            due = path not in sent_at or (
                (last is None or last[path])
                and clock() - max(sent_at[path], shrunk_at[path]) > RESEND_AFTER
            )
            if not due:
                continue
            answered(path, partial(delete_all, client, path))
            if path == workloads:
                answered("the Workloads", partial(release_workloads, client, workloads))
            sent_at[path] = clock()
        left = answered("the counts", partial(counts, client, paths))
        if left is not None:
            if not any(left.values()):
                return
            for path in paths:
                if last is not None and left[path] < last[path]:
                    shrunk_at[path] = clock()
            last = left
        if clock() - max(shrunk_at.values()) > timeout:
            raise TimeoutError(f"{paths} still hold {last}: none shrank for {timeout:.0f} s")
        sleep(1.0)


def delete_all(client: httpx.Client, path: str) -> None:
    params = {"propagationPolicy": "Background"}
    if path.endswith("/pods"):
        params["gracePeriodSeconds"] = "0"
    client.delete(path, params=params).raise_for_status()


def counts(client: httpx.Client, paths: list[str]) -> dict[str, int]:
    """How many objects each of ``paths`` holds."""
    return {path: count(client, path) for path in paths}


def answered(what: str, call: Callable[[], _T]) -> _T | None:
    """What ``call`` returns; None when the API server was too busy to answer (what the
    operator's ``transient_reason`` would try again: reported). Any other error is raised."""
    try:
        return call()
    except (httpx.TransportError, httpx.HTTPStatusError) as error:
        if transient_reason(error) is None:
            raise
        progress(f"cleaning, {what}: {type(error).__name__}: {error}; again")
        return None


@contextlib.contextmanager
def controller(
    bench: Bench, side: str, tag: str
) -> Iterator[tuple[int, str | None, Callable[..., float] | None]]:
    """The phase's controller, running and admitting: its pid, where it serves CPU profiles
    (Kueue; ours is Python), and a reader of its metrics by name and labels (ours)."""
    log = bench.logs / f"{tag}.log"
    if side == KUEUE:
        # Our admission policies match every pod update of the cluster, Kueue's pods' too (1.9 %
        # of the API server's CPU in a profiled phase): out of the way for Kueue's phase, back
        # for ours (whose operator waits until each is in force).
        bench.cluster.kubectl("delete", "-f", str(OUR_POLICIES), "--ignore-not-found")
        manager = kueue.start(
            bench.kueue_binary, bench.kueue_kubeconfig, bench.logs, log, qps=bench.kueue_qps
        )
        try:
            manager.wait_ready()
            probe_kueue(bench, manager)
            yield manager.pid, f"http://127.0.0.1:{manager.pprof_port}", None
        finally:
            manager.stop()
            bench.cluster.kubectl("apply", "-f", str(OUR_POLICIES))
        return
    env = {"PYTHONPATH": str(REPO / "operator")}
    with admitting_operator(bench.installed, log, nodes=nodes_of(bench.shape)[:1],
                            apply=[bench.policy], env=env) as operator:  # fmt: skip
        yield operator.process.pid, None, operator.metric


def probe_kueue(bench: Bench, manager: kueue.Kueue, timeout: float = 120.0) -> None:
    """A one-pod Job through the probe LocalQueue, until Kueue unsuspends it: its Job
    reconciler and scheduler run. Then it is deleted."""
    name = f"probe-{manager.health_port}"
    probe = job(name, "kueue-probe", completions=1, parallelism=1, cpu="100m", run_for="1s")
    probe["metadata"]["labels"] = {kueue.QUEUE_LABEL: "probe"}
    probe["spec"]["suspend"] = True
    bench.cluster.apply(probe)
    deadline = time.monotonic() + timeout
    while bench.cluster.get("job", name, "-n", "kueue-probe")["spec"].get("suspend"):
        if not manager.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"kueue did not admit its probe job:\n{manager.tail()}")
        time.sleep(0.5)
    bench.cluster.kubectl("delete", "job", name, "-n", "kueue-probe", "--wait=false",
                          "--cascade=background")  # fmt: skip


def run_phase(bench: Bench, side: str, repetition: int, *, clean: bool = True) -> Json:
    """One phase of ``side``'s controller; ``clean``: its objects deleted at the end, for the
    next phase on the same cluster."""
    tag = f"{side}-{repetition}"
    namespace = NAMESPACES[side]
    progress(f"{tag}: starting the controller")
    result: Json = {"side": side, "repetition": repetition}
    audit = kubeapi.AuditTail(
        bench.plane.audit_log, kueue.USER if side == KUEUE else SERVICE_ACCOUNT
    )
    before_start = audit.writes()  # the earlier phases' requests
    with controller(bench, side, tag) as (pid, pprof, metric):
        tracker = Tracker(bench.shape, bench.work, side, time.monotonic())
        tracker.metric, tracker.pid = metric, pid
        watches = [
            Watch(bench.access, kubeapi.collection_path("batch/v1", "jobs", namespace),
                  tracker.on_job),
            Watch(bench.access, kubeapi.collection_path("v1", "pods", namespace), tracker.on_pod),
        ]  # fmt: skip
        if side == KUEUE:
            watches.append(Watch(bench.access, workloads_path(namespace), tracker.on_workload))
        sampling = threading.Event()
        try:
            for watch in watches:
                watch.start()
            for watch in watches:
                watch.listed.wait(60)
                if watch.error:
                    raise watch.error
            threading.Thread(target=sample_until, args=(tracker, sampling), daemon=True).start()
            processes = {"controller": pid, **bench.plane.pids}
            for child in children(pid):  # ours: the webhook's process
                processes["webhook"] = child
            # Read before the CPU figures start and after they end: reading is not the work.
            latencies_before = api_latencies(bench)
            cpu_before = {name: cpu_seconds(p) for name, p in processes.items()}
            bench_cpu, machine = time.process_time(), machine_busy_seconds()
            requests_before = audit.writes()
            by_resource_before = Counter(audit.by_resource)
            observe(bench, side, tag, tracker, watches=watches, result=result, pprof=pprof)
            cpu_after = {name: cpu_seconds(p) for name, p in processes.items()}
            result["cpu_seconds"] = {n: round(cpu_after[n] - cpu_before[n], 2) for n in processes}
            spent = result["cpu_seconds"]
            spent["benchmark"] = round(time.process_time() - bench_cpu, 2)
            # What ran beside the cluster, the controller and us: another job on the machine.
            spent["machine"] = round(machine_busy_seconds() - machine, 2)
            spent["everything_else"] = round(spent["machine"] - sum(
                v for k, v in spent.items() if k != "machine"), 2)  # fmt: skip
            result["memory"] = memory_of(pid)
            if "webhook" in processes:
                result["webhook_memory"] = memory_of(processes["webhook"])
            result["requests_during_phase"] = audit.writes() - requests_before
            result["requests_during_phase_by_kind"] = dict(
                (Counter(audit.by_resource) - by_resource_before).most_common()
            )
            result["requests_from_start"] = audit.count - before_start
            result |= {
                figure: after.since(latencies_before.get(figure)).latency_json()
                for figure, after in api_latencies(bench).items()
            }
        finally:
            sampling.set()
            for watch in watches:
                watch.stop()
        result |= figures(bench, tracker)
    # The controller is stopped first, so that it cannot go on releasing (ours) or admitting
    # (Kueue's) pods of Jobs being deleted: a cut phase of ours, cleaned with the operator
    # running, still held 15,000 pods after ten minutes of deletes.
    if clean:
        progress(f"{tag}: cleaning up")
        try:
            clean_namespace(bench, side)
        except Exception as error:  # the figures stand; the next phases cannot run
            result["cleanup_error"] = f"{type(error).__name__}: {error}"
    for watch in watches:
        watch.join(timeout=10)
    return result


def api_latencies(bench: Bench) -> dict[str, kubeapi.Histogram]:
    """``API_LATENCIES`` as the API server's histograms hold them now; none when its metrics
    cannot be read (the phase's other figures stand without them)."""
    try:
        with bench.access.client() as client:
            response = client.get("/metrics")
            response.raise_for_status()
    except httpx.HTTPError as error:
        progress(f"the API server's metrics: {type(error).__name__}: {error}")
        return {}
    found = {
        figure: kubeapi.histogram(response.text, name, labels)
        for figure, (name, labels) in API_LATENCIES.items()
    }
    return {figure: histogram for figure, histogram in found.items() if histogram is not None}


def sample_until(tracker: Tracker, stop: threading.Event) -> None:
    every = round(GATE_SAMPLE_SECONDS / SAMPLE_SECONDS)
    count = 0
    while not stop.wait(SAMPLE_SECONDS):
        tracker.sample()
        count += 1
        if count % every == 0:
            tracker.sample_slowly()


def observe(
    bench: Bench,
    side: str,
    tag: str,
    tracker: Tracker,
    *,
    watches: list[Watch],
    result: Json,
    pprof: str | None,
) -> None:
    """Submit the jobs, then wait until every one is complete (or the phase times out)."""
    progress(f"{tag}: submitting {len(bench.work):,} jobs at {bench.shape.jobs_per_second:g}/s")
    submitted_at = time.monotonic()
    profiler = None
    if bench.profiling is not None:
        profiler = threading.Thread(
            target=profile_components, args=(bench, bench.profiling, tag, pprof, result)
        )
        profiler.start()
    result["post_retries"] = asyncio.run(submit(bench.access, bench, side, tracker))
    result["submission_seconds"] = round(time.monotonic() - submitted_at, 1)
    if side == OURS:
        result["our_deserved_cpu_milli"] = live_deserved(bench)
    deadline = time.monotonic() + bench.phase_timeout
    last_report = 0.0
    while tracker.completed < len(bench.work):
        if time.monotonic() > deadline:
            result["partial"] = f"{tracker.completed} of {len(bench.work)} jobs complete"
            progress(f"{tag}: timed out, {result['partial']}")
            break
        failed = [w.error for w in watches if w.error]
        if failed:
            raise RuntimeError("a watch failed") from failed[0]
        if time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            admitted = sum(1 for j in tracker.jobs.values() if j.admitted is not None)
            progress(f"{tag}: {admitted:,} admitted, {tracker.completed:,} complete")
        time.sleep(1.0)
    result["phase_seconds"] = round(tracker.now(), 1)
    if profiler is not None:
        profiler.join()


def profile_components(
    bench: Bench, profiling: Profiling, tag: str, controller: str | None, result: Json
) -> None:
    """CPU profiles of kube-apiserver, kube-scheduler and the phase's Go controller over the
    same ``profiling.seconds``, each with its ``go tool pprof -top`` beside it; a failure is
    recorded in ``result``, not raised (the phase's figures stand without it)."""
    time.sleep(profiling.at)
    clients = {"kube-apiserver": bench.access.client(),
               "kube-scheduler": scheduler_client(bench.plane)}  # fmt: skip
    if controller is not None:
        clients["controller"] = httpx.Client(base_url=controller)
    profiles: Json = {"at_seconds": profiling.at, "seconds": profiling.seconds}
    result["profiles"] = profiles

    def take(name: str, client: httpx.Client) -> None:
        into = profiling.into / f"{tag}-{name}.pprof"
        try:
            with client:
                kubeapi.cpu_profile(client, profiling.seconds, into)
            into.with_suffix(".top.txt").write_text(kubeapi.pprof_top(into))
            profiles[name] = str(into)
        except (httpx.HTTPError, subprocess.CalledProcessError) as error:
            profiles[name] = f"failed: {type(error).__name__}: {error}"

    progress(f"{tag}: profiling {', '.join(clients)} for {profiling.seconds} s")
    takers = [threading.Thread(target=take, args=item) for item in clients.items()]
    for taker in takers:
        taker.start()
    for taker in takers:
        taker.join()


def live_deserved(bench: Bench) -> dict[str, int]:
    """Our Queues' status.deserved.cpu now, in milli (at the end of submission: saturated)."""
    from sharekeeper.model.quantities import to_internal

    path = kubeapi.collection_path("scheduling.sharekeeper.io/v1alpha1", "queues")
    with bench.access.client() as client:
        return {
            item["metadata"]["name"]: to_internal(
                "cpu", item.get("status", {}).get("deserved", {}).get("cpu", "0")
            )
            for item in kubeapi.items(client, path)
        }


def figures(bench: Bench, tracker: Tracker) -> Json:
    tracks = list(tracker.jobs.values())
    created = [j.created for j in tracks if j.created is not None]
    admitted_at = [j.admitted for j in tracks if j.admitted is not None]
    window = saturation_window(created, admitted_at)

    def waits(pick: Callable[[JobTrack], float | None]) -> list[float]:
        return [
            value - j.created
            for j in tracks
            if j.created is not None and (value := pick(j)) is not None
        ]

    pod_admissions = [
        j.admitted for j in tracks if j.admitted is not None for _ in range(j.spec.pods)
    ]
    deserved = {q: float(d["cpu"]) for q, d in bench.deserved.items()}
    running = [(t, run) for t, run, _ in tracker.samples]
    admitted = [(t, adm) for t, _, adm in tracker.samples]
    running_total = [(round(t, 1), round(sum(run.values()) / 1000, 1)) for t, run in running]
    admitted_total = [(round(t, 1), round(sum(adm.values()) / 1000, 1)) for t, adm in admitted]
    gate_unbound = [(t, unbound) for t, unbound, _ in tracker.gate_samples]
    gate_held = [(t, held) for t, _, held in tracker.gate_samples]
    jobs_per_second = rate_in(admitted_at, window)
    pods_per_second = rate_in(pod_admissions, window)
    return {
        "jobs_admitted": len(admitted_at),
        "jobs_complete": tracker.completed,
        "to_admission_seconds": summary(waits(lambda j: j.admitted)),
        "to_admission_by_weight": summary_by_weight(
            bench.shape,
            [
                (j.spec, j.admitted - j.created)
                for j in tracks
                if j.created is not None and j.admitted is not None
            ],
        ),
        "to_first_pod_admitted_seconds": summary(waits(lambda j: j.first_admitted)),
        "to_unsuspended_seconds": summary(waits(lambda j: j.unsuspended)),  # Kueue's only
        "to_all_running_seconds": summary(waits(lambda j: j.all_running)),
        "to_complete_seconds": summary(waits(lambda j: j.completed)),
        "saturation_window": None if window is None else [round(x, 1) for x in window],
        "admissions_per_second": None if jobs_per_second is None else round(jobs_per_second, 2),
        "pods_admitted_per_second": None if pods_per_second is None else round(pods_per_second, 2),
        "fairness_running": fairness(running, deserved, window),
        "fairness_admitted": fairness(admitted, deserved, window),
        "waits_seconds": [round(w, 2) for w in waits(lambda j: j.admitted)],
        "running_cpu_total": running_total,
        "admitted_cpu_total": admitted_total,
        "in_saturation_window": {
            "running_cpu_mean": rounded(mean_in(running_total, window)),
            "admitted_cpu_mean": rounded(mean_in(admitted_total, window)),
            "gate_unbound_cpu_mean": rounded(mean_in(gate_unbound, window)),
            "gate_held_pods_mean": rounded(mean_in(gate_held, window)),
        },
        "gate_samples": [(round(t, 1), round(u, 1), held) for t, u, held in tracker.gate_samples],
        "rss_samples": [(round(t, 1), rss) for t, rss in tracker.rss_samples],
    }


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# --- the run -------------------------------------------------------------------------------------


def order(repetitions: int, first: str) -> list[str]:
    """K S, S K, K S, ...: each controller goes first as often as the other (give or take one)."""
    other = OURS if first == KUEUE else KUEUE
    return [side for r in range(repetitions)
            for side in ((first, other) if r % 2 == 0 else (other, first))]  # fmt: skip


def setup(shape: Shape, workdir: Path, logs: Path, args: argparse.Namespace) -> Bench:
    work = jobs(shape)
    deserved = deserved_at_saturation(shape)
    unfit = unfit_jobs(shape, work, [deserved[q]["cpu"] for q in range(shape.queues)])
    if unfit:
        raise SystemExit(f"{len(unfit)} jobs ask for more cpu than their queue deserves "
                         f"(first {unfit[0]}): make pods smaller or weights larger")  # fmt: skip
    progress("building (or finding) Kueue")
    binary = kueue.ensure_binary()
    source = kueue.module_source()
    progress("starting the full control plane")
    plane = start_cluster(workdir)
    try:
        cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)
        installed = install_sharekeeper(cluster, workdir)
        # Its replicas would run on the fake nodes, taking room from both controllers' jobs; the
        # operator runs as a process (``admitting_operator``).
        cluster.kubectl("scale", "deployment/sharekeeper", "-n", "sharekeeper", "--replicas=0")
        kueue_kubeconfig = kueue.install(cluster.kubectl, source, workdir, plane)
        access = kubeapi.ApiAccess.from_kubeconfig(plane.kubeconfig)
        progress(f"creating {shape.nodes} nodes, {shape.queues} queues on each side")
        nodes = nodes_of(shape)
        cluster.apply(*nodes)
        wait_nodes_ready(cluster, [n["metadata"]["name"] for n in nodes], timeout=120)
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": NAMESPACES[OURS],
                                  "labels": {"sharekeeper.io/admission": "enabled"}}}  # fmt: skip
        capacity = args.our_sharing == "Capacity"
        policy = our_policy(
            sharing=args.our_sharing, borrow=args.borrow, overcommit=args.overcommit_factor
        )
        cluster.apply(policy, *our_queues(shape, deserved if capacity else None), namespace)
        cluster.apply(*kueue_objects(shape, deserved, args.cohort))
    except BaseException:
        plane.stop()
        raise
    profiling = None
    if args.profile_dir is not None:
        args.profile_dir.mkdir(parents=True, exist_ok=True)
        profiling = Profiling(args.profile_at, args.profile_seconds, args.profile_dir)
    return Bench(shape, work, deserved, plane, cluster, installed, access, binary,
                 kueue_kubeconfig, logs, args.phase_timeout, args.kueue_qps, policy,
                 profiling)  # fmt: skip


def meta(args: argparse.Namespace) -> Json:
    return {
        **provenance(REPO),
        "kubernetes": controlplane.KUBERNETES_VERSION,
        "kueue": kueue.KUEUE_VERSION,
        "cohort": args.cohort,
        "our_sharing": args.our_sharing,
        "borrow": args.borrow,
        "overcommit_factor": args.overcommit_factor,
        "kueue_qps": args.kueue_qps,
        "command": " ".join(sys.argv),
    }


def medians(phases: list[Json], side: str) -> Json:
    """The median over a side's repetitions of each headline figure."""
    mine = [p for p in phases if p["side"] == side and "to_admission_seconds" in p]

    def median(pick: Callable[[Json], Any]) -> float | None:
        values = sorted(v for p in mine if (v := pick(p)) is not None)
        return values[len(values) // 2] if values else None

    return {
        "repetitions": len(mine),
        "admission_p50": median(lambda p: p["to_admission_seconds"].get("p50")),
        "admission_p99": median(lambda p: p["to_admission_seconds"].get("p99")),
        "running_p50": median(lambda p: p["to_all_running_seconds"].get("p50")),
        "running_p99": median(lambda p: p["to_all_running_seconds"].get("p99")),
        "admissions_per_second": median(lambda p: p["admissions_per_second"]),
        "pods_admitted_per_second": median(lambda p: p["pods_admitted_per_second"]),
        "fair_running_max_distance": median(lambda p: p["fairness_running"].get("max_distance")),
        "fair_running_jain": median(lambda p: p["fairness_running"].get("jain_index")),
        "controller_cpu_seconds": median(controller_cpu),
        "controller_peak_rss_mib": median(lambda p: p["memory"]["peak_rss_mib"]),
        "requests_during_phase": median(lambda p: p["requests_during_phase"]),
        "phase_seconds": median(lambda p: p["phase_seconds"]),
    }


REPORTED: tuple[tuple[str, Callable[[Json], Any]], ...] = (
    ("time to admission, p50 (s)", lambda p: p["to_admission_seconds"].get("p50")),
    ("time to admission, p99 (s)", lambda p: p["to_admission_seconds"].get("p99")),
    ("  p50 / p99 by queue weight (s)",
     lambda p: "; ".join(f"{weight}: {w['p50']:.0f} / {w['p99']:.0f}"
                         for weight, w in p["to_admission_by_weight"].items())),
    ("time to the first pod admitted, p50 (s)",
     lambda p: p["to_first_pod_admitted_seconds"].get("p50")),
    ("time to all pods Running, p50 (s)", lambda p: p["to_all_running_seconds"].get("p50")),
    ("time to all pods Running, p99 (s)", lambda p: p["to_all_running_seconds"].get("p99")),
    ("jobs admitted per second, saturated", lambda p: p["admissions_per_second"]),
    ("pods admitted per second, saturated", lambda p: p["pods_admitted_per_second"]),
    ("saturation window (s)",
     lambda p: p["saturation_window"] and round(p["saturation_window"][1]
                                                - p["saturation_window"][0])),
    ("running cpu / deserved: mean over queues", lambda p: p["fairness_running"].get("mean_ratio")),
    ("  farthest queue from 1", lambda p: p["fairness_running"].get("max_distance")),
    ("  Jain's index", lambda p: p["fairness_running"].get("jain_index")),
    ("admitted cpu / deserved: farthest queue from 1",
     lambda p: p["fairness_admitted"].get("max_distance")),
    ("cpu Running; admitted (released, unfinished): mean, saturated",
     lambda p: f"{p['in_saturation_window']['running_cpu_mean']:,}; "
               f"{p['in_saturation_window']['admitted_cpu_mean']:,}"),
    ("ours: cpu released pods not bound hold; pods held: mean, saturated",
     lambda p: f"{p['in_saturation_window']['gate_unbound_cpu_mean']:,}; "
               f"{p['in_saturation_window']['gate_held_pods_mean']:,}"
     if p["side"] == OURS else None),
    ("API server: creating a pod, mean / p50 / p99 (ms)",
     lambda p: _milliseconds(p["pod_create_seconds"])),
    ("  of which our webhook, mean / p50 / p99 (ms)",
     lambda p: _milliseconds(p["webhook_seconds"]) if p["side"] == OURS else None),
    ("phase: submission start to the last job complete (s)", lambda p: p["phase_seconds"]),
    ("controller CPU (s)", controller_cpu),
    ("  of which our webhook's process (s)", lambda p: p["cpu_seconds"].get("webhook")),
    ("controller RSS at the end, peak (MiB)", lambda p: p["memory"]["peak_rss_mib"]),
    ("  our webhook's process, peak (MiB)",
     lambda p: p.get("webhook_memory", {}).get("peak_rss_mib")),
    ("controller API requests", lambda p: p["requests_during_phase"]),
    ("kube-apiserver + etcd CPU (s)",
     lambda p: round(p["cpu_seconds"]["kube-apiserver"] + p["cpu_seconds"]["etcd"], 1)),
    ("other control-plane CPU: scheduler, controllers, kwok (s)",
     lambda p: round(sum(p["cpu_seconds"][k] for k in ("kube-scheduler", "kwok",
                                                       "kube-controller-manager")), 1)),
    ("CPU of nothing measured: another job on the machine (s)",
     lambda p: p["cpu_seconds"].get("everything_else")),
)  # fmt: skip


def _milliseconds(latency: Json) -> str:
    return " / ".join(
        "" if latency[key] is None else f"{1000 * latency[key]:.1f}"
        for key in ("mean", "p50", "p99")
    )


def report(output: Json) -> str:
    """One Markdown table: a row per figure, a column per phase in the order run."""
    phases = [p for p in output["phases"] if "to_admission_seconds" in p]
    head = [f"{'Kueue' if p['side'] == KUEUE else 'ours'} #{p['repetition']}" for p in phases]
    lines = [f"| figure | {' | '.join(head)} |", f"|---|{'---:|' * len(phases)}"]
    for label, pick in REPORTED:
        cells = []
        for phase in phases:
            try:
                value = pick(phase)
            except (KeyError, TypeError):
                value = None
            cells.append("" if value is None else value if isinstance(value, str) else f"{value:,}")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Shape()
    parser.add_argument("--nodes", type=int, default=defaults.nodes)
    parser.add_argument("--node-cpu", type=int, default=defaults.node_cpu)
    parser.add_argument("--node-memory-gib", type=int, default=defaults.node_memory_gib)
    parser.add_argument("--queues", type=int, default=defaults.queues)
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument("--max-pods", type=int, default=defaults.max_pods,
                        help="a job's pods: 1 to this many")  # fmt: skip
    parser.add_argument("--rate", type=float, default=defaults.jobs_per_second,
                        help="jobs submitted per second (default %(default)s)")  # fmt: skip
    run_seconds = f"{defaults.min_run_seconds},{defaults.max_run_seconds}"
    parser.add_argument("--run-seconds", default=run_seconds, help="a pod's run time: min,max")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first", choices=(KUEUE, OURS), default=KUEUE)
    parser.add_argument("--only", choices=(KUEUE, OURS), help="run one controller only")
    parser.add_argument("--no-cohort", dest="cohort", action="store_false",
                        help="Kueue's ClusterQueues in no cohort (no borrowing)")  # fmt: skip
    parser.add_argument("--our-sharing", choices=("Proportion", "Capacity"),
                        default="Proportion",
                        help="our policy: Proportion (deserved follows demand, by weight) or "
                        "Capacity (spec.deserved: Kueue's nominal quotas)")  # fmt: skip
    parser.add_argument("--borrow", action="store_true",
                        help="our policy with admission.borrow: true")  # fmt: skip
    parser.add_argument("--overcommit-factor", type=float,
                        help="our policy's overcommit.factor (default 1.2)")  # fmt: skip
    parser.add_argument("--kueue-qps", type=float, default=50,
                        help="Kueue's client limit, burst twice that (shipped: 50)")  # fmt: skip
    parser.add_argument("--phase-timeout", type=float, default=1800)
    parser.add_argument("--cluster-per-phase", action="store_true",
                        help="a control plane of its own for each phase, in place of the "
                             "clean-up between phases")  # fmt: skip
    parser.add_argument("--workdir", type=Path, help="the cluster's files (default: a temp dir)")
    parser.add_argument("--log-dir", type=Path, help="the controllers' logs (default: workdir)")
    parser.add_argument(
        "--profile-dir",
        type=Path,
        help="CPU profiles of kube-apiserver, kube-scheduler and Kueue go here",
    )
    parser.add_argument(
        "--profile-at",
        type=float,
        default=600.0,
        help="seconds after a phase's submission starts (default %(default)s)",
    )
    parser.add_argument("--profile-seconds", type=int, default=120)
    parser.add_argument("--out", type=Path, default=Path("/tmp/kueue-peer.json"))
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--report", type=Path, help="only print the table of this JSON file")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    low, high = (int(x) for x in args.run_seconds.split(","))
    shape = Shape(nodes=args.nodes, node_cpu=args.node_cpu, node_memory_gib=args.node_memory_gib,
                  queues=args.queues, jobs=args.jobs, max_pods=args.max_pods,
                  jobs_per_second=args.rate, min_run_seconds=low, max_run_seconds=high,
                  seed=args.seed)  # fmt: skip
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-kueue-"))
    logs = args.log_dir or workdir
    logs.mkdir(parents=True, exist_ok=True)
    shared = None if args.cluster_per_phase else setup(shape, workdir, logs, args)
    clean = shared is not None  # one cluster for every phase: each leaves it empty
    output: Json = {"meta": meta(args), "shape": shape.as_json(), "phases": []}
    sides = [args.only] * args.repeat if args.only else order(args.repeat, args.first)
    failed = False
    try:
        for index, side in enumerate(sides):
            repetition = sides[: index + 1].count(side)
            bench = shared or setup(shape, workdir / f"phase-{index + 1}", logs, args)
            output["deserved_cpu_milli"] = {
                shape.queue_name(q): d["cpu"] for q, d in bench.deserved.items()
            }
            try:
                output["phases"].append(run_phase(bench, side, repetition, clean=clean))
            except Exception:
                failed = True
                traceback.print_exc()
                progress(f"{side}-{repetition} failed; going on")
                if clean:
                    try:
                        clean_namespace(bench, side)
                    except Exception as error:
                        output["phases"].append({"side": side, "cleanup_error": str(error)})
            finally:
                if not clean:  # the phase's own cluster
                    bench.plane.stop()
            output["summary"] = {s: medians(output["phases"], s) for s in (KUEUE, OURS)}
            args.out.write_text(json.dumps(output, indent=1) + "\n")
            if output["phases"] and "cleanup_error" in output["phases"][-1]:
                failed = True
                progress(f"stopping: {output['phases'][-1]['cleanup_error']}")
                break
    finally:
        if shared is not None:
            shared.plane.stop()
    print(report(output))
    print(f"figures in {args.out}")
    if args.plot and output["phases"]:
        import plot_kueue

        plot_kueue.plot(output, args.plot)
        print(f"plot in {args.plot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
