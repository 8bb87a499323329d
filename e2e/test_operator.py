"""The running operator on a real API server: queue and policy statuses follow the cluster.

The operator runs as a separate `sharekeeper run` process with the ServiceAccount token and RBAC
from manifests/, not as cluster admin. Its writes are counted from the API server's audit log.
Expected numbers are worked out by hand in the comments (Volcano's proportion semantics).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clusters import REPO, TARGET, Cluster
from objects import (
    NAMESPACE,
    condition,
    deserved,
    node,
    pod,
    policy,
    queue,
    status,
    true_condition,
)
from operating import (
    Operator,
    describe_writes,
    eventually,
    operator_writes,
    start_operator,
)

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts the operator as a process; kind runs the deployed one"
)


def two_nodes_two_queues(cluster: Cluster) -> None:
    """16 cpu / 64Gi; queue a (weight 1) and b (weight 3) both ask for the whole cluster."""
    cluster.apply(
        node("n1"), node("n2"),
        queue("a", weight=1), queue("b", weight=3),
        policy("shares"),
        pod("a-running", "a", "2", "8Gi", node_name="n1"),
        pod("a-waiting", "a", "14", "56Gi"),
        pod("b-waiting", "b", "16", "64Gi"),
    )  # fmt: skip


def test_statuses_appear_with_allocation_request_and_share(
    cluster_with: Cluster, operator: Operator
) -> None:
    two_nodes_two_queues(cluster_with)
    # Weighted 1:3 water-filling of 16 cpu / 64Gi, both requests above their shares.
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    assert deserved(cluster_with, "b") == ("12", "48Gi")
    a = status(cluster_with, "queue", "a")
    assert a["allocated"] == {"cpu": "2", "memory": "8Gi", "pods": "1"}
    assert a["request"] == {"cpu": "16", "memory": "64Gi", "pods": "2"}
    assert a["share"] == "0.5"  # max(2/4, 8Gi/16Gi)
    assert a["policy"] == "shares"
    assert a["state"] == "Open"
    assert a["observedGeneration"] == cluster_with.get("queue", "a")["metadata"]["generation"]
    assert condition(cluster_with, "queue", "a", "Ready")["status"] == "True"
    shares = status(cluster_with, "schedulerpolicy", "shares")
    assert (shares["nodes"], shares["queues"]) == (2, 2)
    assert shares["total"]["cpu"] == "16"
    assert shares["total"]["memory"] == "64Gi"
    table = cluster_with.kubectl("get", "queues").stdout
    assert table.splitlines()[1].split()[:8] == ["a", "1", "Open", "4", "16Gi", "2", "8Gi", "0.5"]


def test_deserved_follows_weight_capability_and_guarantee(
    cluster_with: Cluster, operator: Operator
) -> None:
    two_nodes_two_queues(cluster_with)
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    cluster_with.apply(queue("a", weight=3))  # 3:3 -> an even split
    eventually(lambda: deserved(cluster_with, "a") == ("8", "32Gi"))
    assert deserved(cluster_with, "b") == ("8", "32Gi")
    # Capped at 2 cpu, a leaves the rest of its cpu to b (b still asks for 16).
    cluster_with.apply(queue("a", weight=3, capability={"cpu": "2"}))
    eventually(lambda: deserved(cluster_with, "a") == ("2", "32Gi"))
    assert deserved(cluster_with, "b") == ("14", "32Gi")
    # Back to 1:3 but a guaranteed 8 cpu: b can reach at most 16 - 8.
    cluster_with.apply(queue("a", weight=1, guarantee={"resource": {"cpu": "8"}}))
    eventually(lambda: deserved(cluster_with, "a")[0] == "8")
    assert deserved(cluster_with, "b")[0] == "8"
    assert status(cluster_with, "queue", "b")["realCapability"]["cpu"] == "8"


def test_nodes_added_and_removed_change_totals_and_deserved(
    cluster_with: Cluster, operator: Operator
) -> None:
    two_nodes_two_queues(cluster_with)
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    cluster_with.apply(node("n3"))
    # 24 cpu / 96Gi at 1:3 gives b 18 cpu / 72Gi, above its request: b keeps 16 / 64Gi and a
    # takes the rest.
    eventually(lambda: deserved(cluster_with, "a") == ("8", "32Gi"))
    assert deserved(cluster_with, "b") == ("16", "64Gi")
    assert status(cluster_with, "schedulerpolicy", "shares")["total"]["cpu"] == "24"
    cluster_with.kubectl("delete", "node", "n3")
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    assert status(cluster_with, "schedulerpolicy", "shares")["total"]["cpu"] == "16"


def test_deleting_pods_lowers_allocated(cluster_with: Cluster, operator: Operator) -> None:
    two_nodes_two_queues(cluster_with)
    eventually(lambda: status(cluster_with, "queue", "a").get("allocated", {}).get("cpu") == "2")
    cluster_with.kubectl(
        "delete", "pod", "a-running", "-n", NAMESPACE, "--force", "--grace-period=0"
    )
    eventually(lambda: status(cluster_with, "queue", "a").get("allocated", {}).get("cpu") is None)
    a = status(cluster_with, "queue", "a")
    assert a["request"] == {"cpu": "14", "memory": "56Gi", "pods": "1"}
    assert a["share"] == "0"


def test_pods_of_other_schedulers_are_unmanaged_and_reserved(
    cluster_with: Cluster, operator: Operator
) -> None:
    """Found: one kube-system pod moved the default queue's deserved share. A pod that names
    no queue and is not Volcano's is charged to no queue, and what it holds is taken out of
    what the queues share."""
    two_nodes_two_queues(cluster_with)
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    system = pod("agent", "-", "4", "8Gi", node_name="n1")
    del system["metadata"]["labels"]
    cluster_with.apply(system)
    eventually(lambda: deserved(cluster_with, "a") == ("3", "14Gi"))  # 1:3 of 12 cpu / 56Gi
    shares = status(cluster_with, "schedulerpolicy", "shares")
    assert shares["unmanaged"] == {"cpu": "4", "memory": "8Gi", "pods": "1"}
    assert (shares["total"]["cpu"], shares["total"]["memory"]) == ("12", "56Gi")
    assert status(cluster_with, "queue", "a")["request"]["pods"] == "2"  # not charged


def test_guarantees_above_the_cluster_are_reported(
    cluster_with: Cluster, operator: Operator
) -> None:
    two_nodes_two_queues(cluster_with)
    cluster_with.apply(
        queue("a", guarantee={"resource": {"cpu": "10"}}),
        queue("b", weight=3, guarantee={"resource": {"cpu": "10"}}),
    )
    found = eventually(
        lambda: true_condition(cluster_with, "schedulerpolicy", "shares", "GuaranteeUnsatisfiable")
    )
    assert found is not None
    assert found["status"] == "True"

    def told() -> str:  # the Event follows the status write it tells of
        events = cluster_with.kubectl(
            "get", "events", "-A", "--field-selector", "reason=GuaranteeUnsatisfiable", "-o", "name"
        ).stdout
        assert events.strip(), "a person should see an Event"
        return events

    eventually(told)


def test_a_pod_of_a_namespace_the_queue_does_not_admit_is_not_charged_and_is_told(
    cluster_with: Cluster, operator: Operator
) -> None:
    """Found: any tenant could label a pod ``sharekeeper.io/queue: production`` and be charged
    to another team's queue."""
    outsider = "intruder"
    cluster_with.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": outsider}})
    admits_team = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    stolen = pod("stolen", "production", "4", "4Gi", node_name="n1")
    stolen["metadata"]["namespace"] = outsider
    try:
        cluster_with.apply(
            node("n1"), policy("shares"), queue("production", namespaces=admits_team),
            pod("own", "production", "1", "1Gi", node_name="n1"), stolen,
        )  # fmt: skip
        found = eventually(
            lambda: true_condition(cluster_with, "queue", "production", "NamespaceNotAdmitted")
        )
        assert found is not None
        assert found["message"].startswith(f"1 pod in namespace {outsider} names this queue")
        production = status(cluster_with, "queue", "production")
        assert production["allocated"] == {"cpu": "1", "memory": "1Gi", "pods": "1"}

        def told() -> str:
            return cluster_with.kubectl(
                "get", "events", "-n", outsider, "--field-selector",
                "reason=NamespaceNotAdmitted,involvedObject.name=stolen", "-o", "name",
            ).stdout.strip()  # fmt: skip

        assert eventually(told)
    finally:
        # The namespace stays: without kube-controller-manager it would never finish terminating.
        cluster_with.kubectl(
            "delete", "--raw", f"/api/v1/namespaces/{outsider}/pods?gracePeriodSeconds=0"
        )


def what_shares_publishes(cluster: Cluster) -> str:
    """Everything the policy "shares" of ``two_nodes_two_queues`` publishes, as JSON text."""
    nodes = {
        name: cluster.get("node", name)["metadata"].get("annotations", {}) for name in ("n1", "n2")
    }
    return json.dumps(
        {
            "policy": status(cluster, "schedulerpolicy", "shares"),
            "queues": {name: status(cluster, "queue", name) for name in ("a", "b")},
            "nodes": {
                name: {k: v for k, v in annotations.items() if k.startswith("sharekeeper.io/")}
                for name, annotations in nodes.items()
            },
        }
    )


def test_a_newer_policy_selecting_a_running_queue_changes_nothing_it_publishes(
    cluster_with: Cluster, operator: Operator
) -> None:
    assert cluster_with.plane is not None
    audit = cluster_with.plane.audit_log
    two_nodes_two_queues(cluster_with)
    cluster_with.apply(queue("a", labels={"team": "x"}))
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    time.sleep(3)  # let the last round settle; the next policy is then created seconds later
    before = what_shares_publishes(cluster_with)
    writes_before = len(operator_writes(audit))
    # Its name sorts before "shares": only its creationTimestamp makes it the newer.
    cluster_with.apply(policy("mistaken", queueSelector={"matchLabels": {"team": "x"}}))
    found = eventually(
        lambda: true_condition(cluster_with, "schedulerpolicy", "mistaken", "Overlapping")
    )
    assert found["message"] == (
        "queue a is kept by older policy shares; node n1 is kept by older policy shares; "
        "node n2 is kept by older policy shares"
    )
    mistaken = status(cluster_with, "schedulerpolicy", "mistaken")
    assert (mistaken["queues"], mistaken["nodes"]) == (0, 0)
    time.sleep(3)  # several debounce windows: any write would have happened by now
    assert what_shares_publishes(cluster_with) == before
    touched = [
        write
        for write in operator_writes(audit)[writes_before:]
        if write.get("objectRef", {}).get("name") in {"shares", "a", "b", "n1", "n2"}
    ]
    assert describe_writes(touched) == []


def test_restart_on_an_unchanged_cluster_writes_nothing(
    cluster_with: Cluster, operator: Operator, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    assert cluster_with.plane is not None
    audit = cluster_with.plane.audit_log
    two_nodes_two_queues(cluster_with)
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    time.sleep(3)  # let the last round settle
    before = {kind: cluster_with.get(kind)["items"] for kind in ("queues", "schedulerpolicies")}
    writes_before = len(operator_writes(audit))
    operator.stop(signal.SIGKILL)

    restarted = start_operator(operator_kubeconfig, tmp_path / "restarted.log")
    try:
        restarted.wait_rounds(1)
        time.sleep(3)  # several debounce windows: any write would have happened by now
        after = {kind: cluster_with.get(kind)["items"] for kind in ("queues", "schedulerpolicies")}
        new_writes = operator_writes(audit)[writes_before:]
    finally:
        restarted.stop(signal.SIGKILL)
    assert describe_writes(new_writes) == []
    assert [o["status"] for o in after["queues"]] == [o["status"] for o in before["queues"]]
    assert [o["status"] for o in after["schedulerpolicies"]] == [
        o["status"] for o in before["schedulerpolicies"]
    ]


def test_a_burst_of_500_pods_costs_a_few_dozen_writes(
    cluster_with: Cluster, operator: Operator
) -> None:
    assert cluster_with.plane is not None
    audit = cluster_with.plane.audit_log
    two_nodes_two_queues(cluster_with)
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    time.sleep(1)
    writes_before = len(operator_writes(audit))
    burst = [pod(f"burst-{i}", "b", "10m", "10Mi", node_name="n2") for i in range(500)]
    cluster_with.apply(*burst)
    # 500 x 10m = 5 cpu and 500 x 10Mi = 5000Mi now allocated to b.
    eventually(
        lambda: (
            status(cluster_with, "queue", "b").get("allocated")
            == {"cpu": "5", "memory": "5000Mi", "pods": "500"}
        ),
        timeout=60,
    )
    time.sleep(3)
    writes = operator_writes(audit)[writes_before:]
    status_writes = [w for w in writes if w.get("objectRef", {}).get("subresource") == "status"]
    print(f"\n500 pod creations -> {len(status_writes)} status writes: {describe_writes(writes)}")
    assert 1 <= len(status_writes) <= 40


def test_the_operator_publishes_what_simulate_prints(
    cluster_with: Cluster, operator: Operator, tmp_path: Path
) -> None:
    files = [REPO / "manifests" / "samples", REPO / "examples" / "demo-workload.yaml"]
    for path in files:
        cluster_with.kubectl("apply", "-f", str(path))
    printed = subprocess.run(
        [sys.executable, "-m", "sharekeeper.cli", "simulate", "-o", "json",
         *(arg for path in files for arg in ("-f", str(path)))],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    expected = json.loads(printed.stdout)["queues"]

    def published() -> dict[str, Any]:
        return {
            item["metadata"]["name"]: item.get("status", {})
            for item in cluster_with.get("queues")["items"]
        }

    def comparable(statuses: dict[str, Any]) -> dict[str, Any]:
        """Everything but the bookkeeping only a live object has."""
        return {
            name: {
                **{
                    k: v for k, v in status.items() if k not in {"observedGeneration", "conditions"}
                },
                "conditions": sorted(
                    (c["type"], c["status"], c["reason"]) for c in status.get("conditions", [])
                ),
            }
            for name, status in statuses.items()
        }

    eventually(lambda: comparable(published()) == comparable(expected), timeout=30)


def test_deleting_the_older_policy_hands_its_queue_and_nodes_to_the_newer(
    cluster_with: Cluster, operator: Operator
) -> None:
    two_nodes_two_queues(cluster_with)
    cluster_with.apply(queue("a", labels={"team": "x"}))
    eventually(lambda: deserved(cluster_with, "a") == ("4", "16Gi"))
    time.sleep(1.5)  # creationTimestamp counts seconds: the next policy must be the newer
    cluster_with.apply(policy("mistaken", queueSelector={"matchLabels": {"team": "x"}}))
    eventually(lambda: true_condition(cluster_with, "schedulerpolicy", "mistaken", "Overlapping"))
    assert deserved(cluster_with, "a") == ("4", "16Gi")
    cluster_with.kubectl("delete", "schedulerpolicy", "shares")
    # a alone under "mistaken", which now has both nodes: its whole request, 16 cpu / 64Gi.
    eventually(lambda: deserved(cluster_with, "a") == ("16", "64Gi"))
    assert status(cluster_with, "queue", "a")["policy"] == "mistaken"
    assert true_condition(cluster_with, "queue", "b", "NoPolicy") is not None
    cleared = condition(cluster_with, "schedulerpolicy", "mistaken", "Overlapping")
    assert cleared is not None
    assert (cleared["status"], cleared["reason"]) == ("False", "KeepsAllSelected")
    eventually(
        lambda: (
            cluster_with.get("node", "n1")["metadata"]["annotations"]["sharekeeper.io/policy"]
            == "mistaken"
        )
    )
