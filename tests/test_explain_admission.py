"""``explain queue`` on admission and reclaim: the queue's held pods in admission order, with
their places and why each waits (every pod named: explain is an administrator's tool); its
released pods past their bind timeout; and for an overused queue, why each running pod is or
is not a reclaim victim (the engine's ``spare_reason``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import node, pod, policy, queue, unschedulable
from sharekeeper.cli import main
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim import NotServed, NotServedReason
from sharekeeper.engine.resources import Shortfall
from sharekeeper.model.objects import MutableObj
from sharekeeper.simulate.explaining import explain, parse_target, render_text
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, build_report
from sharekeeper.simulate.victims import MAX_EXPLAINED_PODS, not_served_text

CREATED = "2026-01-01T00:00:00Z"
NOW = 1_767_225_600.0 + 600  # ten minutes after CREATED


def facts(*objects: MutableObj, target: str, now: float = NOW) -> dict[str, Any]:
    inputs = parse_objects(objects)
    kind, name = parse_target(target)
    report = build_report(inputs, Context(now, 0, explained=name if kind == "queue" else None))
    return explain(report, inputs, (kind, name))


def reclaiming(mode: str = "Preview") -> MutableObj:
    obj = policy("p")
    obj["spec"]["reclaim"] = {"mode": mode, "afterSeconds": 60, "maxEvictionsPerRound": 10}
    return obj


def overused(*extra: MutableObj, mode: str = "Preview", held: int = 1) -> list[MutableObj]:
    """Queue a fills both 8-cpu nodes with four 4-cpu pods; b, of equal weight, has ``held``
    held pods of 4 cpu in another namespace: b deserves 4, a 12, so a is 4 cpu over."""
    return [
        reclaiming(mode), node("n1", cpu=8, memory="64Gi"), node("n2", cpu=8, memory="64Gi"),
        queue("a"), queue("b"),
        *(pod(f"a{i}", "a", node=f"n{1 + i // 2}", cpu=4, memory="1Gi") for i in range(4)),
        *(pod(f"b{i}", "b", held=True, created=CREATED, cpu=4, memory="1Gi", namespace="other")
          for i in range(held)),
        *extra,
    ]  # fmt: skip


def test_the_held_pods_are_listed_in_admission_order_naming_every_pod() -> None:
    objects = [
        policy("p"), node("n", cpu=2, memory="64Gi"), queue("a"),
        pod("first", "a", held=True, created=CREATED, cpu=3, namespace="team-x"),
        pod("second", "a", held=True, created="2026-01-01T00:00:01Z", cpu=1),
        pod("third", "a", held=True, created="2026-01-01T00:00:02Z", cpu=1, priority=-5),
    ]  # fmt: skip
    found = facts(*objects, target="a")
    assert found["held"] == {
        "count": 3,
        "inLine": 3,
        "pods": [
            {"pod": "team-x/first", "position": 1,
             "waits": "no room in queue a's deserved share: cpu 3 requested, 2 available"},
            {"pod": "ns/second", "position": 2,
             "waits": "it waits behind pod team-x/first of queue a (priority, then age)"},
            {"pod": "ns/third", "position": 3,
             "waits": "it waits behind pod team-x/first of queue a (priority, then age)"},
        ],
        "more": 0,
    }  # fmt: skip
    text = render_text(found)
    assert "  held by the admission gate: 3, 3 in line, in admission order" in text
    assert "    1st  team-x/first  no room in queue a's deserved share" in text
    assert "    3rd  ns/third  it waits behind pod team-x/first of queue a" in text
    assert found["reclaim"] is None  # a is not overused


def test_released_pods_past_their_bind_timeout_are_named() -> None:
    p = policy("p")
    p["spec"]["admission"] = {"bindTimeoutSeconds": 60}
    objects = [
        p, node("n", cpu=8, memory="64Gi"), queue("a"),
        pod("stuck", "a", admitted=True, cpu=3),
    ]  # fmt: skip
    found = facts(*objects, target="a")
    assert found["notBound"] == {"count": 1, "pods": ["ns/stuck"]}
    assert (
        "  released, not bound after admission.bindTimeoutSeconds: 1 (ns/stuck); they no "
        "longer hold its room"
    ) in render_text(found)
    assert facts(*objects, target="a", now=1_767_225_600.0 + 10)["notBound"]["count"] == 0


def test_each_running_pod_of_an_overused_queue_is_a_victim_or_says_why_not() -> None:
    system = pod("sys", "a", node="n1", namespace="kube-system", cpu=0, memory="1Gi")
    found = facts(*overused(system), target="a")
    reclaim = found["reclaim"]
    assert (reclaim["policy"], reclaim["mode"], reclaim["waiting"]) == ("p", "Preview", 1)
    verdicts = {entry["pod"]: entry for entry in reclaim["pods"]}
    assert set(verdicts) == {"ns/a0", "ns/a1", "ns/a2", "ns/a3", "kube-system/sys"}
    victims = [name for name, entry in verdicts.items() if entry["victim"]]
    assert len(victims) == 1
    victim = verdicts[victims[0]]
    assert victim["reclaimer"] == "other/b0"
    assert victim["why"].startswith("would be evicted (Preview) for pod other/b0 of queue b")
    assert verdicts["kube-system/sys"]["reason"] == "Protected"
    assert "it is protected" in verdicts["kube-system/sys"]["why"]
    others = [e for name, e in verdicts.items() if not e["victim"] and name != "kube-system/sys"]
    assert len(others) == 3
    # One victim suffices: the others could go, and are not needed.
    assert all(e["reason"] in (None, "NotNeeded") for e in others), others
    text = render_text(found)
    assert "  reclaim, under policy p (Preview), 1 held pod of the policy waiting for room" in text
    (line,) = [line for line in text.splitlines() if line.startswith(f"    {victims[0]} ")]
    assert f"  node {victim['node']}  would be evicted (Preview) for pod other/b0" in line


def test_the_queue_that_waits_is_not_a_victim_of_anything() -> None:
    """b is within its share: no reclaim facts for it (explain lists its held pod instead)."""
    found = facts(*overused(), target="b")
    assert found["reclaim"] is None
    assert [p["pod"] for p in found["held"]["pods"]] == ["other/b0"]


def test_a_pod_that_would_take_its_queue_below_deserved_is_spared_and_says_so() -> None:
    """a is 4 cpu over its share; an 8-cpu pod of a would take it 4 below: it may not go."""
    objects = overused()
    objects[5:9] = [
        pod("big", "a", node="n1", cpu=8, memory="1Gi"),
        pod("a2", "a", node="n2", cpu=4, memory="1Gi"),
        pod("a3", "a", node="n2", cpu=4, memory="1Gi"),
    ]
    verdicts = {e["pod"]: e for e in facts(*objects, target="a")["reclaim"]["pods"]}
    assert verdicts["ns/big"]["victim"] is False
    assert verdicts["ns/big"]["reason"] == "WouldGoBelowDeserved"
    assert "would go below its deserved share" in verdicts["ns/big"]["why"]
    assert sum(e["victim"] for e in verdicts.values()) == 1


def test_reclaim_off_and_nobody_waiting_say_so() -> None:
    off = facts(*overused(mode="Off"), target="a")
    assert off["reclaim"]["mode"] == "Off"
    assert "its pods are never evicted for others (spec.reclaim.mode Off)" in render_text(off)
    # b's pod waits, but not at the gate (its namespace did not opt in): nobody reclaims.
    calm = facts(*overused(pod("b0", "b", cpu=4, memory="1Gi"), held=0), target="a")
    assert calm["reclaim"]["waiting"] == 0
    assert "no held pod of the policy waits for room, nothing is reclaimed" in render_text(calm)


def test_the_pods_listed_are_bounded() -> None:
    many = [
        pod(f"s{i:02d}", "a", node="n1", cpu=0, memory="1Mi") for i in range(MAX_EXPLAINED_PODS)
    ]
    reclaim = facts(*overused(*many), target="a")["reclaim"]
    assert len(reclaim["pods"]) == MAX_EXPLAINED_PODS
    assert reclaim["more"] == 4


def test_simulate_explain_prints_the_same_in_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(overused()))
    now = str(NOW)
    assert main(["simulate", "-f", str(path), "--now", now, "--explain", "a", "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == facts(*overused(), target="a")
    assert printed["reclaim"]["pods"]
    assert main(["simulate", "-f", str(path), "--now", now, "--explain", "queue/a"]) == 0
    assert capsys.readouterr().out == render_text(printed)


def test_a_first_in_line_above_its_share_says_which_queue_refuses_and_by_how_much() -> None:
    """b runs 4 cpu on n3, and kube-scheduler found no node for its 8-cpu pod: 20 cpu, a asks
    16, b 12, so each deserves 10; the pod would take b to 12: AboveShare, 6 cpu left. a (16
    of 10) is overused, and its pods say why none is evicted for it."""
    big = unschedulable(
        pod("b-big", "b", created=CREATED, cpu=8, memory="1Gi", namespace="other"), since=CREATED
    )
    objects = overused(
        node("n3", cpu=4, memory="64Gi"),
        pod("b-run", "b", node="n3", cpu=4, memory="1Gi", namespace="other"),
        big,
        held=0,
    )
    reclaim = facts(*objects, target="a")["reclaim"]
    assert reclaim["waiting"] == 1
    assert {entry["victim"] for entry in reclaim["pods"]} == {False}
    assert {entry["why"] for entry in reclaim["pods"]} == {
        "may be evicted for pod other/b-big (first in line), which is not served: its queue "
        "would exceed its deserved share with it: cpu 8 requested, 6 available"
    }


@pytest.mark.parametrize(
    ("limiting", "available", "words"),
    [
        ("b", 6000, "its queue would exceed its deserved share with it: cpu 8 requested, "
         "6 available"),
        ("team", -2000, "queue team above it would exceed its deserved share with it: cpu 8 "
         "requested, already 2 over"),
    ],
)  # fmt: skip
def test_an_above_share_refusal_names_the_queue_and_what_is_short(
    limiting: str, available: int, words: str
) -> None:
    missed = NotServed(
        PodKey("other", "p"), "b", NotServedReason.ABOVE_SHARE, limiting,
        (Shortfall("cpu", 8000, available),),
    )  # fmt: skip
    assert not_served_text(missed) == words
    assert not_served_text(replace(missed, reason=NotServedReason.NO_VICTIMS)) == (
        "nothing that may be reclaimed frees a node for it"
    )
