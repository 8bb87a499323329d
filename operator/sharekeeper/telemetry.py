"""Prometheus metrics: what a person graphs to see the operator and the queues it computes."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

QUEUE_DESERVED = Gauge(
    "sharekeeper_queue_deserved", "Deserved amount per queue and resource, in Kubernetes units",
    ["queue", "resource"],
)  # fmt: skip
QUEUE_ALLOCATED = Gauge(
    "sharekeeper_queue_allocated", "Allocated amount per queue and resource, in Kubernetes units",
    ["queue", "resource"],
)  # fmt: skip
QUEUE_SHARE = Gauge("sharekeeper_queue_share", "Largest allocated/deserved ratio", ["queue"])
QUEUE_OVERUSED = Gauge("sharekeeper_queue_overused", "1 when allocated exceeds deserved", ["queue"])
RECOMPUTE_SECONDS = Histogram(
    "sharekeeper_recompute_seconds", "Time of one snapshot -> engine -> publish round",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)  # fmt: skip
WRITES = Counter(
    "sharekeeper_writes_total", "API writes by kind of object and outcome", ["kind", "outcome"]
)
