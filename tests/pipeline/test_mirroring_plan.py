"""What mirroring decides: creates, patches, deletes and reports, from the Volcano Queues and our
Queues as the store holds them. The API server is played by ``stored``: the object as it would
keep it (the CRD's defaults added), read back as the store would read it."""

from __future__ import annotations

from typing import Any

from sharekeeper.api.mirroring import QueueOrigin, VolcanoQueue, queue_origin, volcano_queue
from sharekeeper.model.objects import MutableObj
from sharekeeper.pipeline.mirroring import Create, Delete, Patch, mirror_object, mirror_plan

DEFAULTS = {"priority": 0, "reclaimable": True, "state": "Open"}


def volcano(name: str, uid: str | None = None, **spec: Any) -> VolcanoQueue:
    return volcano_queue(
        {"metadata": {"name": name, "uid": uid or f"uid-{name}", "labels": {"team": "a"}},
         "spec": spec}
    )  # fmt: skip


def stored(body: MutableObj, uid: str = "", version: str = "1") -> QueueOrigin:
    """``body`` as the API server keeps it (defaults added) and the store reads it."""
    obj = {
        **body,
        "metadata": {**body["metadata"], "uid": uid or f"mirror-{body['metadata']['name']}",
                     "resourceVersion": version},
        "spec": {**DEFAULTS, **body["spec"]},
    }  # fmt: skip
    return queue_origin(obj)


def made(name: str, **labels: str) -> QueueOrigin:
    return queue_origin({"metadata": {"name": name, "uid": f"made-{name}", "labels": labels},
                         "spec": {"weight": 9}})  # fmt: skip


def mirrored(*sources: VolcanoQueue) -> dict[str, QueueOrigin]:
    """The mirrors the plan creates for ``sources``, as stored."""
    plan = mirror_plan({s.name: s for s in sources}, {})
    return {w.name: stored(w.body) for w in plan.writes if isinstance(w, Create)}


def test_a_volcano_queue_gets_a_labelled_owned_queue_of_its_name_and_spec() -> None:
    source = volcano("research", weight=3, capability={"cpu": "8"}, parent="root")
    plan = mirror_plan({"research": source}, {})
    assert plan.reports == ()
    (create,) = plan.writes
    assert isinstance(create, Create)
    assert create.body == {
        "apiVersion": "scheduling.sharekeeper.io/v1alpha1",
        "kind": "Queue",
        "metadata": {
            "name": "research",
            "labels": {"team": "a", "sharekeeper.io/source": "volcano"},
            "ownerReferences": [
                {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                 "name": "research", "uid": "uid-research", "controller": True}
            ],
        },
        "spec": {"weight": 3, "capability": {"cpu": "8"}, "parent": "root", **DEFAULTS},
    }  # fmt: skip


def test_volcanos_root_queue_is_the_trees_root_and_not_mirrored() -> None:
    root, team = volcano("root", weight=1), volcano("team", parent="root")
    plan = mirror_plan({"root": root, "team": team}, {"root": stored(mirror_object(root))})
    created = [w.body["metadata"]["name"] for w in plan.writes if isinstance(w, Create)]
    deleted = [w.name for w in plan.writes if isinstance(w, Delete)]
    assert (created, deleted) == (["team"], ["root"])  # a mirror from before is removed


def test_a_mirror_as_stored_is_not_written_again() -> None:
    source = volcano("a", weight=2, capability={"cpu": 4}, parent="root")
    assert mirror_plan({"a": source}, mirrored(source)).writes == ()


def test_a_change_on_the_volcano_side_is_patched_and_nothing_else() -> None:
    before = volcano("a", weight=2, capability={"cpu": "4", "memory": "8Gi"})
    after = volcano("a", weight=5, capability={"cpu": "4"})
    (patch,) = mirror_plan({"a": after}, mirrored(before)).writes
    assert patch == Patch(
        "a",
        "mirror-a",
        {"spec": {"weight": 5, "capability": {"memory": None}}, "metadata": {"uid": "mirror-a"}},
    )


def test_a_hand_edit_of_a_mirror_is_put_back() -> None:
    source = volcano("a", weight=2)
    (mirror,) = mirror_plan({"a": source}, {}).writes
    assert isinstance(mirror, Create)
    edited = {**mirror.body, "spec": {**mirror.body["spec"], "weight": 7,
                                      "namespaces": {"matchLabels": {"x": "y"}}}}  # fmt: skip
    edited["metadata"] = {**edited["metadata"], "labels": {"sharekeeper.io/source": "volcano",
                                                           "mine": "yes"}}  # fmt: skip
    (patch,) = mirror_plan({"a": source}, {"a": stored(edited)}).writes
    assert patch == Patch(
        "a",
        "mirror-a",
        {
            "spec": {"weight": 2, "namespaces": None},
            "metadata": {"labels": {"mine": None, "team": "a"}, "uid": "mirror-a"},
        },
    )


def test_what_is_left_out_is_kept_current_on_the_mirror() -> None:
    before = volcano("a", affinity={"zone": "x"})
    after = volcano("a")
    (patch,) = mirror_plan({"a": after}, mirrored(before)).writes
    assert isinstance(patch, Patch)
    assert patch.body == {
        "metadata": {"annotations": {"sharekeeper.io/volcano-left-out": None}, "uid": "mirror-a"}
    }


def test_a_queue_people_made_is_never_written_and_the_volcano_queue_is_told() -> None:
    for queue in (made("a"), made("a", **{"sharekeeper.io/source": "volcano"})):
        plan = mirror_plan({"a": volcano("a", weight=3)}, {"a": queue})
        assert plan.writes == ()
        (report,) = plan.reports
        assert (report.name, report.uid, report.reason) == ("a", "uid-a", "MirrorConflict")
        assert "Queue a (scheduling.sharekeeper.io) exists and was not made by the operator" in (
            report.message
        )


def test_a_queue_people_made_is_never_deleted() -> None:
    assert mirror_plan(
        {}, {"a": made("a"), "b": made("b", **{"sharekeeper.io/source": "volcano"})}
    ) == (mirror_plan({}, {}))


def test_a_volcano_queue_our_model_refuses_is_not_mirrored_and_told() -> None:
    refused = volcano("a", weight=0)
    plan = mirror_plan({"a": refused}, {})
    assert plan.writes == ()
    (report,) = plan.reports
    assert report.reason == "NotMirrored"
    assert "spec.weight" in report.message


def test_a_mirror_keeps_its_last_good_spec_when_its_volcano_queue_turns_bad() -> None:
    good = volcano("a", weight=2)
    plan = mirror_plan({"a": volcano("a", weight=0)}, mirrored(good))
    assert plan.writes == ()
    assert [r.reason for r in plan.reports] == ["NotMirrored"]


def test_a_mirror_whose_volcano_queue_is_gone_is_deleted_by_its_uid() -> None:
    plan = mirror_plan({}, mirrored(volcano("a")))
    assert plan.writes == (Delete("a", "mirror-a"),)


def test_a_mirror_of_an_older_volcano_queue_of_the_same_name_is_replaced() -> None:
    old = mirrored(volcano("a", uid="uid-old"))
    assert mirror_plan({"a": volcano("a", uid="uid-new")}, old).writes == (Delete("a", "mirror-a"),)
    # Once the deletion is seen, the new one is mirrored.
    (create,) = mirror_plan({"a": volcano("a", uid="uid-new")}, {}).writes
    assert isinstance(create, Create)
    assert create.body["metadata"]["ownerReferences"][0]["uid"] == "uid-new"


def test_ten_thousand_mirrored_queues_cost_no_write() -> None:
    sources = {f"q{i:05}": volcano(f"q{i:05}", weight=1 + i % 7, capability={"cpu": i})
               for i in range(10_000)}  # fmt: skip
    mirrors = mirrored(*sources.values())
    assert mirror_plan(sources, mirrors).writes == ()
    # One Volcano Queue changed: one write.
    sources["q00042"] = volcano("q00042", weight=100, capability={"cpu": 42})
    assert [w.name for w in mirror_plan(sources, mirrors).writes] == ["q00042"]
