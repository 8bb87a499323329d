"""What a ``/metrics`` scrape costs the operator, by the number of queues.

Run: ``python benchmarks/bench_metrics.py``. Each queue has a deserved and an allocated amount
in 3 resources (cpu, memory, pods), its share and whether it is overused: 8 series a queue.
CPU time (``time.process_time``), best of 5, three figures per size:

- ``first scrape``: the whole answer after a round handed over a new result (the queues'
  series written out, then the registry's own);
- ``same round again``: a scrape before the next round (the queues' text is kept);
- ``as metric families``: the same series made as prometheus_client's metric families and
  rendered by its exposition, the way the operator made them until the text was its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sharekeeper import telemetry
from sharekeeper.engine.shares import ShareResult
from sharekeeper.engine.shares.snapshot import QueueShare
from sharekeeper.model.quantities import scale

SIZES = (1_000, 10_000)


def result(queues: int) -> ShareResult:
    def amounts(i: int) -> dict[str, int]:
        return {"cpu": 4_000 + i, "memory": (2 + i % 7) << 30, "pods": 10 + i % 5}

    return ShareResult(
        {
            f"q-{i:05d}": QueueShare(
                None, "Open", amounts(i), {}, {}, amounts(i + 1), {}, {}, {}, 0.5, i % 3 == 0
            )
            for i in range(queues)
        },
        {},
    )


class AsFamilies(Collector):
    """The queues' series as metric families, for prometheus_client's exposition."""

    def __init__(self, shares: ShareResult) -> None:
        self.shares = shares

    def collect(self) -> Iterator[Metric]:
        deserved = GaugeMetricFamily("sharekeeper_queue_deserved", "", labels=("queue", "resource"))
        allocated = GaugeMetricFamily(
            "sharekeeper_queue_allocated", "", labels=("queue", "resource")
        )
        share = GaugeMetricFamily("sharekeeper_queue_share", "", labels=("queue",))
        overused = GaugeMetricFamily("sharekeeper_queue_overused", "", labels=("queue",))
        for name, queue in self.shares.queues.items():
            share.add_metric((name,), queue.share)
            overused.add_metric((name,), 1 if queue.overused else 0)
            for family, amounts in ((deserved, queue.deserved), (allocated, queue.allocated)):
                for resource, amount in amounts.items():
                    family.add_metric((name, resource), amount / scale(resource))
        return iter((deserved, allocated, share, overused))


def best(run: Callable[[], object], setup: Callable[[], object] = lambda: None) -> float:
    times = []
    for _ in range(5):
        setup()
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def scrape() -> bytes:
    return generate_latest(REGISTRY) + telemetry.QUEUES.exposition()


def row(size: int) -> str:
    shares = result(size)
    series = sum(2 + len(q.deserved) + len(q.allocated) for q in shares.queues.values())
    first = best(scrape, lambda: telemetry.QUEUES.export(result(size)))
    again = best(scrape)
    families = CollectorRegistry()
    families.register(AsFamilies(shares))
    before = best(lambda: generate_latest(REGISTRY) + generate_latest(families))
    return (
        f"| {size:,} | {series:,} | {1000 * first:.1f} ms | {1000 * again:.1f} ms"
        f" | {1000 * before:.1f} ms |"
    )


def main() -> None:
    print("| queues | series | first scrape | same round again | as metric families |")
    print("|---:|---:|---:|---:|---:|")
    for size in SIZES:
        print(row(size))


if __name__ == "__main__":
    main()
