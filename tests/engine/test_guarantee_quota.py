"""GuaranteeQuota: the seed design's example (20 cpu, three queues with guarantee 5 and
capability 10 asking for 9, 6 and 8) under every elastic order, and its edge cases."""

from __future__ import annotations

from builders import node, pod, policy, queue, shares
from sharekeeper.engine.shares.guarantee_quota import random_order


def _example(order: str, *, now: float = 0.0, seed: int = 0, **sharing: object) -> dict[str, int]:
    objects = [
        policy("gq", "GuaranteeQuota", elasticOrder=order, **sharing),
        node("n1", cpu=20),
        *(queue(f"queue{i}", guarantee={"cpu": "5"}, capability={"cpu": "10"}) for i in (1, 2, 3)),
        pod("p1", "queue1", cpu=9),
        pod("p2", "queue2", cpu=6),
        pod("p3", "queue3", cpu=8),
    ]
    result = shares(*objects, now=now, seed=seed)
    return {name: share.deserved["cpu"] for name, share in result.queues.items()}


def test_weight_order_water_fills_the_pool_by_weight() -> None:
    # Pool 5 cpu over wants 4, 1, 3: queue2 takes its 1, the other two split 4 evenly.
    assert _example("Weight") == {"queue1": 7000, "queue2": 6000, "queue3": 7000}


def test_share_order_serves_the_least_served_queue_first() -> None:
    # Served so far: queue1 5/9, queue3 5/8, queue2 5/6.
    assert _example("Share") == {"queue1": 9000, "queue2": 5000, "queue3": 6000}


def test_random_order_reproduces_the_design_walkthrough() -> None:
    # The design document serves queue3, queue2, queue1 and gets 6 / 6 / 8.
    names = ("queue1", "queue2", "queue3")
    seed = next(s for s in range(1000) if random_order(names, "gq", s, 0) == [2, 1, 0])
    assert _example("Random", seed=seed) == {"queue1": 6000, "queue2": 6000, "queue3": 8000}


def test_random_order_changes_at_most_once_per_reshuffle_period() -> None:
    first = _example("Random", now=600.0, reshuffleSeconds=300)
    assert _example("Random", now=899.0, reshuffleSeconds=300) == first
    later = {
        _tuple(_example("Random", now=300.0 * bucket, reshuffleSeconds=300)) for bucket in range(20)
    }
    assert len(later) > 1  # the order does get reshuffled across periods


def test_queues_keep_what_they_run_above_their_guarantee() -> None:
    result = shares(
        policy("gq", "GuaranteeQuota"),
        node("n1", cpu=10),
        queue("busy"),
        queue("idle", guarantee={"cpu": "4"}),
        pod("running", "busy", node="n1", cpu=6),
        pod("waiting", "busy", cpu=4),
    )
    assert result.queues["busy"].deserved["cpu"] == 6000
    assert result.queues["idle"].deserved["cpu"] == 4000


def test_guarantees_above_the_total_are_reported_not_fatal() -> None:
    result = shares(
        policy("gq", "GuaranteeQuota"),
        node("n1", cpu=4),
        queue("a", guarantee={"cpu": "3"}),
        queue("b", guarantee={"cpu": "3"}),
        pod("p", "a", cpu=10),
    )
    assert [reason.kind for reason in result.policies["gq"].reasons] == ["GuaranteeUnsatisfiable"]
    assert result.queues["a"].deserved["cpu"] == 3000
    assert result.queues["b"].deserved["cpu"] == 3000


def _tuple(values: dict[str, int]) -> tuple[int, ...]:
    return tuple(values[name] for name in sorted(values))
