"""The CRDs on a real API server: installed, described, shown, and guarding their input."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import MANIFESTS, Cluster
from sharekeeper.api.base import read
from sharekeeper.api.crds import resources
from sharekeeper.model.objects import ObjectError
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, build_report

SAMPLES = sorted((MANIFESTS / "samples").glob("*.yaml"))
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODELS = {model.__resource__.kind: model for model in resources()}

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
    # Issue 15, finding 8: resource names, label selectors, priority, a zero threshold and
    # quantities above 4P were accepted.
    "queue-capability-name-with-space": (
        edited(QUEUE, "spec.capability", {"has space": "1"}),
        'spec.capability: Invalid value: "object": must be a qualified name',
    ),
    "queue-guarantee-name-without-prefix": (
        edited(QUEUE, "spec.guarantee", {"resource": {"/gpu": "1"}}),
        'spec.guarantee.resource: Invalid value: "object": must be a qualified name',
    ),
    "queue-deserved-name-with-two-slashes": (
        edited(QUEUE, "spec.deserved", {"a/b/c": "1"}),
        'spec.deserved: Invalid value: "object": must be a qualified name',
    ),
    "policy-factors-name-starting-with-dash": (
        edited(POLICY, "spec.overcommit.factors", {"-cpu": 1.5}),
        'spec.overcommit.factors: Invalid value: "object": must be a qualified name',
    ),
    "policy-proportional-empty-name": (
        edited(POLICY, "spec.proportional", {"resources": {"": {"cpu": "1", "memory": "1Gi"}}}),
        'spec.proportional.resources: Invalid value: "object": must be a qualified name',
    ),
    "queue-namespaces-empty-label-key": (
        edited(QUEUE, "spec.namespaces", {"matchLabels": {"": "a"}}),
        'spec.namespaces.matchLabels: Invalid value: "object": must be a qualified name',
    ),
    "policy-selector-bad-label-value": (
        edited(POLICY, "spec.nodeSelector", {"matchLabels": {"pool": "-gpu"}}),
        "spec.nodeSelector.matchLabels.pool in body should match",
    ),
    "policy-selector-label-value-too-long": (
        edited(POLICY, "spec.queueSelector", {"matchLabels": {"team": "a" * 64}}),
        "spec.queueSelector.matchLabels.team: Too long: may not be more than 63 bytes",
    ),
    "policy-selector-too-many-labels": (
        edited(POLICY, "spec.queueSelector", {"matchLabels": {f"k{i}": "v" for i in range(33)}}),
        "spec.queueSelector.matchLabels: Too many: 33: must have at most 32 items",
    ),
    "qos-selector-empty-expression-key": (
        edited(
            QOS,
            "spec.candidates",
            {"podSelector": {"matchExpressions": [{"key": "", "operator": "Exists"}]}},
        ),
        'spec.candidates.podSelector.matchExpressions[0].key: Invalid value: "string": must be '
        "a qualified name",
    ),
    "qos-selector-bad-expression-value": (
        edited(
            QOS,
            "spec.nodeSelector",
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a b"]}]},
        ),
        "spec.nodeSelector.matchExpressions[0].values[0] in body should match",
    ),
    "qos-selector-too-many-values": (
        edited(
            QOS,
            "spec.nodeSelector",
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["v"] * 129}]},
        ),
        "spec.nodeSelector.matchExpressions[0].values: Too many: 129: must have at most 128 items",
    ),
    "queue-priority-2^40": (
        edited(QUEUE, "spec.priority", 2**40),
        "spec.priority in body should be less than or equal to 2147483647",
    ),
    "qos-max-priority-2^31": (
        edited(QOS, "spec.candidates", {"maxPriority": 2**31}),
        "spec.candidates.maxPriority in body should be less than or equal to 2147483647",
    ),
    "qos-grace-period-2^63": (
        edited(QOS, "spec.actions.0.eviction", {"terminationGracePeriodSeconds": 2**63}),
        "spec.actions[0].eviction.terminationGracePeriodSeconds in body must be of type integer",
    ),
    "qos-metric-value-zero": (
        edited(QOS, "spec.objectiveEnsurances.0.metricRule.value", "0"),
        'spec.objectiveEnsurances[0].metricRule.value: Invalid value: "": must be a positive '
        "Kubernetes quantity of at most 4P",
    ),
    "qos-metric-value-above-4P": (
        edited(QOS, "spec.objectiveEnsurances.0.metricRule.value", "5P"),
        "must be a positive Kubernetes quantity of at most 4P",
    ),
    "queue-capability-9Ei": (
        edited(QUEUE, "spec.capability.cpu", "9Ei"),
        'spec.capability[cpu]: Invalid value: "": must be a non-negative Kubernetes quantity of '
        "at most 4P",
    ),
    "queue-guarantee-8Ei": (
        edited(QUEUE, "spec.guarantee", {"resource": {"memory": "8Ei"}}),
        'spec.guarantee.resource[memory]: Invalid value: "": must be a non-negative Kubernetes '
        "quantity of at most 4P",
    ),
    "policy-per-unit-above-4P": (
        edited(
            POLICY,
            "spec.proportional",
            {"resources": {"nvidia.com/gpu": {"cpu": 4 * 10**15 + 1, "memory": "1Gi"}}},
        ),
        "must be a non-negative Kubernetes quantity of at most 4P",
    ),
    "policy-factor-above-100": (
        edited(POLICY, "spec.overcommit.factor", 100.5),
        "spec.overcommit.factor in body should be less than or equal to 100",
    ),
}

PREFIX_253 = ".".join(["a" * 63] * 4)[:253]
VALID = {
    "queue-edge-values": edited(QUEUE, "spec", {
        "priority": 2**31 - 1,
        "capability": {"cpu": "4P", "nvidia.com/gpu": 8, "hugepages-2Mi": "1Gi",
                       f"{PREFIX_253}/{'r' * 63}": "1"},
        "guarantee": {"resource": {"memory": 4 * 10**15}},
        "namespaces": {
            "matchLabels": {"kubernetes.io/metadata.name": "team-a", "empty": ""},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a" * 63, "b"]}],
        },
    }),
    "policy-edge-values": edited(POLICY, "spec", {
        "queueSelector": {"matchLabels": {f"k{i}": "v" for i in range(32)}},
        "overcommit": {"factor": 100, "factors": {"example.com/a_b.C": 1}},
        "proportional": {"enable": True, "resources": {"nvidia.com/gpu": {
            "cpu": "4P", "memory": "4P"}}},
    }),
    "qos-edge-values": edited(
        edited(QOS, "spec.objectiveEnsurances.0.metricRule.value", "4P"),
        "spec.candidates",
        {"maxPriority": -(2**31), "podSelector": {"matchExpressions": [
            {"key": "app.kubernetes.io/name", "operator": "NotIn", "values": ["v"] * 128}]}},
    ),
}  # fmt: skip


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
        "schedulerNames": ["volcano"],
        "unmanaged": "Reserve",
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


@pytest.mark.parametrize("manifest", VALID.values(), ids=VALID.keys())
def test_values_at_the_bounds_are_accepted(crds: Cluster, manifest: dict[str, Any]) -> None:
    crds.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(manifest))
    read(MODELS[manifest["kind"]], manifest)


@pytest.mark.parametrize(("manifest", "message"), INVALID.values(), ids=INVALID.keys())
def test_the_models_refuse_what_the_api_server_refuses(
    manifest: dict[str, Any], message: str
) -> None:
    """``simulate`` and the operator read objects through the models the CRDs come from."""
    with pytest.raises(ObjectError):
        read(MODELS[manifest["kind"]], manifest)


def test_every_example_object_of_ours_is_accepted(crds: Cluster) -> None:
    ours = [
        item
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
        for item in (doc["items"] if doc["kind"] == "List" else [doc])
        if item["kind"] in MODELS
    ]
    assert {item["kind"] for item in ours} == MODELS.keys()
    crds.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(ours))


def test_get_queues_prints_the_contract_columns(crds: Cluster) -> None:
    crds.kubectl("apply", "-f", str(MANIFESTS / "samples" / "queues.yaml"))
    header = crds.kubectl("get", "queues").stdout.splitlines()[0].split()
    assert header == [
        "NAME", "WEIGHT", "STATE", "DESERVED-CPU", "DESERVED-MEM", "ALLOC-CPU", "ALLOC-MEM",
        "SHARE", "GATED", "PARENT", "AGE",
    ]  # fmt: skip
    wide = crds.kubectl("get", "skq", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[-12:] == [
        "GATED", "ADMITTED", "NOT-BOUND", "DESERVED-GPU", "ALLOC-GPU", "REQUEST", "GUARANTEE",
        "CAPABILITY", "PARENT", "POLICY", "OVERUSED", "AGE",
    ]  # fmt: skip


def test_wide_columns_show_gpus_and_whole_resource_lists(crds: Cluster) -> None:
    """The GPU columns read a resource name with dots; the list columns print the whole map."""
    crds.apply(
        {
            "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "gpu-columns"},
            "spec": {"capability": {"nvidia.com/gpu": "4"}},
        }
    )
    crds.kubectl(
        "patch", "skq", "gpu-columns", "--subresource=status", "--type=merge", "-p",
        '{"status": {"deserved": {"nvidia.com/gpu": "2"}, "allocated": {"nvidia.com/gpu": "1"},'
        ' "request": {"cpu": "4"}}}',
    )  # fmt: skip
    header, line = crds.kubectl("get", "skq", "gpu-columns", "-o", "wide").stdout.splitlines()
    # Empty cells leave gaps: read each cell where its column's title starts.
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    row = {
        header[start:end].strip(): line[start:end].strip()
        for start, end in zip(starts, ends, strict=True)
    }
    assert (row["DESERVED-GPU"], row["ALLOC-GPU"]) == ("2", "1")
    assert row["REQUEST"] == '{"cpu":"4"}'
    assert row["CAPABILITY"] == '{"nvidia.com/gpu":"4"}'
    policy_columns = crds.kubectl("get", "skp", "-o", "wide").stdout.splitlines()[0].split()
    assert {"TOTAL-GPU", "HEADROOM"} <= set(policy_columns)


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
