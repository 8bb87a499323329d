"""What the models refuse, so what ``simulate`` and the operator refuse: resource names and label
keys that are not qualified names, malformed label values, quantities above 4P, integers
outside their width, too many entries. The CRDs refuse the same (e2e/test_crds.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sharekeeper.api.base import read
from sharekeeper.api.crds import resources
from sharekeeper.api.policy import policy_spec
from sharekeeper.api.queue import queue_snapshot
from sharekeeper.engine.selectors import MATCH_ALL, LabelSelector, Requirement
from sharekeeper.model.objects import MutableObj, ObjectError
from sharekeeper.model.quantities import MAX_QUANTITY_TEXT

MODELS = {model.__resource__.kind: model for model in resources()}


def queue(**spec: Any) -> MutableObj:
    return {"kind": "Queue", "metadata": {"name": "q"}, "spec": spec}


def scheduler_policy(**spec: Any) -> MutableObj:
    return {"kind": "SchedulerPolicy", "metadata": {"name": "p"}, "spec": spec}


def qos_policy(value: int | str = "6", **spec: Any) -> MutableObj:
    rule = {"name": "r", "metricRule": {"name": "cpu_total_usage", "value": value}}
    return {
        "kind": "NodeQosEnsurancePolicy",
        "metadata": {"name": "n"},
        "spec": {
            "objectiveEnsurances": [{**rule, "actionName": "evict"}],
            "actions": [{"name": "evict", "eviction": {}}],
            **spec,
        },
    }


def accept(obj: MutableObj) -> None:
    read(MODELS[obj["kind"]], obj)


def refusal(obj: MutableObj) -> str:
    """The model's error for ``obj``, which it must refuse."""
    with pytest.raises(ObjectError) as error:
        accept(obj)
    return str(error.value)


# --- resource names -----------------------------------------------------------------------------

RESOURCE_MAPS: dict[str, Callable[[str], MutableObj]] = {
    "queue-capability": lambda name: queue(capability={name: "1"}),
    "queue-guarantee": lambda name: queue(guarantee={"resource": {name: "1"}}),
    "queue-deserved": lambda name: queue(deserved={name: "1"}),
    "policy-factors": lambda name: scheduler_policy(overcommit={"factors": {name: 1.5}}),
    "policy-proportional": lambda name: scheduler_policy(
        proportional={"enable": True, "resources": {name: {"cpu": "1", "memory": "1Gi"}}}
    ),
}
PREFIX_253 = ".".join(["a" * 63] * 4)[:253]
VALID_NAMES = [
    "cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi", "example.com/a_b.C", "x",
    "a" * 63, f"{PREFIX_253}/gpu",
]  # fmt: skip
INVALID_NAMES = [
    "", "has space", "/gpu", "a/b/c", "-cpu", "cpu-", "nvidia.com/", "Example.com/gpu",
    "a..b/gpu", "a" * 64, f"{PREFIX_253}a/gpu",
]  # fmt: skip


@pytest.mark.parametrize("name", VALID_NAMES)
@pytest.mark.parametrize("where", RESOURCE_MAPS.values(), ids=RESOURCE_MAPS.keys())
def test_qualified_resource_names_are_accepted(
    where: Callable[[str], MutableObj], name: str
) -> None:
    accept(where(name))


@pytest.mark.parametrize("name", INVALID_NAMES, ids=lambda name: repr(name[:20]))
@pytest.mark.parametrize("where", RESOURCE_MAPS.values(), ids=RESOURCE_MAPS.keys())
def test_a_resource_name_that_is_not_a_qualified_name_is_refused(
    where: Callable[[str], MutableObj], name: str
) -> None:
    message = refusal(where(name))
    assert f"[{name}]: must be a qualified name" in message


# --- label selectors ----------------------------------------------------------------------------

SELECTORS: dict[str, Callable[[MutableObj], MutableObj]] = {
    "queue-namespaces": lambda selector: queue(namespaces=selector),
    "policy-queues": lambda selector: scheduler_policy(queueSelector=selector),
    "policy-nodes": lambda selector: scheduler_policy(nodeSelector=selector),
    "qos-nodes": lambda selector: qos_policy(nodeSelector=selector),
    "qos-namespaces": lambda selector: qos_policy(candidates={"namespaceSelector": selector}),
    "qos-pods": lambda selector: qos_policy(candidates={"podSelector": selector}),
}
VALID_SELECTOR = {
    "matchLabels": {"kubernetes.io/metadata.name": "team-a", "tier": "", "v": "1.2_b-C"},
    "matchExpressions": [
        {"key": "app.kubernetes.io/name", "operator": "In", "values": ["a", "b" * 63]},
        {"key": "gpu", "operator": "Exists"},
    ],
}
INVALID_SELECTORS = {
    "empty-key": ({"matchLabels": {"": "x"}}, "matchLabels[]: must be a qualified name"),
    "key-with-two-slashes": (
        {"matchLabels": {"a/b/c": "x"}},
        "matchLabels[a/b/c]: must be a qualified name",
    ),
    "value-starting-with-dash": ({"matchLabels": {"team": "-a"}}, "matchLabels.team: String"),
    "value-too-long": ({"matchLabels": {"team": "a" * 64}}, "at most 63 characters"),
    "empty-expression-key": (
        {"matchExpressions": [{"key": "", "operator": "Exists"}]},
        "matchExpressions[0].key: must be a qualified name",
    ),
    "expression-value-with-space": (
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a b"]}]},
        "matchExpressions[0].values[0]: String should match pattern",
    ),
    "too-many-labels": (
        {"matchLabels": {f"k{i}": "v" for i in range(33)}},
        "matchLabels: Dictionary should have at most 32 items",
    ),
    "too-many-values": (
        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"] * 129}]},
        "values: List should have at most 128 items",
    ),
}


@pytest.mark.parametrize("where", SELECTORS.values(), ids=SELECTORS.keys())
def test_a_valid_selector_is_accepted(where: Callable[[MutableObj], MutableObj]) -> None:
    accept(where(VALID_SELECTOR))


@pytest.mark.parametrize(
    ("selector", "message"), INVALID_SELECTORS.values(), ids=INVALID_SELECTORS.keys()
)
@pytest.mark.parametrize("where", SELECTORS.values(), ids=SELECTORS.keys())
def test_an_invalid_selector_is_refused(
    where: Callable[[MutableObj], MutableObj], selector: MutableObj, message: str
) -> None:
    assert message in refusal(where(selector))


# --- numbers ------------------------------------------------------------------------------------

AT_MOST = f"Kubernetes quantity of at most {MAX_QUANTITY_TEXT}"


GRACE_2_63 = {"name": "evict", "eviction": {"terminationGracePeriodSeconds": 2**63}}
OUT_OF_RANGE = {
    "priority-2^40": (queue(priority=2**40), "spec.priority: must be a 32-bit integer"),
    "priority-below-int32": (queue(priority=-(2**31) - 1), "spec.priority: must be a 32-bit"),
    "max-priority-2^31": (
        qos_policy(candidates={"maxPriority": 2**31}),
        "maxPriority: must be a 32-bit integer",
    ),
    "grace-period-2^63": (
        qos_policy(actions=[GRACE_2_63]),
        "terminationGracePeriodSeconds: must be a 64-bit integer",
    ),
    "capability-9Ei": (
        queue(capability={"cpu": "9Ei"}),
        f"spec.capability.cpu: must be a non-negative {AT_MOST}",
    ),
    "guarantee-8Ei": (
        queue(guarantee={"resource": {"memory": "8Ei"}}),
        f"spec.guarantee.resource.memory: must be a non-negative {AT_MOST}",
    ),
    "deserved-above-4P": (queue(deserved={"cpu": 4 * 10**15 + 1}), AT_MOST),
    "per-unit-5P": (
        scheduler_policy(
            proportional={"resources": {"nvidia.com/gpu": {"cpu": "5P", "memory": "1Gi"}}}
        ),
        AT_MOST,
    ),
    "metric-value-5P": (qos_policy(value="5P"), f"metricRule.value: must be a positive {AT_MOST}"),
    "metric-value-0": (qos_policy(value="0"), "metricRule.value: must be a positive"),
    "metric-value-int-0": (qos_policy(value=0), "metricRule.value: must be a positive"),
    "metric-value-0m": (qos_policy(value="0m"), "metricRule.value: must be a positive"),
    "factor-100.5": (
        scheduler_policy(overcommit={"factor": 100.5}),
        "factor: Input should be less than or equal to 100",
    ),
    "factor-inf": (
        scheduler_policy(overcommit={"factor": float("inf")}),
        "factor: Input should be less than or equal to 100",
    ),
    "resource-factor-1000": (
        scheduler_policy(overcommit={"factors": {"cpu": 1000}}),
        "factors.cpu: Input should be less than or equal to 100",
    ),
}


@pytest.mark.parametrize(("obj", "message"), OUT_OF_RANGE.values(), ids=OUT_OF_RANGE.keys())
def test_a_number_out_of_range_is_refused(obj: MutableObj, message: str) -> None:
    assert message in refusal(obj)


@pytest.mark.parametrize(
    "obj",
    [
        queue(priority=2**31 - 1, capability={"cpu": MAX_QUANTITY_TEXT, "memory": 4 * 10**15}),
        queue(priority=-(2**31), guarantee={"resource": {"memory": MAX_QUANTITY_TEXT}}),
        scheduler_policy(overcommit={"factor": 100, "factors": {"cpu": 1}}),
        qos_policy(value=MAX_QUANTITY_TEXT, candidates={"maxPriority": 2**31 - 1}),
    ],
    ids=["int32-max-and-4P", "int32-min", "factor-100", "metric-value-4P"],
)
def test_the_bounds_themselves_are_accepted(obj: MutableObj) -> None:
    accept(obj)


# --- Queue.spec.namespaces ----------------------------------------------------------------------


def test_queue_snapshot_carries_the_namespace_selector() -> None:
    selector = {
        "matchLabels": {"kubernetes.io/metadata.name": "team-a"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch"]}],
    }
    snapshot = queue_snapshot(queue(namespaces=selector))
    assert snapshot.namespaces == LabelSelector(
        {"kubernetes.io/metadata.name": "team-a"},
        (Requirement("tier", "In", frozenset({"batch"})),),
    )


@pytest.mark.parametrize("spec", [{}, {"namespaces": {}}], ids=["absent", "empty"])
def test_a_queue_without_namespaces_takes_pods_of_every_namespace(spec: MutableObj) -> None:
    namespaces = queue_snapshot(queue(**spec)).namespaces
    assert namespaces.empty
    assert namespaces == MATCH_ALL


# --- status: ours to write, never read ------------------------------------------------------------


def test_a_status_the_model_refuses_does_not_stop_a_queue_or_policy_from_being_read() -> None:
    junk = {"deserved": {"cpu": "a lot"}, "conditions": "none", "share": [1]}
    assert "status" in refusal({**queue(weight=3), "status": junk})  # the model would refuse it
    assert queue_snapshot({**queue(weight=3), "status": junk}).weight == 3
    spec = scheduler_policy(overcommit={"factors": {"cpu": 1.5}})
    assert "status" in refusal({**spec, "status": junk})
    assert policy_spec({**spec, "status": junk}).nodes.overcommit.factors == {"cpu": 1.5}
