"""Volcano Queues read for mirroring: what is copied, what is left out and said, what is refused
(everything our Queue model would refuse, since the API server would refuse the mirror), and
the one form specs are compared in."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from sharekeeper.api.mirroring import (
    MAX_LEFT_OUT,
    QueueOrigin,
    queue_origin,
    spec_form,
    volcano_queue,
)
from sharekeeper.api.queue import queue_snapshot, volcano_owner
from sharekeeper.model.objects import ObjectError

DEFAULTS = {"weight": 1, "priority": 0, "reclaimable": True, "state": "Open"}


def volcano(
    name: str = "vq", spec: Any = None, status: Any = None, **metadata: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}", **metadata},
    }
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def mirror(
    name: str = "vq", owner: str = "uid-vq", spec: Any = None, **metadata: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
        "kind": "Queue",
        "metadata": {
            "name": name,
            "uid": f"mirror-{name}",
            "resourceVersion": "7",
            "labels": {"sharekeeper.io/source": "volcano"},
            "ownerReferences": [
                {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                 "name": name, "uid": owner, "controller": True}
            ],
            **metadata,
        },
        "spec": spec if spec is not None else {"weight": 1},
    }  # fmt: skip


def test_the_fields_our_queue_has_are_copied_with_every_default_written_out() -> None:
    read = volcano(
        spec={
            "weight": 3,
            "capability": {"cpu": 8, "memory": "32Gi"},
            "deserved": {"cpu": "4"},
            "guarantee": {"resource": {"cpu": "2"}},
            "reclaimable": False,
            "priority": 5,
        },
        labels={"team": "a"},
    )
    queue = volcano_queue(read)
    assert queue.problem is None
    assert queue.labels == {"team": "a"}
    assert queue.spec == {
        "weight": 3,
        "capability": {"cpu": 8, "memory": "32Gi"},
        "deserved": {"cpu": "4"},
        "guarantee": {"resource": {"cpu": "2"}},
        "priority": 5,
        "reclaimable": False,
        "state": "Open",
    }
    assert queue.left_out is None


def test_an_empty_volcano_queue_is_a_queue_of_defaults() -> None:
    assert volcano_queue(volcano()).spec == DEFAULTS
    assert volcano_queue(volcano(spec={"guarantee": {}})).spec == DEFAULTS


def test_the_parent_is_copied_and_other_fields_are_left_out_and_said() -> None:
    queue = volcano_queue(volcano(spec={"weight": 2, "parent": "org", "affinity": {"x": 1}}))
    assert queue.spec == {**DEFAULTS, "weight": 2, "parent": "org"}
    assert queue.left_out == "spec.affinity"


def test_what_is_left_out_is_bounded() -> None:
    spec = {f"field{i:05}": i for i in range(2000)}
    left_out = volcano_queue(volcano(spec=spec)).left_out
    assert left_out is not None
    assert len(left_out) == MAX_LEFT_OUT
    assert left_out.endswith("...")


@pytest.mark.parametrize(
    ("status", "spec", "state"),
    [
        ({"state": "Open"}, {}, "Open"),
        ({"state": "Closed"}, {}, "Closed"),
        ({"state": "Closing"}, {}, "Closed"),
        ({"state": "Unknown"}, {"state": "Closed"}, "Closed"),
        (None, {"state": "Closed"}, "Closed"),
        ({"state": 7}, {"state": "Sideways"}, "Open"),
        (None, {}, "Open"),
    ],
)
def test_the_state_is_the_observed_one_else_the_desired_one(
    status: Any, spec: Any, state: str
) -> None:
    assert volcano_queue(volcano(spec=spec, status=status)).spec == {**DEFAULTS, "state": state}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"weight": 0}, "spec.weight"),
        ({"weight": 70000}, "spec.weight"),
        ({"weight": "3"}, "spec.weight"),
        ({"capability": {"cpu": "lots"}}, "spec.capability"),
        ({"capability": {"memory": "9Ei"}}, "spec.capability"),  # above 4P
        ({"deserved": {"cpu": "-1"}}, "spec.deserved"),
        ({"guarantee": {"resource": {"cpu": "8"}}, "capability": {"cpu": "4"}}, "guarantee"),
        ({"guarantee": "all of it"}, "spec.guarantee"),
        ({"capability": ["cpu"]}, "spec.capability"),
        ({"reclaimable": "yes"}, "spec.reclaimable"),
    ],
    ids=str,
)
def test_what_our_model_refuses_is_not_mirrored_and_says_why(spec: Any, field: str) -> None:
    queue = volcano_queue(volcano(spec=spec))
    assert queue.spec is None
    assert queue.problem is not None
    assert queue.problem.startswith("Volcano Queue vq is not mirrored: ")
    assert field in queue.problem


def test_a_spec_that_is_not_a_mapping_is_refused() -> None:
    queue = volcano_queue(volcano(spec=["weight", 3]))
    assert queue.spec is None
    assert queue.problem is not None
    assert "spec: must be a mapping" in queue.problem


def test_a_volcano_queue_without_a_uid_cannot_be_read() -> None:
    obj = volcano()
    del obj["metadata"]["uid"]
    with pytest.raises(ObjectError, match=r"metadata\.uid"):
        volcano_queue(obj)


def test_the_api_servers_defaults_are_no_difference() -> None:
    """What the operator sends and what the API server stores (with the CRD's defaults and
    quantities as sent) read the same; a hand edit does not."""
    sent = volcano_queue(volcano(spec={"weight": 2, "capability": {"cpu": "4"}})).spec
    stored = {"weight": 2, "capability": {"cpu": "4"}, "priority": 0, "reclaimable": True,
              "state": "Open", "deserved": {}}  # fmt: skip
    assert spec_form(stored) == sent
    assert spec_form({**stored, "weight": 5}) != sent
    assert spec_form({**stored, "namespaces": {"matchLabels": {"a": "b"}}}) != sent
    assert spec_form({"weight": 0}) is None


def test_a_mirror_is_labelled_and_owned_by_the_volcano_queue_of_its_name() -> None:
    assert volcano_owner(mirror()) == "uid-vq"
    unlabelled = mirror()
    unlabelled["metadata"]["labels"] = {}
    assert volcano_owner(unlabelled) is None
    unowned = mirror()
    del unowned["metadata"]["ownerReferences"]
    assert volcano_owner(unowned) is None
    owned_by_another = mirror()
    owned_by_another["metadata"]["ownerReferences"][0]["name"] = "other"
    assert volcano_owner(owned_by_another) is None
    owned_by_a_deployment = mirror()
    owned_by_a_deployment["metadata"]["ownerReferences"][0]["apiVersion"] = "apps/v1"
    assert volcano_owner(owned_by_a_deployment) is None
    assert volcano_owner({"metadata": "nonsense"}) is None


def test_the_engine_reads_whether_a_queue_is_a_mirror() -> None:
    assert queue_snapshot(mirror()).mirror_of == "uid-vq"
    made = mirror()
    made["metadata"]["labels"] = {}
    assert queue_snapshot(made).mirror_of is None


def test_a_queue_people_made_is_read_without_its_spec() -> None:
    made = mirror(spec={"weight": 4})
    made["metadata"]["labels"] = {"team": "a"}
    assert queue_origin(made) == QueueOrigin("vq", "mirror-vq", "7")


def test_a_mirror_is_read_with_its_labels_annotation_and_spec() -> None:
    origin = queue_origin(
        mirror(spec={"weight": 4}, annotations={"sharekeeper.io/volcano-left-out": "spec.x"})
    )
    assert origin.mirror_of == "uid-vq"
    assert origin.labels == {"sharekeeper.io/source": "volcano"}
    assert origin.left_out == "spec.x"
    assert origin.spec == {"weight": 4}
    assert origin.form == {**DEFAULTS, "weight": 4}
    assert origin.same_but_version(replace(origin, resource_version="8"))
    assert not origin.same_but_version(replace(origin, resource_version="8", left_out=None))


def test_every_field_but_the_version_tells_two_origins_apart() -> None:
    origin = queue_origin(
        mirror(spec={"weight": 4}, annotations={"sharekeeper.io/volcano-left-out": "spec.x"})
    )
    for field in fields(QueueOrigin):
        other = replace(origin, **{field.name: "different"})
        assert origin.same_but_version(other) is (field.name == "resource_version"), field.name
    assert not origin.same_but_version(None)


def test_a_mirror_whose_spec_our_model_refuses_reads_as_different() -> None:
    origin = queue_origin(mirror(spec={"weight": 0}))
    assert origin.form is None
    assert origin.spec == {"weight": 0}
