"""Reclaim under mode On: the plan's victims evicted in order through a fake Eviction API,
planning again after a PodDisruptionBudget's refusal, the round's bound, no second eviction
while the first is in flight, and Events that name no pod of another namespace."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY

from builders import node, pod, policy, queue
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.loops.reclaim import carry_out
from sharekeeper.loops.recompute import Recompute
from sharekeeper.model.objects import MutableObj
from sharekeeper.pipeline.reclaiming import PolicyReclaim
from sharekeeper.pipeline.shares import publication
from sharekeeper.publish.statuses import Kind
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of

CREATED = "2026-01-01T00:00:00Z"
NOW = 1_767_225_600.0 + 600


def cluster(held: int = 1, bound: int = 10, mode: str = "On") -> list[dict[str, Any]]:
    """Queue a fills two 8-cpu nodes with four 4-cpu pods; queue b (equal weight) has ``held``
    held pods of 4 cpu in another namespace."""
    p = policy("p")
    p["spec"]["reclaim"] = {"mode": mode, "afterSeconds": 60, "maxEvictionsPerRound": bound}
    return [
        p,
        node("n1", cpu=8, memory="64Gi"),
        node("n2", cpu=8, memory="64Gi"),
        queue("a"),
        queue("b"),
        *(pod(f"a{i}", "a", node=f"n{1 + i // 2}", cpu=4, memory="1Gi") for i in range(4)),
        *(
            pod(f"b{i}", "b", held=True, created=CREATED, cpu=4, memory="1Gi", namespace="other")
            for i in range(held)
        ),
    ]


def planned(objects: list[dict[str, Any]]) -> PolicyReclaim:
    inputs = parse_objects(objects)
    result = publication(
        snapshot_of(inputs, Context(NOW, 0)), inputs.node_policies,
        held=inputs.store.pods.held(), pods=inputs.store.pods, now=NOW,
    )  # fmt: skip
    return result.reclaims["p"]  # type: ignore[index]


class FakeEvictions:
    """The Eviction API, with PodDisruptionBudgets that refuse ``blocked``."""

    def __init__(self, blocked: set[tuple[str, str]] = frozenset()) -> None:  # type: ignore[assignment]
        self.blocked = set(blocked)
        self.asked: list[tuple[str, str]] = []
        self.pod_events: list[tuple[str, str, str, bool]] = []
        self.uids: dict[str, str] = {}

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[str, str]:
        self.asked.append((namespace, name))
        if (namespace, name) in self.blocked:
            return "blocked", "429: Cannot evict pod as it would violate its disruption budget."
        return "accepted", "evicted"

    async def event(
        self, target: dict[str, str], reason: str, message: str, *, warning: bool
    ) -> None:
        if target["kind"] == "Pod":
            pod = f"{target['namespace']}/{target['name']}"
            self.pod_events.append((pod, reason, message, warning))
            self.uids[pod] = target.get("uid", "")

    # The rest of the recompute loop's writer.
    async def patch_status(self, kind: Kind, name: str, patch: MutableObj) -> MutableObj | None:
        return patch

    async def patch_node_annotations(
        self, name: str, patch: dict[str, str | None]
    ) -> dict[str, str] | None:
        return {k: v for k, v in patch.items() if v is not None}

    async def release_pod(self, namespace: str, name: str, stamp: str) -> bool:
        return True


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"policy": "p"}) or 0.0


def test_the_victims_are_evicted_in_order_and_told_why() -> None:
    round_ = planned(cluster())
    victims = [v.pod for r in round_.plan.reclaims for v in r.victims]
    assert len(victims) == 1
    fake = FakeEvictions()
    before = counter("sharekeeper_reclaim_evictions_total")
    evicting: dict[tuple[str, str], float] = {}
    evicted = asyncio.run(
        carry_out(round_, fake, evicting, clock=lambda: 1.0, uid_of=lambda key: f"uid-{key[1]}")
    )
    assert evicted == victims == fake.asked
    assert set(evicting) == set(victims)
    assert counter("sharekeeper_reclaim_evictions_total") == before + 1
    [(victim, reason, message, warning), (reclaimer, reason2, message2, warning2)] = fake.pod_events
    assert (victim, reason, warning) == (f"{victims[0][0]}/{victims[0][1]}", "Reclaimed", True)
    assert message.startswith("queue a holds cpu 16 of its deserved 12")
    assert "evicted for a pod of another namespace of queue b that waits for cpu 4" in message
    assert "b0" not in message
    assert "other/" not in message
    assert (reclaimer, reason2, warning2) == ("other/b0", "ReclaimedFor", False)
    assert "1 pod of other namespaces (queue a, above its deserved share)" in message2
    assert "ns/" not in message2
    assert "cpu 4" in message2
    # Each Event names its pod's UID: `kubectl describe pod` asks for the Events of that UID.
    assert fake.uids == {f"{victims[0][0]}/{victims[0][1]}": f"uid-{victims[0][1]}",
                         "other/b0": "uid-b0"}  # fmt: skip


def test_a_refused_eviction_is_planned_again_without_it() -> None:
    round_ = planned(cluster())
    [first] = [v.pod for r in round_.plan.reclaims for v in r.victims]
    fake = FakeEvictions(blocked={first})
    refused = counter("sharekeeper_reclaim_evictions_refused_total")
    evicting: dict[tuple[str, str], float] = {}
    evicted = asyncio.run(carry_out(round_, fake, evicting, clock=lambda: 1.0, uid_of=lambda _: ""))
    assert fake.asked[0] == first
    assert len(evicted) == 1
    assert evicted[0] != first
    assert first not in evicting
    assert evicted[0] in evicting
    assert counter("sharekeeper_reclaim_evictions_refused_total") == refused + 1


class SlowEvictions(FakeEvictions):
    """Answers no eviction until ``answer`` is set; counts how many wait at once."""

    def __init__(self, blocked: set[tuple[str, str]] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__(blocked)
        self.answer = asyncio.Event()
        self.waiting = self.most_waiting = 0

    async def evict_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> tuple[str, str]:
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        await self.answer.wait()
        self.waiting -= 1
        return await super().evict_pod(namespace, name)


def test_evictions_go_out_without_waiting_for_each_other() -> None:
    round_ = planned(cluster(held=2))
    victims = [v.pod for r in round_.plan.reclaims for v in r.victims]
    assert len(victims) == 2
    fake = SlowEvictions()

    async def scenario() -> list[tuple[str, str]]:
        carrying = asyncio.create_task(
            carry_out(round_, fake, {}, clock=lambda: 1.0, uid_of=lambda _: "")
        )
        for _ in range(100):  # both sent before either is answered, or not at all
            if fake.waiting == 2:
                break
            await asyncio.sleep(0)
        fake.answer.set()
        return await carrying

    assert asyncio.run(scenario()) == victims
    assert fake.most_waiting == 2
    assert [reason for _, reason, _, _ in fake.pod_events].count("ReclaimedFor") == 2


def test_after_a_refusal_nothing_more_is_sent_and_what_was_in_flight_counts() -> None:
    round_ = planned(cluster(held=2))
    first, second = [v.pod for r in round_.plan.reclaims for v in r.victims]
    fake = SlowEvictions(blocked={first})
    fake.answer.set()
    evicting: dict[tuple[str, str], float] = {}
    evicted = asyncio.run(carry_out(round_, fake, evicting, clock=lambda: 1.0, uid_of=lambda _: ""))
    # Both were in flight when the first was refused; the second is gone, and the plan made
    # again finds the first reclaimer another victim.
    assert fake.asked[:2] == [first, second]
    assert evicted[0] == second
    assert len(evicted) == 2
    assert first not in evicted
    assert set(evicting) == set(evicted)


def test_every_eviction_refused_stops_within_the_bound() -> None:
    round_ = planned(cluster(bound=2))
    fake = FakeEvictions(blocked={("ns", f"a{i}") for i in range(4)})
    evicted = asyncio.run(carry_out(round_, fake, {}, clock=lambda: 1.0, uid_of=lambda _: ""))
    assert evicted == []
    assert len(fake.asked) == 2  # maxEvictionsPerRound tries, then the next round


def test_the_round_bound_holds() -> None:
    # b deserves 8 with three pods held; the bound lets one eviction through this round.
    round_ = planned(cluster(held=3, bound=1))
    assert round_.plan.evictions == 1
    reasons = sorted(n.reason.value for n in round_.plan.not_served)
    assert reasons == ["RoundBound", "RoundBound"]
    fake = FakeEvictions()
    assert (
        len(asyncio.run(carry_out(round_, fake, {}, clock=lambda: 1.0, uid_of=lambda _: ""))) == 1
    )


def test_the_loop_evicts_once_and_not_again_while_the_eviction_is_in_flight() -> None:
    store = ClusterStore()
    store.load(cluster())
    fake = FakeEvictions()
    loop = Recompute(fake, store, clock=lambda: NOW)

    async def scenario() -> None:
        await loop.recompute()
        await asyncio.gather(*loop._evictions, *loop._telling)
        assert len(fake.asked) == 1
        # The watch has not shown the eviction yet: the next round plans without that pod.
        await loop.recompute()
        await asyncio.gather(*loop._evictions, *loop._telling)
        assert len(fake.asked) == 1
        # The watch shows it terminating: still gone for reclaim, nothing evicted again.
        _namespace, name = fake.asked[0]
        dying = next(o for o in cluster() if o["metadata"]["name"] == name)
        dying["metadata"]["deletionTimestamp"] = CREATED
        store.pods.event("MODIFIED", dying)
        await loop.recompute()
        await asyncio.gather(*loop._evictions, *loop._telling)
        assert len(fake.asked) == 1
        waiting = REGISTRY.get_sample_value("sharekeeper_reclaim_waiting", {"policy": "p"})
        assert waiting == 1

    asyncio.run(scenario())


def test_preview_evicts_nothing() -> None:
    store = ClusterStore()
    store.load(cluster(mode="Preview"))
    fake = FakeEvictions()
    loop = Recompute(fake, store, clock=lambda: NOW)

    async def scenario() -> None:
        published = await loop.recompute()
        await asyncio.gather(*loop._evictions, *loop._telling)
        assert published.policies["p"]["reclaim"]["evictions"] == 1
        assert fake.asked == []

    asyncio.run(scenario())


def test_a_round_is_due_when_a_held_pod_will_have_waited_long_enough() -> None:
    store = ClusterStore()
    store.load(cluster())
    fake = FakeEvictions()
    young = 1_767_225_600.0 + 10  # 50 s short of afterSeconds
    loop = Recompute(fake, store, clock=lambda: young)

    async def scenario() -> None:
        await loop.recompute()
        timer = loop._reclaim_timer
        assert timer is not None
        due = timer.when() - asyncio.get_running_loop().time()
        assert 49 < due <= 50.5
        assert fake.asked == []
        timer.cancel()

    asyncio.run(scenario())
