"""Plot the operator's scale curve from ``bench_operator.py``'s JSON.

    .venv/bin/python benchmarks/plot_scale.py [benchmarks/scale.json] [benchmarks/scale.png]

Two panels against the number of pods (log-log): on the left the times (operator start until
every queue's status is published, the floor of one paginated LIST of every pod and node, the
p99 of event -> status, the mean recompute round), on the right the operator's RSS after
settling. Sizes that failed or lack a figure are left out of that figure's line. Needs
matplotlib (the ``bench`` extra); draws with the Agg backend, no display needed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullLocator

Json = dict[str, Any]
HERE = Path(__file__).resolve().parent


def _figure(path: str) -> Callable[[Json], float | None]:
    """A reader of the dotted ``path`` in one size's results (None when absent)."""

    def read(run: Json) -> float | None:
        value: Any = run
        for key in path.split("."):
            if not isinstance(value, dict) or value.get(key) is None:
                return None
            value = value[key]
        return float(value)

    return read


TIMES = (
    ("operator start -> every queue's status", _figure("startup_seconds"), "o-"),
    (
        "operator start -> ready (every list in memory)",
        _figure("startup_milestones_seconds.ready"),
        "D-",
    ),
    ("floor: paginated LIST of pods + nodes", _figure("floor.seconds"), "s--"),
    ("event -> status, p99", _figure("event_to_status.p99_seconds"), "^-"),
    ("one recompute round, mean", _figure("recompute_round.mean_seconds"), "v:"),
)
MEMORY = ("operator RSS after settling", _figure("operator_memory.rss_mib"), "o-")


def _points(
    runs: list[Json], read: Callable[[Json], float | None]
) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for run in runs:
        value = read(run)
        if value is not None and value > 0:
            xs.append(run["cluster"]["pods"])
            ys.append(value)
    return xs, ys


def plot(runs: list[Json], out: Path) -> None:
    """Draw ``runs`` (the ``runs`` list of the JSON) into ``out`` (PNG)."""
    runs = sorted(runs, key=lambda run: run["cluster"]["pods"])
    figure, (times, memory) = plt.subplots(1, 2, figsize=(12, 5.6))
    for label, read, style in TIMES:
        xs, ys = _points(runs, read)
        if xs:
            times.plot(xs, ys, style, label=label)
    times.set_ylabel("seconds")
    times.set_title("Time")
    label, read, style = MEMORY
    xs, ys = _points(runs, read)
    if xs:
        memory.plot(xs, ys, style, color="tab:purple", label=label)
        for x, y in zip(xs, ys, strict=True):
            memory.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(4, 4))
    memory.set_ylabel("MiB")
    memory.set_title("Operator memory")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    pods = [run["cluster"]["pods"] for run in runs]
    ticks = [f"{run['cluster']['pods']:,}\n({run['cluster']['nodes']:,} nodes)" for run in runs]
    for axes in (times, memory):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xticks(pods, ticks)
        axes.yaxis.set_major_formatter(plain)
        axes.yaxis.set_minor_formatter(plain)
        axes.tick_params(axis="y", which="minor", labelsize="x-small")
        axes.set_xlabel("pods (30 per node; queues = 2 x nodes)")
        axes.margins(x=0.1)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize="small", ncol=2)
    sizes = ", ".join(f"{run['cluster']['nodes']:,}" for run in runs)
    figure.suptitle(f"Sharekeeper on the local control plane: {sizes} nodes")
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "scale.json"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "scale.png"
    plot(json.loads(source.read_text())["runs"], out)
    print(f"plot in {out}")


if __name__ == "__main__":
    main()
