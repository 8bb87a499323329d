"""Admission through scheduling gates on a whole cluster in a box: Jobs make the pods, the
webhook gates them, the operator releases them in deserved proportions, the real kube-scheduler
binds them to kwok's nodes, kwok runs and completes them, and the next ones are let through.

Two fake nodes of 4 cpu each: the policy shares 8 cpu. Each test has a namespace of its own,
labelled for admission, and deletes it and its queues at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import objects
from admitting import admitting_operator, held, opted_in_namespace, pods_of
from clusters import REPO, Installed
from fakenodes import job, wait_job_complete
from operating import Operator, eventually

PODGROUP_CRD = Path(__file__).parent / "volcano" / "podgroups.yaml"


@pytest.fixture(scope="module")
def admitting(full_installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[Installed, Operator]
]:  # fmt: skip
    """Nodes, a policy (``admitting.kwok_nodes``, the policy ``all``), Volcano's PodGroup CRD
    (for gangs) and the operator serving the webhook at a loopback URL it publishes in the
    MutatingWebhookConfiguration, from when admission is in force."""
    with admitting_operator(
        full_installed,
        tmp_path_factory.mktemp("admitting") / "operator.log",
        files=[PODGROUP_CRD],
        env={"SHAREKEEPER_DISCOVERY_INTERVAL": "1"},
    ) as operator:
        yield full_installed, operator


@pytest.fixture
def space(admitting: tuple[Installed, Operator], request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, opted in to admission."""
    with opted_in_namespace(admitting[0].cluster, request) as name:
        yield name


def let_through(installed: Installed, namespace: str) -> Counter[str]:
    """Pods let through the gate and not finished, by queue."""
    return Counter(
        pod["metadata"]["labels"]["sharekeeper.io/queue"]
        for pod in pods_of(installed, namespace)
        if not held(pod) and pod["status"].get("phase") not in ("Succeeded", "Failed")
    )


def queued_job(name: str, namespace: str, queue: str, **spec: Any) -> dict[str, Any]:
    return job(name, namespace, labels={"sharekeeper.io/queue": queue}, **spec)


def test_jobs_beyond_the_cluster_run_in_deserved_proportions_and_complete(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    installed, _ = admitting
    cluster = installed.cluster
    weights = {"a": 1, "b": 1, "c": 2}
    # Closed until every Job has made its pods: a round that saw a's and b's pods before c's
    # would let them have c's share, and the first wave would not be the proportions'.
    cluster.apply(*(objects.queue(q, weight, state="Closed") for q, weight in weights.items()))
    # 18 cpu asked of 8: a and b deserve 2 each, c 4.
    cluster.apply(*(
        queued_job(f"job-{q}", space, q, completions=6, parallelism=6, cpu="1", run_for="6s")
        for q in "abc"
    ))  # fmt: skip
    eventually(lambda: sum(held(pod) for pod in pods_of(installed, space)) == 18, timeout=30)
    cluster.apply(*(objects.queue(q, weight, state="Open") for q, weight in weights.items()))

    def first_wave() -> Counter[str]:
        through = let_through(installed, space)
        assert through == Counter({"a": 2, "b": 2, "c": 4}), through
        return through

    eventually(first_wave, timeout=30)
    pods = pods_of(installed, space)
    assert sum(held(pod) for pod in pods) == 10
    running = [pod for pod in pods if not held(pod)]
    # The real scheduler bound each released pod to a fake node, and kwok runs it.
    assert {pod["spec"].get("nodeName") for pod in running} <= {"kwok-1", "kwok-2"}
    assert all(pod["metadata"]["annotations"].get("sharekeeper.io/admitted") for pod in running)

    def told_why() -> bool:  # the Events go out after the round's releases, not before them
        found = cluster.get("events", "-n", space, "--field-selector", "reason=AdmissionWaiting")
        return any("deserved share" in event["message"] for event in found["items"])

    eventually(told_why)
    counts = lambda: [objects.status(cluster, "queue", "c").get(k) for k in ("admitted", "gated")]  # noqa: E731
    eventually(lambda: counts() == [4, 2], timeout=5)
    # Pods finish, the next ones are let through, and every Job completes.
    for q in "abc":
        wait_job_complete(cluster, space, f"job-{q}", timeout=120)
    assert not any(held(pod) for pod in pods_of(installed, space))


def test_a_gang_is_admitted_whole_or_not_at_all(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    installed, _ = admitting
    cluster = installed.cluster
    cluster.apply(objects.queue("a"), objects.queue("b"))
    podgroups = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": name, "namespace": space},
         "spec": {"queue": queue, "minMember": 3}}
        for name, queue in (("huge", "a"), ("fits", "b"))
    ]  # fmt: skip
    cluster.apply(*podgroups)
    group = "scheduling.k8s.io/group-name"
    # 3 x 3 cpu never fits in 8 cpu, let alone in a's half; 3 x 1 cpu fits in b's half.
    cluster.apply(
        job("huge", space, completions=3, parallelism=3, cpu="3", annotations={group: "huge"}),
        job("fits", space, completions=3, parallelism=3, cpu="1", run_for="3s",
            annotations={group: "fits"}),
    )  # fmt: skip
    wait_job_complete(cluster, space, "fits", timeout=60)
    stamps = {
        pod["metadata"]["annotations"]["sharekeeper.io/admitted"]
        for pod in pods_of(installed, space)
        if pod["metadata"]["annotations"].get(group) == "fits"
    }
    assert len(stamps) == 1  # the three went in one round
    huge = [
        p for p in pods_of(installed, space) if p["metadata"]["annotations"].get(group) == "huge"
    ]
    assert len(huge) == 3
    assert all(held(pod) for pod in huge)

    def each_told_it_does_not_fit() -> bool:
        # A pod the round saw before the Job controller made all three was told first that its
        # gang was incomplete; every pod is told again once the reason is the room.
        events = cluster.get("events", "-n", space, "--field-selector", "reason=AdmissionWaiting")
        told = {
            e["involvedObject"]["name"]
            for e in events["items"]
            if "cpu 9 requested" in e["message"]
        }
        assert told >= {pod["metadata"]["name"] for pod in huge}, told
        return True

    eventually(each_told_it_does_not_fit)


def test_a_weight_change_shifts_what_each_queue_admits(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    installed, _ = admitting
    cluster = installed.cluster
    cluster.apply(objects.queue("a"), objects.queue("b"))
    cluster.apply(*(
        queued_job(f"job-{q}", space, q, completions=30, parallelism=30, cpu="1", run_for="4s")
        for q in "ab"
    ))  # fmt: skip
    eventually(lambda: let_through(installed, space) == Counter({"a": 4, "b": 4}), timeout=30)
    cluster.kubectl("patch", "queue", "b", "--type=merge", "-p", '{"spec":{"weight":3}}')

    def shifted() -> bool:
        through = let_through(installed, space)
        assert through == Counter({"a": 2, "b": 6}), through
        return True

    # a's running pods finish (nothing is preempted); then only b's are let through.
    eventually(shifted, timeout=60)


def test_removing_the_label_stops_gating_and_release_lets_held_pods_go(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    installed, _ = admitting
    cluster = installed.cluster
    lost = objects.pod("lost", "no-such-queue", cpu="1", memory="1Gi")
    lost["metadata"]["namespace"] = space
    cluster.apply(lost)
    got = cluster.get("pod", "lost", "-n", space)
    assert held(got)
    cluster.kubectl("label", "namespace", space, "sharekeeper.io/admission-")
    free = objects.pod("free", "no-such-queue", cpu="1", memory="1Gi")
    free["metadata"]["namespace"] = space
    cluster.apply(free)
    assert not held(cluster.get("pod", "free", "-n", space))
    # The pod held before stays held (its queue does not exist) until released by hand.
    assert held(cluster.get("pod", "lost", "-n", space))
    released = subprocess.run(
        [sys.executable, "-m", "sharekeeper.cli", "release", "--namespace", space],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True, text=True, check=False, cwd=REPO,
    )  # fmt: skip
    assert released.returncode == 0, released.stderr
    assert released.stdout.strip() == "pod/lost released"
    got = cluster.get("pod", "lost", "-n", space)
    assert not held(got)
    assert json.dumps(got["spec"].get("schedulingGates") or []) == "[]"
    eventually(lambda: cluster.get("pod", "lost", "-n", space)["spec"].get("nodeName"))
