"""Candidate pods: spec.candidates and the hard exclusions."""

from __future__ import annotations

import pytest

from sharekeeper.engine.qos import LabelSelector, Requirement
from sharekeeper.engine.qos.candidates import candidate_pods

from .builders import candidates_with, node, pod


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        (LabelSelector(), {}, True),
        (LabelSelector({"a": "1"}), {"a": "1", "b": "2"}, True),
        (LabelSelector({"a": "1"}), {"a": "2"}, False),
        (LabelSelector(requirements=(Requirement("a", "In", frozenset({"1"})),)), {}, False),
        (LabelSelector(requirements=(Requirement("a", "NotIn", frozenset({"1"})),)), {}, True),
        (LabelSelector(requirements=(Requirement("a", "Exists"),)), {"a": ""}, True),
        (LabelSelector(requirements=(Requirement("a", "DoesNotExist"),)), {"a": ""}, False),
    ],
)
def test_label_selector(selector: LabelSelector, labels: dict[str, str], matches: bool) -> None:
    assert selector.matches(labels) is matches


def test_defaults_never_touch_system_pods() -> None:
    n = node(
        pod("ok"),
        pod("sys", namespace="kube-system"),
        pod("mirror", mirror_or_static=True),
        pod("ds", daemonset=True),
        pod("critical", priority=2_000_000_000),
        pod("dying", deletion_deadline=1_795_000_000),
        pod("important", priority=1000),
    )
    assert [p.key.name for p in candidate_pods([candidates_with()], n)] == ["ok"]
    # Even a policy allowing every priority never gets the critical pod.
    permissive = candidates_with(max_priority=2**31 - 1)
    assert [p.key.name for p in candidate_pods([permissive], n)] == ["important", "ok"]


def test_namespace_and_pod_selectors() -> None:
    n = node(pod("a", namespace="batch", labels={"tier": "low"}), pod("b", namespace="web"))
    by_namespace = candidates_with(
        namespace_selector=LabelSelector({"kubernetes.io/metadata.name": "batch"})
    )
    by_pod = candidates_with(pod_selector=LabelSelector({"tier": "low"}))
    assert [p.key.name for p in candidate_pods([by_namespace], n)] == ["a"]
    assert [p.key.name for p in candidate_pods([by_pod], n)] == ["a"]
    assert candidate_pods([], n) == ()
