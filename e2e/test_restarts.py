"""The control plane's own processes restarted under the operator, and malformed objects the API
server accepts next to good ones.

The restarts stop kube-apiserver for 30 s, then etcd, on a control plane of this module's own
(the session's is shared by every other test): the same operator process comes through both,
publishes the changes made after each, posts no Event twice and answers ``/healthz`` with 200
throughout. The malformed objects run on the session's control plane.

Each test prints its figures on one line starting with ``FAULT`` (``pytest -s`` shows them) and
asserts the outcome; the time bounds are generous, the measured times are what the report quotes.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from clusters import TARGET, Cluster, Installed, install_sharekeeper
from faults import HealthPoller
from objects import NAMESPACE, deserved, node, pod, policy, queue, status, true_condition
from operating import Operator, eventually, start_operator

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="stops and starts the local control plane's processes"
)

APISERVER_OUTAGE = 30.0
ETCD_OUTAGE = 10.0
RECOVERY = 90.0
"""After an outage: the operator's watches back off up to 30 s between tries (jittered)."""
THROTTLE_ANNOTATION = "sharekeeper.io/cpu-throttle"


def figures(test: str, **values: Any) -> None:
    shown = " ".join(
        f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
        for key, value in values.items()
    )
    print(f"\nFAULT {test}: {shown}")


# --- a control plane of this module's own --------------------------------------------------


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Sharekeeper installed on an etcd and kube-apiserver of this module's own: the tests stop
    them, which must not touch anyone else's."""
    with controlplane.running() as plane:
        cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)
        yield install_sharekeeper(cluster, tmp_path_factory.mktemp("restarts"))


# --- what the tests watch ----------------------------------------------------------------------


def event_tally(cluster: Cluster) -> dict[tuple[str, str, str], tuple[int, int]]:
    """Every Event, by (kind, name, reason) of what it is about: how many Event objects, and
    their total count. An Event posted again for an unchanged condition shows in either."""
    tally: dict[tuple[str, str, str], tuple[int, int]] = {}
    for event in cluster.get("events", "--all-namespaces")["items"]:
        about = event["involvedObject"]
        key = (about["kind"], about["name"], event["reason"])
        objects, count = tally.get(key, (0, 0))
        tally[key] = (objects + 1, count + (event.get("count") or 1))
    return tally


def shares(cluster: Cluster) -> tuple[tuple[str | None, str | None], ...]:
    return deserved(cluster, "a"), deserved(cluster, "b")


def write_counters(operator: Operator) -> dict[str, float]:
    """The operator's counters of what a control-plane outage costs it."""
    return {
        "retries": operator.metric("sharekeeper_write_retries_total"),
        "writes_given_up": operator.metric("sharekeeper_writes_total", outcome="error"),
        "watch_restarts": operator.metric("sharekeeper_watch_restarts_total"),
        "relists": operator.metric("sharekeeper_watch_relists_total"),
        "relists_expired": operator.metric("sharekeeper_watch_relists_total", reason="expired"),
    }


def counted_since(before: dict[str, float], operator: Operator) -> dict[str, int]:
    return {name: int(now - before[name]) for name, now in write_counters(operator).items()}


# --- kube-apiserver, then etcd, restarted ----------------------------------------------------


def test_the_api_server_and_then_etcd_restarted_under_the_operator(
    private: Installed, tmp_path: Path
) -> None:
    """kube-apiserver is stopped (SIGTERM, until it exits) for 30 s, during which nothing can
    change, and started again on the same port with the same flags; then a weight changes. etcd
    is then stopped for 10 s under the running API server and started again on the same data
    directory; then the weight changes back. The same operator process publishes each change,
    posts no Event again for the condition that stayed True (queue a is overused throughout),
    and ``/healthz`` answers 200 during and after each outage: failed writes are retried and
    planned again, they never fail a round."""
    cluster, plane = private.cluster, private.cluster.plane
    assert plane is not None
    # 8 cpu between a (5 cpu bound) and b (12 cpu waiting): a deserves 4 cpu at weights 1:1 and
    # 2 at 1:3, below its 5 either way.
    cluster.apply(
        node("n1"), queue("a", weight=1), queue("b", weight=1), policy("shares"),
        pod("steady", "a", "5", "5Gi", node_name="n1"), pod("waiting", "b", "12", "12Gi"),
    )  # fmt: skip
    even, b_heavier = (("4", "5Gi"), ("4", "12Gi")), (("2", "5Gi"), ("6", "12Gi"))
    operator = start_operator(private.operator_kubeconfig, tmp_path / "operator.log")
    try:
        eventually(lambda: shares(cluster) == even, timeout=60)
        eventually(lambda: all(true_condition(cluster, "queue", q, "Ready") for q in ("a", "b")))
        assert true_condition(cluster, "queue", "a", "Overused")
        overused_event = ("Queue", "a", "AllocatedAboveDeserved")
        eventually(lambda: event_tally(cluster).get(overused_event) == (1, 1))
        time.sleep(1)  # the echoes of the first writes are in: nothing more is due
        events_before = event_tally(cluster)

        counters = write_counters(operator)
        with HealthPoller(operator, interval=0.5) as health:
            sigterm_at = time.monotonic()
            exit_status = plane.stop_process("kube-apiserver")
            down_at = time.monotonic()
            assert exit_status == 0, f"kube-apiserver did not exit on SIGTERM: {exit_status}"
            refused = cluster.kubectl("get", "queue", "a", "--request-timeout=5s", check=False)
            assert refused.returncode != 0, "the API server still answers"
            time.sleep(max(0.0, APISERVER_OUTAGE - (time.monotonic() - down_at)))
            restarted_at = time.monotonic()
            plane.start_process("kube-apiserver")
            ready_at = time.monotonic()
            cluster.apply(queue("b", weight=3))
            eventually(lambda: shares(cluster) == b_heavier, timeout=RECOVERY)
            converged_at = time.monotonic()
            # The watches come back one by one: a round after a late relist would have re-posted
            # an Event by now.
            time.sleep(5)
        figures(
            "apiserver-restart",
            exit_after_sigterm_s=down_at - sigterm_at,
            down_s=restarted_at - down_at,
            ready_after_start_s=ready_at - restarted_at,
            converged_after_change_s=converged_at - ready_at,
            healthz_during=dict(health.between(sigterm_at, ready_at)),
            healthz_after=dict(health.between(ready_at, float("inf"))),
            **counted_since(counters, operator),
        )
        assert operator.process.poll() is None, operator.tail()
        assert event_tally(cluster) == events_before
        assert set(health.between(0, float("inf"))) == {200}, health.answers

        counters = write_counters(operator)
        with HealthPoller(operator, interval=0.5) as health:
            sigterm_at = time.monotonic()
            exit_status = plane.stop_process("etcd")
            down_at = time.monotonic()
            # etcd re-raises SIGTERM once it has shut down.
            assert exit_status == -signal.SIGTERM, f"etcd did not exit on SIGTERM: {exit_status}"
            write = cluster.kubectl(
                "label", "queue", "a", "outage=etcd", "--request-timeout=5s", check=False
            )
            assert write.returncode != 0, "a write went through without etcd"
            time.sleep(max(0.0, ETCD_OUTAGE - (time.monotonic() - down_at)))
            restarted_at = time.monotonic()
            plane.start_process("etcd")
            plane.wait_ready("kube-apiserver")
            ready_at = time.monotonic()
            cluster.apply(queue("b", weight=1))
            eventually(lambda: shares(cluster) == even, timeout=RECOVERY)
            converged_at = time.monotonic()
            time.sleep(2)
        figures(
            "etcd-restart",
            exit_after_sigterm_s=down_at - sigterm_at,
            down_s=restarted_at - down_at,
            apiserver_ready_after_etcd_start_s=ready_at - restarted_at,
            converged_after_change_s=converged_at - ready_at,
            write_during_outage=write.stderr.strip().splitlines()[-1:],
            healthz_during=dict(health.between(sigterm_at, ready_at)),
            healthz_after=dict(health.between(ready_at, float("inf"))),
            **counted_since(counters, operator),
        )
        assert operator.process.poll() is None, operator.tail()
        assert event_tally(cluster) == events_before
        assert set(health.between(0, float("inf"))) == {200}, health.answers
        assert true_condition(cluster, "queue", "a", "Overused")
        assert true_condition(cluster, "queue", "b", "Ready")
    finally:
        operator.stop()


# --- malformed objects next to good ones -------------------------------------------------------


def warnings_about(
    cluster: Cluster, kind: str, namespace: str, name: str, reason: str
) -> list[str]:
    """The messages of the Warning Events with ``reason`` about the object."""
    found = cluster.get(
        "events", "-n", namespace, "--field-selector",
        f"involvedObject.kind={kind},involvedObject.name={name},reason={reason},type=Warning",
    )["items"]  # fmt: skip
    return [event["message"] for event in found]


def test_malformed_objects_are_refused_or_ignored_and_the_good_ones_go_on(
    cluster_with: Cluster, operator: Operator
) -> None:
    """Objects the API server accepts but the operator must not read: a pod requesting 10P cpu
    and a node with 8Ei allocatable memory (above the 4P bound on any quantity) are left out,
    each with an ``Unreadable`` Warning Event naming the field; a pod's bogus
    ``sharekeeper.io/cpu-throttle`` annotation is not read at all, so that pod counts as any
    other. The good queues get their statuses, Ready. Our own kinds cannot get that far: the
    CRD refuses a Queue with a 9Ei capability at apply, naming the field."""
    # The API server stores a quantity of 2^63 or more as 2^63 - 1: the Event quotes that.
    huge_node = node("eight-exbibytes")
    huge_node["status"]["allocatable"] = {"cpu": "8", "memory": "8Ei", "pods": "500"}
    forged = pod("forged-throttle", "ok2", "2", "2Gi", node_name="good")
    forged["metadata"]["annotations"] = {THROTTLE_ANNOTATION: "{not json; limit=-5"}
    cluster_with.apply(
        node("good"), huge_node, policy("shares"), queue("ok1"), queue("ok2"),
        pod("ok1-bound", "ok1", "1", "1Gi", node_name="good"),
        pod("ten-petacores", "ok1", "10P", "1Gi", node_name="good"),
        forged,
    )  # fmt: skip
    started = time.monotonic()

    pod_warnings = eventually(
        lambda: warnings_about(cluster_with, "Pod", NAMESPACE, "ten-petacores", "Unreadable")
    )
    node_warnings = eventually(
        lambda: warnings_about(cluster_with, "Node", "default", "eight-exbibytes", "Unreadable")
    )
    eventually(lambda: deserved(cluster_with, "ok2") == ("2", "2Gi"))
    reported_s = time.monotonic() - started

    assert pod_warnings == [pod_warnings[0]]
    assert "spec.containers[0].resources.requests.cpu" in pod_warnings[0], pod_warnings
    assert node_warnings == [node_warnings[0]]
    assert "status.allocatable.memory" in node_warnings[0], node_warnings
    assert not warnings_about(cluster_with, "Pod", NAMESPACE, "forged-throttle", "Unreadable")
    # Only the good node and the good pods count.
    charged = {
        name: status(cluster_with, "queue", name).get("allocated") for name in ("ok1", "ok2")
    }
    assert charged == {
        "ok1": {"cpu": "1", "memory": "1Gi", "pods": "1"},
        "ok2": {"cpu": "2", "memory": "2Gi", "pods": "1"},
    }
    assert deserved(cluster_with, "ok1") == ("1", "1Gi")
    policy_status = status(cluster_with, "schedulerpolicy", "shares")
    assert policy_status["nodes"] == 1, policy_status
    assert policy_status["total"]["cpu"] == "8", policy_status
    for name in ("ok1", "ok2"):
        assert true_condition(cluster_with, "queue", name, "Ready"), status(
            cluster_with, "queue", name
        )
    unreadable = {
        kind: operator.metric("sharekeeper_unreadable_objects", kind=kind)
        for kind in ("Pod", "Node")
    }
    assert unreadable == {"Pod": 1, "Node": 1}

    too_big = queue("too-big", capability={"memory": "9Ei"})
    refused = cluster_with.kubectl("apply", "-f", "-", input=yaml.safe_dump(too_big), check=False)
    assert refused.returncode != 0
    assert "spec.capability[memory]" in refused.stderr, refused.stderr
    assert "4P" in refused.stderr, refused.stderr
    assert cluster_with.kubectl("get", "queue", "too-big", check=False).returncode != 0

    assert operator.process.poll() is None, operator.tail()
    assert "recomputeRounds" in operator.health()
    figures(
        "malformed",
        reported_s=reported_s,
        pod_event=pod_warnings[0],
        node_event=node_warnings[0],
        queue_refused=refused.stderr.strip().splitlines()[-1],
    )
