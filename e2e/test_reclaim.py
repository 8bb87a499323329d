"""Reclaim on a whole cluster in a box: queue a borrows both fake nodes (``admission.borrow``),
queue b, of equal weight, submits a Job; under Preview the plan shows in the SchedulerPolicy's
status and nothing is evicted; under On exactly enough of a's pods are evicted (through the
Eviction API) for b's pods to run, and no more.

Two fake nodes of 4 cpu; the overcommit factor is 1, so the gate holds b's pods until a's
evicted pods are gone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import objects
from admitting import (
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
        tmp_path_factory.mktemp("reclaiming") / "operator.log",
        apply=[reclaim_policy("Preview")],
    ) as operator:
        yield full_installed, operator


@pytest.fixture
def space(admitting: tuple[Installed, Operator], request: pytest.FixtureRequest) -> Iterator[str]:
    cluster = admitting[0].cluster
    try:
        with opted_in_namespace(cluster, request) as name:
            yield name
    finally:
        cluster.apply(reclaim_policy("Off"))


def test_preview_shows_the_plan_and_on_evicts_just_enough(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    installed, operator = admitting
    cluster = installed.cluster
    cluster.apply(reclaim_policy("Preview"), objects.queue("a"), objects.queue("b"))
    labels = lambda q: {"sharekeeper.io/queue": q}  # noqa: E731
    cluster.apply(
        job("fill", space, completions=8, parallelism=8, cpu="1", memory="64Mi",
            run_for="600s", labels=labels("a")),
    )  # fmt: skip
    eventually(lambda: live_by_queue(installed, space) == Counter({"a": 8}), timeout=60)
    cluster.apply(
        job("want", space, completions=2, parallelism=2, cpu="1", memory="64Mi",
            run_for="600s", labels=labels("b")),
    )  # fmt: skip

    # Preview: b deserves 2 of the 8 cpu, a 6; the plan evicts two of a's pods, nothing goes.
    def planned() -> dict[str, Any]:
        section: dict[str, Any] = objects.status(cluster, "schedulerpolicy", POLICY)["reclaim"]
        assert section["mode"] == "Preview", section
        assert section["waiting"] == 2, section
        assert section["evictions"] == 2, section
        return section

    section = eventually(planned, timeout=30)
    victims = [v for entry in section["reclaims"] for v in entry["victims"]]
    assert {v["queue"] for v in victims} == {"a"}
    assert {entry["queue"] for entry in section["reclaims"]} == {"b"}
    assert live_by_queue(installed, space) == Counter({"a": 8})
    assert events_of(installed, space, "Reclaimed") == []
    b_pods = [p for p in pods_of(installed, space) if p["metadata"]["labels"].get(
        "sharekeeper.io/queue") == "b"]  # fmt: skip
    assert len(b_pods) == 2
    assert all(held(p) for p in b_pods)

    # On: exactly two of a's pods are evicted, and b's two pods run.
    cluster.apply(reclaim_policy("On"))
    eventually(lambda: live_by_queue(installed, space)["b"] == 2, timeout=90)
    events = events_of(installed, space, "Reclaimed")
    assert len(events) == 2, [e["message"] for e in events]
    assert all("queue a holds cpu" in e["message"] for e in events)
    # a's Job makes new pods: they wait (a is at its deserved share) and reclaim nothing.
    eventually(lambda: live_by_queue(installed, space) == Counter({"a": 6, "b": 2}), timeout=30)
    # Three rounds later, still nothing more evicted: no loop. Rounds follow changes, and a
    # settled cluster makes none: each is woken by a change of the bound, which moves no share.
    for bound in (11, 12, 13):
        done = int(operator.health().get("recomputeRounds", 0))
        cluster.apply(reclaim_policy("On", max_evictions=bound))
        operator.wait_rounds(done + 1)
    assert objects.status(cluster, "schedulerpolicy", POLICY)["reclaim"]["evictions"] == 0
    assert len(events_of(installed, space, "Reclaimed")) == 2
    assert live_by_queue(installed, space) == Counter({"a": 6, "b": 2})
    freed = installed.cluster.get("events", "-n", space, "--field-selector", "reason=ReclaimedFor")[
        "items"
    ]
    assert len(freed) == 2
