"""Admission order a tenant cannot forge, and Events that name no other namespace's pod.

A pod of any namespace may name the built-in system-cluster-critical class (the API server
lets it, unless an admin limits the class with a ResourceQuota). Ordered by that priority, one
huge pod would go first in every queue its namespace may use and, not fitting, stop everyone
else's pods behind it. Outside kube-system it counts as priority 0: pods go by age instead.
The cases run simulate's path (objects -> store -> snapshot -> shares -> gate decisions), as
the operator's store would hold them."""

from __future__ import annotations

from typing import Any

from builders import node, pod, policy, queue
from sharekeeper.engine.gates import Waiting
from sharekeeper.model.pods import pod_snapshot
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.pipeline.statuses import waiting_text
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, admission_view, snapshot_of

CRITICAL = 2_000_000_000


def decide(*objects: dict[str, Any]) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(0.0, 0)), inputs.node_policies, held=inputs.store.pods.held()
    )


def shared_queue(*held: dict[str, Any]) -> Publication:
    """One queue of 8 cpu that team-a and team-b share; ``held`` waits at the gate."""
    return decide(policy("p"), node("n", cpu=8, memory="64Gi"), queue("shared"), *held)


def victim(**extra: Any) -> dict[str, Any]:
    """team-a's pod, held first: 1 cpu, which the queue has room for."""
    return pod(
        "train-0", "shared", namespace="team-a", held=True, created="2026-01-01T00:00:00Z",
        cpu=1, **extra,
    )  # fmt: skip


def huge(priority: int, namespace: str = "team-b") -> dict[str, Any]:
    """A later pod that can never fit (20 cpu of 8), with ``priority`` as the API server
    resolved it from its class."""
    return pod(
        "secret-project-train-0", "shared", namespace=namespace, held=True,
        created="2026-01-01T00:05:00Z", priority=priority, cpu=20,
    )  # fmt: skip


def test_a_forged_system_priority_does_not_jump_the_queue() -> None:
    result = shared_queue(victim(), huge(CRITICAL))
    assert result.gates.released == (("team-a", "train-0"),)
    assert result.gates.waiting[("team-b", "secret-project-train-0")].reason == "QuotaExceeded"


def test_system_node_critical_neither() -> None:
    result = shared_queue(victim(), huge(2_000_001_000))
    assert result.gates.released == (("team-a", "train-0"),)


def test_in_kube_system_the_system_priority_still_counts() -> None:
    result = shared_queue(victim(), huge(CRITICAL, namespace="kube-system"))
    assert result.gates.released == ()
    behind = result.gates.waiting[("team-a", "train-0")]
    assert behind.reason == "BehindOthers"


def test_an_admins_priority_class_still_goes_first() -> None:
    """Precedence given on purpose: a PriorityClass of the admin's own (up to 1e9), whose use
    a ResourceQuota restricts, is read as it is."""
    result = shared_queue(victim(), huge(1_000_000_000))
    assert result.gates.released == ()
    assert result.gates.waiting[("team-a", "train-0")].reason == "BehindOthers"


def test_the_snapshot_holds_the_effective_priority() -> None:
    assert pod_snapshot(huge(CRITICAL)).priority == 0
    assert pod_snapshot(huge(CRITICAL, namespace="kube-system")).priority == CRITICAL
    assert pod_snapshot(huge(5000)).priority == 5000
    # A pod the gate does not hold is not ordered: its priority is not even read.
    assert pod_snapshot(pod("running", "shared", node="n", priority=CRITICAL)).priority == 0


# --- Events name no pod of another namespace ----------------------------------------------------


def test_a_pod_waiting_behind_another_namespace_is_not_told_its_name() -> None:
    """Attack: a tenant learnt other teams' pod names from its own pods' AdmissionWaiting
    Events ("it waits behind pod team-b/secret-project-train-0")."""
    result = shared_queue(
        huge(1_000_000_000),
        victim(),
        pod("train-1", "shared", namespace="team-a", held=True,
            created="2026-01-01T00:01:00Z", cpu=1),
    )  # fmt: skip
    told = result.gates.waiting[("team-a", "train-0")]
    assert told.behind == "team-b/secret-project-train-0"  # what the engine knows
    text = waiting_text(told, "team-a")
    assert "secret-project" not in text
    assert "team-b" not in text
    assert text == (
        "it waits behind a pod of another namespace in queue shared (priority, then age)"
    )
    # simulate prints the text of the Event: the same.
    view = admission_view(result.gates)
    assert view["waiting"]["team-a/train-0"] == text


def test_a_pod_of_the_same_namespace_is_still_named() -> None:
    result = shared_queue(
        pod("big", "shared", namespace="team-a", held=True, created="2025-12-31T00:00:00Z",
            cpu=20),
        victim(),
    )  # fmt: skip
    told = result.gates.waiting[("team-a", "train-0")]
    assert waiting_text(told, "team-a") == (
        "it waits behind pod team-a/big of queue shared (priority, then age)"
    )


def test_without_a_namespace_no_pod_is_named() -> None:
    waiting = Waiting("BehindOthers", "shared", behind="team-b/secret")
    assert (
        waiting_text(waiting) == "it waits behind another pod in queue shared (priority, then age)"
    )
    # A namespace that merely starts like the other's is another namespace.
    assert "team-b" not in waiting_text(waiting, "team")
