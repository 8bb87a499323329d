"""Rules no selected node can cross: reported, because they never act (usually a unit mistake)."""

from __future__ import annotations

from dataclasses import replace

from sharekeeper.engine.qos import REGISTRY, LabelSelector, unreachable_rules

from .builders import node, policy, rule


def test_crane_millicores_read_as_cores_are_above_every_node() -> None:
    """Found: ``14000`` (Crane's millicores for 14 cores) was read as 14000 cores, silently."""
    crane = policy(rule("cpu", "cpu_total_usage", 14_000_000), rule("ok", "cpu_total_usage", 6_000))
    nodes = [node(name="a", cpu_capacity=8_000), node(name="b", cpu_capacity=16_000)]
    (found,) = unreachable_rules(crane, nodes, REGISTRY)
    assert (found.rule, found.value, found.largest_capacity) == ("cpu", 14_000_000, 16_000)


def test_a_value_some_selected_node_can_cross_is_fine() -> None:
    twelve = policy(rule("cpu", "cpu_total_usage", 12_000))
    small, large = node(name="a", cpu_capacity=8_000), node(name="b", cpu_capacity=16_000)
    assert unreachable_rules(twelve, [small, large], REGISTRY) == ()
    # Only the nodes the policy selects count.
    only_small = replace(twelve, node_selector=LabelSelector({"size": "s"}))
    labelled = replace(small, labels={"size": "s"})
    assert [r.rule for r in unreachable_rules(only_small, [labelled, large], REGISTRY)] == ["cpu"]


def test_equal_to_capacity_never_triggers_and_percent_above_100_neither() -> None:
    rules = policy(
        rule("all", "cpu_total_usage", 8_000),  # hot means strictly above: never
        rule("pct", "memory_total_utilization", 100_000),  # 100 %
        rule("ninety", "cpu_total_utilization", 90_000),
    )
    found = unreachable_rules(rules, [node(cpu_capacity=8_000)], REGISTRY)
    assert [r.rule for r in found] == ["all", "pct"]


def test_nothing_is_said_without_a_capacity_to_compare_with() -> None:
    crane = policy(rule("cpu", "cpu_total_usage", 14_000_000))
    assert unreachable_rules(crane, [node(cpu_capacity=None)], REGISTRY) == ()
    assert unreachable_rules(crane, [], REGISTRY) == ()
