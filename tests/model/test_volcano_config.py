"""``sharekeeper convert``: a Volcano scheduler configuration becomes a SchedulerPolicy."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from sharekeeper.api.base import read
from sharekeeper.api.policy import OvercommitSettings, SchedulerPolicy
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
        ("{overcommit-factor: 0.8}", {"factor": 1.2}, "overcommit-factor: 0.8 is below 1"),
        (
            "{overcommit-factor: 2, overcommit-factor.cpu: 0}",
            {"factor": 2, "factors": {"cpu": 1.2}},
            "overcommit-factor.cpu: 0 is below 1",
        ),
    ],
    ids=["global", "global-0.8", "per-resource"],
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


def test_without_an_overcommit_plugin_the_policy_has_no_overcommit_and_says_what_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No invented factor in the manifest; the line on stderr says that the API's default
    applies, and that Volcano, without the plugin, has no overcommit limit."""
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text("actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n")
    assert main(["convert", str(path)]) == 0
    captured = capsys.readouterr()
    manifest = yaml.safe_load(captured.out)
    assert "overcommit" not in manifest["spec"]
    default = OvercommitSettings.model_fields["factor"].default
    assert read(SchedulerPolicy, manifest).spec.overcommit.factor == default
    assert captured.err.splitlines() == [
        "sharekeeper convert: warning: no overcommit plugin, so Volcano admits jobs without an "
        f"overcommit limit; the policy leaves spec.overcommit out, and its default factor "
        f"{default} applies"
    ]


def test_an_overcommit_plugin_without_arguments_keeps_the_shared_default_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text("actions: enqueue\ntiers:\n- plugins:\n  - {name: overcommit}\n")
    assert main(["convert", str(path)]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["spec"]["overcommit"] == {}
    assert "warning" not in captured.err


def configmap(conf: str, **data: str) -> dict[str, object]:
    """The ConfigMap Volcano's installation creates, as ``kubectl get -o yaml`` prints it."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
        "data": {"volcano-scheduler.conf": conf, **data},
    }


@pytest.mark.parametrize("dump", [yaml.safe_dump, json.dumps], ids=["yaml", "json"])
def test_the_configmap_converts_as_the_file_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dump: Callable[[object], str]
) -> None:
    conf, held = tmp_path / "volcano-scheduler.conf", tmp_path / "configmap.yaml"
    conf.write_text(CONFIG)
    held.write_text(dump(configmap(CONFIG)))
    assert main(["convert", str(conf)]) == 0
    from_file = capsys.readouterr()
    assert main(["convert", str(held)]) == 0
    from_configmap = capsys.readouterr()
    assert from_configmap.out == from_file.out
    assert from_configmap.err == from_file.err
    assert yaml.safe_load(from_configmap.out)["spec"]["overcommit"]["factor"] == 1.5


# Everything convert leaves out, one line each, in the order it meets them.
EVERYTHING = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: gang
    enablePreemptable: false
  - name: nodeorder
    arguments: {leastrequested.weight: 1, binpack.weight: 5}
  - name: drf
    enableHierarchy: true
- plugins:
  - name: capacity
    enableHierarchy: true
    enableReclaimable: false
  - name: proportion
    enableHierarchy: false
  - name: overcommit
    enableJobEnqueued: true
    arguments: {overcommit-factor: 1.5, overcommit-ratio: 2}
  - name: predicates
    arguments:
      predicate.ProportionalEnable: true
      predicate.resources: nvidia.com/gpu
      predicate.resources.nvidia.com/gpu.cpu: 4
      predicate.resources.example.com/fpga.cpu: 2
  - name: resource-strategy-fit
    arguments:
      resourceStrategyFitWeight: 10
      proportional:
        enable: true
        resources: nvidia.com/gpu
        resourceProportion: {nvidia.com/gpu.cpu: 4, example.com/fpga.memory: 8}
        strict: true
configurations:
- name: enqueue
  arguments: {overcommit-factor: 2}
- name: allocate
  arguments: {enablePredicateErrorCache: true}
- name: preempt
metrics:
  address: http://prometheus.monitoring:9090
tolerance: 3
"""


def test_everything_left_out_is_listed_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "configmap.yaml"
    path.write_text(yaml.safe_dump(configmap(EVERYTHING, **{"extra.conf": "x"})))
    assert main(["convert", str(path)]) == 0
    captured = capsys.readouterr()
    spec = yaml.safe_load(captured.out)["spec"]
    assert spec["sharing"] == {"policy": "Capacity"}
    assert spec["overcommit"] == {"factor": 1.5}
    assert spec["proportional"] == {
        "enable": True,
        "resources": {"nvidia.com/gpu": {"cpu": "4", "memory": "1G"}},
    }
    assert [line.removeprefix("sharekeeper convert: ") for line in captured.err.splitlines()] == [
        "not translated: ConfigMap data entry extra.conf",
        "not translated: metrics (the scheduler's own metrics)",
        "not translated: top-level key tolerance",
        "not translated: tiers[0].plugins[0] gang (with enablePreemptable: false)",
        "not translated: tiers[0].plugins[1] nodeorder "
        "(with arguments leastrequested.weight, binpack.weight)",
        "not translated: tiers[0].plugins[2] drf: enableHierarchy: true; only the capacity "
        "plugin's queue tree is modelled (a SchedulerPolicy reads spec.parent under Capacity "
        "and Proportion)",
        "not translated: tiers[0].plugins[2] drf",
        "not translated: tiers[1].plugins[0] capacity: option enableReclaimable: false",
        "not translated: tiers[1].plugins[1] proportion: a second share plugin; Capacity is kept",
        "not translated: tiers[1].plugins[2] overcommit: argument overcommit-ratio",
        "not translated: tiers[1].plugins[2] overcommit: option enableJobEnqueued: true",
        "not translated: tiers[1].plugins[3] predicates: argument "
        "predicate.resources.example.com/fpga.cpu",
        "not translated: tiers[1].plugins[4] resource-strategy-fit: argument "
        "resourceStrategyFitWeight",
        "not translated: tiers[1].plugins[4] resource-strategy-fit: argument proportional.strict",
        "not translated: tiers[1].plugins[4] resource-strategy-fit: argument "
        "proportional.resourceProportion.example.com/fpga.memory",
        "not translated: configurations[0] enqueue (with argument overcommit-factor); Volcano "
        "read overcommit-factor here up to v1.1 only, since v1.2 it is an argument of the "
        "overcommit plugin",
        "not translated: configurations[1] allocate (with argument enablePredicateErrorCache)",
        "not translated: configurations[2] preempt",
        "not translated: action backfill",
        "not translated: action reclaim",
        "not translated: action preempt",
    ]


def test_an_enable_hierarchy_false_is_what_the_policy_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - {name: overcommit}\n"
        "  - {name: capacity, enableHierarchy: false}\n"
    )
    assert main(["convert", str(path)]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["spec"]["sharing"] == {"policy": "Capacity"}
    assert captured.err == ""


def test_without_the_enqueue_action_a_warning_says_volcano_admits_unchecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(
        "actions: allocate, backfill\ntiers:\n- plugins:\n  - {name: overcommit}\n"
        "  - {name: proportion}\n"
    )
    assert main(["convert", str(path)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "sharekeeper convert: warning: actions: no enqueue, so Volcano admits every job "
        "unchecked; the policy's admission headroom and Enqueueable conditions still check "
        "overcommit and queue quotas",
        "sharekeeper convert: not translated: action backfill",
    ]


def held(conf: str, **data: str) -> str:
    return yaml.safe_dump(configmap(conf, **data))


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
        pytest.param("tiers: [\n", "line 2, column 1: invalid YAML: ", id="syntax"),
        pytest.param(
            "actions: [enqueue, allocate]\ntiers: []\n",
            'scheduler configuration: actions: must be a string such as "enqueue, allocate, '
            "backfill\" (got ['enqueue', 'allocate'])",
            id="actions-list",
        ),
        pytest.param(
            "tiers: []\nconfigurations: 5\n",
            "scheduler configuration: configurations: must be a list of {name: <action>, "
            "arguments: {...}} (got 5)",
            id="configurations-5",
        ),
        pytest.param(
            "tiers: []\nconfigurations: [{arguments: {}}]\n",
            "configurations[0].name: must be a string (got None)",
            id="configuration-without-name",
        ),
        pytest.param(
            "tiers: []\nconfigurations: [{name: allocate, arguments: [1]}]\n",
            "configurations[0].arguments: must be a mapping (got [1])",
            id="configuration-arguments-list",
        ),
        pytest.param(
            plugin("name: capacity\n    enableHierarchy: 'true'"),
            "tiers[0].plugins[0].enableHierarchy: must be true or false (got 'true')",
            id="hierarchy-string",
        ),
        pytest.param(
            "kind: List\nitems: []\n",
            "scheduler configuration: kind: must be ConfigMap (holding volcano-scheduler.conf), "
            "or absent in the configuration file (got 'List')",
            id="list",
        ),
        pytest.param(
            "kind: ConfigMap\nmetadata: {name: volcano-scheduler-configmap, namespace: 5}\n"
            "data: {scheduler.conf: 'tiers: []'}\n",
            "ConfigMap volcano-scheduler-configmap: data: must hold the entry "
            "volcano-scheduler.conf (found: scheduler.conf)",
            id="configmap-other-key",
        ),
        pytest.param(
            "kind: ConfigMap\ndata: 5\n",
            "ConfigMap <unnamed>: data: must hold the entry volcano-scheduler.conf (found: none)",
            id="configmap-data-5",
        ),
        pytest.param(
            "kind: ConfigMap\ndata:\n  volcano-scheduler.conf: {tiers: []}\n",
            "ConfigMap <unnamed>: data[volcano-scheduler.conf]: must be the scheduler "
            "configuration as text (got {'tiers': []})",
            id="configmap-entry-mapping",
        ),
        pytest.param(
            held("tiers: [\n"),
            "ConfigMap volcano-system/volcano-scheduler-configmap: data[volcano-scheduler.conf]: "
            "line 2, column 1: invalid YAML: ",
            id="configmap-entry-syntax",
        ),
        pytest.param(
            held(""),
            "data[volcano-scheduler.conf]: must hold one document, not nothing",
            id="configmap-entry-empty",
        ),
        pytest.param(
            held("tiers: [5]\n"),
            "ConfigMap volcano-system/volcano-scheduler-configmap: data[volcano-scheduler.conf]: "
            "tiers[0]: must be a mapping (got 5)",
            id="configmap-entry-tier-5",
        ),
        pytest.param(
            held("tiers: " + "[" * 100 + "]" * 100),
            "data[volcano-scheduler.conf]: line 1: nests deeper than 64 levels",
            id="configmap-entry-deep",
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
