"""Queue trees on the real API server: org -> team -> project under one Proportion policy,
the operator running as its ServiceAccount (the ``operator`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters import TARGET, Cluster
from objects import node, pod, policy, queue
from operating import Operator, eventually

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts the operator as a process; kind runs the deployed one"
)


def status(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.get("queue", name).get("status", {})
    return got


def deserved_cpu(cluster: Cluster, *names: str) -> list[str | None]:
    return [status(cluster, name).get("deserved", {}).get("cpu") for name in names]


def test_three_levels_share_level_by_level_and_a_weight_moves_one_subtree(
    cluster_with: Cluster, operator: Operator
) -> None:
    cluster_with.apply(
        node("n1", cpu="48"), node("n2", cpu="48"),
        policy("tree"),
        queue("org", weight=2), queue("lab"),
        queue("team-a", parent="org"), queue("team-b", parent="org"),
        queue("px", parent="team-a"), queue("py", weight=3, parent="team-a"),
        pod("lab-work", "lab", "60", "1Gi"),
        pod("b-work", "team-b", "60", "1Gi"),
        pod("x-work", "px", "4", "1Gi", node_name="n1"),
        pod("y-work", "py", "60", "1Gi"),
    )  # fmt: skip
    names = ("org", "lab", "team-a", "team-b", "px", "py")
    eventually(lambda: deserved_cpu(cluster_with, *names) == ["64", "32", "32", "32", "4", "28"])
    org = status(cluster_with, "org")
    assert org["allocated"]["cpu"] == "4"  # px's pod, rolled up through team-a
    assert org["request"]["cpu"] == "124"
    assert status(cluster_with, "py")["decidedBy"]["cpu"] == "Level"
    # lab's weight 1 -> 2: the root's split moves; inside org the ratios stay.
    cluster_with.kubectl("patch", "skq", "lab", "--type=merge", "-p", '{"spec": {"weight": 2}}')
    eventually(lambda: deserved_cpu(cluster_with, *names) == ["48", "48", "24", "24", "4", "20"])


def test_a_queue_with_a_missing_parent_gets_a_condition_and_no_numbers(
    cluster_with: Cluster, operator: Operator
) -> None:
    cluster_with.apply(
        node("n1"), policy("tree"), queue("team", parent="orgg"), queue("project", parent="team")
    )

    def invalid(name: str) -> dict[str, Any] | None:
        conditions = status(cluster_with, name).get("conditions", [])
        found = [c for c in conditions if c["type"] == "InvalidParent" and c["status"] == "True"]
        return found[0] if found else None

    team = eventually(lambda: invalid("team"))
    assert team["message"] == "parent orgg does not exist"
    project = eventually(lambda: invalid("project"))
    assert project["message"].startswith("under queue team, which is left out")
    assert status(cluster_with, "team").get("deserved", {}) == {}
    printed = cluster_with.kubectl("get", "skq", "project").stdout.splitlines()
    assert "PARENT" in printed[0].split()
    assert "team" in printed[1].split()
    # Creating the parent puts the subtree in place.
    cluster_with.apply(queue("orgg"))
    eventually(lambda: invalid("team") is None and invalid("project") is None)
