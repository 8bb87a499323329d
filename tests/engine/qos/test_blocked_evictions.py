"""An eviction a PodDisruptionBudget refuses ends the node's evictions for the check.

Found (issue "Tenant-proof", attack 5): a tenant with ``edit`` in its namespace put a budget
with ``maxUnavailable: 0`` over its own pod; the Eviction API refused it, and the planner moved
on to the next pod in order, evicting other teams' pods (even Guaranteed ones, ranked above the
tenant's) to close the gap, while the tenant kept its CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    ActionClass,
    LabelSelector,
    NodeQosState,
    Outcome,
    PlanReport,
    QosAction,
    QosNode,
    QosPod,
    check_node,
    node_actions,
)
from sharekeeper.engine.qos.planning import Flow, Stop

from .builders import EVICT, THROTTLE, candidates_with, node, pod, policy, rule

Answer = Callable[[QosAction], Outcome]


def drive(flow: Flow, answer: Answer) -> tuple[list[QosAction], PlanReport]:
    seen = []
    try:
        action = next(flow)
        while True:
            seen.append(action)
            action = flow.send(answer(action))
    except StopIteration as stop:
        return seen, stop.value


def budgets(*names: str, outcome: Outcome = Outcome.BLOCKED) -> Answer:
    """An API server where budgets protect the pods ``names`` from eviction."""
    return lambda a: outcome if a.kind == "evict" and a.pod.name in names else Outcome.ACCEPTED


def tenant(name: str = "tenant", cpu: int = 1_500, **kw: Any) -> QosPod:
    """The tenant's Burstable pod, with a CPU limit to throttle."""
    return pod(name, namespace="tenant", qos="Burstable", cpu=cpu, request=100, limit=2_000, **kw)


def guaranteed(name: str, cpu: int) -> QosPod:
    """Another team's Guaranteed pod: the sorter ranks it after every Burstable one."""
    return pod(name, namespace="other", qos="Guaranteed", cpu=cpu, request=cpu, limit=cpu)


def evict_only_check(*pods: QosPod, usage: int = 8_000) -> tuple[QosNode, Flow]:
    n = node(*pods, cpu=usage)
    result = check_node([policy(rule("evict", "cpu_total_usage", 6_000))], n, NodeQosState(), 0)
    return n, node_actions(result, n)


def evictions(seen: list[QosAction]) -> list[str]:
    return [a.pod.name for a in seen if a.kind == "evict"]


def test_a_blocked_pod_ends_the_evictions_nothing_ranked_after_it_goes() -> None:
    # Gap (8 - 6) x 1.1 = 2.2 cores. The tenant's pod is first; the Guaranteed pod (3 cores)
    # would close the gap alone, and was evicted in its place before.
    _, flow = evict_only_check(tenant(), guaranteed("db", 3_000), pod("be", cpu=0))
    seen, report = drive(flow, budgets("tenant"))
    assert evictions(seen) == ["tenant"]
    assert report.accepted == ()
    assert [a.pod.name for a in report.blocked] == ["tenant"]
    assert [a.pod.name for a in report.refused] == ["tenant"]  # refused includes blocked
    assert report.stopped == (
        Stop(ActionClass.EVICT, "cpu_total_usage", PodKey("tenant", "tenant")),
    )
    assert report.remaining == ((ActionClass.EVICT, "cpu_total_usage", 2_200),)


def test_pods_ranked_before_the_blocked_one_are_still_evicted() -> None:
    # Gap 3.3 cores: the BestEffort pod (3 cores) goes first, then the tenant's is blocked and
    # the Guaranteed pod after it stays.
    _, flow = evict_only_check(
        pod("batch", cpu=3_000), tenant(), guaranteed("db", 3_000), usage=9_000
    )
    seen, report = drive(flow, budgets("tenant"))
    assert evictions(seen) == ["batch", "tenant"]
    assert [a.pod.name for a in report.accepted] == ["batch"]
    assert report.remaining == ((ActionClass.EVICT, "cpu_total_usage", 300),)


def test_any_refusal_ends_the_evictions_but_only_a_budget_is_blocked() -> None:
    _, flow = evict_only_check(tenant(), guaranteed("db", 3_000))
    seen, report = drive(flow, budgets("tenant", outcome=Outcome.REFUSED))
    assert evictions(seen) == ["tenant"]
    assert report.blocked == ()
    assert [a.pod.name for a in report.refused] == ["tenant"]
    assert [s.pod.name for s in report.stopped] == ["tenant"]


def test_a_blocked_pod_is_throttled_instead_where_a_throttle_rule_is_in_force() -> None:
    both = policy(
        rule("evict", "cpu_total_usage", 6_000),
        rule("throttle", "cpu_total_usage", 6_000, "throttle"),
    )
    n = node(tenant(), guaranteed("db", 3_000), cpu=8_000)
    seen, report = drive(
        node_actions(check_node([both], n, NodeQosState(), 0), n), budgets("tenant")
    )
    assert [(a.kind, a.pod.name) for a in seen[:2]] == [("evict", "tenant"), ("throttle", "tenant")]
    # One step of 20 % from what it uses: 1.5 cores -> 1.2.
    assert seen[1].cpu_limit_milli == 1_200
    assert seen[1].released == 300
    assert evictions(seen) == ["tenant"], "nothing is evicted in the tenant's place"
    assert ("throttle", "tenant") in [(a.kind, a.pod.name) for a in report.accepted]
    # What the throttle freed counts against the gaps; the throttle plan goes on as usual.
    remaining = {(c, m): v for c, m, v in report.remaining}
    assert remaining[(ActionClass.EVICT, "cpu_total_usage")] == 2_200 - 300


def test_without_a_throttle_rule_a_blocked_pod_is_only_reported() -> None:
    _, flow = evict_only_check(tenant(), guaranteed("db", 3_000))
    seen, _ = drive(flow, budgets("tenant"))
    assert [(a.kind, a.pod.name) for a in seen] == [("evict", "tenant")]


def test_a_pod_the_throttle_rule_does_not_select_is_not_throttled_instead() -> None:
    evicting = policy(rule("evict", "cpu_total_usage", 6_000), name="evict")
    throttling = policy(
        rule("throttle", "cpu_total_usage", 6_000, "throttle"),
        name="throttle",
        candidates=candidates_with(pod_selector=LabelSelector({"app": "batch"})),
    )
    batch = pod("batch", qos="Guaranteed", cpu=2_000, request=500, limit=2_000,
                labels={"app": "batch"})  # fmt: skip
    n = node(tenant(), batch, cpu=8_000)
    result = check_node([evicting, throttling], n, NodeQosState(), 0)
    seen, _ = drive(node_actions(result, n), budgets("tenant"))
    assert [(a.kind, a.pod.name) for a in seen] == [("evict", "tenant"), ("throttle", "batch")]


def test_a_blocked_memory_eviction_throttles_no_cpu_instead() -> None:
    """Memory cannot be throttled: a pod blocked for a memory waterline is only reported
    (the CPU throttle rule may still reach it in its own order)."""
    gib = 2**30
    both = policy(
        rule("mem", "memory_total_usage", 4 * gib),
        rule("throttle", "cpu_total_usage", 6_000, "throttle"),
    )
    hog = tenant(memory=3 * gib)
    n = node(hog, guaranteed("db", 3_000), cpu=8_000, memory=6 * gib)
    seen, report = drive(
        node_actions(check_node([both], n, NodeQosState(), 0), n), budgets("tenant")
    )
    assert [(a.kind, a.pod.name, a.metric) for a in seen[:2]] == [
        ("evict", "tenant", "memory_total_usage"),
        ("throttle", "tenant", "cpu_total_usage"),  # the throttle plan's own, in its order
    ]
    assert evictions(seen) == ["tenant"]
    assert [s.metric for s in report.stopped] == ["memory_total_usage"]


def test_a_refusal_ends_every_evict_waterline_of_the_check() -> None:
    """Had the tenant's pod gone, its memory would have counted against the memory gap too:
    going on with the memory waterline would evict others for a release the tenant withheld."""
    gib = 2**30
    two = policy(rule("cpu", "cpu_total_usage", 6_000), rule("mem", "memory_total_usage", 4 * gib))
    big = guaranteed("db", 3_000)
    n = node(tenant(memory=2 * gib), pod("cache", cpu=0, memory=3 * gib), big,
             cpu=8_000, memory=6 * gib)  # fmt: skip
    seen, report = drive(
        node_actions(check_node([two], n, NodeQosState(), 0), n), budgets("tenant")
    )
    assert evictions(seen) == ["tenant"]
    assert [(s.metric, s.pod.name) for s in report.stopped] == [
        ("cpu_total_usage", "tenant"),
        ("memory_total_usage", "tenant"),
    ]


def test_evicting_every_candidate_goes_on_past_a_refusal() -> None:
    """The evictOnMissingMetrics fallback evicts every candidate anyway: a refusal moves no
    eviction to anyone, so the others still go, and the refused pod is not asked twice."""
    opted = policy(rule("cpu", "cpu_total_usage", 6_000), evict_on_missing=True)
    # Hot once so the rule is triggered, then the node's usage goes missing.
    hot = check_node([opted], node(cpu=8_000), NodeQosState(), 0)
    n = node(tenant(), guaranteed("db", 3_000), cpu=None)
    seen, report = drive(node_actions(check_node([opted], n, hot.state, 10), n), budgets("tenant"))
    assert evictions(seen) == ["tenant", "db"]
    assert [a.pod.name for a in report.accepted] == ["db"]
    assert report.stopped == ()


def test_the_next_check_stops_again_while_the_pod_stands_in_front() -> None:
    both = policy(
        rule("evict", "cpu_total_usage", 6_000),
        rule("throttle", "cpu_total_usage", 6_000, "throttle"),
        actions=(EVICT, THROTTLE),
    )
    pods = (tenant(), guaranteed("db", 3_000))
    n = node(*pods, cpu=8_000)
    first = check_node([both], n, NodeQosState(), 0)
    seen, _ = drive(node_actions(first, n), budgets("tenant"))
    step = next(a for a in seen if a.kind == "throttle" and a.pod.name == "tenant")
    assert step.throttle is not None
    # The kubelet enforces the new limit: the tenant uses less, the node is still hot.
    again = (tenant(cpu=1_200, throttled=(step.throttle.throttle.original_limit_milli,
                                          step.throttle.throttle.current_limit_milli)),
             pods[1])  # fmt: skip
    n2 = node(*again, cpu=7_700)
    second = check_node([both], n2, first.state, 10)
    seen, _ = drive(node_actions(second, n2), budgets("tenant"))
    assert evictions(seen) == ["tenant"]
    assert [(a.kind, a.pod.name) for a in seen[:2]] == [("evict", "tenant"), ("throttle", "tenant")]
    assert (seen[1].cpu_limit_milli or 1_200) < 1_200


# --- the invariant: a refusal never sends an eviction to anyone -------------------------------

GIB = 2**30
pods_strategy = st.lists(
    st.builds(
        lambda i, cpu, mem, qos, prio: pod(
            f"p{i}",
            cpu=cpu,
            memory=mem,
            qos=qos,
            priority=prio,
            request=50,
            limit=None if qos == "BestEffort" else 4_000,
        ),
        st.integers(0, 10_000),
        st.one_of(st.none(), st.integers(0, 4_000)),
        st.one_of(st.none(), st.integers(0, 4 * GIB)),
        st.sampled_from(["BestEffort", "Burstable", "Guaranteed"]),
        st.integers(-3, 3),
    ),
    max_size=10,
    unique_by=lambda p: p.key,
)
rules_strategy = st.sets(st.sampled_from(["cpu", "mem", "throttle", "pct"]), min_size=1)


def _check(pods: list[QosPod], usage: int, memory: int, names: set[str]) -> tuple[QosNode, Flow]:
    chosen = {
        "cpu": rule("cpu", "cpu_total_usage", 6_000),
        "mem": rule("mem", "memory_total_usage", 4 * GIB),
        "throttle": rule("throttle", "cpu_total_usage", 5_000, "throttle"),
        "pct": rule("pct", "cpu_total_utilization", 50_000),
    }
    n = node(*pods, cpu=usage, memory=memory)
    the_policy = policy(*(chosen[name] for name in sorted(names)))
    return n, node_actions(check_node([the_policy], n, NodeQosState(), 0), n)


@settings(max_examples=200, deadline=None)
@given(
    pods_strategy,
    st.integers(0, 16_000),
    st.integers(0, 8 * GIB),
    rules_strategy,
    st.data(),
)
def test_a_refusal_only_ever_removes_evictions(
    pods: list[QosPod], usage: int, memory: int, rules: set[str], data: st.DataObject
) -> None:
    """Whatever pods refuse (budgets or errors), a check evicts a subset of what it would have
    evicted had every eviction been accepted, and nothing after the first refusal."""
    keys = [p.key for p in pods]
    refusing = data.draw(st.sets(st.sampled_from(keys))) if keys else set()
    kind = data.draw(st.sampled_from([Outcome.BLOCKED, Outcome.REFUSED]))

    def answer(action: QosAction) -> Outcome:
        return kind if action.kind == "evict" and action.pod in refusing else Outcome.ACCEPTED

    _, everything = _check(pods, usage, memory, rules)
    accepted_all, _ = drive(everything, lambda a: Outcome.ACCEPTED)
    _, flow = _check(pods, usage, memory, rules)
    seen, report = drive(flow, answer)
    evicted = {a.pod for a in report.accepted if a.kind == "evict"}
    would = {a.pod for a in accepted_all if a.kind == "evict"}
    assert evicted <= would
    assert not evicted & refusing
    order = [a for a in seen if a.kind == "evict"]
    first_refused = next((i for i, a in enumerate(order) if a.pod in refusing), None)
    if first_refused is not None:
        assert len(order) == first_refused + 1, "no eviction is even tried after a refusal"
        assert report.stopped[0].pod == order[first_refused].pod
    # Only accepted releases count: nothing in the gaps for what the refusals kept.
    assert all(a.pod not in refusing for a in report.accepted if a.kind == "evict")
    # A blocked pod is throttled at most once, right after its refusal.
    throttled = [a.pod for a in seen if a.kind == "throttle"]
    assert len(throttled) == len(set(throttled))
