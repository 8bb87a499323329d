"""The share round's admission Events and timers: a released pod not bound in time gets one
NotBound Warning and its room goes to the next held pod; a round is due when the next released
pod reaches its timeout; each held pod's AdmissionWaiting Event gives its place in line."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY

from builders import node, pod, pod_group, policy, queue
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.loops.recompute import Recompute
from sharekeeper.model.objects import MutableObj
from sharekeeper.model.pods import ADMITTED_ANNOTATION
from sharekeeper.publish.statuses import Kind

RELEASED = 1_767_225_600.0
"""2026-01-01T00:00:00Z: the release time ``builders.pod(admitted=True)`` stamps."""
SCHEDULER_SAYS = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."


class Writer:
    """Stands in for the API server: what the loop releases and tells."""

    def __init__(self) -> None:
        self.released: list[str] = []
        self.pod_events: list[tuple[str, str, str, bool]] = []

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        self.released.append(f"{namespace}/{name}")
        return True

    async def event(
        self, target: dict[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        if target["kind"] == "Pod":
            pod_name = f"{target['namespace']}/{target['name']}"
            self.pod_events.append((pod_name, reason, message, warning))

    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
        return patch

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        return {k: v for k, v in patch.items() if v is not None}

    def told(self, reason: str) -> list[tuple[str, str]]:
        return [(pod, message) for pod, why, message, _ in self.pod_events if why == reason]


def stuck_cluster(timeout: int = 60) -> list[dict[str, Any]]:
    """Queue a deserves 4 of the node's 8 cpu (b's bound pod has the rest); 3 of them went to
    ``stuck``, released and never bound (the scheduler says why); ``next`` (2 cpu) waits."""
    p = policy("p")
    p["spec"]["admission"] = {"bindTimeoutSeconds": timeout}
    stuck = pod("stuck", "a", admitted=True, cpu=3)
    stuck["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "message": SCHEDULER_SAYS}],
    }
    return [
        p, node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("b0", "b", node="n", cpu=4), stuck,
        pod("next", "a", held=True, created="2026-01-01T00:00:00Z", cpu=2),
    ]  # fmt: skip


def loop_at(objects: list[dict[str, Any]], now: float, writer: Writer) -> Recompute:
    store = ClusterStore()
    store.load(objects)
    return Recompute(writer, store, clock=lambda: now)


async def a_round(loop: Recompute) -> None:
    await loop.recompute()
    await asyncio.gather(*loop._telling)


def test_a_pod_not_bound_in_time_is_told_once_and_its_room_goes_to_the_next() -> None:
    writer = Writer()
    loop = loop_at(stuck_cluster(), RELEASED + 61, writer)

    async def scenario() -> None:
        published = await loop.recompute()
        await asyncio.gather(*loop._telling)
        assert writer.released == ["ns/next"]
        assert published.queues["a"]["notBound"] == 1
        assert published.queues["a"]["notBoundPods"] == ["ns/stuck"]
        (told,) = writer.told("NotBound")
        assert told[0] == "ns/stuck"
        assert told[1].startswith("admitted at 2026-01-01T00:00:00Z and not bound to a node 60 s")
        assert "no longer holds queue a's room" in told[1]
        assert told[1].endswith(f"; the scheduler says: {SCHEDULER_SAYS}")
        assert all(warning for _, why, _, warning in writer.pod_events if why == "NotBound")
        await a_round(loop)
        await a_round(loop)
        assert len(writer.told("NotBound")) == 1  # told once
        if loop._bind_timer is not None:
            loop._bind_timer.cancel()

    asyncio.run(scenario())


def test_a_pod_bound_after_its_timeout_leaves_the_told_set_and_holds_its_room_again() -> None:
    writer = Writer()
    objects = stuck_cluster()
    loop = loop_at(objects, RELEASED + 61, writer)

    async def scenario() -> None:
        await a_round(loop)
        assert loop._told_not_bound == {("ns", "stuck")}
        loop._store.pods.event("MODIFIED", pod("stuck", "a", admitted=True, node="n", cpu=3))
        published = await loop.recompute()
        assert published.queues["a"]["notBound"] == 0
        assert loop._told_not_bound == set()

    asyncio.run(scenario())


def test_a_round_is_due_when_the_next_released_pod_reaches_its_timeout() -> None:
    writer = Writer()
    loop = loop_at(stuck_cluster(), RELEASED + 20, writer)

    async def scenario() -> None:
        await a_round(loop)
        assert writer.released == []
        assert writer.told("NotBound") == []
        timer = loop._bind_timer
        assert timer is not None
        due = timer.when() - asyncio.get_running_loop().time()
        assert 39 < due <= 40.5
        timer.cancel()

    asyncio.run(scenario())


def unbound_gauge(resource: str) -> float | None:
    labels = {"policy": "p", "resource": resource}
    return REGISTRY.get_sample_value("sharekeeper_admission_unbound", labels)


def test_the_gauge_shows_what_released_pods_not_bound_hold_until_their_timeout() -> None:
    store = ClusterStore()
    store.load(stuck_cluster())
    clock = [RELEASED + 20]
    loop = Recompute(Writer(), store, clock=lambda: clock[0])

    async def scenario() -> None:
        await a_round(loop)
        assert (unbound_gauge("pods"), unbound_gauge("cpu")) == (1.0, 3.0)  # cores
        # Past its timeout the pod holds nothing: the count stays, at 0; the cpu series goes.
        clock[0] = RELEASED + 61
        await a_round(loop)
        assert (unbound_gauge("pods"), unbound_gauge("cpu")) == (0.0, None)
        if loop._bind_timer is not None:
            loop._bind_timer.cancel()

    asyncio.run(scenario())


def test_no_round_is_due_for_a_pod_whose_release_time_is_unknown() -> None:
    objects = stuck_cluster()
    objects[5]["metadata"]["annotations"][ADMITTED_ANNOTATION] = "not a time"
    loop = loop_at(objects, RELEASED + 20, Writer())

    async def scenario() -> None:
        await a_round(loop)
        assert loop._bind_timer is None

    asyncio.run(scenario())


def test_each_held_pod_is_told_its_place_in_its_queues_line() -> None:
    """b's 6 cpu hold none of the three 7-cpu pods; a pod of a queue that does not exist is in
    no line."""
    writer = Writer()
    objects = [
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("a0", "a", node="n", cpu=2),
        *(pod(f"h{i}", "b", held=True, created=f"2026-01-01T00:00:0{i}Z", cpu=7,
              namespace="team-b" if i == 0 else "ns")
          for i in range(3)),
        pod("lost", "nowhere", held=True, cpu=1),
    ]  # fmt: skip
    loop = loop_at(objects, RELEASED, writer)

    async def scenario() -> None:
        await a_round(loop)
        told = dict(writer.told("AdmissionWaiting"))
        assert told["team-b/h0"].endswith("; 1st of 3 held in queue b")
        assert "no room in queue b's deserved share" in told["team-b/h0"]
        # The tenant rule holds: h0 is of another namespace than h1 and h2.
        assert told["ns/h1"] == (
            "waits for admission: it waits behind a pod of another namespace in queue b "
            "(priority, then age); 2nd of 3 held in queue b"
        )
        assert told["ns/h2"].endswith("; 3rd of 3 held in queue b")
        assert (
            told["ns/lost"] == "waits for admission: it names queue nowhere, which does not exist"
        )

    asyncio.run(scenario())


def test_a_held_pod_is_told_again_when_the_reason_it_waits_changes() -> None:
    """Found: a gang's first pod, told its PodGroup had 1 of its 2 pods, kept saying so after
    the Job controller made the second; the gang waited for room, which nobody was told."""
    writer = Writer()
    objects = [
        policy("p"), node("n", cpu=8, memory="64Gi"), queue("a"), queue("b"),
        pod("b0", "b", node="n", cpu=4), pod_group("g", "a", min_member=2),
        pod("g0", "a", group="g", held=True, created="2026-01-01T00:00:00Z", cpu=3),
    ]  # fmt: skip
    loop = loop_at(objects, RELEASED, writer)

    async def scenario() -> None:
        await a_round(loop)
        assert writer.told("AdmissionWaiting") == [
            ("ns/g0", "waits for admission: its PodGroup has 1 of its minMember 2 pods; it goes "
             "whole; 1st of 1 held in queue a")
        ]  # fmt: skip
        loop._store.pods.event(
            "ADDED", pod("g1", "a", group="g", held=True, created="2026-01-01T00:00:01Z", cpu=3)
        )
        await a_round(loop)
        told = writer.told("AdmissionWaiting")[1:]
        assert sorted(name for name, _ in told) == ["ns/g0", "ns/g1"]
        # 2 x 3 cpu in a's half of 8 (b runs 4): the gang waits for room, and both pods say so.
        assert all("no room in queue a's deserved share: cpu 6 requested" in m for _, m in told)
        await a_round(loop)
        assert len(writer.told("AdmissionWaiting")) == 3  # a reason is told once

    asyncio.run(scenario())
