"""Trigger/restore hysteresis per (policy, rule, node) and the scheduling taint's state.

Everything that affects triggered/restored state lives in this module, as data: the
``TRANSITIONS`` table maps (phase, observation, streak reached) to the next phase, what
happens to each counter, and the event emitted. The state is an explicit value that the
caller persists (policy status) and hands back next check, so restarts lose nothing.

Theory of operation (crane.md §3, fixed):

1. An observation is HOT when the metric is strictly above the rule value, CALM when at or
   below, MISSING when there is no usage (or no capacity for a utilization): counters are then
   left alone.
2. A CALM rule triggers after ``avoidanceThreshold`` consecutive HOT checks; a TRIGGERED rule
   restores after ``restoreThreshold`` consecutive CALM ones. Counters saturate at their
   threshold, so a calm node reaches a fixed point and stops changing state.
3. Levels used for planning: ``triggered_now`` (TRIGGERED and not CALM this check: drives evict
   and throttle-down waterlines) and ``restored_now`` (CALM phase with a full calm streak:
   drives throttle-up, on every such check until the throttled pods are back to their
   limits, unlike Crane E2's one-shot restore, §12.9). ``restored_now`` is a level, true for a
   rule that never triggered too; it is not what the status reports as restored.
4. Events are one-shot: TRIGGERED on entering the phase, RESTORED on leaving it.
5. ``RuleState.restored`` is what the status reports: the rule *was* triggered and has
   restored, on the check it restores and then, while the node still has pods its throttling
   lowered (``giving_back``), until they all have their CPU back or the rule triggers again.
   It is persisted with the counters, so a rule that never triggered is never "restored".

The disable-scheduling taint (``scheduling_state``) is present while any rule of an action
with ``disableScheduling`` is TRIGGERED, and is cleared once all such rules restored and the
largest cool-down of those actions has elapsed since the restore: always (§12.11).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sharekeeper.engine.qos.inputs import QosNode
from sharekeeper.engine.qos.metrics import MetricSpec, absolute, node_usage


class Phase(Enum):
    CALM = "Calm"
    TRIGGERED = "Triggered"


class Observation(Enum):
    HOT = "Hot"
    CALM = "Calm"
    MISSING = "Missing"


class Event(Enum):
    TRIGGERED = "Triggered"
    RESTORED = "Restored"


class Count(Enum):
    KEEP = "keep"
    RESET = "reset"
    INCREMENT = "increment"


@dataclass(frozen=True, slots=True)
class Transition:
    phase: Phase
    hot: Count
    calm: Count
    event: Event | None = None


# (phase, observation, the counter this observation advances reaches its threshold) -> next
TRANSITIONS: dict[tuple[Phase, Observation, bool], Transition] = {
    (Phase.CALM, Observation.HOT, False): Transition(Phase.CALM, Count.INCREMENT, Count.RESET),
    (Phase.CALM, Observation.HOT, True): Transition(
        Phase.TRIGGERED, Count.INCREMENT, Count.RESET, Event.TRIGGERED
    ),
    (Phase.CALM, Observation.CALM, False): Transition(Phase.CALM, Count.RESET, Count.INCREMENT),
    (Phase.CALM, Observation.CALM, True): Transition(Phase.CALM, Count.RESET, Count.INCREMENT),
    (Phase.TRIGGERED, Observation.HOT, False): Transition(
        Phase.TRIGGERED, Count.INCREMENT, Count.RESET
    ),
    (Phase.TRIGGERED, Observation.HOT, True): Transition(
        Phase.TRIGGERED, Count.INCREMENT, Count.RESET
    ),
    (Phase.TRIGGERED, Observation.CALM, False): Transition(
        Phase.TRIGGERED, Count.KEEP, Count.INCREMENT
    ),
    (Phase.TRIGGERED, Observation.CALM, True): Transition(
        Phase.CALM, Count.RESET, Count.INCREMENT, Event.RESTORED
    ),
}
_MISSING = Transition(Phase.CALM, Count.KEEP, Count.KEEP)  # phase is kept, see advance()


@dataclass(frozen=True, slots=True)
class RuleState:
    """Persisted per (policy, rule, node). Counters never exceed their thresholds."""

    phase: Phase = Phase.CALM
    hot_streak: int = 0
    calm_streak: int = 0
    restored: bool = False
    """The rule triggered and has restored since, and (after the check it restored) the node
    still has throttled pods to give CPU back to."""


@dataclass(frozen=True, slots=True)
class RuleStep:
    state: RuleState
    observation: Observation
    event: Event | None
    triggered_now: bool
    restored_now: bool


def observe(spec: MetricSpec | None, value: int, node: QosNode) -> Observation:
    """HOT iff usage is strictly above the rule value (equality is calm, crane case A5)."""
    if spec is None:
        return Observation.MISSING
    usage = node_usage(spec.resource, node)
    waterline = absolute(spec, value, node)
    if usage is None or waterline is None:
        return Observation.MISSING
    return Observation.HOT if usage > waterline else Observation.CALM


def _count(how: Count, value: int, limit: int) -> int:
    if how is Count.RESET:
        return 0
    if how is Count.INCREMENT:
        return min(value + 1, limit)
    return value


def advance(
    state: RuleState,
    observation: Observation,
    avoidance_threshold: int,
    restore_threshold: int,
    *,
    giving_back: bool = False,
) -> RuleStep:
    """One check of one rule: the next state, the one-shot event and the planning levels.

    ``giving_back``: the rule's action throttles and the node has throttled pods waiting for
    their CPU back; it keeps a restored rule reported as restored."""
    avoid, restore = max(1, avoidance_threshold), max(1, restore_threshold)
    # Clamp persisted counters in case a threshold was lowered since they were written.
    hot, calm = min(state.hot_streak, avoid), min(state.calm_streak, restore)
    if observation is Observation.MISSING:
        step = _MISSING
        phase = state.phase
    else:
        reached = hot + 1 >= avoid if observation is Observation.HOT else calm + 1 >= restore
        step = TRANSITIONS[(state.phase, observation, reached)]
        phase = step.phase
    restored = phase is Phase.CALM and (
        step.event is Event.RESTORED or (state.restored and giving_back)
    )
    new = RuleState(phase, _count(step.hot, hot, avoid), _count(step.calm, calm, restore), restored)
    return RuleStep(
        state=new,
        observation=observation,
        event=step.event,
        triggered_now=phase is Phase.TRIGGERED and observation is not Observation.CALM,
        restored_now=(
            phase is Phase.CALM and observation is Observation.CALM and new.calm_streak >= restore
        ),
    )


@dataclass(frozen=True, slots=True)
class SchedulingState:
    """Persisted per node: whether the disable-scheduling taint should be on the node.

    ``cool_down_seconds`` is the largest cool-down among the actions that disabled scheduling
    in this episode (kept so the taint is cleared even if the policy has since been deleted);
    ``calm_since`` is when the last of their rules restored.
    """

    disabled: bool = False
    cool_down_seconds: int = 0
    calm_since: int | None = None


def scheduling_state(
    previous: SchedulingState, disabling_cool_downs: tuple[int, ...], now: int
) -> SchedulingState:
    """The next taint state; ``disabling_cool_downs`` lists one cool-down per non-Preview rule
    of a ``disableScheduling`` action that is in the TRIGGERED phase now."""
    if disabling_cool_downs:
        cool_down = max((*disabling_cool_downs, previous.cool_down_seconds))
        return SchedulingState(True, cool_down, None)
    if not previous.disabled:
        return SchedulingState()
    calm_since = now if previous.calm_since is None else previous.calm_since
    if now >= calm_since + previous.cool_down_seconds:
        return SchedulingState()
    return SchedulingState(True, previous.cool_down_seconds, calm_since)
