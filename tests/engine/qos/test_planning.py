"""The sans-I/O flow: outcomes, fallbacks, Preview, pooling across policies, the taint."""

from __future__ import annotations

from dataclasses import replace

from sharekeeper.engine.qos import (
    ActionClass,
    LabelSelector,
    Mode,
    NodeQosState,
    Outcome,
    PlanReport,
    QosAction,
    SkipReason,
    accept_all,
    check_node,
    node_actions,
)
from sharekeeper.engine.qos.planning import Flow

from .builders import candidates_with, node, pod, policy, rule


def drive(flow: Flow, refuse: set[str]) -> tuple[list[QosAction], PlanReport]:
    """Answer like an API server with PodDisruptionBudgets protecting ``refuse``."""
    seen = []
    try:
        action = next(flow)
        while True:
            seen.append(action)
            outcome = Outcome.REFUSED if action.pod.name in refuse else Outcome.ACCEPTED
            action = flow.send(outcome)
    except StopIteration as stop:
        return seen, stop.value


def test_refused_eviction_is_not_counted_and_stops_the_sequence() -> None:
    """Bug crane.md §12.4: Crane subtracted a pod's usage before knowing the eviction's fate.
    And no pod ranked after a refused one is evicted in its place (a tenant's budget must not
    send the eviction to other teams' pods)."""
    pods = [pod("big", cpu=3_000), pod("mid", cpu=2_000), pod("small", cpu=1_000)]
    n = node(*pods, cpu=8_000)
    result = check_node([policy(rule("r", "cpu_total_usage", 6_000))], n, NodeQosState(), 0)
    seen, report = drive(node_actions(result, n), refuse={"big"})
    assert [a.pod.name for a in seen] == ["big"]  # gap 2200m
    assert report.accepted == ()
    assert [a.pod.name for a in report.refused] == ["big"]
    assert report.remaining == ((ActionClass.EVICT, "cpu_total_usage", 2_200),)
    seen, report = drive(node_actions(result, n), refuse={"mid"})
    assert [a.pod.name for a in seen] == ["big"]  # big alone closes the gap: mid never asked
    assert [a.pod.name for a in report.accepted] == ["big"]


def test_eviction_carries_the_action_grace_period() -> None:
    """Bug crane.md §12.3: Crane ignored terminationGracePeriodSeconds."""
    n = node(pod("p", cpu=3_000), cpu=8_000)
    result = check_node([policy(rule("r", "cpu_total_usage", 6_000))], n, NodeQosState(), 0)
    (action,) = accept_all(node_actions(result, n)).accepted
    assert action.grace_period_seconds == 30


def test_pods_releasing_nothing_are_not_evicted() -> None:
    """Crane evicted pods without usage data (release 0) until it ran out (crane.md §12.5)."""
    n = node(pod("unknown", cpu=None), pod("idle", cpu=0), pod("busy", cpu=500), cpu=7_000)
    result = check_node([policy(rule("r", "cpu_total_usage", 6_000))], n, NodeQosState(), 0)
    report = accept_all(node_actions(result, n))
    assert [a.pod.name for a in report.accepted] == ["busy"]


def test_preview_computes_and_reports_but_never_acts_nor_taints() -> None:
    n = node(pod("p", cpu=3_000), cpu=8_000)
    preview = policy(rule("r", "cpu_total_usage", 6_000, preview=True))
    result = check_node([preview], n, NodeQosState(), 0)
    assert result.waterlines == ()
    assert result.plans == ()
    assert not result.scheduling_disabled
    assert result.rules[0].triggered_now
    assert [w.value for w in result.preview_waterlines] == [6_000]
    would = accept_all(node_actions(result, n, preview=True))
    assert [a.pod.name for a in would.accepted] == ["p"]
    assert accept_all(node_actions(result, n)).accepted == ()


def test_waterlines_pool_across_policies_and_both_policies_candidates_qualify() -> None:
    a = policy(
        rule("r", "cpu_total_usage", 7_000),
        name="a",
        candidates=candidates_with(pod_selector=LabelSelector({"team": "a"})),
    )
    b = policy(
        rule("r", "cpu_total_usage", 6_000),
        name="b",
        candidates=candidates_with(pod_selector=LabelSelector({"team": "b"})),
    )
    pods = [pod("pa", cpu=1_500, labels={"team": "a"}), pod("pb", cpu=1_000, labels={"team": "b"})]
    n = node(*pods, cpu=8_000)
    result = check_node([b, a], n, NodeQosState(), 0)
    (line,) = result.waterlines
    assert line.value == 6_000
    assert [c.policy for c in line.contributions] == ["a", "b"]
    report = accept_all(node_actions(result, n))
    assert [x.pod.name for x in report.accepted] == ["pa", "pb"]  # gap 2200m


def test_a_pod_is_acted_on_once_per_check_evicted_pods_are_not_throttled() -> None:
    pods = [pod("p1", cpu=2_000), pod("p2", cpu=1_000)]
    n = node(*pods, cpu=9_000)
    both = policy(
        rule("evict", "cpu_total_usage", 8_000),
        rule("throttle", "cpu_total_usage", 5_000, "throttle"),
    )
    report = accept_all(node_actions(check_node([both], n, NodeQosState(), 0), n))
    assert [(a.kind, a.pod.name) for a in report.accepted] == [
        ("evict", "p1"),
        ("throttle", "p2"),
    ]


def test_throttle_fallback_when_a_metric_cannot_be_quantified() -> None:
    """Memory is not throttle-quantified: every candidate gets one CPU step (crane.md §9)."""
    pods = [pod("p1", cpu=1_000), pod("p2", cpu=100)]
    n = node(*pods, cpu=7_000, memory=8 * 10**9)
    rules = (
        rule("cpu", "cpu_total_usage", 6_000, "throttle"),
        rule("mem", "memory_total_usage", 4 * 10**9, "throttle"),
    )
    result = check_node([policy(*rules)], n, NodeQosState(), 0)
    (plan,) = result.plans
    assert (plan.mode, plan.metric) == (Mode.ALL, "cpu_total_usage")
    report = accept_all(node_actions(result, n))
    assert [a.pod.name for a in report.accepted] == ["p1", "p2"]
    assert all(not a.precise for a in report.accepted)
    memory_only = check_node([policy(rules[1])], n, NodeQosState(), 0)
    assert memory_only.plans[0].mode is Mode.WAIT


def test_restore_covers_throttled_pods_the_policy_no_longer_selects() -> None:
    n = node(pod("p", cpu=100, throttled=(1_000, 500), labels={"x": "y"}), cpu=1_000)
    narrowed = policy(
        rule("t", "cpu_total_usage", 6_000, "throttle"),
        candidates=candidates_with(pod_selector=LabelSelector({"x": "other"})),
    )
    report = accept_all(node_actions(check_node([narrowed], n, NodeQosState(), 0), n))
    assert [(a.kind, a.cpu_limit_milli) for a in report.accepted] == [("restore", 600)]


def test_taint_follows_trigger_restore_and_cool_down_across_checks() -> None:
    evict = policy(rule("r", "cpu_total_usage", 6_000, avoid=1, restore=2))
    state = NodeQosState()
    timeline = []
    for now, usage in [(0, 7_000), (10, 5_000), (20, 5_000), (30, 5_000), (330, 5_000)]:
        result = check_node([evict], node(cpu=usage), state, now)
        state = result.state
        timeline.append(result.scheduling_disabled)
    # hot, calm (not restored yet), restored at 20 (cool-down 300 starts), 30, cleared at 320+
    assert timeline == [True, True, True, True, False]


def test_state_of_rules_that_disappeared_is_dropped() -> None:
    evict = policy(rule("r", "cpu_total_usage", 6_000))
    result = check_node([evict], node(cpu=7_000), NodeQosState(), 0)
    assert set(result.state.rules) == {r.key for r in result.rules}
    gone = check_node([], node(cpu=7_000), result.state, 10)
    assert gone.state.rules == {}


def test_policies_not_selecting_the_node_are_ignored() -> None:
    p = policy(rule("r", "cpu_total_usage", 6_000))
    elsewhere = replace(p, node_selector=LabelSelector({"pool": "gpu"}))
    result = check_node([elsewhere], node(cpu=7_000), NodeQosState(), 0)
    assert result.rules == ()


def test_evictions_earlier_in_the_check_count_against_the_throttle_gap() -> None:
    """Found: "still to release" and the throttle plan ignored what evictions in the same check
    had freed. An eviction of 3 cores closes the 2.2-core throttle gap: nothing is throttled."""
    pods = [pod("big", cpu=3_000), pod("small", cpu=1_000, limit=2_000)]
    n = node(*pods, cpu=10_000)
    both = policy(
        rule("evict", "cpu_total_usage", 9_000),
        rule("throttle", "cpu_total_usage", 8_000, "throttle"),
    )
    report = accept_all(node_actions(check_node([both], n, NodeQosState(), 0), n))
    assert [(a.kind, a.pod.name) for a in report.accepted] == [("evict", "big")]
    assert {(c, m): v for c, m, v in report.remaining} == {
        (ActionClass.EVICT, "cpu_total_usage"): 1_100 - 3_000,
        (ActionClass.THROTTLE_DOWN, "cpu_total_usage"): 2_200 - 3_000,
    }


def test_an_eviction_leaves_the_throttle_plan_only_what_it_did_not_free() -> None:
    pods = [pod("a", cpu=2_000), pod("b", cpu=1_500), pod("c", cpu=1_000)]
    n = node(*pods, cpu=10_000)
    both = policy(
        rule("evict", "cpu_total_usage", 9_000),
        rule("throttle", "cpu_total_usage", 8_000, "throttle"),
    )
    report = accept_all(node_actions(check_node([both], n, NodeQosState(), 0), n))
    # Evict gap 1100m: "a" (2000m) goes. Throttle gap 2200m - 2000m = 200m: one 20 % step of
    # "b" (300m) closes it, and "c" is left alone (without the eviction counted, both went).
    assert [(a.kind, a.pod.name) for a in report.accepted] == [("evict", "a"), ("throttle", "b")]
    assert (ActionClass.THROTTLE_DOWN, "cpu_total_usage", -100) in report.remaining


def test_pods_passed_over_are_reported_with_the_real_reason() -> None:
    """Found: a skipped pod was always blamed on missing usage data."""
    pods = [
        pod("floored", cpu=500, request=500, limit=1_000),  # its request is its floor
        pod("unknown", cpu=None, limit=1_000),
        pod("idle", cpu=0, limit=1_000),
    ]
    n = node(*pods, cpu=7_000)
    throttle = policy(rule("t", "cpu_total_usage", 6_000, "throttle"))
    report = accept_all(node_actions(check_node([throttle], n, NodeQosState(), 0), n))
    assert report.accepted == ()
    assert {(s.pod.name, s.reason, s.floor_milli) for s in report.skipped} == {
        ("floored", SkipReason.AT_FLOOR, 500),
        ("unknown", SkipReason.NO_USAGE, None),
        ("idle", SkipReason.NOTHING_USED, None),
    }


def test_a_calm_node_with_nothing_to_give_back_has_no_waterline() -> None:
    """Found: a calm node with a throttle rule published a ``throttleUp`` waterline (and its
    annotation) on every check, with nothing throttled to restore."""
    throttle = policy(rule("t", "cpu_total_usage", 6_000, "throttle"))
    calm = check_node([throttle], node(pod("p", cpu=100), cpu=2_000), NodeQosState(), 0)
    assert (calm.waterlines, calm.gaps, calm.plans) == ((), (), ())
    assert not calm.rules[0].state.restored
    waiting = node(pod("p", cpu=100, throttled=(1_000, 500)), cpu=2_000)
    restoring = check_node([throttle], waiting, NodeQosState(), 0)
    assert [(w.action_class, w.value) for w in restoring.waterlines] == [
        (ActionClass.THROTTLE_UP, 6_000)
    ]
    assert not restoring.rules[0].state.restored  # it never triggered


def test_a_triggered_throttle_rule_is_restored_until_its_pods_are_back() -> None:
    throttle = policy(rule("t", "cpu_total_usage", 6_000, "throttle"))
    busy = node(pod("p", cpu=1_000, limit=1_000), cpu=7_000)
    hot = check_node([throttle], busy, NodeQosState(), 0)
    (step,) = accept_all(node_actions(hot, busy)).accepted
    assert step.cpu_limit_milli == 800
    # The next checks are calm, with the pod at the limit the throttle gave it.
    waiting = node(pod("p", cpu=800, limit=800, throttled=(1_000, 800)), cpu=2_000)
    first = check_node([throttle], waiting, hot.state, 10)
    assert first.rules[0].state.restored
    second = check_node([throttle], waiting, first.state, 20)
    assert second.rules[0].state.restored  # still giving back
    back = check_node([throttle], node(pod("p", cpu=800, limit=1_000), cpu=2_000), second.state, 30)
    assert not back.rules[0].state.restored
    assert back.waterlines == ()
