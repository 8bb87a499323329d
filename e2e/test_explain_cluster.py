"""``sharekeeper explain`` against the real API server: it lists the cluster through the
kubeconfig, computes what the running operator computes, and explains it; its numbers are the
ones the operator published in the queue's status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from clusters import TARGET, Cluster
from objects import deserved, node, pod, policy, queue, status
from operating import Operator, eventually

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts the operator as a process; kind runs the deployed one"
)


def explain(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharekeeper.cli", "explain", *args],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_explain_prints_the_published_deserved_and_its_bounds(
    cluster_with: Cluster, operator: Operator
) -> None:
    """16 cpu / 64Gi. c may have 2 cpu (Capability) and asks for 4Gi (Request); a and b
    (weights 1 and 3) share the other 14 cpu and 60Gi by one water level each: 3500m / 10500m
    cpu at L = 3500m, 15Gi / 45Gi at L = 15Gi."""
    cluster_with.apply(
        node("n1"), node("n2"), policy("shares"),
        queue("a", weight=1), queue("b", weight=3), queue("c", capability={"cpu": "2"}),
        pod("a-running", "a", "2", "8Gi", node_name="n1"),
        pod("a-waiting", "a", "14", "56Gi"),
        pod("b-waiting", "b", "16", "64Gi"),
        pod("c-waiting", "c", "4", "4Gi"),
    )  # fmt: skip
    eventually(lambda: deserved(cluster_with, "a") == ("3500m", "15Gi"))
    eventually(lambda: deserved(cluster_with, "c") == ("2", "4Gi"))

    for name in ("a", "b", "c"):
        printed = explain(cluster_with, "queue", name, "-o", "json")
        assert printed.returncode == 0, printed.stderr
        facts: dict[str, Any] = json.loads(printed.stdout)
        published = status(cluster_with, "queue", name)
        assert {d: e["deserved"] for d, e in facts["deserved"].items()} == published["deserved"]
        assert {d: e["decidedBy"] for d, e in facts["deserved"].items()} == published["decidedBy"]
        assert facts["publishedDeserved"] == published["deserved"]
        assert facts["realCapability"] == published["realCapability"]
        assert facts["policyTotal"] == status(cluster_with, "schedulerpolicy", "shares")["total"]

    text = explain(cluster_with, "queue", "a")
    assert text.returncode == 0, text.stderr
    assert "Queue a (Open): policy shares, Proportion" in text.stdout
    assert "3500m  Level: weight 1 x L = 3500m, with the water level L = 3500m" in text.stdout
    assert "not written yet" not in text.stdout  # the status holds these very numbers
    c = explain(cluster_with, "queue", "c").stdout
    assert "Capability: its realCapability 2, less than its request 4" in c

    n1 = explain(cluster_with, "node", "n1")
    assert n1.returncode == 0, n1.stderr
    assert "Node n1: policy shares" in n1.stdout
    assert "pods bound              1, requesting cpu=2,memory=8Gi" in n1.stdout
    assert "no waterline crossed at the last check" in n1.stdout

    missing = explain(cluster_with, "queue", "nope")
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == "sharekeeper explain: queue nope not found\n"
