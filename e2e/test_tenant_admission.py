"""A tenant cannot jump a queue it shares with other teams, nor learn their pods' names from
its own pods' Events, on a whole cluster in a box (the webhook gates, the operator releases,
kube-scheduler and kwok run the pods).

Both teams are ServiceAccounts bound to the built-in ClusterRole ``edit`` in their own
namespace (``tenants.py``), impersonated through kubectl, and create their pods as compliant
clients do: the queue label set at creation, the gate left to the webhook."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import objects
from admitting import admitting_operator
from admitting import held as carries_the_gate
from clusters import Installed
from operating import Operator, eventually
from tenants import Tenant, make_tenant

QUEUE = "tenant-shared"
ATTACKER = "adm-attacker"
VICTIM = "adm-victim"


@pytest.fixture(scope="module")
def admitting(full_installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[Installed, Operator]
]:  # fmt: skip
    """Two fake nodes of 4 cpu, a policy over every node (``admitting.kwok_nodes``, the policy
    ``all``), and the operator serving the webhook at a loopback URL it publishes in the
    MutatingWebhookConfiguration, from when admission is in force."""
    log = tmp_path_factory.mktemp("tenant-admission") / "operator.log"
    with admitting_operator(full_installed, log) as operator:
        yield full_installed, operator


@pytest.fixture(scope="module")
def teams(admitting: tuple[Installed, Operator]) -> Iterator[tuple[Tenant, Tenant]]:
    """The attacker's namespace and another team's, both opted in to admission, each with
    ``edit`` there and nowhere else."""
    cluster = admitting[0].cluster
    try:
        yield make_tenant(cluster, ATTACKER), make_tenant(cluster, VICTIM)
    finally:
        for namespace in (ATTACKER, VICTIM):
            cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")


@pytest.fixture
def shared(
    admitting: tuple[Installed, Operator],
    teams: tuple[Tenant, Tenant],
    request: pytest.FixtureRequest,
) -> Iterator[Installed]:
    """The queue both teams' pods name; their pods and the queue go at the end (the
    operator's log is printed when the test failed)."""
    installed, operator = admitting
    failed = request.session.testsfailed
    try:
        yield installed
    finally:
        if request.session.testsfailed > failed:
            cluster = installed.cluster
            for namespace in (ATTACKER, VICTIM):
                events = cluster.get("events", "-n", namespace)["items"]
                print(namespace, [(e["involvedObject"]["name"], e["message"]) for e in events])
            print(operator.tail(80))
        for namespace in (ATTACKER, VICTIM):
            installed.cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=false")
        installed.cluster.kubectl("delete", "queue", QUEUE, "--ignore-not-found")


def queued_pod(name: str, cpu: str, priority_class: str | None = None) -> str:
    """A bare pod naming the shared queue at creation; the webhook gates it."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "example/app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    }  # fmt: skip
    if priority_class:
        spec["priorityClassName"] = priority_class
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"sharekeeper.io/queue": QUEUE}},
        "spec": spec,
    })  # fmt: skip


def held(installed: Installed, namespace: str, name: str) -> bool:
    return carries_the_gate(installed.cluster.get("pod", name, "-n", namespace))


def gated(installed: Installed) -> int:
    return int(objects.status(installed.cluster, "queue", QUEUE).get("gated", -1))


def test_a_forged_system_priority_does_not_jump_a_shared_queue(
    shared: Installed, teams: tuple[Tenant, Tenant]
) -> None:
    """The other team's small pod was held first; the attacker's pod, later, asks for more
    than the cluster has and names system-cluster-critical. Before, it went first by that
    priority, never fitted, and held the other team's pod behind it for as long as it stood."""
    attacker, victim = teams
    cluster = shared.cluster
    cluster.apply(objects.queue(QUEUE, state="Closed"))  # both wait while it is closed
    victim.kubectl("create", "-f", "-", input=queued_pod("train-0", "1"))
    time.sleep(1.1)  # creation times are in whole seconds: the other team's pod is older
    hog = queued_pod("secret-hog", "1000", priority_class="system-cluster-critical")
    attacker.kubectl("create", "-f", "-", input=hog)
    assert cluster.get("pod", "secret-hog", "-n", ATTACKER)["spec"]["priority"] >= 2_000_000_000
    eventually(lambda: gated(shared) == 2, timeout=30)
    cluster.kubectl("patch", "queue", QUEUE, "--type=merge", "-p", '{"spec":{"state":"Open"}}')

    def released() -> bool:
        assert not held(shared, VICTIM, "train-0"), "the other team's pod is still held"
        return True

    eventually(released, timeout=30)
    assert held(shared, ATTACKER, "secret-hog")
    # The real scheduler binds it: it was let through, not merely ungated.
    eventually(lambda: cluster.get("pod", "train-0", "-n", VICTIM)["spec"].get("nodeName"))


def test_a_pods_events_name_no_pod_of_another_namespace(
    shared: Installed, teams: tuple[Tenant, Tenant]
) -> None:
    """The other team's pod, first in line by age, does not fit; the attacker's pod waits
    behind it, and the attacker reads its own pod's Event. Before, it said "it waits behind pod
    adm-victim/secret-project-train-0 of queue tenant-shared"."""
    attacker, victim = teams
    cluster = shared.cluster
    cluster.apply(objects.queue(QUEUE))
    victim.kubectl("create", "-f", "-", input=queued_pod("secret-project-train-0", "1000"))
    eventually(lambda: gated(shared) == 1, timeout=30)
    time.sleep(1.1)  # creation times are in whole seconds: the other team's pod is older
    attacker.kubectl("create", "-f", "-", input=queued_pod("probe", "1"))
    selector = "reason=AdmissionWaiting,involvedObject.name=probe"

    def told() -> str:
        events = attacker.kubectl("get", "events", "--field-selector", selector, "-o", "json")
        messages = [event["message"] for event in json.loads(events.stdout)["items"]]
        assert messages, "no AdmissionWaiting event on probe yet"
        return "\n".join(messages)

    message = eventually(told, timeout=30)
    assert "secret-project" not in message
    assert VICTIM not in message
    assert "waits behind a pod of another namespace in queue tenant-shared" in message
    assert held(shared, ATTACKER, "probe")
