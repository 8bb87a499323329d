"""`sharekeeper simulate` on one node QoS check: the plan it prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sharekeeper.cli import main
from sharekeeper.model.objects import rfc3339

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "qos-check.yaml"
NOW = "1795000000"


def run(capsys: pytest.CaptureFixture[str], *files: Path, now: str = NOW) -> dict[str, object]:
    args = [arg for path in files for arg in ("-f", str(path))]
    assert main(["simulate", *args, "-o", "json", "--now", now]) == 0
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
    # A minute later, a sample begun after batch-0's deletion deadline: what it shows is real.
    node_metrics = next(d for d in docs if d["kind"] == "NodeMetrics")
    node_metrics["timestamp"] = rfc3339(int(NOW) + 55)
    node_metrics["usage"]["cpu"] = "6300m"
    second_input = tmp_path / "second.yaml"
    second_input.write_text(yaml.safe_dump_all(docs))
    second = run(capsys, second_input, now=str(int(NOW) + 60))
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


def example_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]


def written(tmp_path: Path, docs: list[dict[str, Any]], name: str = "input.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_a_calm_node_gets_no_waterlines_annotation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Found: every checked node got ``sharekeeper.io/qos-waterlines``, ``{}`` when calm, and a
    ``throttleUp`` waterline when a throttle rule was calm with nothing to restore."""
    docs = example_docs()
    next(d for d in docs if d["kind"] == "NodeMetrics")["usage"]["cpu"] = "3"
    calm = run(capsys, written(tmp_path, docs))
    assert calm["nodes"]["worker-1"]["annotations"] == {}  # type: ignore[index]
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["spec"]["actions"].append({"name": "throttle", "throttle": {}})
    policy["spec"]["objectiveEnsurances"][0]["actionName"] = "throttle"
    throttle = run(capsys, written(tmp_path, docs))
    assert throttle["nodes"]["worker-1"]["annotations"] == {}  # type: ignore[index]
    rule = throttle["nodeQosEnsurancePolicies"]["cpu-guard"]  # type: ignore[index]
    assert rule["nodes"] == [], "a calm node that never triggered is at rest, not 'restored'"


def test_the_table_of_a_qos_only_input_is_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """Found: ``-o table`` printed an empty queue table for an input without queues."""
    assert main(["simulate", "-f", str(EXAMPLE), "-o", "table", "--now", NOW]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("QUEUE") for line in lines)
    assert lines[0].split() == ["QOS-POLICY", "MATCHED", "TRIGGERED", "CONDITIONS"]
    assert lines[1].split() == ["cpu-guard", "1", "1", "Ready"]
    node = next(line.split() for line in lines if line.startswith("worker-1"))
    assert node == ["worker-1", "cpu-guard/cpu-evict=Triggered/Hot", "evict.cpu_total_usage=6",
                    "evict.cpu_total_usage=550m", "0", "yes", "-"]  # fmt: skip
    action = lines[lines.index(next(x for x in lines if x.startswith("#  "))) + 1].split()
    assert action == ["1", "worker-1", "evict", "batch/batch-0", "cpu_total_usage", "900m", "-"]


def test_the_table_shows_queues_and_the_plan_when_both_are_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = Path(__file__).resolve().parent.parent / "examples" / "cluster.yaml"
    args = ["simulate", "-f", str(cluster), "-f", str(EXAMPLE), "-o", "table", "--now", NOW]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("QUEUE ")
    assert "\nQOS-POLICY " in out
    assert "batch/batch-0" in out


def test_a_cpu_value_above_every_node_is_warned_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Found: Crane's millicores (``14000`` for 14 cores) were read as 14000 cores, silently:
    the rule could never trigger."""
    docs = example_docs()
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["spec"]["objectiveEnsurances"][0]["metricRule"]["value"] = "14000"
    path = written(tmp_path, docs)
    assert main(["simulate", "-f", str(path), "-o", "json", "--now", NOW]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("sharekeeper simulate: warning: cpu-guard: rule cpu-evict:")
    assert 'write "14" or "14000m"' in captured.err
    status = json.loads(captured.out)["nodeQosEnsurancePolicies"]["cpu-guard"]
    reachable = next(c for c in status["conditions"] if c["type"] == "WaterlinesReachable")
    assert (reachable["status"], reachable["reason"]) == ("False", "AboveCapacity")
    assert "largest 8" in reachable["message"]

    policy["spec"]["objectiveEnsurances"][0]["metricRule"]["value"] = "6"
    assert main(["simulate", "-f", str(written(tmp_path, docs)), "-o", "json", "--now", NOW]) == 0
    fine = capsys.readouterr()
    assert fine.err == ""
    status = json.loads(fine.out)["nodeQosEnsurancePolicies"]["cpu-guard"]
    reachable = next(c for c in status["conditions"] if c["type"] == "WaterlinesReachable")
    assert reachable["status"] == "True"


def test_a_gap_left_open_names_why_pods_were_passed_over(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Found: whatever the cause, the message blamed missing usage data."""
    docs = example_docs()
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["spec"]["actions"] = [
        {"name": "throttle", "throttle": {"cpuThrottle": {"minCPURatio": 90, "stepCPURatio": 10}}}
    ]
    policy["spec"]["objectiveEnsurances"][0]["actionName"] = "throttle"
    policy["spec"]["candidates"]["podSelector"] = {"matchLabels": {"pick": "me"}}
    pod = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "batch-0")
    pod["metadata"]["labels"] = {"pick": "me"}
    # batch-0 uses 900m; a 1-core limit with a 90 % floor cannot go below 900m.
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    report = run(capsys, written(tmp_path, docs))
    entry = report["nodeQosEnsurancePolicies"]["cpu-guard"]["nodes"][0]  # type: ignore[index]
    assert report["actions"] == []
    assert "usage data" not in entry["message"]
    assert entry["message"] == (
        "throttleDown cpu_total_usage: 550m still to release; passed over, acting on them frees "
        "nothing (CPU limit floor (request or minCPURatio) not below its usage: batch/batch-0 "
        "(floor 900m))"
    )


def test_a_terminating_pods_usage_is_leaving_and_not_released_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """batch-0 (900m) is already terminating: its usage is on its way out, so the gap of 550m
    is closed without another eviction, and the plan says why."""
    docs = example_docs()
    dying = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "batch-0")
    dying["metadata"]["deletionTimestamp"] = "2026-11-18T11:07:00Z"  # --now plus 20 s
    dying["metadata"]["deletionGracePeriodSeconds"] = 30
    report = run(capsys, written(tmp_path, docs))
    assert report["actions"] == []
    (entry,) = report["nodeQosEnsurancePolicies"]["cpu-guard"]["nodes"]  # type: ignore[index]
    assert entry["gaps"] == [
        {"class": "evict", "metric": "cpu_total_usage", "gap": "-440m", "leaving": "900m"}
    ]  # (6.5 - 0.9 - 6) x 1.1
    assert main(["simulate", "-f", str(tmp_path / "input.yaml"), "-o", "table", "--now", NOW]) == 0
    assert "evict.cpu_total_usage=-440m(900m leaving)" in capsys.readouterr().out
