"""Hypothesis invariants of the planner, the throttle arithmetic and the hysteresis."""

from __future__ import annotations

from dataclasses import replace
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from sharekeeper.engine.qos import (
    CpuThrottle,
    NodeCheckResult,
    NodeQosState,
    Objective,
    Observation,
    Outcome,
    Phase,
    QosNode,
    QosPod,
    RuleState,
    SchedulingState,
    accept_all,
    check_node,
    node_actions,
    stays_at_rest,
)
from sharekeeper.engine.qos.hysteresis import advance
from sharekeeper.engine.qos.throttling import throttle_step

from .builders import node, pod, policy, rule

FAST = settings(max_examples=150, deadline=None)

pods_strategy = st.lists(
    st.builds(
        lambda i, cpu, qos, prio, start: pod(f"p{i}", cpu=cpu, qos=qos, priority=prio, start=start),
        st.integers(0, 10_000),
        st.one_of(st.none(), st.integers(0, 4_000)),
        st.sampled_from(["BestEffort", "Burstable", "Guaranteed"]),
        st.integers(-5, 5),
        st.one_of(st.none(), st.integers(0, 100)),
    ),
    max_size=12,
    unique_by=lambda p: p.key,
)


def evict_check(
    pods: list[QosPod], usage: int, line: int = 6_000
) -> tuple[NodeCheckResult, QosNode]:
    n = node(*pods, cpu=usage)
    return check_node([policy(rule("r", "cpu_total_usage", line))], n, NodeQosState(), 0), n


@FAST
@given(pods_strategy, st.integers(0, 20_000), st.data())
def test_never_evicts_more_than_needed(pods: list[QosPod], usage: int, data: st.DataObject) -> None:
    result, n = evict_check(pods, usage)
    refuse = data.draw(st.sets(st.sampled_from([p.key for p in pods]))) if pods else set()
    flow, accepted, gap = node_actions(result, n), [], result.gaps[0].amount if result.gaps else 0
    try:
        action = next(flow)
        while True:
            ok = action.pod not in refuse
            if ok:
                accepted.append(action)
            action = flow.send(Outcome.ACCEPTED if ok else Outcome.REFUSED)
    except StopIteration as stop:
        report = stop.value
    released = [a.released for a in accepted]
    assert gap is not None
    # Removing the last accepted eviction would leave the gap open.
    assert sum(released[:-1]) < gap or not released
    # Only accepted evictions count.
    if report.remaining:
        assert report.remaining[0][2] == gap - sum(released)
    # Stopping early means the gap is closed, a refused eviction stopped the sequence, or no
    # useful candidate is left.
    if gap - sum(released) > 0 and not report.stopped:
        evicted = {a.pod for a in report.accepted} | {a.pod for a in report.refused}
        assert all((p.cpu_usage_milli or 0) == 0 or p.key in evicted for p in pods)
    # A refusal is the last eviction tried: nothing ranked after it goes in its place.
    assert len(report.refused) <= 1
    if report.refused:
        assert [s.pod for s in report.stopped] == [report.refused[0].pod]


@FAST
@given(pods_strategy, st.integers(0, 20_000), st.randoms(use_true_random=False))
def test_plans_do_not_depend_on_input_order(pods: list[QosPod], usage: int, rnd: Random) -> None:
    first, n1 = evict_check(pods, usage)
    shuffled = list(pods)
    rnd.shuffle(shuffled)
    second, n2 = evict_check(shuffled, usage)
    assert accept_all(node_actions(first, n1)) == accept_all(node_actions(second, n2))


@FAST
@given(
    st.integers(0, 8_000),
    st.one_of(st.none(), st.integers(1, 8_000)),
    st.integers(0, 4_000),
    st.integers(0, 100),
    st.integers(0, 100),
)
def test_throttle_never_goes_below_request_or_min_ratio(
    usage: int, limit: int | None, request: int, min_ratio: int, step: int
) -> None:
    p = pod("p", cpu=usage, request=request, limit=limit)
    change = throttle_step(p, CpuThrottle(min_ratio, step))
    if change is None:
        return
    assert change.cpu_limit_milli is not None
    floor = max(request, 1, (limit or 0) * min_ratio // 100)
    assert change.cpu_limit_milli >= floor
    assert change.cpu_limit_milli < (limit if limit is not None else usage)


@FAST
@given(st.integers(1, 5), st.integers(1, 5), st.lists(st.booleans(), max_size=20))
def test_a_calm_rule_reaches_a_fixed_point(avoid: int, restore: int, history: list[bool]) -> None:
    state = RuleState()
    for hot in history:
        state = advance(state, Observation.HOT if hot else Observation.CALM, avoid, restore).state
    # restore calm checks restore it; one more clears ``restored`` (nothing to give back).
    for _ in range(restore + 1):
        state = advance(state, Observation.CALM, avoid, restore).state
    step = advance(state, Observation.CALM, avoid, restore)
    assert step.state == state
    assert step.restored_now
    assert step.event is None


rules_strategy = st.lists(
    st.builds(
        lambda i, metric, value, action, avoid, restore, preview: rule(
            f"r{i}", metric, value, action, avoid=avoid, restore=restore, preview=preview
        ),
        st.integers(0, 1_000),
        st.sampled_from(
            ["cpu_total_usage", "memory_total_usage", "cpu_total_utilization", "no_such_metric"]
        ),
        st.integers(0, 40_000),
        st.sampled_from(["evict", "throttle", "missing"]),
        st.integers(1, 3),
        st.integers(1, 3),
        st.booleans(),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda r: r.name,
)


@FAST
@given(
    st.lists(rules_strategy, min_size=1, max_size=3),
    st.one_of(st.none(), st.integers(0, 20_000)),
    st.one_of(st.none(), st.integers(0, 20_000)),
    pods_strategy,
)
def test_a_node_that_stays_at_rest_is_one_the_full_check_leaves_at_rest(
    rule_sets: list[list[Objective]], cpu: int | None, memory: int | None, pods: list[QosPod]
) -> None:
    """What lets a check skip a calm node nothing is remembered of: the full check of that
    node, from the zero state, would report, act on and remember nothing."""
    policies = [policy(*rules, name=f"p{i}") for i, rules in enumerate(rule_sets)]
    n = node(*pods, cpu=cpu, memory=memory)
    if not stays_at_rest(policies, replace(n, pods=())):
        return
    result = check_node(policies, n, NodeQosState(), 1_000)
    assert not result.waterlines
    assert not result.preview_waterlines
    assert not result.notes
    assert not result.scheduling_disabled
    assert all(s.observation is Observation.CALM and s.event is None for s in result.rules)
    assert all(s.state.phase is Phase.CALM and not s.state.hot_streak for s in result.rules)
    assert all(not s.state.restored and not s.triggered_now for s in result.rules)
    assert accept_all(node_actions(result, n)).accepted == ()
    assert result.state.releases == ()
    assert result.state.scheduling == SchedulingState()
