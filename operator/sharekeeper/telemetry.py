"""Prometheus metrics: what a person graphs to see the operator and the queues it computes."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Callable, Mapping

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest

from sharekeeper.engine.shares import ShareResult
from sharekeeper.engine.shares.snapshot import QueueName, QueueShare
from sharekeeper.model.quantities import scale


class QueueSeries:
    """The per-queue series, rendered from the last round's result when /metrics is scraped.

    At 10,000 queues they are 80,000 to 90,000 series. Kept as prometheus_client's gauge
    children (each with its lock and value object) they were 410,000 long-lived objects (about
    90 MiB) that the cyclic collector walked; made at scrape time as its metric families and
    rendered by its exposition, a scrape cost 1.2 s of CPU (0.13 s at 1,000 queues). So they are
    written as text here, once per round's result however often it is scraped
    (``benchmarks/bench_metrics.py``). A round only hands its result over, and a deleted queue
    has no series left to remove. The result is never changed once made, so the scrape's thread
    reads it while the next round makes the next one."""

    def __init__(self) -> None:
        self._queues: Mapping[QueueName, QueueShare] = {}
        self._lock = threading.Lock()
        self._rendered: tuple[Mapping[QueueName, QueueShare], bytes] = ({}, _queue_text({}))

    def export(self, result: ShareResult) -> None:
        self._queues = result.queues

    def exposition(self) -> bytes:
        """The series in Prometheus' text format (0.0.4)."""
        queues = self._queues
        with self._lock:  # concurrent scrapes of a new result render it once
            if self._rendered[0] is not queues:
                self._rendered = (queues, _queue_text(queues))
            return self._rendered[1]


_AMOUNT_FAMILIES: tuple[tuple[str, str, Callable[[QueueShare], Mapping[str, int]]], ...] = (
    ("sharekeeper_queue_deserved", "Deserved amount per queue and resource, in Kubernetes units",
     lambda queue: queue.deserved),
    ("sharekeeper_queue_allocated", "Allocated amount per queue and resource, in Kubernetes units",
     lambda queue: queue.allocated),
)  # fmt: skip


def _queue_text(queues: Mapping[QueueName, QueueShare]) -> bytes:
    labels = {name: _label_value(name) for name in queues}
    resources: dict[str, tuple[str, int]] = {}
    lines: list[str] = []
    for family, help_text, amounts in _AMOUNT_FAMILIES:
        lines.append(f"# HELP {family} {help_text}\n# TYPE {family} gauge\n")
        for name, queue in queues.items():
            series = f'{family}{{queue="{labels[name]}",resource="'
            for resource, amount in amounts(queue).items():
                known = resources.get(resource)
                if known is None:
                    known = resources[resource] = (_label_value(resource), scale(resource))
                lines.append(f'{series}{known[0]}"}} {amount / known[1]!r}\n')
    lines.append(
        "# HELP sharekeeper_queue_share Largest allocated/deserved ratio\n"
        "# TYPE sharekeeper_queue_share gauge\n"
    )
    lines.extend(
        f'sharekeeper_queue_share{{queue="{labels[name]}"}} {float(queue.share)!r}\n'
        for name, queue in queues.items()
    )
    lines.append(
        "# HELP sharekeeper_queue_overused 1 when allocated exceeds deserved\n"
        "# TYPE sharekeeper_queue_overused gauge\n"
    )
    lines.extend(
        f'sharekeeper_queue_overused{{queue="{labels[name]}"}} {1 if queue.overused else 0}\n'
        for name, queue in queues.items()
    )
    return "".join(lines).encode()


def _label_value(value: str) -> str:
    """As the text format escapes a label value. Queue and resource names are validated by the
    API server (no backslash, quote or newline can pass), but escaping costs little here."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


QUEUES = QueueSeries()


def serve(host: str, port: int) -> int:
    """``GET /metrics`` on ``host:port``, answered from a thread of its own: the registry's
    series, then the queues'. Always the text format 0.0.4, which every Prometheus reads.
    Returns the port it listens on (the one the system chose, for port 0)."""
    # The family the address is in (IPv6 for "::"), as http.server alone would take IPv4.
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(http.server.ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

    server = Server((str(address[0]), port), _Scrape)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return int(server.server_address[1])


class _Scrape(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.partition("?")[0] != "/metrics":
            self.send_error(404, "only /metrics is served here")
            return
        body = generate_latest(REGISTRY) + QUEUES.exposition()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """One line per scrape is noise."""


RECOMPUTE_SECONDS = Histogram(
    "sharekeeper_recompute_seconds",
    "Time of one round: waiting for a QoS check in progress, snapshot -> engines -> diff",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)  # fmt: skip
GC_PAUSE_SECONDS = Histogram(
    "sharekeeper_gc_pause_seconds",
    "Time the cyclic garbage collector held the process, per collection, by the oldest"
    " generation it collected (2: a full collection)",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)  # fmt: skip
PENDING_WRITES = Gauge(
    "sharekeeper_pending_writes", "Status and node patches decided but not yet sent"
)
WRITES = Counter(
    "sharekeeper_writes_total", "API writes by kind of object and outcome", ["kind", "outcome"]
)
STATUS_NOT_WRITTEN = Gauge(
    "sharekeeper_status_not_written",
    "Queues and SchedulerPolicies whose status writes failed 3 times in a row and have not"
    " landed since, by kind; each failed write counts as outcome error in"
    " sharekeeper_writes_total",
    ["kind"],
)
WRITE_RETRIES = Counter(
    "sharekeeper_write_retries_total",
    "API writes sent again after a transient failure, by kind of object and failure (http_429,"
    " http_5xx, timeout, transport); a write given up counts as outcome error in"
    " sharekeeper_writes_total",
    ["kind", "reason"],
)  # fmt: skip
UNREADABLE = Gauge(
    "sharekeeper_unreadable_objects",
    "Objects (or parts of them) the operator cannot read and leaves out, by kind",
    ["kind"],
)
QOS_USAGE_SECONDS = Histogram(
    "sharekeeper_qos_usage_seconds", "Time a QoS check spends reading usage from metrics.k8s.io",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)  # fmt: skip
QOS_CHECK_SECONDS = Histogram(
    "sharekeeper_qos_check_seconds", "Time of one node QoS check of every governed node "
    "(reading usage, the engine, acting and publishing)",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)  # fmt: skip
WATCH_LISTS = Counter(
    "sharekeeper_watch_lists_total", "Complete LISTs per watched resource", ["resource"]
)
WATCH_RELISTS = Counter(
    "sharekeeper_watch_relists_total",
    "LISTs started over: reason expired (410, resourceVersion or continue token too old) or error"
    " (an unexpected answer or a failing store; the store may have missed an event)",
    ["resource", "reason"],
)  # fmt: skip
WATCH_RESTARTS = Counter(
    "sharekeeper_watch_restarts_total",
    "WATCH requests restarted from the last resourceVersion: reason timeout (normal end),"
    " transport (connection failed or dropped), error (an ERROR event), http_<code>",
    ["resource", "reason"],
)  # fmt: skip
WATCH_EVENTS = Counter(
    "sharekeeper_watch_events_total", "Watch events received by type", ["resource", "type"]
)
WATCH_SYNCED = Gauge(
    "sharekeeper_watch_synced", "1 once the first complete LIST reached the store", ["resource"]
)
WATCH_SERVED = Gauge(
    "sharekeeper_watch_served",
    "1 while a resource defined by a CRD (ours, Volcano's PodGroups) is served, 0 while not",
    ["resource"],
)
LEADER = Gauge(
    "sharekeeper_leader",
    "1 while this replica holds the leader Lease and acts; 0 while it only watches (always 1 "
    "without --leader-elect)",
)
LEADERSHIP_TRANSITIONS = Counter(
    "sharekeeper_leadership_acquired_total", "Times this replica became the leader"
)
QOS_USAGE_CLOCK_AHEAD = Gauge(
    "sharekeeper_qos_usage_clock_ahead_seconds",
    "How far the newest NodeMetrics timestamp of the last QoS check was ahead of the "
    "operator's clock (0: not ahead)",
)
USAGE_AVAILABLE = Gauge(
    "sharekeeper_usage_available",
    "1 when the last QoS check could read usage from metrics.k8s.io, 0 when it could not",
)
PODS_HELD = Gauge(
    "sharekeeper_admission_held_pods", "Pods the admission gate holds, at the last share round"
)
ADMISSION_UNBOUND = Gauge(
    "sharekeeper_admission_unbound",
    "What the pods the admission gate released and no scheduler has bound yet (within their"
    " bind timeout) request, by policy and resource, in Kubernetes units (pods: how many), at"
    " the last share round: the room they hold until they are bound",
    ["policy", "resource"],
)
PODS_RELEASED = Counter(
    "sharekeeper_admission_released_pods_total", "Pods released from the admission gate"
)
QOS_EVICTIONS_BLOCKED = Counter(
    "sharekeeper_qos_evictions_blocked_total",
    "Node QoS evictions a PodDisruptionBudget refused (EvictionBlocked), by the metric whose"
    " waterline wanted them; the node's evictions end there for the check",
    ["metric"],
)  # fmt: skip
RECLAIM_EVICTIONS = Counter(
    "sharekeeper_reclaim_evictions_total",
    "Pods evicted by reclaim (accepted by the Eviction API)",
    ["policy"],
)
RECLAIM_REFUSED = Counter(
    "sharekeeper_reclaim_evictions_refused_total",
    "Reclaim evictions refused (a PodDisruptionBudget, or any other refusal)",
    ["policy"],
)
RECLAIM_WAITING = Gauge(
    "sharekeeper_reclaim_waiting",
    "Held pods waiting for room under a policy whose reclaim mode is Preview or On",
    ["policy"],
)
