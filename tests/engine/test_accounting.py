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
