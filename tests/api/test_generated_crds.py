"""crds/ is generated from the models: the files are what `make crds` writes, byte for byte,
and what the operator renders into status fits the models the CRDs come from."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel

from sharekeeper.api.crds import generated
from sharekeeper.api.policy import SchedulerPolicyStatus
from sharekeeper.api.qos import MetricName, NodeQosEnsurancePolicyStatus
from sharekeeper.api.queue import QueueStatus
from sharekeeper.engine.qos import REGISTRY
from sharekeeper.simulate.reading import parse_objects, read_objects
from sharekeeper.simulate.report import Context, build_report

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
EXAMPLES = ROOT / "examples"


def test_make_crds_reproduces_the_crds_directory_byte_for_byte() -> None:
    """Fails when a model changed and `make crds` was not run (or a file was edited by hand)."""
    expected = generated()
    assert sorted(p.name for p in CRDS.glob("*.yaml")) == sorted(expected)
    for name, text in expected.items():
        assert (CRDS / name).read_text() == text, f"crds/{name} is stale: run `make crds`"


def test_the_metric_names_of_the_model_are_the_engines() -> None:
    assert set(get_args(MetricName)) == set(REGISTRY)


def _stamped(value: Any) -> Any:
    """Conditions as the publisher writes them (with lastTransitionTime)."""
    if isinstance(value, dict):
        out = {k: _stamped(v) for k, v in value.items() if v is not None}
        if {"type", "status", "reason", "message"} <= out.keys():
            out.setdefault("lastTransitionTime", "2026-01-01T00:00:00Z")
        return out
    if isinstance(value, list):
        return [_stamped(v) for v in value]
    return value


def _fits(model: type[BaseModel], status: dict[str, Any]) -> None:
    """Every field of ``status`` is a field of ``model`` (unknown ones would be dropped, and the
    API server would prune them from the object) with a value of its type."""
    stamped = _stamped(status)
    read = model.model_validate(stamped)
    assert read.model_dump(by_alias=True, exclude_unset=True) == stamped


def test_every_status_the_operator_renders_is_a_field_of_the_models() -> None:
    inputs = parse_objects(read_objects([EXAMPLES / "cluster.yaml", EXAMPLES / "qos-check.yaml"]))
    report = build_report(inputs, Context(now_seconds=1_767_225_600, seed=0))
    assert report["queues"]
    assert report["schedulerPolicies"]
    assert report["nodeQosEnsurancePolicies"]
    for status in report["queues"].values():
        assert "elastic" in status
        _fits(QueueStatus, status)
    for status in report["schedulerPolicies"].values():
        assert "overcommit" in status
        _fits(SchedulerPolicyStatus, status)
    for status in report["nodeQosEnsurancePolicies"].values():
        _fits(NodeQosEnsurancePolicyStatus, status)


def test_sharekeeper_crds_writes_the_files(tmp_path: Path) -> None:
    from sharekeeper.cli import main

    assert main(["crds", str(tmp_path)]) == 0
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == generated()
