"""A NodeQosEnsurancePolicy's status stays small at thousands of nodes.

Listing every matched node put 2.6 MB into one status at 5,000 nodes, and the API server
refused every write (its limit is 1.5 MiB by default). Nodes at rest need no entry (their state
reads back as zero), and at most ``MAX_LISTED_NODES`` are listed, the most urgent first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sharekeeper.pipeline.qos import MAX_LISTED_NODES
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, qos_section

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qos-check.yaml"
NOW = 1_795_000_000


def cluster(nodes: int, hot: set[int]) -> list[dict[str, Any]]:
    """``nodes`` copies of the example's 8-core worker, each with usage, no pods; the example's
    rule evicts above 6 cores after one hot check."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    kept = [d for d in docs if d["kind"] == "NodeQosEnsurancePolicy"]
    template = next(d for d in docs if d["kind"] == "Node")
    for index in range(nodes):
        name = f"node-{index:05d}"
        kept.append({**template, "metadata": {"name": name, "labels": {}}})
        cpu = "7" if index in hot else "2"
        kept.append(
            {
                "kind": "NodeMetrics",
                "metadata": {"name": name},
                "usage": {"cpu": cpu, "memory": "1Gi"},
            }
        )
    return kept


def status_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    report = qos_section(parse_objects(docs), Context(now_seconds=NOW, seed=0))
    statuses: dict[str, Any] = report["nodeQosEnsurancePolicies"]
    return next(iter(statuses.values()))


def test_a_calm_cluster_lists_no_node_but_counts_them_all() -> None:
    status = status_of(cluster(1_500, hot=set()))
    assert status["matchedNodes"] == 1_500
    assert status["nodes"] == []


def test_hot_nodes_are_listed_and_calm_ones_are_not() -> None:
    status = status_of(cluster(50, hot={3, 17}))
    assert [entry["name"] for entry in status["nodes"]] == ["node-00003", "node-00017"]


def test_too_many_nodes_to_list_keeps_the_most_urgent_and_says_so() -> None:
    hot = set(range(0, 2_400, 2))  # 1,200 hot nodes among 2,400
    status = status_of(cluster(2_400, hot=hot))
    listed = [entry["name"] for entry in status["nodes"]]
    assert len(listed) == MAX_LISTED_NODES
    assert listed == sorted(listed)
    assert all(int(name.split("-")[1]) in hot for name in listed)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert "most urgent" in ready["message"]


def test_a_calm_node_still_remembered_is_checked_in_full_and_the_others_are_counted() -> None:
    """Calm nodes nothing is remembered of are left out of the full check (at 5,000 nodes,
    most of its cost): they are counted and get no annotation nor taint. A node calm now but
    hot at the last check is remembered in the status, and carried on: its rule restores, its
    taint stays for the action's cool-down."""
    first = status_of(cluster(4, hot={1, 2}))
    assert [entry["name"] for entry in first["nodes"]] == ["node-00001", "node-00002"]
    docs = cluster(4, hot={1})
    policy = next(d for d in docs if d["kind"] == "NodeQosEnsurancePolicy")
    policy["status"] = first
    report = qos_section(parse_objects(docs), Context(now_seconds=NOW + 10, seed=0))
    status = report["nodeQosEnsurancePolicies"]["cpu-guard"]
    assert (status["matchedNodes"], status["triggeredNodes"]) == (4, 1)
    entries = {entry["name"]: entry for entry in status["nodes"]}
    assert sorted(entries) == ["node-00001", "node-00002"]
    assert entries["node-00002"]["rules"][0]["phase"] == "Calm"
    assert entries["node-00002"]["scheduling"]["disabled"] is True  # the 300 s cool-down
    tainted = {name: bool(node["taints"]) for name, node in report["nodes"].items()}
    assert tainted == {
        "node-00000": False, "node-00001": True, "node-00002": True, "node-00003": False
    }  # fmt: skip
