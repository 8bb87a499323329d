"""Pod -> queue resolution and per-queue allocated/request/inqueue (volcano.md §2)."""

from __future__ import annotations

from builders import node, pod, pod_group, policy, queue, shares


def _objects() -> list[dict[str, object]]:
    annotated = pod("annotated", node="n", cpu=1)
    annotated["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "b"  # type: ignore[index]
    return [
        policy(),
        node("n", cpu=16),
        queue("default"),
        queue("a"),
        queue("b"),
        queue("c"),
        pod("labelled", "a", node="n", cpu=2),
        annotated,
        pod("grouped", group="job", cpu=3),
        pod("unnamed", cpu=4),
        pod("done", "a", node="n", phase="Succeeded", cpu=8),
        pod_group("job", "c", phase="Inqueue", min_resources={"cpu": "5"}),
    ]


def test_pods_find_their_queue_by_label_annotation_group_then_default() -> None:
    queues = shares(*_objects()).queues
    assert queues["a"].allocated == {"cpu": 2000}  # the Succeeded pod does not count
    assert queues["b"].allocated == {"cpu": 1000}
    assert queues["c"].request == {"cpu": 3000}
    assert queues["default"].request == {"cpu": 4000}


def test_inqueue_is_what_an_admitted_group_has_not_yet_allocated() -> None:
    queues = shares(*_objects()).queues
    assert queues["c"].inqueue == {"cpu": 5000}


def test_scheduling_gated_pods_do_not_reserve() -> None:
    result = shares(
        policy(),
        node("n", cpu=8),
        queue("q"),
        pod_group("job", "q", phase="Inqueue", min_resources={"cpu": "4"}),
        pod("gated", group="job", gated=True, cpu=1),
        pod("running", group="job", node="n", cpu=1),
    )
    assert result.queues["q"].inqueue == {"cpu": 2000}  # 4 - 1 allocated - 1 gated


# --- Queue.spec.namespaces: which namespaces' pods a queue is charged for ------------------------


def namespace(name: str, **labels: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def admitting(name: str, selector: dict[str, object]) -> dict[str, object]:
    obj = queue(name)
    obj["spec"]["namespaces"] = selector  # type: ignore[index]
    return obj


def test_a_pod_of_a_namespace_the_queue_does_not_admit_is_charged_to_no_queue() -> None:
    """Found: any tenant could label a pod ``sharekeeper.io/queue: production`` and spend another
    team's queue."""
    result = shares(
        policy(),
        node("n", cpu=16),
        namespace("team-a", team="a"),
        namespace("team-b", team="b"),
        admitting("production", {"matchLabels": {"team": "a"}}),
        queue("default"),
        pod("mine", "production", node="n", namespace="team-a", cpu=2),
        pod("stolen", "production", node="n", namespace="team-b", cpu=3),
        pod("also-stolen", "production", namespace="team-b", cpu=1),
    )
    production = result.queues["production"]
    assert production.allocated == {"cpu": 2000}
    assert production.request == {"cpu": 2000}
    assert result.queues["default"].request == {}  # charged to no queue at all
    (refusal,) = [r for r in production.reasons if r.kind == "NamespaceNotAdmitted"]
    assert refusal.message.startswith("2 pods in namespace team-b name this queue")


def test_a_namespace_is_selected_by_its_name_label_even_when_unknown() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        admitting("q", {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ns"]}]}),
        pod("in", "q", node="n", namespace="ns", cpu=1),
        pod("out", "q", node="n", namespace="elsewhere", cpu=1),
    )  # fmt: skip
    assert result.queues["q"].allocated == {"cpu": 1000}


def test_pods_that_name_no_queue_go_to_default_only_from_namespaces_it_admits() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        admitting("default", {"matchLabels": {"kubernetes.io/metadata.name": "batch"}}),
        pod("batch-pod", namespace="batch", cpu=1),
        pod("system-pod", namespace="kube-system", cpu=4),
    )
    default = result.queues["default"]
    assert default.request == {"cpu": 1000}
    assert not [r for r in default.reasons if r.kind == "NamespaceNotAdmitted"]  # none asked


def test_a_podgroup_of_a_namespace_not_admitted_reserves_nothing_in_the_queue() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        admitting("c", {"matchLabels": {"kubernetes.io/metadata.name": "mine"}}),
        pod_group("job", "c", phase="Inqueue", min_resources={"cpu": "5"}, namespace="theirs"),
        pod("member", group="job", namespace="theirs", cpu=3),
    )
    assert (result.queues["c"].request, result.queues["c"].inqueue) == ({}, {})
    assert [r.kind for r in result.queues["c"].reasons] == ["NamespaceNotAdmitted"]


def test_without_namespaces_every_namespace_is_admitted() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        queue("q"),
        pod("a", "q", node="n", namespace="one", cpu=1),
        pod("b", "q", node="n", namespace="two", cpu=1),
    )
    assert result.queues["q"].allocated == {"cpu": 2000}
