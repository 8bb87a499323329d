"""What the webhook does to a new pod, and the patch that releases it: pure functions over the
pod as the API server sends it (untrusted: any field may be malformed)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import pod
from sharekeeper.model.pods import (
    ADMISSION_GATE,
    gates_with_admission,
    pod_snapshot,
    release_patch,
)

OURS = {"name": ADMISSION_GATE}


def test_a_pod_naming_a_queue_gets_the_gate_after_any_it_has() -> None:
    assert gates_with_admission(pod("p", "a", cpu=1)) == [OURS]
    assert gates_with_admission(pod("p", "a", gated=True, cpu=1)) == [{"name": "wait"}, OURS]


def test_a_volcano_queue_annotation_or_a_podgroup_also_names_a_queue() -> None:
    by_annotation = pod("p", cpu=1)
    by_annotation["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "a"
    assert gates_with_admission(by_annotation) == [OURS]
    assert gates_with_admission(pod("p", group="job", cpu=1)) == [OURS]


@pytest.mark.parametrize(
    ("why", "obj"),
    [
        ("names no queue", pod("p", cpu=1)),
        ("gated by us already", pod("p", "a", held=True, cpu=1)),
        ("bound at creation: the API server refuses gates there", pod("p", "a", node="n", cpu=1)),
    ],
)
def test_pods_left_alone(why: str, obj: dict[str, Any]) -> None:
    assert gates_with_admission(obj) is None, why


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "schedulingGates"), "not a list"),
        (("metadata", "labels"), ["sharekeeper.io/queue"]),
        (("metadata", "annotations"), 7),
    ],
)
def test_malformed_fields_leave_the_pod_alone_without_raising(
    path: tuple[str, str], value: object
) -> None:
    obj = pod("p", "a", cpu=1)
    obj[path[0]][path[1]] = value
    assert gates_with_admission(obj) is None


def test_the_release_patch_removes_only_our_gate_and_records_the_time() -> None:
    patch = release_patch("2026-11-24T00:00:00Z")
    assert patch["spec"]["schedulingGates"] == [{"$patch": "delete", "name": ADMISSION_GATE}]
    assert patch["metadata"]["annotations"] == {"sharekeeper.io/admitted": "2026-11-24T00:00:00Z"}


def test_a_held_pod_is_read_with_its_order_and_a_released_one_as_admitted() -> None:
    held = pod_snapshot(pod("p", "a", held=True, priority=5, created="2026-01-01T00:00:10Z", cpu=1))
    assert (held.admission, held.priority, held.created_seconds) == ("held", 5, 1767225610.0)
    admitted = pod_snapshot(pod("q", "a", admitted=True, priority=5, cpu=1))
    assert (admitted.admission, admitted.priority) == ("admitted", 0)  # order is not kept
    assert pod_snapshot(pod("r", "a", cpu=1)).admission == "none"
