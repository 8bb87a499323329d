"""Prometheus metrics: what a person graphs to see the operator and the queues it computes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sharekeeper.engine.shares import ShareResult
from sharekeeper.engine.shares.snapshot import QueueName, QueueShare
from sharekeeper.model.quantities import scale


class QueueSeries(Collector):
    """The per-queue series, made from the last round's result when /metrics is scraped.

    At 10,000 queues they are 91,000 series: kept as prometheus_client's gauge children (each
    with its lock and value object) they were 410,000 long-lived objects (about 90 MiB) that
    the cyclic collector walked and a weight change set again one by one. Made at scrape time
    instead, a round only hands its result over, and a deleted queue has no series left to
    remove. The result is never changed once made, so the scrape's thread reads it
    while the next round makes the next one."""

    def __init__(self) -> None:
        self._queues: Mapping[QueueName, QueueShare] = {}

    def export(self, result: ShareResult) -> None:
        self._queues = result.queues

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        deserved, allocated, share, overused = families = self._families()
        for name, queue in self._queues.items():
            share.add_metric((name,), float(queue.share))
            overused.add_metric((name,), 1 if queue.overused else 0)
            for family, amounts in ((deserved, queue.deserved), (allocated, queue.allocated)):
                for resource, amount in amounts.items():
                    family.add_metric((name, resource), amount / scale(resource))
        return iter(families)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "sharekeeper_queue_deserved",
                "Deserved amount per queue and resource, in Kubernetes units",
                labels=("queue", "resource"),
            ),
            GaugeMetricFamily(
                "sharekeeper_queue_allocated",
                "Allocated amount per queue and resource, in Kubernetes units",
                labels=("queue", "resource"),
            ),
            GaugeMetricFamily(
                "sharekeeper_queue_share", "Largest allocated/deserved ratio", labels=("queue",)
            ),
            GaugeMetricFamily(
                "sharekeeper_queue_overused",
                "1 when allocated exceeds deserved",
                labels=("queue",),
            ),
        )


QUEUES = QueueSeries()
REGISTRY.register(QUEUES)
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
