"""A released pod the scheduler cannot place stops holding its queue's room after the policy's
``admission.bindTimeoutSeconds``, on a whole cluster in a box: the real kube-scheduler finds no
node for it (a node selector no node matches), the operator gives its room to the next held
pod of the queue, which the scheduler binds, and the stuck pod gets one NotBound Warning that
repeats what the scheduler said.

Two fake nodes of 4 cpu; overcommit factor 1, so the headroom holds nothing the queue's share
does not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import objects
from admitting import admitting_operator, held, opted_in_namespace
from clusters import Installed
from operating import Operator, eventually

TIMEOUT = 15
"""Seconds: far longer than the scheduler takes to bind a pod that fits, and long enough for
the test to create the next pod and see it told to wait before the stuck one's time is up
(kubectl calls take seconds on a loaded machine)."""


def bind_timeout_policy(seconds: int | None) -> dict[str, Any]:
    admission = {} if seconds is None else {"bindTimeoutSeconds": seconds}
    return objects.policy("all", admission=admission, overcommit={"factor": 1})


@pytest.fixture(scope="module")
def admitting(
    full_installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Installed, Operator]]:
    try:
        with admitting_operator(
            full_installed,
            tmp_path_factory.mktemp("bind-timeout") / "operator.log",
            apply=[bind_timeout_policy(TIMEOUT)],
        ) as operator:
            yield full_installed, operator
    finally:
        full_installed.cluster.apply(bind_timeout_policy(None))


@pytest.fixture
def space(admitting: tuple[Installed, Operator], request: pytest.FixtureRequest) -> Iterator[str]:
    with opted_in_namespace(admitting[0].cluster, request) as name:
        yield name


def queued_pod(name: str, namespace: str, cpu: str, **spec: Any) -> dict[str, Any]:
    obj = objects.pod(name, "a", cpu=cpu, memory="1Gi")
    obj["metadata"]["namespace"] = namespace
    obj["spec"].update(spec)
    return obj


def events(installed: Installed, namespace: str, reason: str, pod: str) -> list[dict[str, Any]]:
    selector = f"reason={reason},involvedObject.name={pod}"
    found: list[dict[str, Any]] = installed.cluster.get(
        "events", "-n", namespace, "--field-selector", selector
    )["items"]
    return found


def test_a_pod_no_node_takes_gives_its_room_to_the_next_after_the_timeout(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    installed, _ = admitting
    cluster = installed.cluster
    cluster.apply(objects.queue("a"))
    # 6 cpu: a deserves all it asks for, and it is let through; no node has the label.
    cluster.apply(queued_pod("stuck", space, "6", nodeSelector={"sharekeeper.test/none": "x"}))
    eventually(lambda: not held(cluster.get("pod", "stuck", "-n", space)), timeout=30)
    # 4 more cpu: a now deserves the 8 the policy shares, 6 of which stuck still holds.
    cluster.apply(queued_pod("next", space, "4"))

    def told_to_wait() -> str:
        found = events(installed, space, "AdmissionWaiting", "next")
        assert len(found) == 1, found
        message: str = found[0]["message"]
        return message

    waiting = eventually(told_to_wait, timeout=30)
    assert "no room in queue a's deserved share" in waiting
    assert waiting.endswith("; 1st of 1 held in queue a")

    # bindTimeoutSeconds after stuck's release, its room is next's: the scheduler binds next.
    bound = lambda: cluster.get("pod", "next", "-n", space)["spec"].get("nodeName")  # noqa: E731
    assert eventually(bound, timeout=30) in ("kwok-1", "kwok-2")
    stuck = cluster.get("pod", "stuck", "-n", space)
    assert not stuck["spec"].get("nodeName")

    (warning,) = eventually(lambda: events(installed, space, "NotBound", "stuck"), timeout=10)
    # Told once: the rounds since (next's release, its binding) did not repeat it.
    assert (warning["type"], warning.get("count")) == ("Warning", 1)
    message = warning["message"]
    admitted = stuck["metadata"]["annotations"]["sharekeeper.io/admitted"]
    assert message.startswith(f"admitted at {admitted} and not bound to a node {TIMEOUT} s later")
    assert "it no longer holds queue a's room" in message
    assert "; the scheduler says: 0/2 nodes are available" in message

    def counted() -> bool:
        status = objects.status(cluster, "queue", "a")
        assert status.get("notBound") == 1, status
        assert status.get("notBoundPods") == [f"{space}/stuck"], status
        return True

    eventually(counted, timeout=10)
