"""A pod's own constraints on nodes, as kube-scheduler's NodeAffinity and TaintToleration
filters read them: node selector, required node affinity (terms ORed, expressions ANDed),
tolerations of NoSchedule and NoExecute taints."""

from __future__ import annotations

import pytest

from sharekeeper.engine.node_constraints import (
    ANY_NODE,
    NO_NODE,
    Comparison,
    NodeConstraints,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from sharekeeper.engine.selectors import Requirement

ZONE = "topology.kubernetes.io/zone"
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def term(
    *expressions: Requirement | Comparison, fields: tuple[Requirement, ...] = ()
) -> NodeSelectorTerm:
    return NodeSelectorTerm(expressions, fields)


def affinity(*terms: NodeSelectorTerm) -> NodeConstraints:
    return NodeConstraints((), terms, ())


def test_a_pod_asking_nothing_goes_anywhere_untainted_and_nowhere_if_unreadable() -> None:
    assert ANY_NODE.allows("n", {}, ())
    assert ANY_NODE.allows("n", {"a": "b"}, (Taint("x", "", "PreferNoSchedule"),))
    assert not ANY_NODE.allows("n", {}, (GPU_TAINT,))
    assert not NO_NODE.allows("n", {ZONE: "a"}, ())


def test_the_node_selector_wants_every_label_with_its_value() -> None:
    wanted = NodeConstraints(((ZONE, "a"), ("disk", "ssd")), None, ())
    assert wanted.allows("n", {ZONE: "a", "disk": "ssd", "other": "x"}, ())
    assert not wanted.allows("n", {ZONE: "a"}, ())
    assert not wanted.allows("n", {ZONE: "b", "disk": "ssd"}, ())


@pytest.mark.parametrize(
    ("requirement", "labels", "matches"),
    [
        (Requirement(ZONE, "In", frozenset({"a", "b"})), {ZONE: "b"}, True),
        (Requirement(ZONE, "In", frozenset({"a", "b"})), {ZONE: "c"}, False),
        (Requirement(ZONE, "In", frozenset({"a"})), {}, False),
        (Requirement(ZONE, "NotIn", frozenset({"a"})), {ZONE: "b"}, True),
        (Requirement(ZONE, "NotIn", frozenset({"a"})), {}, True),
        (Requirement(ZONE, "NotIn", frozenset({"a"})), {ZONE: "a"}, False),
        (Requirement(ZONE, "Exists"), {ZONE: ""}, True),
        (Requirement(ZONE, "Exists"), {}, False),
        (Requirement(ZONE, "DoesNotExist"), {}, True),
        (Requirement(ZONE, "DoesNotExist"), {ZONE: "a"}, False),
        (Comparison("cores", "Gt", 8), {"cores": "16"}, True),
        (Comparison("cores", "Gt", 8), {"cores": "8"}, False),
        (Comparison("cores", "Gt", -1), {"cores": "+0"}, True),
        (Comparison("cores", "Lt", 8), {"cores": "4"}, True),
        (Comparison("cores", "Lt", 8), {"cores": "-4"}, True),
        (Comparison("cores", "Lt", 8), {"cores": "16"}, False),
        (Comparison("cores", "Lt", 8), {"cores": "four"}, False),
        (Comparison("cores", "Lt", 8), {"cores": "4.0"}, False),
        (Comparison("cores", "Lt", 8), {}, False),
    ],
)
def test_each_operator_of_a_match_expression(
    requirement: Requirement | Comparison, labels: dict[str, str], matches: bool
) -> None:
    assert affinity(term(requirement)).allows("n", labels, ()) is matches


def test_terms_are_ored_and_their_expressions_anded() -> None:
    in_a = Requirement(ZONE, "In", frozenset({"a"}))
    ssd = Requirement("disk", "In", frozenset({"ssd"}))
    big = Comparison("cores", "Gt", 32)
    either = affinity(term(in_a, ssd), term(big))
    assert either.allows("n", {ZONE: "a", "disk": "ssd"}, ())
    assert either.allows("n", {"cores": "64"}, ())
    assert not either.allows("n", {ZONE: "a"}, ())  # half of the first term, none of the second


def test_an_empty_term_matches_no_node_and_no_terms_at_all_no_node_either() -> None:
    assert not affinity(term()).allows("n", {ZONE: "a"}, ())
    assert affinity(term(), term(Requirement(ZONE, "Exists"))).allows("n", {ZONE: "a"}, ())
    assert not affinity().allows("n", {}, ())


def test_match_fields_name_the_node() -> None:
    named = affinity(term(fields=(Requirement("metadata.name", "In", frozenset({"n1"})),)))
    assert named.allows("n1", {}, ())
    assert not named.allows("n2", {}, ())
    both = affinity(
        term(
            Requirement(ZONE, "In", frozenset({"a"})),
            fields=(Requirement("metadata.name", "NotIn", frozenset({"n1"})),),
        )
    )
    assert both.allows("n2", {ZONE: "a"}, ())
    assert not both.allows("n1", {ZONE: "a"}, ())
    assert not both.allows("n2", {ZONE: "b"}, ())


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        (Toleration("nvidia.com/gpu", "Exists", "", ""), True),
        (Toleration("nvidia.com/gpu", "Equal", "present", ""), True),
        (Toleration("nvidia.com/gpu", "Equal", "absent", ""), False),
        (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"), True),
        (Toleration("nvidia.com/gpu", "Equal", "present", "NoExecute"), False),
        (Toleration("", "Exists", "", ""), True),  # tolerates everything
        (Toleration("", "Exists", "", "NoExecute"), False),
        (Toleration("other", "Exists", "", ""), False),
    ],
)
def test_tolerations_as_kubernetes_matches_them(toleration: Toleration, tolerated: bool) -> None:
    pod = NodeConstraints((), None, (toleration,))
    assert pod.allows("n", {}, (GPU_TAINT,)) is tolerated


def test_every_taint_that_keeps_pods_off_must_be_tolerated() -> None:
    taints = (
        GPU_TAINT,
        Taint("dedicated", "ml", "NoExecute"),
        Taint("soft", "", "PreferNoSchedule"),
    )
    one = NodeConstraints((), None, (Toleration("nvidia.com/gpu", "Exists", "", ""),))
    both = NodeConstraints(
        (), None, (Toleration("nvidia.com/gpu", "Exists", "", ""),
                   Toleration("dedicated", "Equal", "ml", "NoExecute")),
    )  # fmt: skip
    assert not one.allows("n", {}, taints)
    assert both.allows("n", {}, taints)
    assert both.allows("n", {}, ())
