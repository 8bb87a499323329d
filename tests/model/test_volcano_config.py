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
