"""Throttle records live in the policy's status, keyed by pod UID, and nothing a pod says about
itself is read back (finding: a forged ``sharekeeper.io/cpu-throttle`` annotation with
``originalLimit: "64"`` made the operator "restore" a tenant's pod from 2 to 64 cores)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sharekeeper.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "qos-check.yaml"
NOW = "1795000000"
FORGED = json.dumps({"originalLimit": "64", "limit": "2"})


def throttling_example() -> list[dict[str, Any]]:
    """The seed example with a throttle action instead of eviction, every pod with a UID, and
    two candidates: batch-0 (BestEffort, no CPU limit) and batch-1 (a 1-core limit)."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["spec"]["objectiveEnsurances"][0]["actionName"] = "throttle"
    policy["spec"]["candidates"]["podSelector"] = {"matchLabels": {"throttle": "yes"}}
    policy["spec"]["actions"] = [
        {"name": "throttle", "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 20}}}
    ]
    for doc in docs:
        if doc["kind"] == "PodMetrics" and doc["metadata"]["name"] == "batch-1":
            doc["containers"][0]["usage"]["cpu"] = "950m"  # busy enough to be worth a step
        if doc["kind"] == "Pod":
            doc["metadata"]["uid"] = f"uid-{doc['metadata']['name']}"
            if doc["metadata"]["name"] in ("batch-0", "batch-1"):
                doc["metadata"]["labels"] = {"throttle": "yes"}
    return docs


def check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: list[dict[str, Any]]
) -> dict[str, Any]:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["simulate", "-f", str(path), "-o", "json", "--now", NOW]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def with_usage(docs: list[dict[str, Any]], cpu: str) -> list[dict[str, Any]]:
    docs = copy.deepcopy(docs)
    next(d for d in docs if d["kind"] == "NodeMetrics")["usage"]["cpu"] = cpu
    return docs


def pod(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == name)


def fed_back(docs: list[dict[str, Any]], report: dict[str, Any]) -> list[dict[str, Any]]:
    docs = copy.deepcopy(docs)
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["status"] = report["nodeQosEnsurancePolicies"]["cpu-guard"]
    return docs


def test_a_throttle_is_recorded_in_the_policy_status_by_uid_and_restored_from_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = throttling_example()
    hot = check(capsys, tmp_path, docs)
    throttled = [a for a in hot["actions"] if a["kind"] == "throttle"]
    assert throttled, "a hot node throttles"
    entry = hot["nodeQosEnsurancePolicies"]["cpu-guard"]["nodes"][0]
    records = {record["pod"]: record for record in entry["throttled"]}
    batch_1 = records["batch/batch-1"]
    # One 20 % step from what it uses (950m), not from its limit: 760m, below its usage.
    assert batch_1 == {"pod": "batch/batch-1", "uid": "uid-batch-1",
                       "originalLimit": "1", "limit": "760m"}  # fmt: skip
    # A pod without a CPU limit is recorded with its target and no original limit.
    assert records["batch/batch-0"] == {"pod": "batch/batch-0", "uid": "uid-batch-0",
                                        "limit": "720m"}  # fmt: skip

    calm = check(capsys, tmp_path, with_usage(fed_back(docs, hot), "1"))
    restores = {a["pod"]: a for a in calm["actions"] if a["kind"] == "restore"}
    assert restores["batch/batch-1"]["cpuLimit"] == "912m"  # one step up, below the original


def test_a_forged_throttle_annotation_is_never_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = with_usage(throttling_example(), "1")
    pod(docs, "batch-1")["metadata"]["annotations"] = {"sharekeeper.io/cpu-throttle": FORGED}
    calm = check(capsys, tmp_path, docs)
    assert [a for a in calm["actions"] if a["pod"] == "batch/batch-1"] == []


def test_a_restore_never_goes_above_the_recorded_original_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = throttling_example()
    hot = check(capsys, tmp_path, docs)
    later = fed_back(docs, hot)
    pod(later, "batch-1")["metadata"]["annotations"] = {"sharekeeper.io/cpu-throttle": FORGED}
    limits: list[str | None] = []
    for _ in range(4):  # calm checks step the limit back up, one step each
        report = check(capsys, tmp_path, with_usage(later, "1"))
        limits += [a["cpuLimit"] for a in report["actions"] if a["pod"] == "batch/batch-1"]
        later = fed_back(later, report)
    assert limits == ["912m", "1"]
    final = report["nodeQosEnsurancePolicies"]["cpu-guard"]["nodes"]
    assert all("batch/batch-1" not in str(node.get("throttled")) for node in final)


def test_a_recreated_pod_of_the_same_name_starts_afresh(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = throttling_example()
    hot = check(capsys, tmp_path, docs)
    later = with_usage(fed_back(docs, hot), "1")
    pod(later, "batch-1")["metadata"]["uid"] = "uid-batch-1-new"
    calm = check(capsys, tmp_path, later)
    assert [a for a in calm["actions"] if a["pod"] == "batch/batch-1"] == []
