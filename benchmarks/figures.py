"""What the benchmarks share: how a percentile of measured samples is taken, and what a run
records of where it ran."""

from __future__ import annotations

import math
import os
import platform
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def nearest_rank(samples: Sequence[float], fraction: float) -> float:
    """The smallest sample with at least ``fraction`` of all samples at or below it."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def provenance(repo: Path) -> dict[str, Any]:
    """When and on what a run ran: the UTC time, the commit, whether the operator's code had
    changes not committed, the CPUs and the Python version."""

    def git(*args: str) -> str:
        command = ["git", *args]
        done = subprocess.run(command, cwd=repo, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "operator")),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
