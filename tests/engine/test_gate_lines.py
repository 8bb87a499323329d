"""Each queue's line: the held pods it keeps waiting, in the order it would admit them
(priority, then age, then name; a PodGroup's pods together), and each pod's place in it."""

from __future__ import annotations

from typing import Any

import pytest

from builders import node, pod, pod_group, policy, queue
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.shares.snapshot import QueueName
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.pipeline.statuses import ordinal, waiting_message, waiting_text
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of


def decide(*objects: dict[str, Any]) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(0.0, 0)), inputs.node_policies, held=inputs.store.pods.held()
    )


def held(name: str, queue_name: str, second: int, **fields: Any) -> dict[str, Any]:
    return pod(name, queue_name, held=True, created=f"2026-01-01T00:00:{second:02d}Z", **fields)


def test_the_line_is_the_admission_order_of_the_pods_left_waiting() -> None:
    result = decide(
        policy("p"), node("n", cpu=4, memory="64Gi"), queue("a"),
        held("old", "a", 0, cpu=1),            # goes
        held("young", "a", 5, cpu=2),
        held("urgent", "a", 9, cpu=9, priority=100),  # first in line, and fits nowhere
        held("middle", "a", 3, cpu=1),
    )  # fmt: skip
    a = QueueName("a")
    assert result.gates.released == ()  # urgent, first, does not fit: the queue stops
    assert [key.name for key in result.gates.lines[a]] == ["urgent", "old", "middle", "young"]
    keys = [PodKey("ns", name) for name in ("young", "urgent")]
    assert result.gates.positions(keys) == {keys[0]: (4, 4), keys[1]: (1, 4)}


def test_released_pods_leave_the_line() -> None:
    result = decide(
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"),
        *(held(f"h{i}", "a", i, cpu=1) for i in range(5)),
    )  # fmt: skip
    assert [key.name for key in result.gates.released] == ["h0", "h1"]
    assert [key.name for key in result.gates.lines[QueueName("a")]] == ["h2", "h3", "h4"]
    assert result.gates.positions([PodKey("ns", "h0")]) == {}


def test_a_podgroups_pods_stand_together_at_its_first_pods_place() -> None:
    result = decide(
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"),
        pod_group("g", "a", min_member=2),
        held("lone", "a", 1, cpu=1),
        held("g-b", "a", 2, cpu=2, group="g"),
        held("g-a", "a", 0, cpu=2, group="g"),
        held("last", "a", 3, cpu=1),
    )  # fmt: skip
    line = [key.name for key in result.gates.lines[QueueName("a")]]
    assert line == ["g-a", "g-b", "lone", "last"]


def test_pods_no_room_could_admit_are_in_no_line() -> None:
    result = decide(
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"), queue("shut", state="Closed"),
        held("lost", "nowhere", 0, cpu=1), held("closed", "shut", 0, cpu=1),
    )  # fmt: skip
    assert result.gates.lines == {}
    assert set(result.gates.waiting) == {PodKey("ns", "lost"), PodKey("ns", "closed")}
    assert result.gates.positions(result.gates.waiting) == {}


@pytest.mark.parametrize(
    ("number", "text"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"),
     (21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th"), (112, "112th"), (1000, "1000th")],
)  # fmt: skip
def test_ordinals(number: int, text: str) -> None:
    assert ordinal(number) == text


def test_the_event_names_a_pod_of_its_own_namespace_and_explain_names_all() -> None:
    result = decide(
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"),
        held("first", "a", 0, cpu=3, namespace="team-x"), held("second", "a", 1, cpu=1),
    )  # fmt: skip
    why = result.gates.waiting[PodKey("ns", "second")]
    place = result.gates.positions([PodKey("ns", "second")])[PodKey("ns", "second")]
    assert waiting_message(why, "ns", place) == (
        "waits for admission: it waits behind a pod of another namespace in queue a "
        "(priority, then age); 2nd of 2 held in queue a"
    )
    assert waiting_text(why, names_all=True) == (
        "it waits behind pod team-x/first of queue a (priority, then age)"
    )
