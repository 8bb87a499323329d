"""What the pod reader keeps of a pod that waits to be scheduled (held by the admission gate, or
found Unschedulable): its node constraints and since when it waits, and nothing more for any
other pod. And the node reader's taints."""

from __future__ import annotations

from typing import Any

from builders import node, pod, unschedulable
from sharekeeper.engine.node_constraints import (
    ANY_NODE,
    NO_NODE,
    Comparison,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from sharekeeper.engine.selectors import Requirement
from sharekeeper.model.nodes import UNSCHEDULABLE_TAINT, node_snapshot
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.pods import node_constraints, pod_record, unschedulable_since
from sharekeeper.model.records import PodRecord, WaitingPodRecord

CREATED = "2026-01-01T00:00:00Z"
CREATED_SECONDS = 1_767_225_600.0


def test_an_unschedulable_pod_waits_since_its_condition_changed() -> None:
    record = pod_record(unschedulable(pod("p", "a", created=CREATED, priority=7, cpu=1)))
    assert isinstance(record, WaitingPodRecord)
    assert record.unschedulable_since == CREATED_SECONDS + 60
    assert record.constraints is ANY_NODE
    # Ordered as a held pod is: its effective priority and creation are read.
    assert (record.share.priority, record.share.created_seconds) == (7, CREATED_SECONDS)


def test_without_a_transition_time_it_waits_since_its_creation() -> None:
    obj = unschedulable(pod("p", "a", created=CREATED, cpu=1), since=None)
    assert unschedulable_since(obj) == CREATED_SECONDS


def test_only_the_unschedulable_reason_counts() -> None:
    gated = unschedulable(pod("p", "a", created=CREATED, cpu=1))
    gated["status"]["conditions"][1]["reason"] = "SchedulingGated"
    scheduled = unschedulable(pod("q", "a", created=CREATED, cpu=1))
    scheduled["status"]["conditions"][1].update(status="True", reason="")
    for obj in (gated, scheduled, pod("r", "a", created=CREATED, cpu=1)):
        record = pod_record(obj)
        assert type(record) is PodRecord
        assert (record.share.priority, record.share.created_seconds) == (0, 0.0)


def test_bound_and_finished_pods_never_wait_whatever_their_conditions_say() -> None:
    bound = unschedulable(pod("p", "a", node="n", created=CREATED, cpu=1))
    done = unschedulable(pod("q", "a", phase="Failed", created=CREATED, cpu=1))
    assert not isinstance(pod_record(bound), WaitingPodRecord)
    assert type(pod_record(done)) is PodRecord


def test_a_held_pod_waits_with_its_constraints_and_is_not_unschedulable() -> None:
    obj = pod("p", "a", held=True, created=CREATED, cpu=1)
    obj["spec"]["nodeSelector"] = {"pool": "gpu"}
    record = pod_record(obj)
    assert isinstance(record, WaitingPodRecord)
    assert record.unschedulable_since is None
    assert record.constraints.selector == (("pool", "gpu"),)


def test_constraints_are_read_whole() -> None:
    obj = pod("p", "a", cpu=1)
    obj["spec"]["nodeSelector"] = {"b": "2", "a": "1"}
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["x", "y"]},
                        {"key": "cores", "operator": "Gt", "values": ["8"]},
                    ]},
                    {"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                    ]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
        }
    }  # fmt: skip
    obj["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "team", "value": "ml"},
        {"operator": "Exists"},
    ]
    constraints = node_constraints(obj)
    assert constraints.selector == (("a", "1"), ("b", "2"))
    assert constraints.terms == (
        NodeSelectorTerm(
            (Requirement("zone", "In", frozenset({"x", "y"})), Comparison("cores", "Gt", 8)), ()
        ),
        NodeSelectorTerm((), (Requirement("metadata.name", "In", frozenset({"n1"})),)),
    )
    assert constraints.tolerations == (
        Toleration("gpu", "Exists", "", "NoSchedule"),
        Toleration("team", "Equal", "ml", ""),
        Toleration("", "Exists", "", ""),
    )


def test_constraints_that_cannot_be_read_allow_no_node() -> None:
    def with_spec(**spec: Any) -> MutableObj:
        obj = pod("p", "a", cpu=1)
        obj["spec"].update(spec)
        return obj

    required = "requiredDuringSchedulingIgnoredDuringExecution"
    broken = [
        with_spec(nodeSelector=["not", "a", "mapping"]),
        with_spec(tolerations=[{"key": "k", "operator": "Maybe"}]),
        with_spec(tolerations="all"),
        with_spec(affinity={"nodeAffinity": {required: {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}]}}}),
        with_spec(affinity={"nodeAffinity": {required: {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}]}}}),
        with_spec(affinity={"nodeAffinity": {required: {"nodeSelectorTerms": [
            {"matchExpressions": [{"operator": "Exists"}]}]}}}),
    ]  # fmt: skip
    for obj in broken:
        assert node_constraints(obj) is NO_NODE, obj["spec"]
    # The pod itself is still read: only its constraints are taken for none met.
    record = pod_record(unschedulable(broken[0]))
    assert isinstance(record, WaitingPodRecord)
    assert record.constraints is NO_NODE


def test_a_node_keeps_the_taints_that_keep_pods_off_and_its_cordon() -> None:
    obj = node("n", cpu=8)
    obj["spec"] = {
        "unschedulable": True,
        "taints": [
            {"key": "gpu", "value": "yes", "effect": "NoSchedule"},
            {"key": "gone", "effect": "NoExecute"},
            {"key": "soft", "effect": "PreferNoSchedule"},
            "not a taint",
        ],
    }
    assert node_snapshot(obj).taints == (
        Taint("gpu", "yes", "NoSchedule"),
        Taint("gone", "", "NoExecute"),
        UNSCHEDULABLE_TAINT,
    )
    assert node_snapshot(node("plain", cpu=8)).taints == ()
