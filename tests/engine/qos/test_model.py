"""api/qos.py and model/qos.py: Kubernetes dicts in, status/annotation/action dicts out."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from sharekeeper.api.qos import node_entries, qos_policy, read_policy, state_from_status
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    NodeQosState,
    Strategy,
    accept_all,
    check_node,
    node_actions,
    with_releases,
)
from sharekeeper.engine.qos.candidates import protected
from sharekeeper.model.objects import ObjectError
from sharekeeper.model.qos import (
    newest_sample_time,
    node_from_dicts,
    pod_view,
    waterlines_annotation,
)
from sharekeeper.pipeline.qos import action_dict, node_status_entry, releasing_entry

POLICY: dict[str, Any] = {
    "apiVersion": "ensurance.sharekeeper.io/v1alpha1",
    "kind": "NodeQosEnsurancePolicy",
    "metadata": {"name": "cpu"},
    "spec": {
        "nodeSelector": {"matchLabels": {"pool": "batch"}},
        "objectiveEnsurances": [
            {
                "name": "cpu-usage-evict",
                "metricRule": {"name": "cpu_total_usage", "value": "6"},
                "avoidanceThreshold": 1,
                "actionName": "evict",
            },
            {
                "name": "mem-util",
                "metricRule": {"name": "memory_total_utilization", "value": "50.5"},
                "actionName": "evict",
                "strategy": "Preview",
            },
        ],
        "actions": [
            {
                "name": "evict",
                "disableScheduling": True,
                "eviction": {"terminationGracePeriodSeconds": 5},
            },
            {
                "name": "throttle",
                "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 20}},
            },
        ],
    },
}


def k8s_pod(name: str, cpu_limit: str | None = None, **extra: object) -> dict[str, object]:
    resources = {"limits": {"cpu": cpu_limit}} if cpu_limit else {}
    return {
        "metadata": {"name": name, "namespace": "default", **extra},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": resources}]},
        "status": {
            "qosClass": "Burstable",
            "phase": "Running",
            "startTime": "2026-01-01T00:00:00Z",
        },
    }


def test_policy_defaults_and_units() -> None:
    policy = qos_policy(read_policy(POLICY))
    cpu, mem = policy.objectives
    assert (cpu.value, cpu.restore_threshold) == (6_000, 1)
    assert (mem.value, mem.strategy) == (50_500, Strategy.PREVIEW)
    assert policy.actions["evict"].eviction is not None
    assert policy.actions["evict"].eviction.termination_grace_period_seconds == 5
    assert policy.actions["evict"].cool_down_seconds == 300
    assert (policy.candidates.max_priority, policy.excess_percent) == (999, 10)
    assert policy.evict_on_missing_metrics is False


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            {"metricRule": {"name": "cpu_load_1_min", "value": "1"}},
            "metricRule.name: Input should be 'cpu_total_usage'",
        ),
        ({"metricRule": {"name": "cpu_total_usage", "value": "-1"}}, "metricRule.value"),
        ({"metricRule": {"name": "cpu_total_usage", "value": "0"}}, "must be a positive"),
        ({"avoidanceThreshold": 0}, "avoidanceThreshold: Input should be greater than or equal"),
        ({"metricRule": None}, "metricRule: is required"),
        ({"strategy": "Later"}, "strategy: Input should be 'None' or 'Preview' (got 'Later')"),
    ],
)
def test_policy_errors_name_object_and_field(patch: dict[str, object], message: str) -> None:
    """Crane's webhook cases (crane_cases.json validation_cases) that apply to the engine input."""
    spec: dict[str, Any] = dict(POLICY["spec"])
    spec["objectiveEnsurances"] = [{**spec["objectiveEnsurances"][0], **patch}]
    with pytest.raises(ObjectError) as error:
        qos_policy(read_policy({**POLICY, "spec": spec}))
    assert "NodeQosEnsurancePolicy cpu: spec.objectiveEnsurances[0]" in str(error.value)
    assert error.value.path.startswith("spec.objectiveEnsurances[0]")
    assert message in str(error.value)


def test_pod_and_node_from_dicts_with_metrics() -> None:
    pods = [
        k8s_pod(
            "a",
            "2",
            annotations={"sharekeeper.io/cpu-throttle": '{"originalLimit": "2", "limit": "1600m"}'},
        ),
        k8s_pod(
            "ds",
            ownerReferences=[
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": "x",
                    "uid": "u-x",
                    "controller": True,
                }
            ],
        ),
        {**k8s_pod("done"), "status": {"phase": "Succeeded"}},
    ]
    node = {
        "metadata": {"name": "n1", "labels": {"pool": "batch"}},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi"}},
    }
    metrics = {"usage": {"cpu": "7", "memory": "8Gi"}}
    pod_metrics = {
        PodKey("default", "a"): {
            "containers": [{"name": "c", "usage": {"cpu": "1500m", "memory": "1Gi"}}]
        }
    }
    snapshot = node_from_dicts(
        node, pods, metrics, pod_metrics, daemonsets={("default", "x", "u-x")}
    )
    assert (snapshot.cpu_usage_milli, snapshot.memory_capacity_bytes) == (7_000, 16 * 2**30)
    a, ds = snapshot.pods
    # The annotation is not ours to trust (finding: a forged one raised a limit to 64 cores).
    assert (a.cpu_usage_milli, a.cpu_limit_milli, a.throttle) == (1_500, 2_000, None)
    assert a.start_time == 1_767_225_600
    assert ds.daemonset
    assert ds.cpu_usage_milli is None  # no PodMetrics: unknown, not zero


@pytest.mark.parametrize("said", ["Guaranteed", "guaranteed", ["Guaranteed"], {"a": 1}, 7, None])
def test_a_pod_s_qos_class_is_one_of_the_three_or_none(said: object) -> None:
    pod = {**k8s_pod("a"), "status": {"qosClass": said, "phase": "Running"}}
    assert pod_view(pod).qos_class == ("Guaranteed" if said == "Guaranteed" else "")


def test_the_usage_sample_says_when_its_window_began_and_a_pod_when_it_is_killed() -> None:
    node = {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8"}}}
    dying = k8s_pod("a", deletionTimestamp="2026-01-01T00:00:30Z", deletionGracePeriodSeconds=30)
    dying["spec"]["terminationGracePeriodSeconds"] = 30  # type: ignore[index]
    metrics = {"timestamp": "2026-01-01T00:01:00Z", "window": "1m0.5s", "usage": {"cpu": "1"}}
    snapshot = node_from_dicts(node, [dying], metrics)
    assert snapshot.usage_since == 1_767_225_600 - 1  # the window's half second rounds it down
    assert snapshot.usage_at == 1_767_225_660
    (pod,) = snapshot.pods
    assert (pod.terminating, pod.deletion_deadline) == (True, 1_767_225_630)
    assert (pod.grace_period_seconds, pod.deletion_grace_seconds) == (30, 30)
    assert node_from_dicts(node, [], {"usage": {"cpu": "1"}}).usage_since is None
    unwindowed = node_from_dicts(node, [], {k: v for k, v in metrics.items() if k != "window"})
    assert (unwindowed.usage_since, unwindowed.usage_at) == (None, 1_767_225_660)
    with pytest.raises(ObjectError, match="window: is not a duration such as 10s"):
        node_from_dicts(node, [], {**metrics, "window": "10"})


@pytest.mark.parametrize(
    ("metadata", "protected_pod"),
    [
        # Anyone who creates a pod can write these: they exempt nothing.
        ({"annotations": {"kubernetes.io/config.source": "file"}}, False),
        ({"annotations": {"kubernetes.io/config.mirror": "x"}}, False),
        ({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}]}, False),
        ({"annotations": {"kubernetes.io/config.mirror": "x"},
          "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "elsewhere"}]}, False),
        # What the kubelet and the DaemonSet controller write.
        ({"annotations": {"kubernetes.io/config.mirror": "x"},
          "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1"}]}, True),
        ({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x",
                               "uid": "u-x", "controller": True}]}, True),
        # A DaemonSet that does not exist, or a version the garbage collector cannot resolve.
        ({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x",
                               "uid": "forged", "controller": True}]}, False),
        ({"ownerReferences": [{"apiVersion": "apps/v1beta2", "kind": "DaemonSet", "name": "x",
                               "uid": "u-x", "controller": True}]}, False),
    ],
)  # fmt: skip
def test_exemptions_come_only_from_fields_a_tenant_cannot_forge(
    metadata: dict[str, Any], protected_pod: bool
) -> None:
    obj = k8s_pod("p")
    obj["metadata"].update(metadata)
    obj["spec"]["nodeName"] = "n1"
    assert protected(pod_view(obj, daemonsets={("default", "x", "u-x")})) is protected_pod


def test_outputs_and_state_round_trip_through_status() -> None:
    policy = qos_policy(read_policy(POLICY))
    node = node_from_dicts(
        {
            "metadata": {"name": "n1", "labels": {"pool": "batch"}},
            "status": {"capacity": {"cpu": "8", "memory": "16Gi"}},
        },
        [k8s_pod("a")],
        {"usage": {"cpu": "7", "memory": "9Gi"}},
        {
            PodKey("default", "a"): {
                "containers": [{"name": "c", "usage": {"cpu": "1500m", "memory": "1Gi"}}]
            }
        },
    )
    result = check_node([policy], node, NodeQosState(), now=1_000)
    assert waterlines_annotation(result.waterlines) == {"evict.cpu_total_usage": "6"}
    assert waterlines_annotation(result.preview_waterlines) == {
        "evict.memory_total_utilization": "50500m"
    }
    (action,) = accept_all(node_actions(result, node)).accepted
    assert action_dict(action) == {
        "kind": "evict",
        "pod": "default/a",
        "node": "n1",
        "metric": "cpu_total_usage",
        "released": "1500m",
    }
    entry = node_status_entry(result, "cpu")
    json.dumps(entry)  # plain JSON
    read = [read_policy({**POLICY, "status": {"nodes": [entry]}})]
    restored = state_from_status(node_entries(read)["n1"])
    assert restored == result.state


def test_releases_round_trip_through_status() -> None:
    n = node_from_dicts(
        {
            "metadata": {"name": "n1", "labels": {"pool": "batch"}},
            "status": {"capacity": {"cpu": "8"}},
        },
        [k8s_pod("a", uid="u-a")],
        {"usage": {"cpu": "7", "memory": "9Gi"}},
        {PodKey("default", "a"): {"containers": [{"usage": {"cpu": "1500m", "memory": "1Gi"}}]}},
    )
    (evicted,) = accept_all(
        node_actions(check_node([qos_policy(read_policy(POLICY))], n, NodeQosState(), 1_000), n)
    ).accepted
    (release,) = with_releases(n, (), [evicted], 1_000)
    entries = [releasing_entry(release), releasing_entry(replace(release, gone_at=1_010))]
    status = {"nodes": [{"name": "n1", "releasing": entries[:1]}]}
    other = {"nodes": [{"name": "n1", "releasing": entries[1:]}]}
    read = [read_policy({**POLICY, "status": status}), read_policy({**POLICY, "status": other})]
    # One record per pod, whichever policy holds a copy.
    assert state_from_status(node_entries(read)["n1"]).releases == (release,)
    assert (release.cpu_milli, release.memory_bytes, release.deadline) == (1_500, 2**30, 1_005)


def test_the_newest_sample_time_is_read_from_the_timestamps_alone() -> None:
    samples = [
        {"timestamp": "2026-01-01T00:00:30Z"},
        {"timestamp": "2026-01-01T00:01:00Z"},
        {},
        {"timestamp": 5},
    ]
    assert newest_sample_time(samples) == 1_767_225_660
    assert newest_sample_time([{"timestamp": "yesterday"}]) is None
    assert newest_sample_time([]) is None
