"""What gets published for a snapshot: the queue's Enqueueable answer and node annotations."""

from __future__ import annotations

import json
from typing import Any

from builders import node, pod, pod_group, policy, queue
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of


def published(*objects: dict[str, Any]) -> Publication:
    inputs = parse_objects(objects)
    return publication(snapshot_of(inputs, Context(0.0, 0)), inputs.node_policies)


def enqueueable(result: Publication, name: str) -> dict[str, Any] | None:
    conditions = result.queues[name]["conditions"]
    return next((c for c in conditions if c["type"] == "Enqueueable"), None)


def test_a_job_larger_than_the_overcommitted_headroom_is_explained() -> None:
    # 10 cpu x 1.2 = 12 cpu admissible; 8 in use leaves 4, the next job asks for 6.
    result = published(
        policy("p"),
        node("n1", cpu=10, memory="64Gi"),
        queue("a"),
        pod("running", "a", node="n1", cpu=8, memory="1Gi"),
        pod_group("big", "a", min_resources={"cpu": "6", "memory": "1Gi"}),
    )
    answer = enqueueable(result, "a")
    assert answer is not None
    assert (answer["status"], answer["reason"]) == ("False", "OvercommitHeadroomExceeded")
    assert "PodGroup ns/big" in answer["message"]
    assert "cpu 6 requested, 4 available" in answer["message"]


def test_a_job_that_fits_is_admissible_and_no_job_means_no_condition() -> None:
    result = published(
        policy("p"),
        node("n1", cpu=10, memory="64Gi"),
        queue("a"),
        queue("b"),
        pod_group("small", "a", min_resources={"cpu": "2", "memory": "1Gi"}),
    )
    answer = enqueueable(result, "a")
    assert answer is not None
    assert (answer["status"], answer["reason"]) == ("True", "Admissible")
    assert enqueueable(result, "b") is None


def test_a_node_two_policies_select_carries_the_older_ones_annotations() -> None:
    gpu, everything = policy("gpu", node_labels={"pool": "gpu"}), policy("all")
    gpu["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    everything["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    result = published(
        gpu,
        everything,
        node("shared", labels={"pool": "gpu"}, cpu=8, memory="8Gi"),
        node("plain", cpu=8, memory="8Gi"),
        queue("a"),
    )
    assert result.nodes["shared"]["sharekeeper.io/policy"] == "gpu", "older than all"
    assert result.nodes["plain"]["sharekeeper.io/policy"] == "all"
    assert json.loads(result.nodes["plain"]["sharekeeper.io/overcommit-factors"]) == {
        "cpu": 1.2,
        "memory": 1.2,
    }


def test_nodes_alike_share_their_overcommit_spelling_and_others_get_their_own() -> None:
    """The round spells each distinct allocatable once; a node of another size, or of a policy
    with other factors, still gets its own numbers."""
    cpu = policy("cpu", node_labels={"pool": "cpu"})
    cpu["spec"]["overcommit"] = {"factors": {"cpu": 2}}
    cpu["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    everything = policy("all")
    everything["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    result = published(
        cpu,
        everything,
        *(node(f"small-{i}", cpu=8, memory="8Gi") for i in range(2)),
        node("large", cpu=16, memory="8Gi"),
        node("doubled", labels={"pool": "cpu"}, cpu="4800m", memory="8Gi"),
        queue("a"),
    )
    allocatable, factors = (
        {
            name: json.loads(annotations[f"sharekeeper.io/overcommit-{which}"])["cpu"]
            for name, annotations in result.nodes.items()
        }
        for which in ("allocatable", "factors")
    )
    assert factors == {"small-0": 1.2, "small-1": 1.2, "large": 1.2, "doubled": 2}
    assert allocatable == {
        "small-0": "9600m",
        "small-1": "9600m",
        "large": "19200m",
        "doubled": "9600m",
    }


def test_unmanaged_pods_count_once_in_the_overcommit_headroom() -> None:
    """Found: under Reserve the overcommitted total was the net total while ``used`` still
    held the unmanaged pods, so they were taken off twice (headroom 7.8 instead of 9)."""
    result = published(
        policy("p"),
        node("n", cpu=10),
        queue("q"),
        pod("work", "q", node="n", cpu=2),
        pod("agent", namespace="kube-system", node="n", cpu=1),
    )
    status = result.policies["p"]
    assert status["total"]["cpu"] == "9"  # what the queues share
    assert status["overcommit"]["overcommittedTotal"]["cpu"] == "12"  # 10 x 1.2, gross
    assert status["overcommit"]["used"]["cpu"] == "3"
    assert status["overcommit"]["headroom"]["cpu"] == "9"
