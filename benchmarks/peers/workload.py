"""The workload both admission controllers get, and the arithmetic of what is measured.

Pure: no cluster, no clock. ``bench_kueue.py`` turns a ``Shape`` into objects, submits the
``jobs`` at their times and feeds what it saw back into ``summary``, ``saturation_window``,
``rate_in`` and ``fairness``.

The shape (defaults: issue 26's small size): ``nodes`` fake nodes of ``node_cpu`` cpu and
``node_memory_gib`` GiB; ``queues`` queues, queue i of weight ``min_weight + i mod (max_weight -
min_weight + 1)``; ``jobs`` batch/v1 Jobs, job j in a queue drawn at random, with ``pods`` pods
(1 to ``max_pods``, all at once: parallelism = completions) of ``pod_cpu_milli`` cpu and
``pod_memory_gib`` GiB each, that each run ``run_seconds`` (``min_run_seconds`` to
``max_run_seconds``) once placed, submitted at ``j / jobs_per_second`` seconds. Every draw comes
from one ``random.Random(seed)``, so a seed is a workload.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from figures import nearest_rank

Json = dict[str, Any]


@dataclass(frozen=True)
class Shape:
    nodes: int = 100
    node_cpu: int = 8
    node_memory_gib: int = 32
    queues: int = 50
    jobs: int = 2000
    max_pods: int = 8
    pod_cpu_milli: int = 1000
    pod_memory_gib: int = 2
    min_run_seconds: int = 20
    max_run_seconds: int = 40
    jobs_per_second: float = 8.0
    min_weight: int = 2
    max_weight: int = 5
    seed: int = 26

    def weight(self, queue: int) -> int:
        return self.min_weight + queue % (self.max_weight - self.min_weight + 1)

    def queue_name(self, queue: int) -> str:
        return f"q-{queue:04d}"

    def node_name(self, node: int) -> str:
        return f"kwok-{node:04d}"

    @property
    def cluster_cpu_milli(self) -> int:
        return self.nodes * self.node_cpu * 1000

    @property
    def mean_pods(self) -> float:
        return (1 + self.max_pods) / 2

    @property
    def mean_run_seconds(self) -> float:
        return (self.min_run_seconds + self.max_run_seconds) / 2

    @property
    def jobs_per_second_at_capacity(self) -> float:
        """What a full cluster finishes, on average: more than this arriving is saturation."""
        pods_at_once = self.cluster_cpu_milli / self.pod_cpu_milli
        return pods_at_once / self.mean_run_seconds / self.mean_pods

    def as_json(self) -> Json:
        return {
            **asdict(self),
            "pods_expected": round(self.jobs * self.mean_pods),
            "jobs_per_second_at_capacity": round(self.jobs_per_second_at_capacity, 2),
        }


@dataclass(frozen=True)
class JobSpec:
    name: str
    queue: int
    pods: int
    run_seconds: int
    at: float
    """When it is submitted, in seconds after the first job."""


def jobs(shape: Shape) -> list[JobSpec]:
    """The shape's jobs, in submission order; the same for the same shape."""
    draw = random.Random(shape.seed)
    return [
        JobSpec(
            name=f"job-{index:05d}",
            queue=draw.randrange(shape.queues),
            pods=draw.randint(1, shape.max_pods),
            run_seconds=draw.randint(shape.min_run_seconds, shape.max_run_seconds),
            at=index / shape.jobs_per_second,
        )
        for index in range(shape.jobs)
    ]


def job_cpu_milli(shape: Shape, job: JobSpec) -> int:
    return job.pods * shape.pod_cpu_milli


def unfit_jobs(
    shape: Shape, work: Sequence[JobSpec], deserved_cpu_milli: Sequence[int]
) -> list[str]:
    """The jobs asking for more cpu than their queue deserves: Kueue, which admits a job whole,
    would hold such a job until it can borrow, while we admit its pods one by one. A comparable
    workload has none."""
    return [job.name for job in work if job_cpu_milli(shape, job) > deserved_cpu_milli[job.queue]]


# --- figures ------------------------------------------------------------------------------------


def summary(samples: Sequence[float]) -> Json:
    """Count, mean, p50, p90, p99 (nearest rank) and max; only the count when empty."""
    if not samples:
        return {"count": 0}
    return {
        "count": len(samples),
        "mean": round(sum(samples) / len(samples), 3),
        "p50": round(nearest_rank(samples, 0.50), 3),
        "p90": round(nearest_rank(samples, 0.90), 3),
        "p99": round(nearest_rank(samples, 0.99), 3),
        "max": round(max(samples), 3),
    }


def summary_by_weight(shape: Shape, waits: Iterable[tuple[JobSpec, float]]) -> dict[str, Json]:
    """``summary`` of the waits of each queue weight's jobs, keyed by the weight (as text, for
    JSON): under shares by weight and demand drawn alike for every queue, the low weights'
    jobs wait longest, so this shows whose tail the p99 is."""
    found: dict[int, list[float]] = {}
    for job, wait in waits:
        found.setdefault(shape.weight(job.queue), []).append(wait)
    return {str(weight): summary(found[weight]) for weight in sorted(found)}


def backlog(submitted: Sequence[float], admitted: Sequence[float]) -> list[tuple[float, int]]:
    """(time, jobs submitted and not admitted yet just after it), one step per event; at equal
    times a submission counts before an admission."""
    steps = sorted([(t, 0, 1) for t in submitted] + [(t, 1, -1) for t in admitted])
    level, out = 0, []
    for time, _, change in steps:
        level += change
        out.append((time, level))
    return out


def saturation_window(
    submitted: Sequence[float], admitted: Sequence[float], fraction: float = 0.25
) -> tuple[float, float] | None:
    """From when the backlog (jobs submitted, not yet admitted) first reaches ``fraction`` of
    its peak to when it last falls below that: the stretch in which every admission waited for
    room, not for work. None without a backlog."""
    steps = backlog(submitted, admitted)
    peak = max((level for _, level in steps), default=0)
    if peak <= 0:
        return None
    threshold = max(1.0, fraction * peak)
    above = [index for index, (_, level) in enumerate(steps) if level >= threshold]
    start = steps[above[0]][0]
    last = above[-1]
    end = steps[last + 1][0] if last + 1 < len(steps) else steps[last][0]
    return (start, end) if end > start else None


def rate_in(times: Sequence[float], window: tuple[float, float] | None) -> float | None:
    """Events per second inside ``window`` (both ends included)."""
    if window is None:
        return None
    start, end = window
    inside = sum(1 for t in times if start <= t <= end)
    return inside / (end - start)


def mean_in(
    series: Sequence[tuple[float, float]], window: tuple[float, float] | None
) -> float | None:
    """The mean of the values of ``series`` ((time, value), taken at a steady interval) whose
    time is inside ``window`` (both ends included); None when none is."""
    if window is None:
        return None
    start, end = window
    inside = [value for time, value in series if start <= time <= end]
    return sum(inside) / len(inside) if inside else None


def fairness(
    samples: Sequence[tuple[float, Mapping[int, float]]],
    deserved: Mapping[int, float],
    window: tuple[float, float] | None,
) -> Json:
    """How far each queue's use stayed from what it deserves inside ``window``.

    ``samples`` are (time, queue -> amount in use) taken at a steady interval; a queue missing
    from a sample used nothing. Per queue, the mean over the window's samples of use /
    deserved; then, over the queues: the mean of those ratios, the mean and the largest
    distance from 1 (and which queue), and Jain's index of the ratios (1: every queue got the
    same fraction of what it deserves; 1/n: one queue got everything)."""
    if window is None:
        return {"samples": 0}
    start, end = window
    inside = [used for time, used in samples if start <= time <= end]
    queues = sorted(q for q, amount in deserved.items() if amount > 0)
    if not inside or not queues:
        return {"samples": len(inside)}
    ratios = {
        q: sum(used.get(q, 0.0) for used in inside) / len(inside) / deserved[q] for q in queues
    }
    distances = {q: abs(ratio - 1.0) for q, ratio in ratios.items()}
    farthest = max(queues, key=lambda q: distances[q])
    values = list(ratios.values())
    squares = sum(v * v for v in values)
    return {
        "samples": len(inside),
        "mean_ratio": round(sum(values) / len(values), 3),
        "min_ratio": round(min(values), 3),
        "max_ratio": round(max(values), 3),
        "mean_distance": round(sum(distances.values()) / len(distances), 3),
        "max_distance": round(distances[farthest], 3),
        "farthest_queue": farthest,
        "jain_index": round(sum(values) ** 2 / (len(values) * squares), 4) if squares else None,
    }
