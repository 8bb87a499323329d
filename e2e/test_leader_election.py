"""Two replicas of the operator against one API server, taking turns through the Lease
``sharekeeper/sharekeeper``: one acts, the other waits, ready, and takes over when the leader
dies (after the lease runs out) or stops (at once: the Lease is handed back)."""

from __future__ import annotations

import signal
import time
import urllib.error
from pathlib import Path

import pytest

from clusters import TARGET, Cluster
from metrics_server import MetricsServer
from objects import NAMESPACE, deserved, node, pod, policy, queue
from operating import Operator, eventually, start_operator
from test_node_qos import (
    TAINT_KEY,
    evicted,
    make_hot_node,
    node_entry,
    pod_state,
    qos_policy,
    taints,
)

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts operators as processes; kind runs the deployed one"
)

LEASE_SECONDS = 4
LEADER_ELECTION = [
    "--leader-elect",
    f"--leader-elect-lease-duration={LEASE_SECONDS}",
    "--leader-elect-renew-deadline=3",
    "--leader-elect-retry-period=1",
]


def leading(replica: Operator) -> bool:
    """What the replica's ``/readyz`` says (False while its probe server is not up yet)."""
    assert replica.process.poll() is None, f"operator exited:\n{replica.tail()}"
    try:
        return bool(replica.ready()[1].get("leader"))
    except (urllib.error.URLError, OSError):
        return False


def ready(replica: Operator) -> bool:
    try:
        return replica.ready()[0] == 200
    except (urllib.error.URLError, OSError):
        return False


def two_replicas(kubeconfig: Path, tmp_path: Path) -> tuple[Operator, Operator]:
    """The first to start leads (once it found no live holder); the second waits, ready."""
    first = start_operator(kubeconfig, tmp_path / "first.log", args=LEADER_ELECTION)
    second: Operator | None = None
    try:
        eventually(lambda: leading(first), timeout=30)
        second = start_operator(kubeconfig, tmp_path / "second.log", args=LEADER_ELECTION)
        eventually(lambda: ready(second), timeout=30)
    except BaseException:
        for replica in (first, second):
            if replica is not None:
                replica.stop(signal.SIGKILL)
        raise
    return first, second


def one_queue_cluster(cluster: Cluster) -> None:
    cluster.apply(
        node("n1"), node("n2"), policy("shares"),
        queue("a", weight=1), queue("b", weight=1),
        pod("a-waiting", "a", "16", "64Gi"), pod("b-waiting", "b", "16", "64Gi"),
    )  # fmt: skip


def test_one_replica_leads_and_the_other_takes_over_when_the_leader_is_killed(
    cluster_with: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    one_queue_cluster(cluster_with)
    first, second = two_replicas(operator_kubeconfig, tmp_path)
    try:
        eventually(lambda: deserved(cluster_with, "a") == ("8", "32Gi"))
        assert leading(first)
        assert not leading(second)
        assert int(second.health()["recomputeRounds"]) == 0, "the waiting replica writes nothing"
        assert second.metric("sharekeeper_leader") == 0

        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        cluster_with.apply(queue("a", weight=3))
        eventually(lambda: deserved(cluster_with, "a") == ("12", "48Gi"), timeout=30)
        took = time.monotonic() - killed
        print(f"\nleader killed -> the other replica published the change in {took:.1f}s")
        assert leading(second)
        assert second.metric("sharekeeper_leader") == 1
        # The lease it saw renewed last must run out first, then one round: never much more.
        assert LEASE_SECONDS <= took + 1 < LEASE_SECONDS + 15
    finally:
        first.stop(signal.SIGKILL)
        second.stop(signal.SIGKILL)


def test_a_leader_that_stops_hands_over_at_once(
    cluster_with: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    one_queue_cluster(cluster_with)
    first, second = two_replicas(operator_kubeconfig, tmp_path)
    try:
        first.stop(signal.SIGTERM)  # a rolling update: the Lease is released on the way out
        stopped = time.monotonic()
        eventually(lambda: leading(second), timeout=30)
        took = time.monotonic() - stopped
        print(f"\nleader stopped -> the other replica led after {took:.1f}s")
        assert took < LEASE_SECONDS, "a released Lease is taken at the next try"
    finally:
        first.stop(signal.SIGKILL)
        second.stop(signal.SIGKILL)


def test_the_lease_deleted_under_the_leader_is_recreated_and_one_replica_still_leads(
    cluster_with: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    one_queue_cluster(cluster_with)
    first, second = two_replicas(operator_kubeconfig, tmp_path)
    try:
        cluster_with.kubectl("delete", "lease", "sharekeeper", "-n", "sharekeeper")
        eventually(lambda: cluster_with.get("lease", "sharekeeper", "-n", "sharekeeper"))
        # The replica that lost the lease steps down at its next renewal (1 s apart).
        eventually(lambda: sum(leading(replica) for replica in (first, second)) == 1, timeout=15)
        holder = cluster_with.get("lease", "sharekeeper", "-n", "sharekeeper")["spec"]
        assert holder["holderIdentity"]
        cluster_with.apply(queue("a", weight=3))
        eventually(lambda: deserved(cluster_with, "a") == ("12", "48Gi"), timeout=30)
    finally:
        first.stop(signal.SIGKILL)
        second.stop(signal.SIGKILL)


def test_a_qos_episode_goes_on_when_the_leader_is_killed_in_the_middle_of_it(
    cluster_with: Cluster, metrics: MetricsServer, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    """The leader throttles d and taints w1, then dies. The other replica continues the
    episode from the policy's status: it restores d's CPU limit to exactly the recorded
    original when usage falls, and lifts the taint after the cool-down; nothing is evicted."""
    hot = make_hot_node(cluster_with, metrics)
    metrics.set_pod(NAMESPACE, "d", {"main": {"cpu": "1900m", "memory": "100Mi"}})
    first, second = two_replicas(operator_kubeconfig, tmp_path)

    def limit() -> str:
        return str(pod_state(hot, "d")["spec"]["containers"][0]["resources"]["limits"]["cpu"])

    calm_down = {
        "name": "calm-down", "disableScheduling": True, "coolDownSeconds": 4,
        "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 20}},
    }  # fmt: skip
    try:
        only_d = {"podSelector": {"matchLabels": {"app": "d"}}}
        hot.apply(qos_policy("episode", action=calm_down, restore=2, candidates=only_d))
        eventually(lambda: limit() != "2" and TAINT_KEY in taints(hot), timeout=40)
        assert node_entry(hot, "episode")["throttled"][0]["originalLimit"] == "2"

        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        metrics.set_node("w1", cpu="3", memory="8Gi")
        metrics.set_pod(NAMESPACE, "d", {"main": {"cpu": "200m", "memory": "100Mi"}})
        eventually(lambda: limit() == "2", timeout=60)
        restored = time.monotonic() - killed
        eventually(lambda: TAINT_KEY not in taints(hot), timeout=60)
        untainted = time.monotonic() - killed
        print(f"\nleader killed mid-episode -> limit restored after {restored:.1f}s, "
              f"taint lifted after {untainted:.1f}s")  # fmt: skip
        assert leading(second)
        assert evicted(hot) == []
        assert "throttled" not in node_entry(hot, "episode")
    finally:
        first.stop(signal.SIGKILL)
        second.stop(signal.SIGKILL)
