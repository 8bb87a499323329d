"""Defaults are applied the same way to a hand-written file (``simulate``) and to an object the
API server has defaulted from the generated CRD (the operator): same engine input, same plan.

The API server's structural defaulting is emulated here from the CRD files themselves; the
same comparison against a real API server is in ``e2e/test_crds.py``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from sharekeeper.api.qos import qos_policy, read_policy
from sharekeeper.engine.qos import CpuThrottle
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, build_report

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qos-check.yaml"

MINIMAL: list[dict[str, Any]] = [
    d for d in yaml.safe_load_all((ROOT / "examples" / "minimal.yaml").read_text()) if d
]


def _schemas() -> dict[str, dict[str, Any]]:
    schemas = {}
    for path in (ROOT / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        kind = crd["spec"]["names"]["kind"]
        schemas[kind] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schemas


def api_defaulted(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: a missing property with a default
    gets it (deep-copied), then defaulting goes on inside, defaults included."""
    if isinstance(value, dict):
        out = dict(value)
        for name, child in schema.get("properties", {}).items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = api_defaulted(child, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in set(out) - set(schema.get("properties", {})):
                out[key] = api_defaulted(extra, out[key])
        return out
    if isinstance(value, list) and "items" in schema:
        return [api_defaulted(schema["items"], item) for item in value]
    return value


def _inputs(ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The example cluster (a node at 7 of 8 cores, ten candidate pods) with ``ours``."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    return [d for d in docs if d["kind"] != "NodeQosEnsurancePolicy"] + ours


def test_a_hand_written_policy_and_the_api_defaulted_one_give_the_same_plan() -> None:
    schemas = _schemas()
    defaulted = [api_defaulted(schemas[obj["kind"]], obj) for obj in MINIMAL]
    assert defaulted[0]["spec"]["actions"][0]["throttle"] == {
        "cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 10}
    }
    context = Context(now_seconds=1_767_225_600, seed=0)
    by_hand = build_report(parse_objects(_inputs(MINIMAL)), context)
    by_api = build_report(parse_objects(_inputs(defaulted)), context)
    assert by_hand == by_api
    kinds = {action["kind"] for action in by_hand["actions"]}
    assert kinds == {"throttle"}, "10 % steps: the CRD's default, not 0 (which never throttles)"


def test_the_engine_reads_the_crds_throttle_defaults() -> None:
    policy = qos_policy(read_policy(MINIMAL[0]))
    assert policy.actions["throttle"].throttle == CpuThrottle(min_cpu_ratio=10, step_cpu_ratio=10)
