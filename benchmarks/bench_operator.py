"""The operator's scale curve on the local control plane: what a change costs as the cluster grows.

    .venv/bin/python benchmarks/bench_operator.py --sizes 500,1000,2000,5000 \\
        --out benchmarks/scale.json --plot benchmarks/scale.png

Each size N (nodes) runs in a fresh etcd + kube-apiserver (``e2e/controlplane.py``), torn down
before the next size starts, so that one size's leftovers (etcd revisions, watch caches, audit
log) cannot slow the next. The cluster of size N:

- N nodes of 32 cpu / 128Gi; every tenth node is a GPU node of 64 cpu / 512Gi / 8 nvidia.com/gpu;
- 30 pods per node, one container each with cpu/memory requests and a ``sharekeeper.io/queue``
  label: half are bound (``spec.nodeName``; there is no kubelet, creating them bound is enough),
  15 per node at 2 cpu / 4Gi, half pending at 8 cpu / 16Gi. A tenth of all pods ask for one
  nvidia.com/gpu: 6 bound on each GPU node (so 2 GPUs per GPU node stay idle and the
  proportional reservation has something to keep) and the rest pending;
- 2 x N queues (weights 1..7), 15 pods each; together the pods ask for about four times the
  cluster's cpu and twice its memory, so every queue is demand-limited above its share and any
  weight change moves every queue's deserved share;
- with ``--tree-fanout F``, those queues are the leaves of a tree: inner queues (weights 1..7,
  no pods of their own) each parent F queues of the level below, level by level until F or
  fewer are left at the top; the weight changes then go to the top-level queues, so that each
  still moves every queue's deserved share (at N = 5,000 and F = 8: 10,000 leaves under 1,430
  inner queues, five levels);
- one SchedulerPolicy over everything with overcommit (factor 1.5) and GPU-proportional
  reservation (8 cpu / 8Gi per idle GPU);
- one NodeQosEnsurancePolicy selecting every node with a ``cpu_total_usage`` rule at 1000 cores,
  which never triggers, so every QoS check examines every node and acts on none. Usage comes from
  the stand-in metrics-server (``e2e/metrics_server.py``) registered with the real aggregation
  layer, 2 cpu / 8Gi for every node and none for pods (``--usage none``: no metrics API, and
  every node is checked as "usage unknown").

Per size, in this order, it measures (timings are reported, never asserted):

creation
    nodes, queues and pods POSTed by ``--in-flight`` concurrent requests (httpx2, 32 by default);
    objects per second per kind.
floor
    one paginated LIST (limit 500 + continue) of all pods and of all nodes from Python with the
    same HTTP library, json-decoding every page: what any controller pays at start.
start-up
    from the operator's process start (``sharekeeper run`` as its ServiceAccount) until every
    Queue has ``status.deserved``, polling a paginated list of queues every 0.5 s (a poll stops
    at the first queue without a status, so polling while nothing is published costs one page).
event -> status
    ``--changes`` times: merge-patch one queue's weight (a different queue each time), then GET
    that queue every 20 ms until its ``status.deserved.cpu`` differs; the clock starts just
    before the patch is sent. Before the next change the operator's writes must have stopped
    for 3 s (from the audit log) with none left to send (its ``/healthz``), so every change
    starts from a quiet operator. p50 and p99 are nearest-rank: with 20 changes p99 is the
    slowest.
recompute round
    the operator's ``sharekeeper_recompute_seconds`` histogram scraped from its metrics port
    before the first and after the last change: mean of the rounds in between (sum and count
    deltas) and the upper bound of the highest bucket any of them fell in.
garbage collector
    likewise ``sharekeeper_gc_pause_seconds``, over the same window: how many full collections
    fell in it and what they took, and all collections of any generation (they pause both the
    rounds and the event loop).
QoS check
    likewise ``sharekeeper_qos_check_seconds``, from the first change to the end of the idle
    window; "n/a" when the operator does not export it (the probe's ``qosChecks`` count is
    reported either way).
RSS
    VmRSS (and the peak, VmHWM) from ``/proc/<pid>/status`` after the idle window; the
    webhook's process (with ``--reviews-per-second``) apart.
idle writes
    the operator's writes in the API server's audit log during 30 s that start once the last
    change's writes have stopped.
webhook reviews
    with ``--reviews-per-second R`` (0, the default: no webhook), the operator serves the
    admission webhook on 127.0.0.1 and, from the first change to the end of the idle window,
    one client POSTs an AdmissionReview of a new pod that names a queue R times a second (one
    at a time, over one kept-alive TLS connection that trusts the webhook's CA): each review's
    round trip, p50 / p99 / max, during the changes and during the idle window. What a pod's
    creation waits for our answer while the operator works, without the API server's share.
simulate
    on the largest size (``--simulate all`` for every size): nodes, pods, queues, both policy
    kinds and the NodeMetrics, read by paginated LISTs, ``kind``/``apiVersion`` set on each
    item and ``managedFields`` dropped (what ``kubectl get -o json`` prints), as one JSON
    ``List`` file; then ``sharekeeper simulate -f FILE -o json > /dev/null``, timed, with its
    peak RSS. The operator is stopped first, so the two do not share the two cores.

Results go to ``--out`` as JSON, merged by size with what the file already holds, so sizes can
be run one at a time; ``--plot`` draws them (``benchmarks/plot_scale.py``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import functools
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import httpx2 as httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "e2e"))

import controlplane  # noqa: E402
import kubeapi  # noqa: E402
from clusters import CRDS, MANIFESTS, Cluster  # noqa: E402
from figures import nearest_rank, provenance  # noqa: E402
from metrics_api import METRICS_SERVICE, register_metrics_api  # noqa: E402
from metrics_server import MetricsServer  # noqa: E402
from objects import GROUP, NAMESPACE, node, pod, policy, queue  # noqa: E402
from operating import SERVICE_ACCOUNT, Operator, start_operator  # noqa: E402
from sharekeeper.kube.webhook_tls import CA_CERT  # noqa: E402
from sharekeeper.model.pods import QUEUE_LABEL  # noqa: E402
from sharekeeper.settings import WebhookSettings  # noqa: E402

Json = dict[str, Any]

GPU = "nvidia.com/gpu"
QOS_GROUP = "ensurance.sharekeeper.io/v1alpha1"
QUEUES_PATH = kubeapi.collection_path(GROUP, "queues")
POLICY_NAME = "everything"
RECOMPUTE_HISTOGRAM = "sharekeeper_recompute_seconds"
QOS_CHECK_HISTOGRAM = "sharekeeper_qos_check_seconds"
GC_PAUSE_HISTOGRAM = "sharekeeper_gc_pause_seconds"
QOS_USAGE_HISTOGRAM = "sharekeeper_qos_usage_seconds"
AUDIT_LOG_MAX_MB = 100_000
IDLE_WINDOW_SECONDS = 30.0
QUIET_SECONDS = 3.0
STARTUP_POLL_SECONDS = 0.5
CHANGE_POLL_SECONDS = 0.02


# --- the cluster of one size -------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """The objects of one size; see the module docstring for the shape and the reasons."""

    nodes: int
    pods_per_node: int = 30
    queues_per_node: int = 2
    gpu_node_every: int = 10
    gpus_per_gpu_node: int = 8
    busy_gpus_per_gpu_node: int = 6
    qos_check_interval_seconds: int = 5
    tree_fanout: int = 0
    """0: the queues are flat; F: they are the leaves of a tree of F children per inner queue."""

    def __post_init__(self) -> None:
        if self.tree_fanout == 1 or self.tree_fanout < 0:
            raise ValueError("a tree needs a fanout of at least 2 (0: flat)")

    @property
    def pods(self) -> int:
        return self.nodes * self.pods_per_node

    @property
    def leaves(self) -> int:
        """The queues the pods name."""
        return self.nodes * self.queues_per_node

    @property
    def queues(self) -> int:
        return self.leaves + sum(len(level) for level in self.inner_levels())

    @property
    def gpu_nodes(self) -> int:
        return sum(1 for i in range(self.nodes) if self.is_gpu_node(i))

    @property
    def bound_per_node(self) -> int:
        return self.pods_per_node // 2

    @property
    def bound_pods(self) -> int:
        return self.nodes * self.bound_per_node

    @property
    def gpu_pods(self) -> int:
        return self.pods // 10

    @property
    def bound_gpu_pods(self) -> int:
        return self.gpu_nodes * self.busy_gpus_per_gpu_node

    def is_gpu_node(self, index: int) -> bool:
        return index % self.gpu_node_every == 0

    def node_name(self, index: int) -> str:
        return f"n-{index:05d}"

    def node_names(self) -> list[str]:
        return [self.node_name(i) for i in range(self.nodes)]

    def queue_names(self) -> list[str]:
        """The leaves (every queue, when flat)."""
        return [f"q-{i:05d}" for i in range(self.leaves)]

    def inner_levels(self) -> list[list[str]]:
        """The inner queues level by level, the leaves' parents first and the top last (none
        when flat): queue i of a level has queue i // F of the level above as its parent."""
        levels: list[list[str]] = []
        width = self.leaves
        while self.tree_fanout and width > self.tree_fanout:
            width = -(-width // self.tree_fanout)
            levels.append([f"t{len(levels) + 1}-{i:05d}" for i in range(width)])
        return levels

    def change_targets(self) -> list[str]:
        """The queues whose weight the changes set, in turn: each moves every deserved share."""
        levels = self.inner_levels()
        return levels[-1] if levels else self.queue_names()

    def check(self) -> None:
        if self.busy_gpus_per_gpu_node > min(self.bound_per_node, self.gpus_per_gpu_node):
            raise ValueError("more busy GPUs per GPU node than bound pods or GPUs on it")
        if self.bound_gpu_pods > self.gpu_pods:
            raise ValueError("more bound GPU pods than GPU pods")

    def node_objects(self) -> Iterator[Json]:
        for index in range(self.nodes):
            if not self.is_gpu_node(index):
                yield node(self.node_name(index), "32", "128Gi", **{"sharekeeper.io/pool": "cpu"})
                continue
            gpu_node = node(self.node_name(index), "64", "512Gi", **{"sharekeeper.io/pool": "gpu"})
            for resources in ("capacity", "allocatable"):
                gpu_node["status"][resources] = {
                    **gpu_node["status"][resources],
                    GPU: str(self.gpus_per_gpu_node),
                }
            yield gpu_node

    def queue_objects(self) -> Iterator[Json]:
        """Top-down, so that a parent is usually there before its children (creations run
        concurrently; a child created first is InvalidParent until its parent comes)."""
        levels = [*self.inner_levels(), []]
        for depth in range(len(levels) - 2, -1, -1):
            yield from self._level(levels[depth], levels[depth + 1])
        yield from self._level(self.queue_names(), levels[0])

    def _level(self, names: list[str], parents: list[str]) -> Iterator[Json]:
        for index, name in enumerate(names):
            spec = {"parent": parents[index // self.tree_fanout]} if parents else {}
            yield queue(name, weight=1 + index % 7, **spec)

    def pod_objects(self) -> Iterator[Json]:
        """Bound pods node by node (GPU pods first on GPU nodes), then the pending ones (the
        remaining GPU pods first); pod i belongs to queue i mod Q."""
        queues = self.queue_names()
        index = 0

        def one(node_name: str | None, gpu: bool) -> Json:
            cpu, memory = ("2", "4Gi") if node_name else ("8", "16Gi")
            built = pod(f"p-{index:06d}", queues[index % len(queues)], cpu, memory, node_name)
            if gpu:
                resources = built["spec"]["containers"][0]["resources"]
                resources["requests"][GPU] = "1"
                resources["limits"] = {GPU: "1"}  # extended resources need requests == limits
            return built

        for node_index in range(self.nodes):
            busy = self.busy_gpus_per_gpu_node if self.is_gpu_node(node_index) else 0
            for slot in range(self.bound_per_node):
                yield one(self.node_name(node_index), gpu=slot < busy)
                index += 1
        pending_gpu = self.gpu_pods - self.bound_gpu_pods
        for slot in range(self.pods - self.bound_pods):
            yield one(None, gpu=slot < pending_gpu)
            index += 1

    def scheduler_policy(self) -> Json:
        return policy(
            POLICY_NAME,
            overcommit={"factor": 1.5},
            proportional={"enable": True, "resources": {GPU: {"cpu": "8", "memory": "8Gi"}}},
        )

    def qos_policy(self) -> Json:
        """Every node, a rule that never triggers: each check examines every node."""
        return {
            "apiVersion": QOS_GROUP,
            "kind": "NodeQosEnsurancePolicy",
            "metadata": {"name": "every-node"},
            "spec": {
                "checkIntervalSeconds": self.qos_check_interval_seconds,
                "objectiveEnsurances": [
                    {
                        "name": "cpu-far-above-any-node",
                        "metricRule": {"name": "cpu_total_usage", "value": "1000"},
                        "actionName": "throttle",
                    }
                ],
                "actions": [
                    {
                        "name": "throttle",
                        "throttle": {"cpuThrottle": {"minCPURatio": 20, "stepCPURatio": 10}},
                    }
                ],
            },
        }

    def as_json(self) -> Json:
        return {
            "nodes": self.nodes,
            "gpu_nodes": self.gpu_nodes,
            "pods": self.pods,
            "bound_pods": self.bound_pods,
            "pending_pods": self.pods - self.bound_pods,
            "gpu_pods": self.gpu_pods,
            "bound_gpu_pods": self.bound_gpu_pods,
            "queues": self.queues,
            "leaf_queues": self.leaves,
            "tree_fanout": self.tree_fanout,
            "tree_levels": len(self.inner_levels()) + 1,
        }


# --- helpers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    changes: int
    in_flight: int
    usage: str
    simulate: bool
    startup_timeout: float
    settle_timeout: float
    log_dir: Path | None
    dump: Path | None
    apiserver_flags: tuple[str, ...]
    reviews_per_second: float = 0.0
    change_every: float = 0.0
    """Seconds from one weight change to the next, the writes of the last one still streaming
    (0: each change once the last one's writes settled)."""


def progress(size: int, message: str) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp} bench {size}] {message}", file=sys.stderr, flush=True)


def memory_of(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of a process, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mib": fields["VmRSS"], "peak_rss_mib": fields["VmHWM"]}


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that still run (our operator's webhook process)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


@contextlib.contextmanager
def fresh_control_plane(apiserver_flags: Sequence[str]) -> Iterator[controlplane.ControlPlane]:
    """A new etcd + kube-apiserver, removed on exit, with ``apiserver_flags`` passed on."""
    # The audit log counts the operator's writes; kube-apiserver rotates it at 100 MB by
    # default, which twenty rounds of 10,000 status writes pass.
    flags = [f"--audit-log-maxsize={AUDIT_LOG_MAX_MB}", *apiserver_flags]
    with controlplane.running(apiserver_flags=flags) as plane:
        yield plane


def wait_for(
    condition: Callable[[], bool],
    *,
    timeout: float,
    interval: float,
    alive: Callable[[], bool],
    what: str,
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if not alive():
            raise RuntimeError(f"the operator exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        time.sleep(interval)


def every_queue_published(client: httpx.Client, expected: int) -> bool:
    """Whether every queue has ``status.deserved``; stops reading at the first that has not."""
    published = 0
    for page, _ in kubeapi.pages(client, QUEUES_PATH):
        for item in page.get("items") or []:
            if not item.get("status", {}).get("deserved"):
                return False
            published += 1
    return published >= expected


def deserved_cpu(client: httpx.Client, name: str) -> str | None:
    response = client.get(f"{QUEUES_PATH}/{name}")
    response.raise_for_status()
    value: str | None = response.json().get("status", {}).get("deserved", {}).get("cpu")
    return value


def deserved_cpu_moved(client: httpx.Client, name: str, before: str | None) -> bool:
    return deserved_cpu(client, name) != before


def set_weight(client: httpx.Client, name: str, weight: int) -> None:
    response = client.patch(
        f"{QUEUES_PATH}/{name}",
        content=json.dumps({"spec": {"weight": weight}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    response.raise_for_status()


def histograms(metrics_url: str) -> tuple[kubeapi.Histogram | None, kubeapi.Histogram | None]:
    exposition = kubeapi.scrape(metrics_url)
    return (
        kubeapi.histogram(exposition, RECOMPUTE_HISTOGRAM),
        kubeapi.histogram(exposition, QOS_CHECK_HISTOGRAM),
    )


def gc_pauses(metrics_url: str) -> tuple[kubeapi.Histogram | None, kubeapi.Histogram | None]:
    """The operator's collections so far: the full ones, and all."""
    exposition = kubeapi.scrape(metrics_url)
    return (
        kubeapi.histogram(exposition, GC_PAUSE_HISTOGRAM, {"generation": "2"}),
        kubeapi.histogram(exposition, GC_PAUSE_HISTOGRAM),
    )


def pause_figures(
    after: tuple[kubeapi.Histogram | None, kubeapi.Histogram | None],
    before: tuple[kubeapi.Histogram | None, kubeapi.Histogram | None],
) -> Json | None:
    """What the collector took between two ``gc_pauses`` scrapes (None: not exported)."""
    if after[0] is None or after[1] is None:
        return None
    full, every = after[0].since(before[0]), after[1].since(before[1])
    return {
        "full": full.as_json() | {"total_seconds": round(full.sum, 3)},
        "all": every.as_json() | {"total_seconds": round(every.sum, 3)},
    }


def nothing_pending(operator: Operator) -> bool:
    """Whether the operator has no status or annotation write left to send (its ``/healthz``);
    one that does not answer in time (its collector walking the heap) is not done. An operator
    too old to say counts as done."""
    try:
        return not operator.health().get("pendingWrites", 0)
    except (OSError, ValueError):
        return False


def qos_checks_so_far(operator: Operator) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(operator.health().get("qosChecks", 0))
    return None


# --- the simulate figure -----------------------------------------------------------------------

DUMPED = (
    ("v1", "Node", kubeapi.collection_path("v1", "nodes")),
    ("v1", "Pod", kubeapi.collection_path("v1", "pods")),
    (GROUP, "Queue", QUEUES_PATH),
    (GROUP, "SchedulerPolicy", kubeapi.collection_path(GROUP, "schedulerpolicies")),
    (QOS_GROUP, "NodeQosEnsurancePolicy",
     kubeapi.collection_path(QOS_GROUP, "nodeqosensurancepolicies")),
)  # fmt: skip
NODE_METRICS = ("metrics.k8s.io/v1beta1", "NodeMetrics", "/apis/metrics.k8s.io/v1beta1/nodes")


def dump_cluster(client: httpx.Client, path: Path, *, with_metrics: bool) -> Json:
    """Every object simulate reads, as one ``List`` file, the way ``kubectl get -o json`` would
    print them (kind and apiVersion on each item, no managedFields)."""
    started = time.perf_counter()
    listing: list[Json] = []
    for api_version, kind, collection in (*DUMPED, *((NODE_METRICS,) if with_metrics else ())):
        for item in kubeapi.items(client, collection):
            item["metadata"].pop("managedFields", None)
            listing.append({"apiVersion": api_version, "kind": kind, **item})
    with path.open("w") as out:
        json.dump({"apiVersion": "v1", "kind": "List", "items": listing}, out)
    return {
        "objects": len(listing),
        "file_mebibytes": round(path.stat().st_size / 2**20, 1),
        "dump_seconds": round(time.perf_counter() - started, 2),
    }


def time_simulate(path: Path, stderr_file: Path) -> Json:
    """Wall time and peak RSS of ``sharekeeper simulate -f FILE -o json > /dev/null``."""
    command = [str(Path(sys.executable).with_name("sharekeeper")), "simulate", "-f", str(path),
               "-o", "json"]  # fmt: skip
    with open(os.devnull, "wb") as devnull, stderr_file.open("wb") as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=devnull, stderr=errors)
        # wait4, not wait: the child's own resource usage, whatever other children we had.
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        tail = stderr_file.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"simulate exited {process.returncode}:\n{tail}")
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


# --- one size ----------------------------------------------------------------------------------


def measure(workload: Workload, options: Options) -> Json:
    """Build the cluster of ``workload`` in a fresh control plane and take every figure."""
    size = workload.nodes
    result: Json = {"cluster": workload.as_json(), "phases_seconds": {}}
    phases: dict[str, float] = result["phases_seconds"]
    began = time.perf_counter()

    def phase_done(name: str, since: float) -> float:
        now = time.perf_counter()
        phases[name] = round(now - since, 1)
        return now

    with (
        fresh_control_plane(options.apiserver_flags) as plane,
        tempfile.TemporaryDirectory(prefix="bench-operator-") as scratch_name,
    ):
        scratch = Path(scratch_name)
        mark = phase_done("control_plane", began)
        cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)
        access = kubeapi.ApiAccess.from_kubeconfig(plane.kubeconfig)
        cluster.kubectl("apply", "-f", str(CRDS))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.kubectl("apply", "-k", str(MANIFESTS))
        cluster.kubectl("create", "namespace", NAMESPACE)

        with contextlib.ExitStack() as stack:
            metrics: MetricsServer | None = None
            if options.usage == "metrics":
                namespace, name = METRICS_SERVICE
                metrics = stack.enter_context(
                    MetricsServer(
                        scratch / "metrics-server",
                        hosts=(f"{name}.{namespace}.svc",),
                        client_ca=plane.front_proxy_ca,
                    )
                )
                register_metrics_api(cluster, metrics)
                for node_name in workload.node_names():
                    metrics.set_node(node_name, cpu="2", memory="8Gi")
            mark = phase_done("setup", mark)

            creation: Json = {}
            result["creation"] = creation
            for kind, objects in (
                ("nodes", workload.node_objects()),
                ("queues", workload.queue_objects()),
                ("policies", iter([workload.scheduler_policy(), workload.qos_policy()])),
                ("pods", workload.pod_objects()),
            ):
                progress(size, f"creating {kind}")
                done = kubeapi.create_all(access, objects, in_flight=options.in_flight)
                creation[kind] = done.as_json()
                progress(size, f"created {done.count:,} {kind} in {done.seconds:.1f} s "
                         f"({done.per_second:,.0f}/s, {done.retries} retries)")  # fmt: skip
            mark = phase_done("creation", mark)

            with access.client() as client:
                progress(size, "floor: paginated LIST of pods and nodes")
                pods_list = kubeapi.timed_list(client, kubeapi.collection_path("v1", "pods"))
                nodes_list = kubeapi.timed_list(client, kubeapi.collection_path("v1", "nodes"))
                result["floor"] = {
                    "seconds": round(pods_list.seconds + nodes_list.seconds, 3),
                    "pods": pods_list.as_json(),
                    "nodes": nodes_list.as_json(),
                }
                mark = phase_done("floor", mark)
                operator_figures = run_operator(
                    workload, options, plane=plane, cluster=cluster, client=client, scratch=scratch
                )
                result.update(operator_figures)
                mark = phase_done("operator", mark)
                if options.simulate:
                    progress(size, "simulate: dumping the cluster into one file")
                    dumped = options.dump or scratch / "cluster.json"
                    result["simulate"] = dump_cluster(
                        client, dumped, with_metrics=metrics is not None
                    )
                    progress(size, f"simulate -f ({result['simulate']['objects']:,} objects)")
                    result["simulate"] |= time_simulate(dumped, scratch / "simulate.err")
                    mark = phase_done("simulate", mark)
    phase_done("total", began)
    return result


def run_operator(
    workload: Workload,
    options: Options,
    *,
    plane: controlplane.ControlPlane,
    cluster: Cluster,
    client: httpx.Client,
    scratch: Path,
) -> Json:
    """Start the operator, take the operator's figures, stop it."""
    size = workload.nodes
    token = cluster.kubectl(
        "create", "token", "sharekeeper", "-n", "sharekeeper", "--duration=12h"
    ).stdout.strip()
    kubeconfig = controlplane.write_token_kubeconfig(
        plane, scratch / "operator-kubeconfig", token, "sharekeeper"
    )
    log_dir = options.log_dir or scratch
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"operator-{size}.log"
    audit = kubeapi.AuditTail(plane.audit_log, SERVICE_ACCOUNT)
    figures: Json = {}

    webhook_port = controlplane.free_port()
    webhook_args = (
        [f"--webhook-bind-address=127.0.0.1:{webhook_port}",
         f"--webhook-url=https://127.0.0.1:{webhook_port}"]
        if options.reviews_per_second else []
    )  # fmt: skip
    progress(size, f"starting the operator (log {log})")
    started = time.perf_counter()
    operator = start_operator(kubeconfig, log, args=webhook_args)
    reviews: ReviewStream | None = None

    def alive() -> bool:
        return operator.process.poll() is None

    milestones: dict[str, float] = {}
    figures["startup_milestones_seconds"] = milestones

    def published() -> bool:
        """Every queue has a status; on the way, when /readyz turned 200 (every initial list
        in memory) and when the first round was decided (its writes then follow)."""
        at = round(time.perf_counter() - started, 2)
        try:
            if "ready" not in milestones and operator.ready()[0] == 200:
                milestones["ready"] = at
            if "first_round" not in milestones and operator.health().get("recomputeRounds", 0):
                milestones["first_round"] = at
        except OSError:
            pass  # not listening yet
        return every_queue_published(client, workload.queues)

    try:
        wait_for(
            published,
            timeout=options.startup_timeout, interval=STARTUP_POLL_SECONDS, alive=alive,
            what="status on every queue",
        )  # fmt: skip
        figures["startup_seconds"] = round(time.perf_counter() - started, 2)
        progress(size, f"every queue published after {figures['startup_seconds']:.1f} s")
        figures["startup_writes"] = audit.writes()
        settled_after = audit.wait_quiet(
            quiet_for=QUIET_SECONDS, timeout=options.settle_timeout, alive=alive,
            done=functools.partial(nothing_pending, operator),
        )  # fmt: skip
        figures["startup_writes"] = audit.writes()
        figures["startup_settled_seconds"] = round(time.perf_counter() - started, 2)
        progress(size, f"writes settled {settled_after:.1f} s later "
                 f"({figures['startup_writes']:,} writes)")  # fmt: skip

        metrics_url = f"http://127.0.0.1:{operator.metrics_port}/metrics"
        recompute_before, qos_before = histograms(metrics_url)
        gc_before = gc_pauses(metrics_url)
        usage_before = kubeapi.histogram(kubeapi.scrape(metrics_url), QOS_USAGE_HISTOGRAM)
        qos_checks_before = qos_checks_so_far(operator)
        latencies: list[float] = []
        writes_per_change: list[int] = []
        writing_seconds: list[float] = []
        targets = workload.change_targets()
        if options.reviews_per_second:
            reviews = ReviewStream(
                f"https://127.0.0.1:{webhook_port}/gate", webhook_ca(client),
                options.reviews_per_second,
            )  # fmt: skip
            reviews.start()
        for change in range(options.changes):
            target = targets[change % len(targets)]
            before = deserved_cpu(client, target)
            writes_before = audit.writes()
            sent = time.perf_counter()
            set_weight(client, target, 200 + change)
            wait_for(
                functools.partial(deserved_cpu_moved, client, target, before),
                timeout=options.settle_timeout, interval=CHANGE_POLL_SECONDS, alive=alive,
                what=f"new deserved on {target}",
            )  # fmt: skip
            latencies.append(time.perf_counter() - sent)
            if options.change_every:
                time.sleep(max(0.0, sent + options.change_every - time.perf_counter()))
            else:
                waited = audit.wait_quiet(
                    quiet_for=QUIET_SECONDS, timeout=options.settle_timeout, alive=alive,
                    done=functools.partial(nothing_pending, operator),
                )  # fmt: skip
                writing_seconds.append(max(0.0, waited - QUIET_SECONDS))
            writes_per_change.append(audit.writes() - writes_before)
            progress(size, f"change {change + 1}/{options.changes}: {latencies[-1]:.2f} s, "
                     f"{writes_per_change[-1]:,} writes")  # fmt: skip
        recompute_after, _ = histograms(metrics_url)
        figures["gc_pauses"] = pause_figures(gc_pauses(metrics_url), gc_before)

        progress(size, f"idle for {IDLE_WINDOW_SECONDS:.0f} s")
        if reviews is not None:
            reviews.window = "idle"
        idle_from = audit.writes()
        time.sleep(IDLE_WINDOW_SECONDS)
        idle_writes = audit.writes() - idle_from
        if reviews is not None:
            figures["webhook_reviews"] = reviews.finish()
        _, qos_after = histograms(metrics_url)
        usage_after = kubeapi.histogram(kubeapi.scrape(metrics_url), QOS_USAGE_HISTOGRAM)
        qos_checks_after = qos_checks_so_far(operator)
        memory = memory_of(operator.process.pid)
        for child in children(operator.process.pid):  # the webhook's, when it serves one
            figures["webhook_memory"] = memory_of(child)
        if not alive():
            raise RuntimeError("the operator exited during the idle window")

        figures["event_to_status"] = {
            "changes": len(latencies),
            "p50_seconds": round(nearest_rank(latencies, 0.5), 3),
            "p99_seconds": round(nearest_rank(latencies, 0.99), 3),
            "max_seconds": round(max(latencies), 3),
            "samples_seconds": [round(x, 3) for x in latencies],
        }
        figures["writes_per_change"] = writes_per_change
        if options.change_every:
            figures["change_every_seconds"] = options.change_every
        # From the new status showing up to the last write of that change (+- 0.25 s).
        figures["writes_after_status_seconds"] = [round(x, 2) for x in writing_seconds]
        figures["recompute_round"] = (
            None if recompute_after is None else recompute_after.since(recompute_before).as_json()
        )
        qos: Json = {"exported": qos_after is not None}
        if qos_after is not None:
            qos |= qos_after.since(qos_before).as_json()
        if usage_after is not None:
            qos["reading_usage"] = usage_after.since(usage_before).as_json()
        if qos_checks_before is not None and qos_checks_after is not None:
            qos["checks_in_window"] = qos_checks_after - qos_checks_before
        figures["qos_check"] = qos
        figures["operator_memory"] = memory
        figures["idle_writes_30s"] = idle_writes
        figures["writes_by_kind"] = dict(audit.by_resource.most_common())
    except BaseException:
        progress(size, f"failed; the operator's log ends:\n{operator.tail(40)}")
        raise
    finally:
        if reviews is not None:
            reviews.finish()
        operator.stop(signal.SIGTERM)
    return figures


def webhook_ca(client: httpx.Client) -> str:
    """The CA the operator's webhook certificate is signed by, from the Secret it keeps (in the
    namespace the operator runs in here, its ServiceAccount's)."""
    kept = WebhookSettings(address=("", 0), namespace="sharekeeper")
    response = client.get(f"/api/v1/namespaces/{kept.namespace}/secrets/{kept.secret}")
    response.raise_for_status()
    return base64.b64decode(response.json()["data"][CA_CERT]).decode()


class ReviewStream(threading.Thread):
    """AdmissionReviews POSTed to the webhook at a steady rate, one at a time; each round trip
    is kept under the ``window`` it was sent in (set by the caller)."""

    REVIEW: ClassVar[Json] = {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "bench", "operation": "CREATE", "object": {
            "metadata": {"name": "p", "namespace": NAMESPACE,
                         "labels": {QUEUE_LABEL: "q-0"}},
            "spec": {"containers": [{"name": "main", "image": "none"}]}}},
    }  # fmt: skip

    def __init__(self, url: str, ca_pem: str, per_second: float) -> None:
        super().__init__(daemon=True)
        self.url, self.ca_pem, self.interval = url, ca_pem, 1.0 / per_second
        self.window = "changes"
        self.seconds: dict[str, list[float]] = {}
        self.failures = 0
        self._stopping = threading.Event()

    def run(self) -> None:
        context = ssl.create_default_context(cadata=self.ca_pem)
        with httpx.Client(verify=context, timeout=30) as client:
            due = time.perf_counter()
            while not self._stopping.is_set():
                sent = time.perf_counter()
                try:
                    client.post(self.url, json=self.REVIEW).raise_for_status()
                except httpx.HTTPError:
                    self.failures += 1
                else:
                    self.seconds.setdefault(self.window, []).append(time.perf_counter() - sent)
                due = max(due + self.interval, time.perf_counter())
                self._stopping.wait(due - time.perf_counter())

    def finish(self) -> Json:
        self._stopping.set()
        self.join(timeout=60)
        figures: Json = {"failures": self.failures}
        for window, samples in self.seconds.items():
            figures[window] = {
                "reviews": len(samples),
                "p50_ms": round(nearest_rank(samples, 0.5) * 1000, 1),
                "p99_ms": round(nearest_rank(samples, 0.99) * 1000, 1),
                "max_ms": round(max(samples) * 1000, 1),
            }
        return figures


# --- reporting ---------------------------------------------------------------------------------


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def histogram_text(figure: Json | None, unit: str) -> str:
    if not figure or not figure.get("observations"):
        return "n/a"
    slowest = figure["slowest_at_most_seconds"]
    bound = "beyond the last bucket" if slowest == "+Inf" else f"all <= {seconds(slowest)}"
    return f"{seconds(figure['mean_seconds'])} mean ({bound}; {figure['observations']} {unit})"


def pause_text(pauses: Json | None) -> str:
    if not pauses:
        return "n/a (not exported)"
    full, every = pauses["full"], pauses["all"]
    return (
        f"{full['observations']} full collections, {seconds(full['total_seconds'])} "
        f"({every['observations']:,} collections in all, {seconds(every['total_seconds'])})"
    )


def table_rows(result: Json, usage: str) -> list[tuple[str, str]]:
    """The figures of one size as (figure, value) rows."""
    cluster, creation = result["cluster"], result["creation"]
    floor = result["floor"]
    latency = result["event_to_status"]
    qos = result["qos_check"]
    if qos.get("exported"):
        qos_text = histogram_text(qos, "checks")
    else:
        qos_text = f"n/a (not exported; {qos.get('checks_in_window', '?')} checks ran)"
    usage_text = "usage from the stand-in" if usage == "metrics" else "no usage"
    created = ", ".join(
        f"{kind} {creation[kind]['per_second']:,.0f}" for kind in ("nodes", "queues", "pods")
    )
    memory = result["operator_memory"]
    changes = result["writes_per_change"]
    rows = [
        ("cluster", f"{cluster['nodes']:,} nodes ({cluster['gpu_nodes']:,} GPU), "
                    f"{cluster['pods']:,} pods ({cluster['bound_pods']:,} bound, "
                    f"{cluster['gpu_pods']:,} GPU), {cluster['queues']:,} queues"
                    + (f" (a tree of fanout {cluster['tree_fanout']}, "
                       f"{cluster['tree_levels']} levels)" if cluster["tree_fanout"] else "")),
        ("creation, objects/s (in flight)", f"{created} ({creation['pods']['in_flight']})"),
        ("floor: paginated LIST of pods + nodes",
         f"{seconds(floor['seconds'])} (pods {seconds(floor['pods']['seconds'])}, "
         f"{floor['pods']['mebibytes']} MiB; nodes {seconds(floor['nodes']['seconds'])})"),
        ("operator start -> ready (every list in memory)",
         seconds(result.get("startup_milestones_seconds", {}).get("ready"))),
        ("operator start -> first round decided",
         seconds(result.get("startup_milestones_seconds", {}).get("first_round"))),
        ("operator start -> every queue's status", seconds(result["startup_seconds"])),
        (f"event -> status, p50 / p99 (n={latency['changes']})",
         f"{seconds(latency['p50_seconds'])} / {seconds(latency['p99_seconds'])}"),
        ("one recompute round (during the changes)",
         histogram_text(result["recompute_round"], "rounds")),
        ("  garbage collector, during the changes", pause_text(result.get("gc_pauses"))),
        (f"one QoS check of every node ({usage_text})", qos_text),
        ("  of which reading usage from metrics.k8s.io",
         histogram_text(qos.get("reading_usage"), "checks") if qos.get("reading_usage") else "n/a"),
        ("operator RSS after settling (peak)",
         f"{memory['rss_mib']:,.0f} MiB ({memory['peak_rss_mib']:,.0f} MiB)"),
        *(("  its webhook's process",
            f"{w['rss_mib']:,.0f} MiB ({w['peak_rss_mib']:,.0f} MiB)")
          for w in ([result["webhook_memory"]] if "webhook_memory" in result else [])),
        ("operator writes in 30 s idle", str(result["idle_writes_30s"])),
        *((f"webhook review round trip, {window}: p50 / p99 / max (n)",
           f"{w['p50_ms']:,} / {w['p99_ms']:,} / {w['max_ms']:,} ms ({w['reviews']:,})")
          for window, w in result.get("webhook_reviews", {}).items() if window != "failures"),
        ("operator writes per weight change, median"
         + (f" (one every {paced:g} s)" if (paced := result.get("change_every_seconds")) else ""),
         f"{sorted(changes)[len(changes) // 2]:,}" if changes else "n/a"),
    ]  # fmt: skip
    simulate = result.get("simulate")
    if simulate:
        rows.append(
            ("simulate -f ONE_FILE -o json",
             f"{seconds(simulate['seconds'])}, peak {simulate['peak_rss_mib']:,.0f} MiB "
             f"({simulate['objects']:,} objects, {simulate['file_mebibytes']} MiB)")
        )  # fmt: skip
    rows.append(("wall time of this size", seconds(result["phases_seconds"]["total"])))
    return rows


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(figure) for figure, _ in rows)
    print(f"| {'figure'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|---|")
    for figure, value in rows:
        print(f"| {figure.ljust(width)} | {value} |")


def merged(path: Path, results: list[Json], meta: Json) -> Json:
    """The runs already in ``path``, with the sizes just measured replaced."""
    runs: dict[int, Json] = {}
    if path.exists():
        for run in json.loads(path.read_text()).get("runs", []):
            runs[run["cluster"]["nodes"]] = run
    for run in results:
        runs[run["cluster"]["nodes"]] = {**run, "meta": meta}
    return {"runs": [runs[size] for size in sorted(runs)]}


def run_meta(options: Options, size_list: Sequence[int]) -> Json:
    return {
        **provenance(REPO),
        "kubernetes": controlplane.KUBERNETES_VERSION,
        "sizes_in_run": list(size_list),
        "changes": options.changes,
        "change_every_seconds": options.change_every,
        "in_flight": options.in_flight,
        "usage": options.usage,
        "apiserver_flags": list(options.apiserver_flags),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,1000,2000,5000",
                        help="node counts, comma-separated (default %(default)s)")  # fmt: skip
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--queues-per-node", type=int, default=2)
    parser.add_argument("--tree-fanout", type=int, default=0,
                        help="the queues as leaves of a tree of this fanout (0: flat)")  # fmt: skip
    parser.add_argument("--changes", type=int, default=20, help="weight changes per size")
    parser.add_argument("--in-flight", type=int, default=32, help="concurrent creates")
    parser.add_argument("--usage", choices=("metrics", "none"), default="metrics",
                        help="node usage from the stand-in metrics-server, or none")  # fmt: skip
    parser.add_argument("--simulate", choices=("top", "all", "none"), default="top",
                        help="time simulate on the largest size, every size, or none")  # fmt: skip
    parser.add_argument("--startup-timeout", type=float, default=3600)
    parser.add_argument("--settle-timeout", type=float, default=1800)
    parser.add_argument(
        "--apiserver-flag",
        action="append",
        default=[],
        help="an extra kube-apiserver flag: --apiserver-flag=--max-requests-inflight=800",
    )
    parser.add_argument("--reviews-per-second", type=float, default=0.0,
                        help="serve the webhook, time reviews at this rate (0: off)")  # fmt: skip
    parser.add_argument("--change-every", type=float, default=0.0,
                        help="a weight change every this many seconds, while the last one's "
                        "writes still stream (default: each once they settled)")  # fmt: skip
    parser.add_argument("--log-dir", type=Path, help="keep the operator's logs here")
    parser.add_argument("--keep-dump", type=Path, help="write simulate's file here and keep it")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "scale.json")
    parser.add_argument("--plot", type=Path, default=REPO / "benchmarks" / "scale.png")
    args = parser.parse_args()

    size_list = sorted({int(size) for size in args.sizes.split(",")})
    options = Options(
        changes=args.changes, in_flight=args.in_flight, usage=args.usage,
        simulate=False, startup_timeout=args.startup_timeout,
        settle_timeout=args.settle_timeout, log_dir=args.log_dir, dump=args.keep_dump,
        apiserver_flags=tuple(args.apiserver_flag), reviews_per_second=args.reviews_per_second,
        change_every=args.change_every,
    )  # fmt: skip
    meta = run_meta(options, size_list)
    results: list[Json] = []
    failed = False
    for size in size_list:
        workload = Workload(
            size, args.pods_per_node, args.queues_per_node, tree_fanout=args.tree_fanout
        )
        workload.check()
        simulate = args.simulate == "all" or (args.simulate == "top" and size == size_list[-1])
        try:
            result = measure(workload, dataclasses.replace(options, simulate=simulate))
        except Exception:
            failed = True
            traceback.print_exc()
            progress(size, "this size failed; going on with the next")
            continue
        results.append(result)
        print(f"\n== {size:,} nodes")
        print_table(table_rows(result, options.usage))
        args.out.write_text(json.dumps(merged(args.out, [result], meta), indent=1) + "\n")
    if results:
        print(f"\nfigures in {args.out}")
        try:
            import plot_scale
        except ImportError as missing:  # matplotlib is in the optional "bench" extra
            print(f"no plot: {missing} (make venv installs the locked bench extra)")
        else:
            plot_scale.plot(json.loads(args.out.read_text())["runs"], args.plot)
            print(f"plot in {args.plot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
