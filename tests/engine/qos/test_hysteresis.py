"""The transition table: consecutive streaks, saturation, one-shot events, the taint."""

from __future__ import annotations

import pytest

from sharekeeper.engine.qos.hysteresis import (
    TRANSITIONS,
    Event,
    Observation,
    Phase,
    RuleState,
    SchedulingState,
    advance,
    scheduling_state,
)

HOT, CALM, MISSING = Observation.HOT, Observation.CALM, Observation.MISSING


def run(observations: list[Observation], avoid: int = 2, restore: int = 2) -> list[RuleState]:
    state, states = RuleState(), []
    for observation in observations:
        state = advance(state, observation, avoid, restore).state
        states.append(state)
    return states


def test_table_covers_every_phase_and_observation() -> None:
    for phase in Phase:
        for observation in (HOT, CALM):
            for reached in (False, True):
                assert (phase, observation, reached) in TRANSITIONS


def test_hot_checks_must_be_consecutive_before_triggering() -> None:
    states = run([HOT, CALM, HOT, HOT])
    assert [s.phase for s in states] == [Phase.CALM, Phase.CALM, Phase.CALM, Phase.TRIGGERED]


def test_a_calm_check_while_triggered_does_not_restore_before_the_streak() -> None:
    step = advance(RuleState(Phase.TRIGGERED, 2, 0), CALM, 2, 2)
    assert step.state.phase is Phase.TRIGGERED
    assert not step.triggered_now
    assert not step.restored_now
    assert advance(step.state, HOT, 2, 2).triggered_now  # still triggered: no new streak


def test_counters_saturate_so_a_calm_node_reaches_a_fixed_point() -> None:
    states = run([HOT] * 5 + [CALM] * 10, avoid=3, restore=4)
    assert max(s.hot_streak for s in states) == 3
    assert states[-1] == states[-2] == RuleState(Phase.CALM, 0, 4)


def test_missing_usage_leaves_state_alone_but_keeps_a_triggered_rule_triggered() -> None:
    triggered = RuleState(Phase.TRIGGERED, 2, 1)
    step = advance(triggered, MISSING, 2, 2)
    assert step.state == triggered
    assert step.triggered_now  # so the missing-metric fallback can apply
    assert step.event is None
    calm = advance(RuleState(Phase.CALM, 0, 2), MISSING, 2, 2)
    assert not calm.restored_now


def test_events_are_one_shot() -> None:
    events: list[Event | None] = []
    state = RuleState()
    for observation in [HOT, HOT, HOT, CALM, CALM, CALM]:
        step = advance(state, observation, 2, 2)
        state, events = step.state, [*events, step.event]
    assert events == [None, Event.TRIGGERED, None, None, Event.RESTORED, None]


def test_lowered_threshold_clamps_persisted_counters() -> None:
    step = advance(RuleState(Phase.CALM, 7, 0), HOT, 2, 2)
    assert step.state == RuleState(Phase.TRIGGERED, 2, 0)


@pytest.mark.parametrize(
    ("previous", "cool_downs", "now", "expected"),
    [
        (SchedulingState(), (60,), 100, SchedulingState(True, 60, None)),
        (SchedulingState(True, 60, None), (), 100, SchedulingState(True, 60, 100)),
        (SchedulingState(True, 60, 100), (), 159, SchedulingState(True, 60, 100)),
        (SchedulingState(True, 60, 100), (), 160, SchedulingState()),
        (SchedulingState(True, 60, 100), (30,), 120, SchedulingState(True, 60, None)),
        (SchedulingState(), (), 100, SchedulingState()),
    ],
    ids=["disable", "restored-start-cooldown", "cooling", "cleared", "retrigger", "idle"],
)
def test_taint_is_cleared_after_restore_plus_cool_down(
    previous: SchedulingState, cool_downs: tuple[int, ...], now: int, expected: SchedulingState
) -> None:
    assert scheduling_state(previous, cool_downs, now) == expected


def test_restored_is_reported_only_for_a_rule_that_triggered() -> None:
    """Found: a throttle rule that never triggered reported ``restored: true`` on every calm
    check (the planning level was reported). Restored now means: triggered, then restored, and
    kept while the node still has throttled pods to give CPU back to."""
    never = RuleState()
    for _ in range(3):
        step = advance(never, CALM, 1, 1, giving_back=True)
        never = step.state
        assert step.restored_now  # the level that drives throttle-up...
        assert not never.restored  # ...is not "restored"
    triggered = advance(RuleState(), HOT, 1, 1).state
    restoring = advance(triggered, CALM, 1, 1, giving_back=True).state
    assert restoring.restored
    assert advance(restoring, CALM, 1, 1, giving_back=True).state.restored  # still giving back
    assert advance(restoring, MISSING, 1, 1, giving_back=True).state.restored  # a late sample
    assert not advance(restoring, CALM, 1, 1, giving_back=False).state.restored  # all back
    assert not advance(restoring, HOT, 1, 1, giving_back=True).state.restored  # triggered again
    # An evict-only rule (nothing to give back) is restored on the check it restores, only.
    evicting = advance(triggered, CALM, 1, 1).state
    assert evicting.restored
    assert not advance(evicting, CALM, 1, 1).state.restored
