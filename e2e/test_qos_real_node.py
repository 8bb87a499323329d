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
to under, the steps, CPU released against the gap) are printed.

The throttle test goes on when ``low`` stops burning (a file it polls, in a host directory it
mounts): the operator is restarted, restores ``low``'s limit step by step to what it was, and
untaints the node after the cool-down. A second test evicts ``low`` instead."""

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
from nodepods import (
    BURN,
    burn_until_stopped,
    busybox_pod,
    cfs_quota_cores,
    container_cgroup,
    cores,
    node_usage,
    wait_running,
)
from operating import Operator, eventually, start_operator
from qosing import node_entry

NAMESPACE = "burners"
POLICY = "real-node-cpu"
STEP = 30  # stepCPURatio, percent
MIN_RATIO = 10  # minCPURatio, percent
# metrics-server's resolution: checking more often would step again on the same sample.
CHECK_SECONDS = 15
BURNER_LIMIT = "700m"
WATERLINE = 1.1  # cores: high's 0.7, what the node itself uses, and room for low's last step
PRIORITIES = {"qos-low": 100, "qos-high": 1_000_000}
COOL_DOWN = 15  # seconds the node stays tainted after the rule restored
TAINT_KEY = "sharekeeper.io/interference"


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
        # The namespace and the classes stay (applied again by the next test), the pods go
        # (the kubelet stops them).
        cluster.kubectl("delete", "nodeqosensurancepolicy", POLICY, "--ignore-not-found")
        cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--timeout=60s", check=False)


class Operators:
    """The operator, started again by ``restart``; every one started is stopped at the end."""

    def __init__(self, installed: Installed, directory: Any) -> None:
        self.installed, self.directory = installed, directory
        self.started: list[Operator] = []
        self.restart()

    def restart(self) -> Operator:
        if self.started:
            self.started[-1].stop()
        running = start_operator(
            self.installed.operator_kubeconfig, self.directory / f"operator-{len(self.started)}.log"
        )
        self.started.append(running)
        running.wait_rounds(0)
        return running

    def stop(self) -> None:
        for running in self.started:
            running.stop()
        print(f"\noperator log tail:\n{self.started[-1].tail(15)}")


@pytest.fixture
def operator(installed: Installed, tmp_path: Any) -> Iterator[Operators]:
    operators = Operators(installed, tmp_path)
    try:
        yield operators
    finally:
        operators.stop()


def policy(waterline: str, *, restore_threshold: int = 1000, evict: bool = False) -> dict[str, Any]:
    """Throttle (or evict) above ``waterline`` cores at the first hot check, and taint the node
    while the rule is triggered; restore after ``restore_threshold`` calm checks (the default:
    not while the burners burn)."""
    action: dict[str, Any] = (
        {"name": "evict", "eviction": {"terminationGracePeriodSeconds": 1}}
        if evict
        else {
            "name": "throttle",
            "disableScheduling": True,
            "coolDownSeconds": COOL_DOWN,
            "throttle": {"cpuThrottle": {"minCPURatio": MIN_RATIO, "stepCPURatio": STEP}},
        }
    )
    return {
        "apiVersion": "ensurance.sharekeeper.io/v1alpha1",
        "kind": "NodeQosEnsurancePolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "nodeSelector": {"matchLabels": dict([realnode.NODE_LABEL])},
            "checkIntervalSeconds": CHECK_SECONDS,
            "objectiveEnsurances": [
                {"name": "cpu", "metricRule": {"name": "cpu_total_usage", "value": waterline},
                 "avoidanceThreshold": 1, "restoreThreshold": restore_threshold,
                 "actionName": action["name"]}],
            "actions": [action],
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


def real_node_entry(cluster: Cluster) -> dict[str, Any]:
    """The real node's entry in the policy's status ({} when it has none)."""
    return node_entry(cluster, POLICY, realnode.NODE_NAME)


def tainted(cluster: Cluster) -> bool:
    taints = cluster.get("node", realnode.NODE_NAME)["spec"].get("taints", [])
    return any(t["key"] == TAINT_KEY for t in taints)


def actions_on(cluster: Cluster, name: str, reason: str) -> int:
    """How many times ``reason`` was announced on pod ``name`` (repeats are one Event's count;
    an operator started anew posts a new Event)."""
    selector = f"--field-selector=involvedObject.name={name},reason={reason}"
    events = cluster.get("events", "-n", NAMESPACE, selector)["items"]
    return sum(int(e.get("count") or 1) for e in events)


def low_quota_reaches(cluster: Cluster, node: realnode.RealNode, limit: float) -> bool:
    """Whether the low pod's CFS quota comes to ``limit`` cores: the kubelet applies a resize
    after the spec shows it (0.9 s, measured)."""

    def there() -> bool:
        quota = cfs_quota_cores(container_cgroup(cluster, node, NAMESPACE, "low"))
        return bool(quota == pytest.approx(limit, abs=0.001))

    return eventually(there, timeout=15)


def steps(samples: list[Sample], start: str = BURNER_LIMIT) -> list[float]:
    """low's limits in cores as they changed, from ``start`` on."""
    limits = [cores(start)]
    for sample in samples:
        if cores(sample.low_limit) != limits[-1]:
            limits.append(cores(sample.low_limit))
    return limits


def start_burners(cluster: Cluster, control: Any) -> None:
    """``high`` burns for good; ``low`` until ``control/stop`` exists."""
    control.mkdir(exist_ok=True)
    for name, command, mounted in (("high", BURN, None), ("low", burn_until_stopped(), control)):
        cluster.apply(busybox_pod(name, NAMESPACE, command, cpu_request="100m",
                                  cpu_limit=BURNER_LIMIT, priority_class=f"qos-{name}",
                                  host_dir=mounted))  # fmt: skip
    for name in ("high", "low"):
        wait_running(cluster, NAMESPACE, name)


def quiet_baseline(cluster: Cluster) -> float:
    """The node's usage in a window without the test's pods, leaving room under WATERLINE for
    high's limit and low's last step; fails if it does not within a minute. A sample may still
    hold the last test's pods, stopped seconds ago: the next ones will not."""
    _, stamp = node_usage(cluster)

    def quiet() -> tuple[float]:
        nonlocal stamp
        baseline, stamp = next_sample(cluster, stamp)
        assert baseline + cores(BURNER_LIMIT) + 0.15 < WATERLINE, (
            f"the node uses {baseline:.2f} cores without the burners: no room under the waterline"
        )
        return (baseline,)  # truthy even at 0

    return eventually(quiet, timeout=60, interval=0)[0]


def test_the_low_priority_burner_is_throttled_under_the_waterline_and_restored_when_it_calms(
    burners: Cluster, operator: Operators, real_node_box: RealNodeBox, tmp_path: Any
) -> None:
    cluster = burners
    node = real_node_box.get().node
    baseline = quiet_baseline(cluster)
    cluster.apply(policy(f"{WATERLINE:g}"))
    control = tmp_path / "control"
    start_burners(cluster, control)
    high_before = cluster.get("pod", "high", "-n", NAMESPACE)

    def throttle_gap() -> str:
        entry = real_node_entry(cluster)
        gaps = [g for g in entry.get("gaps", []) if g.get("class") == "throttleDown"]
        return json.dumps(gaps[0]) if gaps else ""

    # Follow metrics-server's samples and low's limit until the node is back under.
    samples: list[Sample] = []
    crossed: Sample | None = None

    def sample() -> Sample:
        usage, stamp = node_usage(cluster)
        low_limit = limit_of(cluster, "low")
        if not samples or (samples[-1].stamp, samples[-1].low_limit) != (stamp, low_limit):
            samples.append(Sample(time.monotonic(), usage, stamp, low_limit, throttle_gap()))
        return samples[-1]

    def under_again() -> bool:
        nonlocal crossed
        last = sample()
        if crossed is None and last.node > WATERLINE:
            crossed = last
        assert crossed is not None, f"the node is not above {WATERLINE} yet ({last.node:.2f})"
        assert last.low_limit != BURNER_LIMIT, f"low not throttled yet, node at {last.node:.2f}"
        assert last.node < WATERLINE, f"node at {last.node:.2f}, low limited to {last.low_limit}"
        return True

    eventually(under_again, timeout=200, interval=0.5)
    assert crossed is not None
    under = samples[-1]

    # Precise steps: each new limit is STEP % below the lower of the last limit and the usage.
    limits = steps(samples)
    for before, after in itertools.pairwise(limits):
        assert after <= before * (1 - STEP / 100) + 0.001, limits
        assert after >= max(0.1, MIN_RATIO / 100) - 0.001, limits
    # runc enforces the last one; each step was taken once; the node is tainted meanwhile.
    assert low_quota_reaches(cluster, node, limits[-1])
    assert actions_on(cluster, "low", "Throttled") == len(limits) - 1
    assert tainted(cluster)
    # Where a person looks: the Events name the pod's UID, which `kubectl describe` asks for.
    assert "Throttled" in cluster.kubectl("describe", "pod", "low", "-n", NAMESPACE).stdout

    # high was never touched: the same limits, no record, no Event, no restart.
    high = cluster.get("pod", "high", "-n", NAMESPACE)
    assert (
        high["spec"]["containers"][0]["resources"]
        == (high_before["spec"]["containers"][0]["resources"])
    )
    assert high["status"]["containerStatuses"][0]["restartCount"] == 0
    high_quota = cfs_quota_cores(container_cgroup(cluster, node, NAMESPACE, "high"))
    assert high_quota == pytest.approx(cores(BURNER_LIMIT))
    records = {t["pod"]: t for t in real_node_entry(cluster).get("throttled", [])}
    assert set(records) == {f"{NAMESPACE}/low"}, records
    assert records[f"{NAMESPACE}/low"]["originalLimit"] == BURNER_LIMIT
    # The record is ours, in the policy's status, by UID; the pod itself is never annotated.
    low = cluster.get("pod", "low", "-n", NAMESPACE)
    assert records[f"{NAMESPACE}/low"]["uid"] == low["metadata"]["uid"]
    assert "sharekeeper.io/cpu-throttle" not in low["metadata"].get("annotations", {})
    events = cluster.get("events", "-n", NAMESPACE,
                         "--field-selector=involvedObject.name=high")["items"]  # fmt: skip
    assert not [e for e in events if e["reason"].startswith(("Throttled", "Evicted"))], events

    peak = max(s.node for s in samples)
    gaps = [s.gap for s in samples if s.gap]
    print(
        f"\nbaseline {baseline:.2f} cores, waterline {WATERLINE:g}, node peak {peak:.2f}\n"
        f"crossing to under: {under.at - crossed.at:.0f}s "
        f"(samples {crossed.stamp} -> {under.stamp}, node {crossed.node:.2f} -> {under.node:.2f})\n"
        f"low's limit in {len(limits) - 1} steps: {' -> '.join(f'{x:g}' for x in limits)}\n"
        f"released {limits[0] - limits[-1]:.2f} cores of low's limit, node down by "
        f"{peak - under.node:.2f}; throttleDown gaps seen: {gaps[0] if gaps else 'none'} first, "
        f"{gaps[-1] if gaps else 'none'} last"
    )

    # low stops burning; the rule may now restore after two calm checks (lowered only now, so
    # that the restore does not race the burn).
    (control / "stop").touch()
    stopped = time.monotonic()
    cluster.apply(policy(f"{WATERLINE:g}", restore_threshold=2))
    throttled_at = len(samples)

    def restored_once() -> bool:
        assert sample().low_limit != under.low_limit, f"low still at {under.low_limit}"
        return True

    eventually(restored_once, timeout=120, interval=0.5)
    # Restarted in the middle of the restore: the next steps go on from the status's record.
    operator.restart()

    def back_to_original() -> bool:
        last = sample()
        assert last.low_limit == BURNER_LIMIT, f"low at {last.low_limit}"
        assert not real_node_entry(cluster).get("throttled"), real_node_entry(cluster)
        return True

    eventually(back_to_original, timeout=240, interval=0.5)
    restored = time.monotonic()
    ups = steps(samples[throttled_at:], start=under.low_limit)
    # Up by STEP % of the current limit each check, never above the original.
    for before, after in itertools.pairwise(ups):
        assert before < after <= min(before * (1 + STEP / 100), cores(BURNER_LIMIT)) + 0.001, ups
    assert ups[-1] == cores(BURNER_LIMIT)
    assert actions_on(cluster, "low", "Restored") == len(ups) - 1
    assert actions_on(cluster, "low", "Throttled") == len(limits) - 1
    assert low_quota_reaches(cluster, node, cores(BURNER_LIMIT))

    # The taint goes COOL_DOWN seconds after the rule restored.
    eventually(lambda: not tainted(cluster), timeout=COOL_DOWN + 4 * CHECK_SECONDS, interval=1)
    print(
        f"restore: {' -> '.join(f'{x:g}' for x in ups)} in {restored - stopped:.0f}s after the "
        f"burn stopped, across one operator restart; untainted {time.monotonic() - restored:.0f}s "
        f"after"
    )


def test_the_low_priority_burner_is_evicted_above_the_eviction_waterline(
    burners: Cluster, operator: Operators, tmp_path: Any
) -> None:
    cluster = burners
    quiet_baseline(cluster)
    cluster.apply(policy(f"{WATERLINE:g}", evict=True))
    start_burners(cluster, tmp_path / "control")
    started = time.monotonic()
    low_uid = cluster.get("pod", "low", "-n", NAMESPACE)["metadata"]["uid"]

    def low_gone() -> bool:
        pods = cluster.get("pods", "-n", NAMESPACE)["items"]
        assert [p["metadata"]["name"] for p in pods] == ["high"], [
            (p["metadata"]["name"], p["status"].get("phase")) for p in pods
        ]
        return True

    eventually(low_gone, timeout=120, interval=0.5)
    evicted = time.monotonic()

    def under() -> float:
        usage, _ = node_usage(cluster)
        assert usage < WATERLINE, f"node at {usage:.2f}"
        return usage

    usage = eventually(under, timeout=60, interval=1)
    # One eviction, of low alone, announced on it; high still runs as it was.
    events = cluster.get("events", "-n", NAMESPACE, "--field-selector=reason=Evicted")["items"]
    assert [(e["involvedObject"]["name"], e["involvedObject"]["uid"]) for e in events] == [
        ("low", low_uid)
    ], events
    assert actions_on(cluster, "low", "Evicted") == 1
    high = cluster.get("pod", "high", "-n", NAMESPACE)
    assert high["status"]["containerStatuses"][0]["restartCount"] == 0
    assert high["spec"]["containers"][0]["resources"]["limits"]["cpu"] == BURNER_LIMIT
    print(f"\nlow evicted {evicted - started:.0f}s after the burners ran; node then {usage:.2f}")
