"""Every case of ``crane_cases.json`` (sorting, waterline heap, counting, gaps, executor).

Where Crane's behaviour is a defect we fix (``reference/crane.md`` §12), the test asserts our
semantics and names the bug; where a case needs Crane's own comparator chain, the chain is
composed from our comparators, which shows they are the same building blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

import reference
from sharekeeper.engine.qos import (
    ActionClass,
    CpuThrottle,
    NodeCheckResult,
    NodeQosState,
    Objective,
    Outcome,
    QosNode,
    QosPod,
    accept_all,
    check_node,
    node_actions,
)
from sharekeeper.engine.qos.hysteresis import Event, Observation, RuleState, advance
from sharekeeper.engine.qos.sorting import (
    CPU_SORTER,
    CPU_USAGE,
    EXT_CPU_RATIO,
    GENERAL_SORTER,
    PRIORITY,
    QOS_CLASS,
    RUNNING_TIME,
    USES_EXT_CPU,
    Sorter,
)

from .builders import action, node, pod, policy, rule

CASES = reference.crane_cases()
SORTING = {c["id"]: c for c in CASES["sorting_cases"]}
COUNTING = {c["id"]: c for c in CASES["analyzer_counting_cases"]["cases"]}
GAPS = {c["id"]: c for c in CASES["gap_cases"]["cases"]}
EXECUTOR = {c["id"]: c for c in CASES["executor_cases"]["cases"]}

# Crane E2 chains, built from our comparators (crane.md §10).
CRANE_E2_CPU = Sorter(
    "crane-e2-cpu", (USES_EXT_CPU, PRIORITY, QOS_CLASS, CPU_USAGE, EXT_CPU_RATIO, RUNNING_TIME)
)
CRANE_E2_GENERAL = Sorter("crane-e2-general", (PRIORITY, QOS_CLASS, RUNNING_TIME))


def crane_pod(raw: dict[str, Any]) -> QosPod:
    return pod(
        raw["name"],
        qos=raw["qosClass"],
        priority=raw.get("priority", 0),
        cpu=round(raw.get("podCPUUsageCores", 0) * 1000),
        memory=round(raw.get("podMemUsageBytes", 0)),
        ext_cpu=raw.get("elasticCPULimit", 0),
        start=raw.get("startTimeUnix"),
    )


def input_pods(case: dict[str, Any]) -> list[QosPod]:
    raw = case["input_pods"]
    if raw == "same as S1":
        raw = SORTING["S1"]["input_pods"]
    return [crane_pod(p) for p in raw]


def modulo_ties(names: Sequence[str], tie_groups: Sequence[Sequence[str]]) -> list[object]:
    """Names with each tie group collapsed to one token: Crane leaves ties unordered."""
    token = {n: frozenset(g) for g in tie_groups for n in g}
    return [token.get(n, n) for n in names]


def names(pods: Sequence[QosPod]) -> list[str]:
    return [p.key.name for p in pods]


# --- sorting ---------------------------------------------------------------------------------

CRANE_CHAINS: dict[str, Sorter] = {
    "S1": CRANE_E2_CPU,
    "S3": CRANE_E2_GENERAL,
    "S7": CRANE_E2_GENERAL,
}
# Our sorters on the same pods. Differences from Crane's expected order are deliberate:
# classAndPriority puts QoS class before priority (DESIGN.md; Crane E2 swapped them), and
# CPU usage sorts descending (Crane E1 sorted ascending, crane.md §12.10).
OURS: dict[str, tuple[Sorter, list[str]]] = {
    "S1": (
        CPU_SORTER,
        [
            "elastic-cpu-2",
            "elastic-cpu-4",
            "cpu-2",
            "burstable-2",
            "priority-1",
            "prioirty-2-2",
            "prioirty-2",
            "cpu-1",
            "guarantee-1",
            "time-2",
            "time-1",
        ],
    ),
    "S3": (
        GENERAL_SORTER,
        [
            "elastic-cpu-2",
            "elastic-cpu-4",
            "burstable-2",
            "cpu-2",
            "priority-1",
            "prioirty-2",
            "prioirty-2-2",
            "cpu-1",
            "guarantee-1",
            "time-2",
            "time-1",
        ],
    ),
    "S5": (
        CPU_SORTER,
        ["be-big", "be-small", "bu-low-prio-hot", "bu-low-prio-cool", "bu-prio0", "g-prio0"],
    ),
    "S7": (GENERAL_SORTER, ["no-start", "started-2000", "started-1000"]),
}


@pytest.mark.parametrize("case_id", sorted(CRANE_CHAINS))
def test_sorting_case_with_crane_chain(case_id: str) -> None:
    case, chain = SORTING[case_id], CRANE_CHAINS[case_id]
    ordered = names(chain.sort(input_pods(case)))
    assert modulo_ties(ordered, case["tie_groups"]) == modulo_ties(
        case["expected_order"], case["tie_groups"]
    )


@pytest.mark.parametrize("case_id", sorted(SORTING))
def test_sorting_case_with_our_sorter(case_id: str) -> None:
    sorter, expected = OURS[case_id]
    pods = input_pods(SORTING[case_id])
    assert names(sorter.sort(pods)) == expected
    # Deterministic: ties broken by namespace/name, not input order.
    assert names(sorter.sort(reversed(pods))) == expected


def test_sorting_case_s5_cpu_usage_descending_fixes_e1() -> None:
    """Bug crane.md §12.10: Crane E1 acted on the *smallest* CPU consumer of each class and
    priority first. We act on the largest first: each such group of S5 comes out reversed."""
    case = SORTING["S5"]
    groups: dict[tuple[str, int], list[str]] = {}
    for raw in sorted(case["input_pods"], key=lambda p: case["expected_order"].index(p["name"])):
        groups.setdefault((raw["qosClass"], raw["priority"]), []).append(raw["name"])
    reversed_groups = [name for group in groups.values() for name in reversed(group)]
    assert names(CPU_SORTER.sort(input_pods(case))) == reversed_groups


# --- waterline heap --------------------------------------------------------------------------


def test_heap_case_h1_waterline_is_the_smallest_triggered_value() -> None:
    rules = []
    for i in range(20, 0, -1):
        rules.append(rule(f"r{i}", "cpu_total_usage", i))
        result = check_node([policy(*rules)], node(cpu=10_000), NodeQosState(), now=0)
        (line,) = result.waterlines
        assert (line.action_class, line.value) == (ActionClass.EVICT, i)
    assert len(line.contributions) == 20


# --- counting --------------------------------------------------------------------------------


def run_counting(case: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Per tick: (E2 view: T when triggered now, R on the one-shot restore event,
    E1 view: T when triggered now, R while restored)."""
    state, e2, e1 = RuleState(), [], []
    for hot in case["above_sequence"]:
        step = advance(
            state,
            Observation.HOT if hot else Observation.CALM,
            case["avoidanceThreshold"],
            case["restoreThreshold"],
        )
        state = step.state
        trig = "T" if step.triggered_now else None
        e2.append(trig or ("R" if step.event is Event.RESTORED else "-"))
        e1.append(trig or ("R" if step.restored_now else "-"))
    return e2, e1


@pytest.mark.parametrize("case_id", ["A1", "A3"])
def test_counting_case(case_id: str) -> None:
    case = COUNTING[case_id]
    e2, e1 = run_counting(case)
    # The one-shot restore event follows Crane v0.9+ (the #637 fix, crane.md §3).
    assert e2 == case["expected"]["E2_v0.9+_HEAD"]
    # The restored *level* drives throttle-up on every calm check, as Crane E1 did; E2's
    # one-shot restore left pods throttled forever (crane.md §12.9).
    assert e1 == case["expected"]["E1_v0.6-0.7"]


def test_counting_case_a5_equality_is_calm() -> None:
    case = COUNTING["A5"]
    result = check_node(
        [policy(rule("r", "cpu_total_usage", case["threshold"]))],
        node(cpu=case["series_value"]),
        NodeQosState(),
        now=0,
    )
    assert result.rules[0].observation is Observation.CALM
    assert case["expected_above"] is False


# --- gaps ------------------------------------------------------------------------------------


def only_gap(result: Any, action_class: ActionClass) -> int:
    (gap,) = [g for g in result.gaps if g.action_class is action_class]
    return int(gap.amount)


def test_gap_case_g1_evict_uses_the_minimum_triggered_waterline() -> None:
    case = GAPS["G1"]
    rules = [rule(f"r{w}", case["metric"], w) for w in case["triggered_waterlines"]]
    result = check_node([policy(*rules)], node(cpu=case["used"]), NodeQosState(), now=0)
    assert only_gap(result, ActionClass.EVICT) == pytest.approx(case["expected_gap"])


def test_gap_case_g3_throttle_up_is_the_headroom() -> None:
    case = GAPS["G3"]
    rules = [rule(f"r{w}", case["metric"], w, "throttle") for w in case["restored_waterlines"]]
    # A throttle-up waterline is in force only while some pod waits for its CPU back.
    throttled = pod("p", cpu=0, throttled=(1_000, 500))
    result = check_node([policy(*rules)], node(throttled, cpu=case["used"]), NodeQosState(), 0)
    assert only_gap(result, ActionClass.THROTTLE_UP) == pytest.approx(case["expected_gap"])


def test_gap_case_g5_memory_in_bytes() -> None:
    case = GAPS["G5"]
    r = rule("m", case["metric"], int(case["waterline_bytes"]))
    result = check_node([policy(r)], node(memory=int(case["used_bytes"])), NodeQosState(), 0)
    assert only_gap(result, ActionClass.EVICT) == case["expected_gap_bytes"]


def test_gap_case_g7_missing_unused_metric_does_not_evict_everything() -> None:
    """Bug crane.md §12.6: Crane iterates the registry, so a metric no rule uses, missing from
    the state, forced the evict-all fallback. We only look at metrics that have a waterline."""
    pods = [pod(f"p{i}", cpu=1000) for i in range(5)]
    n = node(*pods, cpu=7_000, memory=None)  # memory_total_utilization has no usage
    result = check_node([policy(rule("cpu", "cpu_total_usage", 6000))], n, NodeQosState(), 0)
    report = accept_all(node_actions(result, n))
    assert len(report.accepted) == 2  # gap 1100m: two 1000m pods, not all five


def test_gap_case_g7_missing_used_metric_waits_unless_opted_in() -> None:
    n = node(*[pod(f"p{i}", memory=10**9) for i in range(3)], memory=None)
    r = rule("mem", "memory_total_utilization", 50_000)
    state = NodeQosState()
    # Hot once so the rule is TRIGGERED, then the usage disappears.
    hot = check_node([policy(r)], node(memory=60 * 2**30), state, 0)
    for opt_in, expected in ((False, 0), (True, 3)):
        result = check_node([policy(r, evict_on_missing=opt_in)], n, hot.state, 10)
        report = accept_all(node_actions(result, n))
        assert len(report.accepted) == expected
        assert bool(report.waiting) is not opt_in


# --- executor --------------------------------------------------------------------------------


def evict_case(
    case: dict[str, Any], metric_rule: Callable[[], Objective], n_kwargs: dict[str, Any]
) -> tuple[NodeCheckResult, QosNode]:
    pods = [crane_pod(p) for p in case["pods"]]
    n = node(*pods, **n_kwargs)
    result = check_node([policy(metric_rule())], n, NodeQosState(), now=0)
    (plan,) = result.plans
    assert names(plan.candidates) == case["sorted_order"]
    return result, n


def test_executor_case_x1_cpu_eviction_stops_when_the_gap_closes() -> None:
    case = EXECUTOR["X1"]
    result, n = evict_case(
        case,
        lambda: rule("r", "cpu_total_usage", case["evict_waterlines"][0]),
        {"cpu": case["node_used"]},
    )
    assert result.plans[0].gap == case["gap_start"]
    report = accept_all(node_actions(result, n))
    assert names_of(report.accepted) == case["expected_evicted"]
    assert [a.released for a in report.accepted] == [s["released"] for s in case["steps"]]
    assert report.remaining[0][2] == case["steps"][-1]["gap_after"]


def names_of(actions: Sequence[Any]) -> list[str]:
    return [a.pod.name for a in actions]


def test_executor_case_x3_memory_eviction() -> None:
    case = EXECUTOR["X3"]
    result, n = evict_case(
        case,
        lambda: rule("r", "memory_total_usage", int(case["evict_waterlines"][0])),
        {"memory": int(case["node_used_bytes"])},
    )
    assert result.plans[0].gap == case["gap_start"]
    report = accept_all(node_actions(result, n))
    assert names_of(report.accepted) == case["expected_evicted"]
    assert report.remaining[0][2] == case["steps"][-1]["gap_after"]


def test_executor_case_x5_memory_utilization_converted_with_capacity() -> None:
    case = EXECUTOR["X5"]
    capacity = int(case["memory_total_bytes"])
    result, n = evict_case(
        case,
        lambda: rule("r", "memory_total_utilization", case["evict_waterlines"][0] * 1000),
        {"memory": capacity * case["node_used_percent"] // 100, "memory_capacity": capacity},
    )
    assert result.plans[0].gap == case["gap_start_bytes"]
    report = accept_all(node_actions(result, n))
    assert names_of(report.accepted) == case["expected_evicted"]
    assert [a.released for a in report.accepted] == [s["released"] for s in case["steps"]]
    assert report.remaining[0][2] == case["steps"][-1]["gap_after"]


def test_executor_case_x7_memory_rules_are_precise_not_evict_all() -> None:
    """Crane E1 did not register memory (crane.md §12.10): a memory rule alone evicted nothing,
    with a CPU rule it evicted every pod. Memory is a registered metric here: both evict
    precisely."""
    assert EXECUTOR["X7"]["era"] == "E1"
    pods = [pod(f"p{i}", cpu=500, memory=2 * 10**9) for i in range(6)]
    n = node(*pods, cpu=4_000, memory=7 * 10**9)
    mem = rule("mem", "memory_total_usage", 6 * 10**9)
    cpu = rule("cpu", "cpu_total_usage", 3_500)
    alone = accept_all(node_actions(check_node([policy(mem)], n, NodeQosState(), 0), n))
    assert len(alone.accepted) == 1  # gap 1.1e9 bytes: one 2e9 pod
    both = accept_all(node_actions(check_node([policy(mem, cpu)], n, NodeQosState(), 0), n))
    # cpu gap 550m needs two 500m pods; the first also closes the memory gap.
    assert len(both.accepted) == 2


def test_executor_case_x9_throttle_down_actually_runs() -> None:
    """Bug crane.md §12.1 (PR #659): Crane E2 never ran the precise throttle-down loop. X9
    refers to X8's inputs, which the case file does not carry; these are our own."""
    assert "no container is throttled" in EXECUTOR["X9"]["expected"]
    pods = [
        pod("be", cpu=1_500, request=0, limit=None),
        pod("bu", qos="Burstable", cpu=2_000, request=500, limit=2_000),
    ]
    n = node(*pods, cpu=7_000)
    result = check_node(
        [policy(rule("t", "cpu_total_usage", 6_000, "throttle"))], n, NodeQosState(), 0
    )
    report = accept_all(node_actions(result, n))
    # gap 1100m; step 20 %: be 1500m -> 1200m frees 300m, bu 2000m -> 1600m frees 400m;
    # both throttled once this check, the rest of the gap waits for the next one.
    assert [(a.kind, a.pod.name, a.cpu_limit_milli, a.released) for a in report.accepted] == [
        ("throttle", "be", 1_200, 300),
        ("throttle", "bu", 1_600, 400),
    ]
    assert report.remaining == ((ActionClass.THROTTLE_DOWN, "cpu_total_usage", 400),)


def test_executor_case_x11_restore_steps_up_lowest_ranked_first() -> None:
    case = EXECUTOR["X11"]
    p1, p3, p2 = case["pods_in_sorted_order"]
    (c1,), (c3,), (c2,) = (p["containers"] for p in (p1, p3, p2))
    pods = [
        # BestEffort pod originally without a limit, throttled to 1.8 cores.
        pod("p1", cpu=round(c1["usageCores"] * 1000), throttled=(None, c1["cfsQuota"] // 100)),
        # Never throttled (quota -1): nothing to restore.
        pod("p3", cpu=round(c3["usageCores"] * 1000)),
        pod(
            "p2",
            qos=p2["qosClass"],
            cpu=round(c2["usageCores"] * 1000),
            limit=c2["cfsQuota"] // 100,
            throttled=(round(c2["limitCores"] * 1000), c2["cfsQuota"] // 100),
        ),
    ]
    n = node(*pods, cpu=case["node_used"], cpu_capacity=8_000)
    throttle = action("throttle", throttle=CpuThrottle(0, case["action"]["stepCPURatio"]))
    restoring = policy(
        rule("t", "cpu_total_usage", case["throttle_up_waterlines"][0], "throttle"),
        actions=(throttle,),
    )
    result = check_node([restoring], n, NodeQosState(), 0)
    assert only_gap(result, ActionClass.THROTTLE_UP) == case["gap_start"]
    report = accept_all(node_actions(result, n))
    steps = [s for s in case["steps"] if "skipped" not in s]
    assert [(a.kind, a.pod.name) for a in report.accepted] == [("restore", s["pod"]) for s in steps]
    assert [a.cpu_limit_milli for a in report.accepted] == [
        round(s["new_quota_cores"] * 1000) for s in steps
    ]
    assert [a.released for a in report.accepted] == [s["released"] for s in steps]
    assert report.remaining[0][2] == case["steps"][-1]["gap_after"]


# --- the seed's example ----------------------------------------------------------------------


def test_seed_example_ten_candidates_first_eviction_suffices() -> None:
    """The proposal's motivating case: ten low-priority pods; evicting the first (by the CPU
    sorter) already brings usage under the waterline, so exactly one pod is evicted."""
    pods = [pod(f"pod-{i}", cpu=300 + 100 * i) for i in range(10)]  # pod-9 uses 1200m
    n = node(*pods, cpu=7_000)
    result = check_node([policy(rule("cpu", "cpu_total_usage", 6_000))], n, NodeQosState(), 0)
    flow = node_actions(result, n)
    first = next(flow)
    assert (first.kind, first.pod.name, first.released) == ("evict", "pod-9", 1_200)
    with pytest.raises(StopIteration) as stop:
        flow.send(Outcome.ACCEPTED)
    assert [a.pod.name for a in stop.value.value.accepted] == ["pod-9"]
