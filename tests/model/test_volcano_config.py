"""``sharekeeper convert``: a Volcano scheduler configuration becomes a SchedulerPolicy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sharekeeper.cli import main

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: proportion_optimize
    arguments:
      proportion_optimize.GuaranteeEnable: false
      proportion_optimize.PriorityType: Guarantee
  - name: overcommit
    arguments:
      overcommit-factor: 1.5
      overcommit-factor.nvidia.com/gpu: 1.0
  - name: predicates
    arguments:
      predicate.ProportionalEnable: true
      predicate.resources: nvidia.com/gpu
      predicate.resources.nvidia.com/gpu.cpu: 4
      predicate.resources.nvidia.com/gpu.memory: 8
      predicate.GPUSharingEnable: true
  - name: capacity
"""


def test_convert_translates_share_overcommit_and_proportional_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(CONFIG)
    assert main(["convert", str(path), "--name", "gpu"]) == 0
    captured = capsys.readouterr()
    manifest = yaml.safe_load(captured.out)
    assert manifest["kind"] == "SchedulerPolicy"
    assert manifest["metadata"]["name"] == "gpu"
    assert manifest["spec"]["sharing"] == {
        "policy": "ProportionOptimize",
        "guaranteeEnable": False,
        "priorityType": "Guarantee",
    }
    assert manifest["spec"]["overcommit"] == {"factor": 1.5, "factors": {"nvidia.com/gpu": 1.0}}
    assert manifest["spec"]["proportional"] == {
        "enable": True,
        "resources": {"nvidia.com/gpu": {"cpu": "4", "memory": "8G"}},
    }
    untranslated = captured.err.splitlines()
    assert any("priority" in line for line in untranslated)
    assert any("gang" in line for line in untranslated)
    assert any("predicate.GPUSharingEnable" in line for line in untranslated)
    assert any("capacity: a second share plugin" in line for line in untranslated)


def test_convert_rejects_a_file_without_tiers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.conf"
    path.write_text("actions: allocate\n")
    assert main(["convert", str(path)]) == 2
    assert "tiers" in capsys.readouterr().err


def overcommit(arguments: str) -> str:
    return f"tiers:\n- plugins:\n  - name: overcommit\n    arguments: {arguments}\n"


@pytest.mark.parametrize(
    ("arguments", "factors", "warned"),
    [
        ("{overcommit-factor: 0.5}", {"factor": 1.2}, "overcommit-factor: 0.5 is below 1"),
        (
            "{overcommit-factor: 2, overcommit-factor.cpu: 0}",
            {"factor": 2, "factors": {"cpu": 1.2}},
            "overcommit-factor.cpu: 0 is below 1",
        ),
    ],
    ids=["global", "per-resource"],
)
def test_a_factor_below_1_becomes_volcanos_default_with_a_warning(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: str,
    factors: dict[str, object],
    warned: str,
) -> None:
    """Volcano replaces a factor below 1 by its default 1.2 (and says so in its log)."""
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(overcommit(arguments))
    assert main(["convert", str(path)]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["spec"]["overcommit"] == factors
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert warnings == [
        f"sharekeeper convert: warning: tiers[0].plugins[0] overcommit: {warned}, which Volcano "
        "replaces with its default 1.2; so does this policy"
    ]


def plugin(entry: str) -> str:
    return f"tiers:\n- plugins:\n  - {entry}\n"


PROPORTIONAL = "{predicate.ProportionalEnable: true, predicate.resources: nvidia.com/gpu"


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        pytest.param(
            "tiers: 5\n",
            "scheduler configuration: tiers: must be a list of {plugins: [...]}",
            id="tiers-not-a-list",
        ),
        pytest.param("tiers: [5]\n", "tiers[0]: must be a mapping (got 5)", id="tier-5"),
        pytest.param(
            "tiers:\n- plugins: 5\n", "tiers[0].plugins: must be a list (got 5)", id="plugins-5"
        ),
        pytest.param(
            "tiers:\n- plugins: [5]\n",
            "tiers[0].plugins[0]: must be a mapping (got 5)",
            id="plugin-5",
        ),
        pytest.param(
            plugin("name: 5"), "tiers[0].plugins[0].name: must be a string (got 5)", id="name-5"
        ),
        pytest.param(
            plugin("name: overcommit\n    arguments: [1]"),
            "tiers[0].plugins[0].arguments: must be a mapping (got [1])",
            id="arguments-list",
        ),
        pytest.param(
            plugin("name: resource-strategy-fit\n    arguments: {proportional: 5}"),
            "tiers[0].plugins[0].arguments.proportional: must be a mapping (got 5)",
            id="proportional-5",
        ),
        pytest.param(
            plugin(
                "name: resource-strategy-fit\n    arguments: {proportional: "
                "{enable: true, resources: nvidia.com/gpu, resourceProportion: 5}}"
            ),
            "tiers[0].plugins[0].arguments.proportional.resourceProportion: must be a mapping "
            "(got 5)",
            id="resource-proportion-5",
        ),
        # What Volcano would take but a SchedulerPolicy cannot hold: the policy would be refused.
        pytest.param(
            overcommit("{overcommit-factor: 150}"),
            "SchedulerPolicy default: spec.overcommit.factor: Input should be less than or equal "
            "to 100 (got 150)",
            id="factor-150",
        ),
        pytest.param(
            overcommit("{overcommit-factor: .inf}"), "spec.overcommit.factor", id="factor-inf"
        ),
        pytest.param(
            overcommit("{overcommit-factor: .nan}"), "spec.overcommit.factor", id="factor-nan"
        ),
        pytest.param(
            plugin(
                f"name: predicates\n    arguments: {PROPORTIONAL}, "
                "predicate.resources.nvidia.com/gpu.cpu: 1.0e+300}"
            ),
            "spec.proportional.resources[nvidia.com/gpu].cpu",
            id="rate-1e300",
        ),
        pytest.param(
            plugin(
                "name: proportion_optimize\n    arguments: {proportion_optimize.PriorityType: X}"
            ),
            "spec.sharing.priorityType",
            id="priority-type-x",
        ),
        pytest.param(b"tiers: [\xe9]\n", "is not UTF-8 text (byte 0xe9 at offset 8)", id="latin-1"),
        pytest.param(b"\x00\x01", "is binary, not UTF-8 text", id="binary"),
        pytest.param("", "must hold one document, not nothing", id="empty"),
        pytest.param(
            "tiers: []\n---\ntiers: []\n",
            "must hold one document, not 2 documents",
            id="two-documents",
        ),
        pytest.param(
            "tiers: " + "[" * 100 + "]" * 100, "line 1: nests deeper than 64 levels", id="deep"
        ),
        pytest.param(
            "tiers: [\n", "line 2, column 1: did not find expected node content", id="syntax"
        ),
    ],
)
def test_a_malformed_configuration_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str | bytes, fragment: str
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_bytes(config.encode() if isinstance(config, str) else config)
    assert main(["convert", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("sharekeeper convert: ")
    assert fragment in captured.err


def test_a_name_kubernetes_refuses_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(CONFIG)
    assert main(["convert", str(path), "--name", "GPU pool"]) == 2
    assert capsys.readouterr().err.startswith(
        "sharekeeper convert: option --name: must be a lowercase RFC 1123 subdomain"
    )
