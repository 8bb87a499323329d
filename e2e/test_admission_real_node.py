"""Admission on the real node (``realnode.py``): the pods the gate releases are bound by
kube-scheduler to the real node, and the kubelet runs them as containers; the pods it holds
start when the first ones finish.

The node offers the machine's cores, C. Two queues of equal weight each submit a Job of three
busybox pods of C/5 CPU each that run for RUN_FOR; together they ask 1.2 C, so each queue
deserves C/2, room for two of its pods (0.4 C): two run, one waits behind the gate."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import objects
import realnode
from admitting import admitting_operator, held, opted_in_namespace, pods_of
from clusters import Installed, RealNodeBox
from fakenodes import job
from nodepods import cores
from operating import eventually

RUN_FOR = 20  # seconds
PODS_PER_JOB = 3


@pytest.fixture
def installed(real_node_box: RealNodeBox) -> Installed:
    return real_node_box.installed()


@pytest.fixture
def space(installed: Installed, request: pytest.FixtureRequest) -> Iterator[str]:
    with opted_in_namespace(installed.cluster, request) as name:
        yield name


def busybox_job(name: str, namespace: str, queue: str, cpu: str) -> dict[str, Any]:
    """A Job of PODS_PER_JOB pods at once, each sleeping RUN_FOR seconds in the local image
    (``fakenodes.job``'s, whose completion delay only kwok reads)."""
    made = job(name, namespace, completions=PODS_PER_JOB, parallelism=PODS_PER_JOB, cpu=cpu,
               memory="32Mi", labels={"sharekeeper.io/queue": queue})  # fmt: skip
    template = made["spec"]["template"]["spec"]
    template["terminationGracePeriodSeconds"] = 1
    template["containers"][0].update(
        image=realnode.BUSYBOX_IMAGE, imagePullPolicy="Never", command=["sleep", str(RUN_FOR)]
    )
    return made


def running_in_containers(pod: dict[str, Any]) -> bool:
    """Bound to the real node and its container started by the kubelet (a containerd ID)."""
    statuses = pod["status"].get("containerStatuses") or []
    return (
        pod["spec"].get("nodeName") == realnode.NODE_NAME
        and bool(statuses)
        and statuses[0].get("containerID", "").startswith("containerd://")
        and ("running" in statuses[0]["state"] or "terminated" in statuses[0]["state"])
    )


def test_released_pods_run_on_the_real_node_and_the_held_ones_follow(
    installed: Installed, space: str, tmp_path: Any
) -> None:
    cluster = installed.cluster
    allocatable = cluster.get("node", realnode.NODE_NAME)["status"]["allocatable"]["cpu"]
    cpu = f"{int(cores(allocatable) * 1000) // 5}m"
    with admitting_operator(installed, tmp_path / "operator.log", nodes=[]):
        cluster.apply(objects.queue("a"), objects.queue("b"))
        cluster.apply(*(busybox_job(f"job-{q}", space, q, cpu) for q in "ab"))

        def first_wave() -> list[dict[str, Any]]:
            pods = pods_of(installed, space)
            started = Counter(p["metadata"]["labels"]["sharekeeper.io/queue"]
                              for p in pods if running_in_containers(p))  # fmt: skip
            waiting = Counter(p["metadata"]["labels"]["sharekeeper.io/queue"]
                              for p in pods if held(p))  # fmt: skip
            assert (started, waiting) == (Counter(a=2, b=2), Counter(a=1, b=1)), (started, waiting)
            return pods

        pods = eventually(first_wave, timeout=60, interval=1)
        released = [p for p in pods if not held(p)]
        assert all(p["metadata"]["annotations"].get("sharekeeper.io/admitted") for p in released)

        # The first pods end; the held ones are let through and run on the node too.
        def every_job_complete() -> bool:
            for name in ("job-a", "job-b"):
                status = cluster.get("job", name, "-n", space).get("status", {})
                assert status.get("succeeded") == PODS_PER_JOB, (name, status)
            return True

        eventually(every_job_complete, timeout=4 * RUN_FOR + 60, interval=1)
        pods = pods_of(installed, space)
        assert len(pods) == 2 * PODS_PER_JOB
        assert not any(held(p) for p in pods)
        assert all(p["spec"]["nodeName"] == realnode.NODE_NAME for p in pods)
        assert all(p["status"]["phase"] == "Succeeded" for p in pods)
