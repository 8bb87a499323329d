"""Usage on its way out is not released twice: terminating pods, and our evictions that the
node's usage sample does not show yet.

Node of 8 cores used against a 6-core evict rule (10 % excess: a gap of 2200m); ``big`` uses
3 cores, ``mid`` 2, ``small`` 1. Times are seconds; a sample's window begins at
``usage_since``.
"""

from __future__ import annotations

from dataclasses import replace

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    REGISTRY,
    ActionClass,
    Eviction,
    NodeCheckResult,
    NodeQosState,
    Phase,
    QosAction,
    QosNode,
    QosPod,
    QosPolicy,
    Release,
    ThrottleState,
    accept_all,
    check_node,
    node_actions,
    with_releases,
)
from sharekeeper.engine.qos.releasing import (
    LEAVING_SECONDS,
    RELEASE_RECORD_SECONDS,
    SETTLE_SECONDS,
    STUCK_AFTER_SECONDS,
    carried,
    unsampled,
)
from sharekeeper.engine.qos.waterlines import Contribution, gap, pooled_waterlines

from .builders import EVICT, THROTTLE, node, pod, policy, rule

EVICT_AT_6 = policy(rule("r", "cpu_total_usage", 6_000, avoid=1))
BIG = pod("big", uid="u-big", cpu=3_000, memory=2**30)
MID = pod("mid", uid="u-mid", cpu=2_000)
SMALL = pod("small", uid="u-small", cpu=1_000)


def check(
    n: QosNode, state: NodeQosState, now: int, guard: QosPolicy = EVICT_AT_6
) -> tuple[list[str], NodeQosState]:
    """One check whose every action is accepted, and the state the next check reads."""
    result = check_node([guard], n, state, now)
    accepted = accept_all(node_actions(result, n)).accepted
    releases = with_releases(n, result.state.releases, accepted, now)
    return [a.pod.name for a in accepted], replace(result.state, releases=releases)


def evict_gap(result: NodeCheckResult) -> tuple[int | None, int]:
    (g,) = (g for g in result.gaps if g.action_class is ActionClass.EVICT)
    return g.amount, g.leaving


def test_checks_on_a_sample_that_has_not_seen_the_eviction_evict_no_more() -> None:
    """The over-eviction this prevents: the sample stayed the same for three checks, and each
    check evicted the next pod for usage the first eviction had already freed."""
    evicted, state = check(node(BIG, MID, SMALL, cpu=8_000, usage_since=90), NodeQosState(), 100)
    assert evicted == ["big"]
    (release,) = state.releases
    assert (release.cpu_milli, release.memory_bytes, release.deadline) == (3_000, 2**30, 130)
    # The pod is terminating; the sample is the same one.
    dying = replace(BIG, deletion_deadline=130)
    evicted, state = check(node(dying, MID, SMALL, cpu=8_000, usage_since=90), state, 110)
    assert evicted == []
    # The pod is gone; the sample is still the same one.
    evicted, state = check(node(MID, SMALL, cpu=8_000, usage_since=90), state, 120)
    assert evicted == []
    assert [r.gone_at for r in state.releases] == [120]
    # A sample whose window began after the check that found it gone, still above 6 cores:
    # the usage left is real, and the next pod goes.
    evicted, state = check(node(MID, SMALL, cpu=7_000, usage_since=121), state, 140)
    assert evicted == ["mid"]
    assert [r.pod.name for r in state.releases] == ["mid"]


def test_what_is_leaving_is_left_out_of_the_gap_and_reported() -> None:
    dying = replace(BIG, deletion_deadline=130)
    result = check_node([EVICT_AT_6], node(dying, MID, cpu=8_000), NodeQosState(), 110)
    assert evict_gap(result) == (-1_100, 3_000)  # (8000 - 3000 - 6000) x 1.1
    assert accept_all(node_actions(result, node(dying, MID, cpu=8_000))).accepted == ()
    # The rule reads the usage as sampled: it stays triggered until the sample is calm.
    (status,) = result.rules
    assert status.state.phase is Phase.TRIGGERED


def test_part_of_the_gap_left_open_is_released_precisely() -> None:
    dying = replace(SMALL, deletion_deadline=130)
    n = node(BIG, MID, dying, cpu=8_000)
    result = check_node([EVICT_AT_6], n, NodeQosState(), 110)
    assert evict_gap(result) == (1_100, 1_000)  # (8000 - 1000 - 6000) x 1.1
    # big alone closes it; without small leaving, big and mid would go (gap 2200m).
    assert [a.pod.name for a in accept_all(node_actions(result, n)).accepted] == ["big"]


def test_a_throttle_down_gap_leaves_it_out_a_restore_headroom_does_not() -> None:
    throttling = policy(rule("t", "cpu_total_usage", 6_000, "throttle", avoid=1))
    dying = replace(BIG, deletion_deadline=130)
    result = check_node([throttling], node(dying, MID, cpu=8_000), NodeQosState(), 110)
    (down,) = result.gaps
    assert (down.action_class, down.amount, down.leaving) == (
        ActionClass.THROTTLE_DOWN,
        -1_100,
        3_000,
    )
    up = Contribution("p", "t", ActionClass.THROTTLE_UP, "cpu_total_usage", 6_000, THROTTLE,
                      throttling.candidates, False, 0)  # fmt: skip
    (line,) = pooled_waterlines([up], REGISTRY)
    out = unsampled(node(dying), (), 110)
    assert out.leaving_cpu_milli == 3_000
    headroom = gap(line, REGISTRY["cpu_total_usage"], node(dying, cpu=5_000), out)
    assert (headroom.amount, headroom.leaving) == (1_000, 0)


def test_a_pod_stuck_terminating_past_its_deadline_counts_again() -> None:
    stuck = replace(BIG, deletion_deadline=100)
    n = node(stuck, MID, cpu=8_000)
    assert unsampled(n, (), 100 + STUCK_AFTER_SECONDS).leaving_cpu_milli == 3_000
    assert unsampled(n, (), 101 + STUCK_AFTER_SECONDS).leaving_cpu_milli == 0
    result = check_node([EVICT_AT_6], n, NodeQosState(), 101 + STUCK_AFTER_SECONDS)
    assert [a.pod.name for a in accept_all(node_actions(result, n)).accepted] == ["mid"]


def test_a_pod_given_a_day_to_stop_is_leaving_for_two_minutes_only() -> None:
    """A tenant who deletes its own busy pod with a day's grace period must not hold the
    node's evictions for a day."""
    day = 86_400
    slow = replace(BIG, deletion_deadline=100 + day, deletion_grace_seconds=day)
    n = node(slow, MID, cpu=8_000)
    assert unsampled(n, (), 100 + LEAVING_SECONDS + STUCK_AFTER_SECONDS).leaving_cpu_milli == 3_000
    assert unsampled(n, (), 101 + LEAVING_SECONDS + STUCK_AFTER_SECONDS).leaving_cpu_milli == 0
    quick = replace(BIG, deletion_deadline=130, deletion_grace_seconds=30)
    assert unsampled(node(quick), (), 130 + STUCK_AFTER_SECONDS).leaving_cpu_milli == 3_000


def test_our_record_stands_in_for_a_terminating_pod_without_a_sample() -> None:
    release = Release("evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100)
    unmeasured = replace(BIG, cpu_usage_milli=None, deletion_deadline=130)
    assert unsampled(node(unmeasured), (release,), 110).leaving_cpu_milli == 3_000
    assert unsampled(node(unmeasured), (), 110).leaving_cpu_milli == 0


def test_an_eviction_the_watch_has_not_shown_yet_is_leaving() -> None:
    release = Release("evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100)
    assert unsampled(node(BIG), (release,), 101).leaving_cpu_milli == 3_000


def test_a_gone_pod_settles_with_the_first_sample_begun_after_it_stopped() -> None:
    gone = Release("evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100, deadline=200)
    seen_gone = replace(gone, gone_at=150)
    for release, since, counted in [
        (gone, 10_000, False),  # the first check finding it gone: after its deadline
        (gone, 200 + SETTLE_SECONDS, True),  # the kubelet may still have been killing it
        (seen_gone, 150, True),
        (seen_gone, 151, False),  # after the check that found it gone, before the deadline
        (replace(gone, deadline=None), 10_000, True),  # when it stopped is not known yet
        (seen_gone, None, True),  # a sample without a time
    ]:
        n = node(usage_since=since)
        assert (unsampled(n, (release,), 160).leaving_cpu_milli == 3_000) is counted, (
            release,
            since,
        )
        assert (carried(n, (release,), 160) != ()) is counted, (release, since)


def test_a_sample_stamped_ahead_of_our_clock_is_taken_to_have_begun_that_much_earlier() -> None:
    """A metrics clock 10 s ahead: the sample (stamped 170 at our 160, a 15 s window) began at
    145 by our clock, before the check that found the pod gone (150), so it may still hold the
    pod's usage; read as stamped (155) it would settle the eviction early."""
    release = Release(
        "evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100, deadline=200, gone_at=150
    )
    ahead = node(usage_since=155, usage_at=170)
    assert unsampled(ahead, (release,), 160).leaving_cpu_milli == 3_000
    assert carried(ahead, (release,), 160) == (release,)
    # Its next sample, as far ahead: begun at 160 by our clock, after the pod stopped.
    later = node(usage_since=170, usage_at=185)
    assert unsampled(later, (release,), 175).leaving_cpu_milli == 0
    assert carried(later, (release,), 175) == ()
    # A sample stamped before our now is read as stamped (a clock behind only settles late).
    behind = node(usage_since=155, usage_at=158)
    assert unsampled(behind, (release,), 160).leaving_cpu_milli == 0


def test_a_pod_recreated_under_the_same_name_is_not_the_evicted_one() -> None:
    release = Release("evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100)
    again = replace(BIG, uid="u-big-2")
    n = node(again, cpu=8_000, usage_since=90)
    assert (
        unsampled(n, (release,), 110).leaving_cpu_milli == 3_000
    )  # the old one may be in the sample
    assert [r.gone_at for r in carried(n, (release,), 110)] == [110]


def test_records_are_forgotten_after_a_while_settled_or_not() -> None:
    release = Release("evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100)
    n = node(usage_since=None)
    assert carried(n, (release,), 100 + RELEASE_RECORD_SECONDS) != ()
    assert carried(n, (release,), 101 + RELEASE_RECORD_SECONDS) == ()


def test_the_record_takes_the_deadline_the_api_server_set() -> None:
    release = Release("evict", PodKey("default", "big"), "u-big", 3_000, 0, at=100, deadline=130)
    dying = replace(BIG, deletion_deadline=160)
    assert [r.deadline for r in carried(node(dying), (release,), 110)] == [160]


def test_an_eviction_without_a_grace_period_takes_the_pods_own() -> None:
    no_grace = replace(EVICT, eviction=Eviction(termination_grace_period_seconds=None))
    evicting = policy(rule("r", "cpu_total_usage", 6_000, avoid=1), actions=(no_grace,))
    patient: QosPod = replace(BIG, grace_period_seconds=600)
    n = node(patient, cpu=8_000)
    result = check_node([evicting], n, NodeQosState(), 100)
    accepted = accept_all(node_actions(result, n)).accepted
    assert [r.deadline for r in with_releases(n, (), accepted, 100)] == [700]


def test_a_throttle_the_sample_does_not_show_yet_is_not_made_again() -> None:
    """The same for throttles: the CPU a lower limit frees shows in the usage only once the
    kubelet has applied it and a sample has been taken since; checks before that stepped the
    limit down again (2400m, then 1920m, for a gap the first step closed)."""
    throttling = policy(rule("t", "cpu_total_usage", 6_000, "throttle", avoid=1))
    hog = pod("hog", uid="u-hog", qos="Burstable", cpu=3_000, limit=4_000)
    throttled, state = check(node(hog, cpu=6_500, usage_since=90), NodeQosState(), 100, throttling)
    assert throttled == ["hog"]  # 3000m x 0.8 = 2400m frees 600m of a 550m gap
    (release,) = state.releases
    assert (release.kind, release.cpu_milli, release.at) == ("throttle", 600, 100)
    stepped = replace(hog, cpu_limit_milli=2_400, throttle=ThrottleState(4_000, 2_400))
    # The same sample: the hog's 3 cores are still in it.
    throttled, state = check(node(stepped, cpu=6_500, usage_since=90), state, 110, throttling)
    assert throttled == []
    assert state.releases == (release,)
    # A sample begun after the lower limit applied, still above 6 cores: one more step.
    throttled, state = check(
        node(stepped, cpu=6_300, usage_since=100 + SETTLE_SECONDS + 1), state, 120, throttling
    )
    assert throttled == ["hog"]
    # 2400m -> 1920m, from a pod the sample shows at 3 cores: the earlier record settled.
    assert [(r.cpu_milli, r.at) for r in state.releases] == [(1_080, 120)]


def test_throttles_not_shown_yet_add_up_and_an_eviction_takes_their_place() -> None:
    hog = pod("hog", uid="u-hog", cpu=3_000, limit=4_000)
    earlier = Release("throttle", hog.key, "u-hog", 600, 0, at=100)
    n = node(hog, cpu=6_500, usage_since=90)
    step = QosAction("throttle", hog.key, "node-1", "cpu_total_usage", "cpu", 480)
    (added,) = with_releases(n, (earlier,), [step], 110)
    assert (added.kind, added.cpu_milli, added.at) == ("throttle", 1_080, 110)
    evict = QosAction("evict", hog.key, "node-1", "cpu_total_usage", "cpu", 3_000)
    (evicted,) = with_releases(n, (added,), [evict], 120)
    assert (evicted.kind, evicted.cpu_milli) == ("evict", 3_000)
    # A throttled pod that is gone takes its record with it; one terminating counts whole.
    assert carried(node(usage_since=90), (earlier,), 110) == ()
    dying = replace(hog, deletion_deadline=130)
    assert unsampled(node(dying, usage_since=90), (earlier,), 110).leaving_cpu_milli == 3_000


def test_a_restore_the_sample_does_not_show_yet_is_not_made_again() -> None:
    """And the other way round: a restore lets its pod take more CPU only once the higher
    limit applies; a stale sample showed the same headroom again, and the next check gave
    the same CPU back a second time."""
    restoring = policy(rule("t", "cpu_total_usage", 6_000, "throttle", avoid=1, restore=1))
    held = pod("held", uid="u-held", qos="Burstable", cpu=1_000, limit=1_000)
    held = replace(held, throttle=ThrottleState(4_000, 1_000))
    calm = node(held, cpu=5_000, usage_since=90)
    acted, state = check(calm, NodeQosState(), 100, restoring)
    assert acted == ["held"]  # 1000m -> 1200m: 200m of the 1100m headroom
    (release,) = state.releases
    assert (release.kind, release.cpu_milli) == ("restore", 200)
    raised = replace(held, cpu_limit_milli=1_200, throttle=ThrottleState(4_000, 1_200))
    result = check_node([restoring], node(raised, cpu=5_000, usage_since=90), state, 110)
    (up,) = result.gaps
    assert (up.action_class, up.amount, up.arriving) == (ActionClass.THROTTLE_UP, 880, 200)
    # A sample begun after the higher limit applied: the full headroom again.
    later = node(raised, cpu=5_000, usage_since=100 + SETTLE_SECONDS + 1)
    (up,) = check_node([restoring], later, state, 120).gaps
    assert (up.amount, up.arriving) == (1_100, 0)
