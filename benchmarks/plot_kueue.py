"""Plot ``bench_kueue.py``'s JSON: Kueue and our admission gate on the same workload.

    .venv/bin/python benchmarks/plot_kueue.py /tmp/kueue-peer.json benchmarks/kueue-peer.png

Left, the distribution of the time from a Job's creation to its admission, one line per phase
(share of jobs admitted within x seconds). Right, the cpu in Running pods over the phase's time,
against the cluster's cpu, and (faint) the cpu of the admitted, unfinished work: released pods
(ours) or admitted Jobs (Kueue's), Running or not yet. Needs matplotlib (the ``bench`` extra);
the Agg backend, no display.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

Json = dict[str, Any]
COLOURS = {"kueue": "tab:orange", "sharekeeper": "tab:blue"}
STYLES = ("-", "--", ":", "-.")


def plot(results: Json, path: Path) -> None:
    figure, (waits, running) = plt.subplots(1, 2, figsize=(12, 4.5))
    for phase in results["phases"]:
        side, repetition = phase["side"], phase["repetition"]
        style = STYLES[(repetition - 1) % len(STYLES)]
        label = f"{side} #{repetition}"
        ordered = sorted(phase["waits_seconds"])
        if ordered:
            fractions = [(i + 1) / len(ordered) for i in range(len(ordered))]
            waits.plot(ordered, fractions, style, color=COLOURS[side], label=label)
        points = phase["running_cpu_total"]
        if points:
            running.plot([t for t, _ in points], [cpu for _, cpu in points], style,
                         color=COLOURS[side], label=label)  # fmt: skip
        admitted = phase.get("admitted_cpu_total") or []  # in runs since 2026-12-01
        if admitted:
            running.plot([t for t, _ in admitted], [cpu for _, cpu in admitted], style,
                         color=COLOURS[side], alpha=0.35, linewidth=0.8,
                         label=f"{label}, admitted")  # fmt: skip
    shape = results["shape"]
    running.axhline(shape["nodes"] * shape["node_cpu"], color="grey", linewidth=0.8)
    waits.set_xlabel("seconds from the Job's creation to its admission")
    waits.set_ylabel("share of jobs admitted")
    waits.grid(alpha=0.3)
    waits.legend(fontsize="small")
    running.set_xlabel("seconds into the phase")
    running.set_ylabel("cpu in Running pods; faint: admitted (grey: the cluster's)")
    running.grid(alpha=0.3)
    figure.suptitle(
        f"{shape['nodes']} nodes, {shape['queues']} queues, {shape['jobs']:,} jobs at "
        f"{shape['jobs_per_second']:g}/s; Kueue {results['meta']['kueue']}, "
        f"sharekeeper {results['meta']['commit']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kueue-peer.json")
    target = Path(sys.argv[2] if len(sys.argv) > 2 else "benchmarks/kueue-peer.png")
    plot(json.loads(source.read_text()), target)
