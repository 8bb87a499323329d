"""Reclaim for pods outside admission, on a whole cluster in a box: queue a, of a namespace that
opted in to admission, borrows both fake nodes (``admission.borrow``); queue b, of equal
weight, runs a Job in a namespace that did not opt in, so nothing gates its pods: the real
scheduler finds no room and marks them Unschedulable. Under Preview the plan shows and nothing
is evicted; under On exactly enough of a's pods are evicted for b's pods to run, and no more.

a's replacements are held by the gate (a is at its deserved share), so the room the evictions
free goes to b's pods, not back to a. Two fake nodes of 4 cpu; the overcommit factor is 1."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import objects
from admitting import (
    QUEUE_LABEL,
    RECLAIM_POLICY,
    admitting_operator,
    events_of,
    held,
    live_by_queue,
    opted_in_namespace,
    pods_of,
    reclaim_policy,
)
from clusters import Installed
from fakenodes import job
from operating import Operator, eventually

POLICY = RECLAIM_POLICY


@pytest.fixture(scope="module")
def admitting(
    full_installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Installed, Operator]]:
    with admitting_operator(
        full_installed,
        tmp_path_factory.mktemp("reclaiming-unscheduled") / "operator.log",
        apply=[reclaim_policy("Off")],
    ) as operator:
        yield full_installed, operator


@pytest.fixture
def spaces(
    admitting: tuple[Installed, Operator], request: pytest.FixtureRequest
) -> Iterator[tuple[str, str]]:
    """An opted-in namespace (for a) and one beside it that did not opt in (for b)."""
    cluster = admitting[0].cluster
    try:
        with opted_in_namespace(cluster, request) as name:
            plain = f"{name[:50]}-plain"
            cluster.kubectl("create", "namespace", plain)
            try:
                yield name, plain
            finally:
                cluster.discard_namespace(plain)
    finally:
        cluster.apply(reclaim_policy("Off"))


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "PodScheduled"
        and c["status"] == "False"
        and c.get("reason") == "Unschedulable"
        for c in pod["status"].get("conditions") or []
    )


def a_fills_then_b_wants(installed: Installed, spaces: tuple[str, str], wanted: int) -> None:
    """Queues a and b under the policy in Preview; a's Job fills both nodes (8 pods of 1 cpu)
    in the opted-in namespace, then b's Job asks for ``wanted`` such pods in the other one."""
    cluster = installed.cluster
    borrower, plain = spaces
    cluster.apply(reclaim_policy("Preview"), objects.queue("a"), objects.queue("b"))
    cluster.apply(
        job("fill", borrower, completions=8, parallelism=8, cpu="1", memory="64Mi",
            run_for="600s", labels={QUEUE_LABEL: "a"}),
    )  # fmt: skip
    eventually(lambda: live_by_queue(installed, borrower) == Counter({"a": 8}), timeout=60)
    cluster.apply(
        job("want", plain, completions=wanted, parallelism=wanted, cpu="1", memory="64Mi",
            run_for="600s", labels={QUEUE_LABEL: "b"}),
    )  # fmt: skip


def test_unschedulable_pods_outside_admission_reclaim_just_enough(
    admitting: tuple[Installed, Operator], spaces: tuple[str, str]
) -> None:
    installed, operator = admitting
    cluster = installed.cluster
    borrower, plain = spaces
    a_fills_then_b_wants(installed, spaces, 2)

    # Nothing gates b's pods: the scheduler finds no room for them.
    def stuck() -> list[dict[str, Any]]:
        pods = pods_of(installed, plain)
        assert len(pods) == 2
        assert all(unschedulable(p) and not held(p) for p in pods), [p["status"] for p in pods]
        return pods

    eventually(stuck, timeout=30)

    # Preview: b deserves 2 of the 8 cpu, a 6; the plan evicts two of a's pods, nothing goes.
    def planned() -> dict[str, Any]:
        section: dict[str, Any] = objects.status(cluster, "schedulerpolicy", POLICY)["reclaim"]
        assert section["mode"] == "Preview", section
        assert section["waiting"] == 2, section
        assert section["evictions"] == 2, section
        return section

    section = eventually(planned, timeout=30)
    assert {entry["reclaimer"].split("/")[0] for entry in section["reclaims"]} == {plain}
    victims = [v for entry in section["reclaims"] for v in entry["victims"]]
    assert {v["queue"] for v in victims} == {"a"}
    assert live_by_queue(installed, borrower, plain) == Counter({"a": 8})
    assert events_of(installed, borrower, "Reclaimed") == []

    # On: exactly two of a's pods are evicted, and b's two pods run.
    cluster.apply(reclaim_policy("On"))
    eventually(lambda: live_by_queue(installed, plain)["b"] == 2, timeout=90)
    evicted = events_of(installed, borrower, "Reclaimed")
    assert len(evicted) == 2, [e["message"] for e in evicted]
    assert all("queue a holds cpu" in e["message"] for e in evicted)
    # a's Job makes new pods: the gate holds them (a is at its deserved share); they reclaim
    # nothing.
    eventually(
        lambda: live_by_queue(installed, borrower, plain) == Counter({"a": 6, "b": 2}), timeout=30
    )
    # Rounds later (each woken by a new, empty queue), still nothing more evicted: no loop.
    for idle in ("c", "d", "e"):
        done = int(operator.health().get("recomputeRounds", 0))
        cluster.apply(objects.queue(idle))
        operator.wait_rounds(done + 1)
    assert objects.status(cluster, "schedulerpolicy", POLICY)["reclaim"]["evictions"] == 0
    assert len(events_of(installed, borrower, "Reclaimed")) == 2
    assert live_by_queue(installed, borrower, plain) == Counter({"a": 6, "b": 2})

    def replaced() -> list[dict[str, Any]]:
        # The Job controller may count an evicted pod as failed and back off before it
        # replaces it (10 s, then 20 s).
        found = [p for p in pods_of(installed, borrower) if not p["spec"].get("nodeName")]
        assert found, "a's Job has not replaced its evicted pods yet"
        return found

    replacements = eventually(replaced, timeout=60)
    assert all(held(p) for p in replacements)
    assert len(events_of(installed, plain, "ReclaimedFor")) == 2


def test_a_held_pod_past_its_queue_s_share_by_the_gate_s_count_reclaims_nothing(
    admitting: tuple[Installed, Operator], spaces: tuple[str, str]
) -> None:
    """b deserves 4 of the 8 cpu, and its four pods outside the gate fill that share by the
    gate's count, though none is bound. b's fifth pod, of the opted-in namespace, is held as a
    borrower past b's share: room would not let it go within that share, so it is no reclaimer
    (it was one while reclaim counted bound pods only), and the four are."""
    installed, _ = admitting
    cluster = installed.cluster
    borrower, plain = spaces
    a_fills_then_b_wants(installed, spaces, 4)
    eventually(lambda: sum(unschedulable(p) for p in pods_of(installed, plain)) == 4, timeout=30)
    cluster.apply(
        job("late", borrower, completions=1, parallelism=1, cpu="1", memory="64Mi",
            run_for="600s", labels={QUEUE_LABEL: "b"}),
    )  # fmt: skip

    def late() -> dict[str, Any]:
        [found] = [
            p for p in pods_of(installed, borrower) if p["metadata"]["labels"][QUEUE_LABEL] == "b"
        ]
        assert held(found)
        return found

    name = eventually(late, timeout=30)["metadata"]["name"]

    def told() -> str:
        messages = [
            e["message"]
            for e in events_of(installed, borrower, "AdmissionWaiting")
            if e["involvedObject"]["name"] == name
        ]
        assert messages, "no AdmissionWaiting Event yet"
        return messages[-1]

    assert "(past b's deserved share, borrowing)" in eventually(told, timeout=30)

    def planned() -> dict[str, Any]:
        section: dict[str, Any] = objects.status(cluster, "schedulerpolicy", POLICY)["reclaim"]
        assert (section["waiting"], section["evictions"]) == (4, 4), section
        return section

    section = eventually(planned, timeout=30)
    assert {entry["reclaimer"].split("/")[0] for entry in section["reclaims"]} == {plain}
    assert live_by_queue(installed, borrower, plain) == Counter({"a": 8})
