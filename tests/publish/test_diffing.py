"""Merge patches and condition stamping: equal in, nothing out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sharekeeper.publish.diffing import merge_patch, stamped_conditions, transitions

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


def apply_merge_patch(target: object, patch: object) -> object:
    """RFC 7386, written independently of the code under test."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


@given(objects)
def test_equal_objects_need_no_patch(obj: dict[str, object]) -> None:
    assert merge_patch(obj, obj) == {}


@given(objects, objects)
def test_the_patch_turns_current_into_desired(
    current: dict[str, object], desired: dict[str, object]
) -> None:
    # Merge patches cannot express a null value, and our statuses never hold one.
    def no_nulls(value: object) -> bool:
        if isinstance(value, dict):
            return all(v is not None and no_nulls(v) for v in value.values())
        return True

    if no_nulls(desired):
        assert apply_merge_patch(current, merge_patch(current, desired)) == desired


def test_only_changed_keys_are_sent_and_gone_keys_are_nulled() -> None:
    current = {"deserved": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}, "share": "0.5"}
    desired = {"deserved": {"cpu": "6", "memory": "8Gi"}, "share": "0.5"}
    assert merge_patch(current, desired) == {"deserved": {"cpu": "6", "nvidia.com/gpu": None}}


def condition(type_: str, status: str, time: str = "") -> dict[str, str]:
    stamped = {"type": type_, "status": status, "reason": type_, "message": "m"}
    return stamped | ({"lastTransitionTime": time} if time else {})


def test_transition_time_moves_only_when_status_changes() -> None:
    current = [condition("Ready", "True", "t0"), condition("Overused", "False", "t0")]
    desired = [condition("Ready", "True"), condition("Overused", "True")]
    stamped = stamped_conditions(current, desired, generation=3, now="t1")
    assert [(c["type"], c["lastTransitionTime"], c["observedGeneration"]) for c in stamped] == [
        ("Ready", "t0", 3),
        ("Overused", "t1", 3),
    ]


def test_a_condition_already_there_as_desired_is_that_same_object() -> None:
    there = {**condition("Ready", "True", "t0"), "observedGeneration": 3}
    foreign = {**condition("Overused", "True", "t0"), "observedGeneration": 3, "by": "someone"}
    older = {**condition("NoPolicy", "False", "t0"), "observedGeneration": 2}
    reworded = {**condition("Invalid", "False", "t0"), "observedGeneration": 3}
    desired = [
        condition("Ready", "True"),
        condition("Overused", "True"),
        condition("NoPolicy", "False"),
        {**condition("Invalid", "False"), "message": "new words"},
    ]
    stamped = stamped_conditions([there, foreign, older, reworded], desired, generation=3, now="t1")
    assert stamped[0] is there
    # A field someone else added goes; an older generation and new words are stamped anew,
    # the transition time kept (the status did not change).
    assert stamped[1:] == [
        {**condition("Overused", "True", "t0"), "observedGeneration": 3},
        {**condition("NoPolicy", "False", "t0"), "observedGeneration": 3},
        {**condition("Invalid", "False", "t0"), "message": "new words", "observedGeneration": 3},
    ]
    assert merge_patch({"conditions": [there]}, {"conditions": stamped[:1]}) == {}


def test_conditions_are_matched_by_type_in_whatever_order_they_are_there() -> None:
    """The conditions we wrote are looked up by position; any other order finds them by type."""
    there = [
        {**condition("Ready", "True", "t0"), "observedGeneration": 3},
        {**condition("Overused", "False", "t0"), "observedGeneration": 3},
        {**condition("Stale", "True", "t0"), "observedGeneration": 3},
    ]
    desired = [
        condition("Ready", "True"),
        condition("NoPolicy", "False"),
        condition("Overused", "True"),
    ]
    expected = [
        there[0],
        {**condition("NoPolicy", "False", "t1"), "observedGeneration": 3},
        {**condition("Overused", "True", "t1"), "observedGeneration": 3},
    ]
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0]):
        current = [there[i] for i in order]
        stamped = stamped_conditions(current, desired, generation=3, now="t1")
        assert stamped == expected
        assert (stamped[0] is there[0]) == (0 in order)


def test_events_for_conditions_that_became_true_only() -> None:
    current = [condition("Overused", "False"), condition("NoPolicy", "True")]
    desired = [
        condition("Overused", "True"),
        condition("NoPolicy", "True"),
        condition("Ready", "True"),
    ]
    changes = transitions(current, desired, {"Overused", "NoPolicy"})
    assert [change.type for change in changes] == ["Overused"]
