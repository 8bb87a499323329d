"""Rendering the simulate report as JSON, YAML or a table of queues."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

TABLE_COLUMNS = (
    "QUEUE",
    "POLICY",
    "WEIGHT",
    "GUARANTEE",
    "DESERVED",
    "ALLOCATED",
    "REQUEST",
    "SHARE",
)


def render(report: Mapping[str, Any], weights: Mapping[str, int], output: str) -> str:
    if output == "json":
        return json.dumps(report, indent=2, sort_keys=True) + "\n"
    if output == "yaml":
        return yaml.safe_dump(dict(report), sort_keys=True)
    return queue_table(report["queues"], weights)


def queue_table(queues: Mapping[str, Mapping[str, Any]], weights: Mapping[str, int]) -> str:
    rows = [TABLE_COLUMNS]
    for name, status in sorted(queues.items()):
        rows.append(
            (
                name,
                status.get("policy", "-"),
                str(weights.get(name, 1)),
                _resources(status["guarantee"]),
                _resources(status["deserved"]),
                _resources(status["allocated"]),
                _resources(status["request"]),
                status["share"] + (" (overused)" if status["overused"] else ""),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(TABLE_COLUMNS))]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        + "\n"
        for row in rows
    )


def _resources(amounts: Mapping[str, str]) -> str:
    """``cpu=4,memory=8Gi``; zero dimensions are left out to keep the table readable."""
    shown = [f"{name}={value}" for name, value in sorted(amounts.items()) if value != "0"]
    return ",".join(shown) or "-"
