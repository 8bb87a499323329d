"""The CRDs on a real API server: installed, described, shown, and guarding their input."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import MANIFESTS, Cluster
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, build_report

SAMPLES = sorted((MANIFESTS / "samples").glob("*.yaml"))

QUEUE: dict[str, Any] = {
    "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
    "kind": "Queue",
    "metadata": {"name": "invalid"},
    "spec": {"weight": 1, "capability": {"cpu": "8"}},
}
POLICY: dict[str, Any] = {
    "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
    "kind": "SchedulerPolicy",
    "metadata": {"name": "invalid"},
    "spec": {"sharing": {"policy": "Proportion"}, "overcommit": {"factor": 1.5}},
}
QOS: dict[str, Any] = {
    "apiVersion": "ensurance.sharekeeper.io/v1alpha1",
    "kind": "NodeQosEnsurancePolicy",
    "metadata": {"name": "invalid"},
    "spec": {
        "objectiveEnsurances": [
            {
                "name": "cpu-evict",
                "metricRule": {"name": "cpu_total_usage", "value": "6"},
                "avoidanceThreshold": 2,
                "actionName": "evict",
            }
        ],
        "actions": [{"name": "evict", "eviction": {}}],
    },
}


def edited(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with the dotted ``path`` (list indexes allowed) set to ``value``."""
    obj = copy.deepcopy(base)
    *parents, last = path.split(".")
    node: Any = obj
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if isinstance(node, list):
        node[int(last) : int(last) + 1] = [value]  # replaces, or appends one past the end
    else:
        node[last] = value
    return obj


INVALID = {
    "queue-weight-zero": (
        edited(QUEUE, "spec.weight", 0),
        "spec.weight in body should be greater than or equal to 1",
    ),
    "queue-weight-too-large": (
        edited(QUEUE, "spec.weight", 65536),
        "spec.weight in body should be less than or equal to 65535",
    ),
    "queue-negative-quantity": (
        edited(QUEUE, "spec.capability.cpu", "-2"),
        'spec.capability[cpu]: Invalid value: "": must be a non-negative Kubernetes quantity',
    ),
    "queue-malformed-quantity": (
        edited(QUEUE, "spec.guarantee", {"resource": {"memory": "lots"}}),
        'spec.guarantee.resource[memory]: Invalid value: "": must be a non-negative',
    ),
    "queue-guarantee-above-capability": (
        edited(QUEUE, "spec.guarantee", {"resource": {"cpu": "9"}}),
        'spec.guarantee.resource: Invalid value: "object": guarantee must not exceed capability',
    ),
    "queue-unknown-state": (
        edited(QUEUE, "spec.state", "Paused"),
        'spec.state: Unsupported value: "Paused": supported values: "Open", "Closed"',
    ),
    "policy-factor-below-one": (
        edited(POLICY, "spec.overcommit.factor", 0.8),
        "spec.overcommit.factor in body should be greater than or equal to 1",
    ),
    "policy-resource-factor-below-one": (
        edited(POLICY, "spec.overcommit.factors", {"cpu": 0.5}),
        "spec.overcommit.factors.cpu in body should be greater than or equal to 1",
    ),
    "policy-unknown-sharing-policy": (
        edited(POLICY, "spec.sharing.policy", "Fair"),
        'spec.sharing.policy: Unsupported value: "Fair"',
    ),
    "policy-unknown-priority-type": (
        edited(POLICY, "spec.sharing.priorityType", "Size"),
        'spec.sharing.priorityType: Unsupported value: "Size": supported values: "Weight", '
        '"Guarantee"',
    ),
    "policy-selector-in-without-values": (
        edited(
            POLICY, "spec.queueSelector", {"matchExpressions": [{"key": "team", "operator": "In"}]}
        ),
        "In and NotIn need values",
    ),
    "qos-unknown-metric": (
        edited(QOS, "spec.objectiveEnsurances.0.metricRule.name", "gpu_usage"),
        'spec.objectiveEnsurances[0].metricRule.name: Unsupported value: "gpu_usage"',
    ),
    "qos-threshold-below-one": (
        edited(QOS, "spec.objectiveEnsurances.0.avoidanceThreshold", 0),
        "spec.objectiveEnsurances[0].avoidanceThreshold in body should be greater than or equal "
        "to 1",
    ),
    "qos-action-not-defined": (
        edited(QOS, "spec.objectiveEnsurances.0.actionName", "throttle"),
        'spec.objectiveEnsurances: Invalid value: "object": every objectiveEnsurances[].actionName '
        "must be the name of an entry in spec.actions",
    ),
    "qos-duplicate-rule-names": (
        edited(QOS, "spec.objectiveEnsurances.1", QOS["spec"]["objectiveEnsurances"][0]),
        "spec.objectiveEnsurances[1]: Duplicate value",
    ),
}


def test_crds_are_served_with_short_names_and_category(crds: Cluster) -> None:
    resources = crds.kubectl("api-resources", "--categories=sharekeeper", "-o", "wide").stdout
    for line in ("queues   skq", "schedulerpolicies   skp", "nodeqosensurancepolicies   nep"):
        name, short = line.split()
        assert any(row.split()[:2] == [name, short] for row in resources.splitlines()), resources
    for row in resources.splitlines()[1:]:
        assert "false" in row.split(), f"{row!r} should not be namespaced"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda path: Path(path).stem)
def test_every_sample_is_accepted(crds: Cluster, sample: Path) -> None:
    crds.kubectl("apply", "-f", str(sample))
    for doc in yaml.safe_load_all(sample.read_text()):
        got = crds.get(doc["kind"].lower(), doc["metadata"]["name"])
        assert got["spec"]  # stored, with defaults filled in below


def test_defaults_are_filled_in(crds: Cluster) -> None:
    crds.apply(
        edited(QUEUE, "metadata.name", "defaults"),
        {**edited(POLICY, "metadata.name", "defaults"), "spec": {}},
        edited(QOS, "metadata.name", "defaults"),
    )
    queue = crds.get("queue", "defaults")["spec"]
    assert (queue["state"], queue["reclaimable"], queue["priority"]) == ("Open", True, 0)
    policy = crds.get("schedulerpolicy", "defaults")["spec"]
    assert policy["sharing"] == {
        "policy": "Proportion",
        "guaranteeEnable": True,
        "elasticEnable": True,
        "priorityType": "Weight",
        "elasticOrder": "Weight",
        "reshuffleSeconds": 300,
    }
    assert policy["overcommit"] == {"factor": 1.2}
    assert policy["proportional"] == {"enable": False}
    qos = crds.get("nodeqosensurancepolicy", "defaults")["spec"]
    assert qos["candidates"] == {"maxPriority": 999}
    assert (qos["excessPercent"], qos["evictOnMissingMetrics"], qos["checkIntervalSeconds"]) == (
        10,
        False,
        10,
    )
    rule = qos["objectiveEnsurances"][0]
    assert (rule["restoreThreshold"], rule["strategy"]) == (1, "None")


@pytest.mark.parametrize(("manifest", "message"), INVALID.values(), ids=INVALID.keys())
def test_invalid_object_is_rejected_with_a_clear_message(
    crds: Cluster, manifest: dict[str, Any], message: str
) -> None:
    result = crds.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(manifest), check=False
    )
    assert result.returncode != 0, f"accepted: {manifest}"
    assert message in result.stderr


def test_the_valid_base_objects_are_accepted(crds: Cluster) -> None:
    """Guards the test above: each invalid object differs from an accepted one by one field."""
    for manifest in (QUEUE, POLICY, QOS):
        crds.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(manifest))


def test_get_queues_prints_the_contract_columns(crds: Cluster) -> None:
    crds.kubectl("apply", "-f", str(MANIFESTS / "samples" / "queues.yaml"))
    header = crds.kubectl("get", "queues").stdout.splitlines()[0].split()
    assert header == [
        "NAME", "WEIGHT", "STATE", "DESERVED-CPU", "DESERVED-MEM", "ALLOC-CPU", "ALLOC-MEM",
        "SHARE", "AGE",
    ]  # fmt: skip
    wide = crds.kubectl("get", "skq", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[-3:] == ["POLICY", "OVERUSED", "AGE"]


def test_explain_describes_the_fields(crds: Cluster) -> None:
    explained = crds.kubectl("explain", "queue.spec.guarantee").stdout
    assert "Resources reserved for this queue" in explained
    assert (
        "Guaranteed minimum per resource"
        in crds.kubectl("explain", "queue.spec.guarantee.resource").stdout
    )
    assert (
        "Overcommit factors used for admission"
        in crds.kubectl("explain", "skp.spec.overcommit").stdout
    )
    assert (
        "Consecutive hot checks"
        in crds.kubectl("explain", "nep.spec.objectiveEnsurances.avoidanceThreshold").stdout
    )


def test_simulate_plans_the_same_for_a_hand_written_policy_and_the_api_defaulted_one(
    crds: Cluster,
) -> None:
    """Defaults come from one place: the hand-written objects (read by simulate's models) and
    the same objects as the API server returns them (defaulted by the generated CRDs) give
    the same statuses and the same QoS plan, which throttles in the CRD's 10 % steps."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    ours = [d for d in yaml.safe_load_all((examples / "minimal.yaml").read_text()) if d]
    crds.apply(*ours)
    stored = [crds.get(obj["kind"].lower(), obj["metadata"]["name"]) for obj in ours]
    assert stored[0]["spec"]["actions"][0]["throttle"]["cpuThrottle"] == {
        "minCPURatio": 10,
        "stepCPURatio": 10,
    }
    cluster = [
        d
        for d in yaml.safe_load_all((examples / "qos-check.yaml").read_text())
        if d and d["kind"] != "NodeQosEnsurancePolicy"
    ]
    context = Context(now_seconds=1_767_225_600, seed=0)
    by_hand = build_report(parse_objects([*cluster, *copy.deepcopy(ours)]), context)
    by_api = build_report(parse_objects([*cluster, *stored]), context)
    assert by_hand == by_api
    assert {action["kind"] for action in by_hand["actions"]} == {"throttle"}
