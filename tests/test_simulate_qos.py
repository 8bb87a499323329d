"""`sharekeeper simulate` on one node QoS check: the plan it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sharekeeper.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "qos-check.yaml"
NOW = "1795000000"


def run(capsys: pytest.CaptureFixture[str], *files: Path) -> dict[str, object]:
    args = [arg for path in files for arg in ("-f", str(path))]
    assert main(["simulate", *args, "-o", "json", "--now", NOW]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def test_the_first_eviction_closes_the_gap_so_only_one_pod_goes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The seed example: ten candidates, and the first one evicted already brings usage under
    the waterline (gap (6.5 - 6) x 1.1 = 550m; the busiest BestEffort pod uses 900m)."""
    report = run(capsys, EXAMPLE)
    assert report["actions"] == [
        {"kind": "evict", "pod": "batch/batch-0", "node": "worker-1",
         "metric": "cpu_total_usage", "released": "900m"},
    ]  # fmt: skip
    node = report["nodes"]["worker-1"]  # type: ignore[index]
    assert node["taints"] == [{"key": "sharekeeper.io/interference", "effect": "PreferNoSchedule"}]
    assert json.loads(node["annotations"]["sharekeeper.io/qos-waterlines"]) == {
        "evict.cpu_total_usage": "6"
    }


def test_feeding_the_status_back_continues_the_episode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A second check, with the first check's status as input and usage still high but the
    evicted pod gone, keeps the rule triggered rather than starting to count again."""
    first = run(capsys, EXAMPLE)
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    docs = [d for d in docs if d["metadata"]["name"] != "batch-0"]
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["status"] = first["nodeQosEnsurancePolicies"]["cpu-guard"]  # type: ignore[index]
    policy["spec"]["objectiveEnsurances"][0]["avoidanceThreshold"] = 3
    node_metrics = next(d for d in docs if d["kind"] == "NodeMetrics")
    node_metrics["usage"]["cpu"] = "6300m"
    second_input = tmp_path / "second.yaml"
    second_input.write_text(yaml.safe_dump_all(docs))
    second = run(capsys, second_input)
    rule = second["nodeQosEnsurancePolicies"]["cpu-guard"]["nodes"][0]["rules"][0]  # type: ignore[index]
    assert rule["phase"] == "Triggered"  # a fresh count would need 3 hot checks first
    assert [a["pod"] for a in second["actions"]] == ["batch/batch-2"]  # type: ignore[index]


def test_preview_computes_the_plan_and_acts_on_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["spec"]["objectiveEnsurances"][0]["strategy"] = "Preview"
    path = tmp_path / "preview.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    report = run(capsys, path)
    assert report["actions"] == []
    entry = report["nodeQosEnsurancePolicies"]["cpu-guard"]["nodes"][0]  # type: ignore[index]
    assert [(a["pod"], a["outcome"]) for a in entry["lastActions"]] == [
        ("batch/batch-0", "Preview")
    ]
    assert report["nodes"]["worker-1"]["taints"] == []  # type: ignore[index]
