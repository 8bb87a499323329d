"""Node QoS on the real node (``realnode.py``): real containers burn real CPU, metrics-server
measures it from the kubelet, and the operator throttles through ``pods/resize`` what runc then
enforces as a CFS quota.

Two busybox burners limited to BURNER_LIMIT each: ``low`` (PriorityClass value 100, a
candidate) and ``high`` (value 1000000, above the policy's ``maxPriority`` 999, never a
candidate). The node's usage is its own cgroup's (containerd, the kubelet and the pods), not
the machine's, so other processes on it move the waterline's reach only by taking CPU from the
burners. The burners are below a core each so that the machine's 2 cores keep room for
everything else while they run: together they are above WATERLINE, and throttling ``low``
alone, in steps of STEP percent, brings the node back under. The figures (time from crossing
to under, the steps, CPU released against the gap) are printed."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import realnode
from clusters import Cluster, Installed, RealNodeBox
from nodepods import BURN, busybox_pod, cfs_quota_cores, container_cgroup, cores, node_usage
from operating import Operator, eventually, start_operator

NAMESPACE = "burners"
POLICY = "real-node-cpu"
STEP = 30  # stepCPURatio, percent
MIN_RATIO = 10  # minCPURatio, percent
# metrics-server's resolution: checking more often would step again on the same sample.
CHECK_SECONDS = 15
BURNER_LIMIT = "700m"
WATERLINE = 1.1  # cores: high's 0.7, what the node itself uses, and room for low's last step
PRIORITIES = {"qos-low": 100, "qos-high": 1_000_000}


@dataclass
class Sample:
    at: float  # monotonic seconds
    node: float  # cores, from metrics-server
    stamp: str  # the sample's timestamp
    low_limit: str  # low's CPU limit in its spec
    gap: str  # the node's throttleDown gap in the policy's status ("" when none)


@pytest.fixture
def installed(real_node_box: RealNodeBox) -> Installed:
    return real_node_box.installed()


@pytest.fixture
def burners(installed: Installed) -> Iterator[Cluster]:
    """The namespace and the two PriorityClasses; at the end the policy and the pods go."""
    cluster = installed.cluster
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    cluster.apply(*(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value}
        for name, value in PRIORITIES.items()
    ))  # fmt: skip
    try:
        yield cluster
    finally:
        # No namespace controller runs on this control plane: the namespace and the classes
        # stay (applied again by the next test), the pods go (the kubelet stops them).
        cluster.kubectl("delete", "nodeqosensurancepolicy", POLICY, "--ignore-not-found")
        cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--timeout=60s", check=False)


@pytest.fixture
def operator(installed: Installed, tmp_path: Any) -> Iterator[Operator]:
    running = start_operator(installed.operator_kubeconfig, tmp_path / "operator.log")
    try:
        running.wait_rounds(0)
        yield running
    finally:
        running.stop()
        print(f"\noperator log tail:\n{running.tail(15)}")


def policy(waterline: str) -> dict[str, Any]:
    """Throttle (never evict) above ``waterline`` cores at the first hot check; restore only
    after 1000 calm checks, i.e. not during the test."""
    throttle = {
        "name": "throttle",
        "throttle": {"cpuThrottle": {"minCPURatio": MIN_RATIO, "stepCPURatio": STEP}},
    }
    return {
        "apiVersion": "ensurance.sharekeeper.io/v1alpha1",
        "kind": "NodeQosEnsurancePolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "nodeSelector": {"matchLabels": dict([realnode.NODE_LABEL])},
            "checkIntervalSeconds": CHECK_SECONDS,
            "objectiveEnsurances": [
                {"name": "cpu", "metricRule": {"name": "cpu_total_usage", "value": waterline},
                 "avoidanceThreshold": 1, "restoreThreshold": 1000, "actionName": "throttle"}],
            "actions": [throttle],
        },
    }  # fmt: skip


def next_sample(cluster: Cluster, after: str, timeout: float = 40) -> tuple[float, str]:
    """The node's next metrics-server sample (timestamp other than ``after``)."""

    def fresh() -> tuple[float, str]:
        usage, stamp = node_usage(cluster)
        assert stamp != after, "no new sample yet"
        return usage, stamp

    return eventually(fresh, timeout=timeout, interval=1)


def limit_of(cluster: Cluster, name: str) -> str:
    pod = cluster.get("pod", name, "-n", NAMESPACE)
    return str(pod["spec"]["containers"][0]["resources"]["limits"]["cpu"])


def test_the_low_priority_burner_is_throttled_under_the_waterline(
    burners: Cluster, operator: Operator, real_node_box: RealNodeBox
) -> None:
    cluster = burners
    node = real_node_box.get().node
    _, stamp = node_usage(cluster)
    baseline, stamp = next_sample(cluster, stamp)  # a window without the test's pods
    waterline = WATERLINE
    assert baseline + cores(BURNER_LIMIT) + 0.15 < waterline, (
        f"the node uses {baseline:.2f} cores without the burners: no room under the waterline"
    )
    cluster.apply(policy(f"{waterline:g}"))
    for name in ("high", "low"):
        cluster.apply(busybox_pod(name, NAMESPACE, BURN, cpu_request="100m",
                                  cpu_limit=BURNER_LIMIT,
                                  priority_class=f"qos-{name}"))  # fmt: skip
    for name in ("high", "low"):
        cluster.kubectl("wait", "--for=condition=Ready", f"pod/{name}", "-n", NAMESPACE,
                        "--timeout=60s")  # fmt: skip
    high_before = cluster.get("pod", "high", "-n", NAMESPACE)

    def throttle_gap() -> str:
        status = cluster.get("nodeqosensurancepolicy", POLICY).get("status", {})
        entries = [n for n in status.get("nodes", []) if n["name"] == realnode.NODE_NAME]
        gaps = [g for e in entries for g in e.get("gaps", []) if g.get("class") == "throttleDown"]
        return json.dumps(gaps[0]) if gaps else ""

    # Follow metrics-server's samples and low's limit until the node is back under.
    samples: list[Sample] = []
    crossed: Sample | None = None

    def under_again() -> bool:
        nonlocal crossed
        usage, stamp = node_usage(cluster)
        low_limit = limit_of(cluster, "low")
        if not samples or (samples[-1].stamp, samples[-1].low_limit) != (stamp, low_limit):
            samples.append(Sample(time.monotonic(), usage, stamp, low_limit, throttle_gap()))
        if crossed is None and usage > waterline:
            crossed = samples[-1]
        assert crossed is not None, f"the node is not above {waterline} yet ({usage:.2f})"
        assert low_limit != BURNER_LIMIT, f"low not throttled yet, node at {usage:.2f}"
        assert usage < waterline, f"node at {usage:.2f}, low limited to {low_limit}"
        return True

    eventually(under_again, timeout=200, interval=0.5)
    assert crossed is not None
    under = samples[-1]

    # Precise steps: each new limit is STEP % below the lower of the last limit and the usage.
    limits = [cores(BURNER_LIMIT)]
    for sample in samples:
        if cores(sample.low_limit) != limits[-1]:
            limits.append(cores(sample.low_limit))
    for before, after in itertools.pairwise(limits):
        assert after <= before * (1 - STEP / 100) + 0.001, limits
        assert after >= max(0.1, MIN_RATIO / 100) - 0.001, limits
    # runc enforces the last one.
    low_quota = cfs_quota_cores(container_cgroup(cluster, node, NAMESPACE, "low"))
    assert low_quota == pytest.approx(limits[-1], abs=0.001)

    # high was never touched: the same limits, no record, no Event, no restart.
    high = cluster.get("pod", "high", "-n", NAMESPACE)
    assert (
        high["spec"]["containers"][0]["resources"]
        == (high_before["spec"]["containers"][0]["resources"])
    )
    assert high["status"]["containerStatuses"][0]["restartCount"] == 0
    high_quota = cfs_quota_cores(container_cgroup(cluster, node, NAMESPACE, "high"))
    assert high_quota == pytest.approx(cores(BURNER_LIMIT))
    status = cluster.get("nodeqosensurancepolicy", POLICY)["status"]
    (entry,) = [n for n in status.get("nodes", []) if n["name"] == realnode.NODE_NAME]
    records = {t["pod"]: t for t in entry.get("throttled", [])}
    assert set(records) == {f"{NAMESPACE}/low"}, records
    assert records[f"{NAMESPACE}/low"]["originalLimit"] == BURNER_LIMIT
    events = cluster.get("events", "-n", NAMESPACE,
                         "--field-selector=involvedObject.name=high")["items"]  # fmt: skip
    assert not [e for e in events if e["reason"].startswith(("Throttled", "Evicted"))], events

    peak = max(s.node for s in samples)
    gaps = [s.gap for s in samples if s.gap]
    print(
        f"\nbaseline {baseline:.2f} cores, waterline {waterline:g}, node peak {peak:.2f}\n"
        f"crossing to under: {under.at - crossed.at:.0f}s "
        f"(samples {crossed.stamp} -> {under.stamp}, node {crossed.node:.2f} -> {under.node:.2f})\n"
        f"low's limit in {len(limits) - 1} steps: {' -> '.join(f'{x:g}' for x in limits)}\n"
        f"released {limits[0] - limits[-1]:.2f} cores of low's limit, node down by "
        f"{peak - under.node:.2f}; throttleDown gaps seen: {gaps[0] if gaps else 'none'} first, "
        f"{gaps[-1] if gaps else 'none'} last"
    )
