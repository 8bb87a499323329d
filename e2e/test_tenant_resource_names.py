"""Issue "Tenant-proof", attack 4, "stop every queue's status", replayed on a whole cluster in
a box (kube-scheduler, the controllers, kwok's fake nodes, the admission webhook).

The attack as found: a tenant with ``edit`` in one namespace made sixteen pods, held by our
admission gate, each asking for 500 made-up extended resources. Every queue (not only the
tenant's) got 7,003 resource names and a 1.56 MB status; every status write failed ("request
is too large"), observedGeneration froze, yet every queue still said Ready=True, /healthz
answered 200, the metric series went from 225 to 24,232 and the log took 343 KB of tracebacks
in a minute.

What must hold instead: every queue's status keeps being written, with only the resources the
nodes offer; the tenant's pods wait with ``ResourceNotOffered``; other teams' pods are still
admitted; the operator's metric series stay where they were."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import objects
from admitting import QUEUE_LABEL, admitting_operator
from clusters import Installed
from operating import Operator, eventually
from tenants import ADMISSION_LABEL, Tenant, make_tenant

GATE = "sharekeeper.io/admission"
TENANT_NAMESPACE = "attack-4"
TEAM_NAMESPACE = "attack-4-team"
QUEUES = ("dims-tenant", "dims-team", "dims-other")
PODS, NAMES_PER_POD = 16, 500
MADE_UP_DOMAIN = "made-up.example.com"


@pytest.fixture(scope="module")
def attacked(
    full_installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Installed, Operator, Tenant]]:
    """Fake nodes, a policy (``admitting.kwok_nodes``, the policy ``all``), three queues, the
    operator serving the webhook at a loopback URL (from when admission is in force), a tenant
    namespace opted in to admission (the tenant has ``edit`` there) and another team's
    namespace."""
    cluster = full_installed.cluster
    tenant = make_tenant(cluster, TENANT_NAMESPACE)
    cluster.kubectl("create", "namespace", TEAM_NAMESPACE)
    cluster.kubectl("label", "namespace", TEAM_NAMESPACE, ADMISSION_LABEL)
    queues = (
        objects.queue("dims-tenant", namespaces=only(TENANT_NAMESPACE)),
        objects.queue("dims-team", weight=2, namespaces=only(TEAM_NAMESPACE)),
        objects.queue("dims-other"),
    )
    try:
        with admitting_operator(
            full_installed,
            tmp_path_factory.mktemp("attack-4") / "operator.log",
            apply=(objects.policy("all"), *queues),
            env={"SHAREKEEPER_DISCOVERY_INTERVAL": "1"},
        ) as operator:
            yield full_installed, operator, tenant
    finally:
        for namespace in (TENANT_NAMESPACE, TEAM_NAMESPACE):
            cluster.discard_namespace(namespace)
        cluster.kubectl("delete", "queues", *QUEUES, "--wait=false")


def only(namespace: str) -> dict[str, Any]:
    """A queue's ``spec.namespaces`` admitting this namespace alone."""
    return {"matchLabels": {"kubernetes.io/metadata.name": namespace}}


def attack_pod(index: int) -> dict[str, Any]:
    """As a compliant client makes it: the queue named at creation, the gate left to the
    webhook. Extended resources are asked for through limits (requests follow them)."""
    made_up = {f"{MADE_UP_DOMAIN}/r{index:02}-{j:03}": "1" for j in range(NAMES_PER_POD)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"attack-{index:02}", "labels": {QUEUE_LABEL: "dims-tenant"}},
        "spec": {
            "containers": [{
                "name": "main", "image": "example/app:1",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"cpu": "100m", "memory": "64Mi", **made_up}},
            }],
        },
    }  # fmt: skip


def metric_series(operator: Operator) -> dict[str, int]:
    """The operator's own series (``sharekeeper_*``), counted by metric family."""
    url = f"http://127.0.0.1:{operator.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        family.name: len(family.samples)
        for family in text_string_to_metric_families(text)
        if family.name.startswith("sharekeeper_")
    }


def offered(installed: Installed) -> set[str]:
    """Every resource name some node's allocatable lists."""
    nodes = installed.cluster.get("nodes")["items"]
    return {name for node in nodes for name in node["status"].get("allocatable", {})}


def status_names(status: dict[str, Any], fields: tuple[str, ...]) -> set[str]:
    return {name for field in fields for name in status.get(field) or {}}


QUEUE_AMOUNTS = ("deserved", "guarantee", "realCapability", "allocated", "request", "inqueue",
                 "elastic", "decidedBy")  # fmt: skip
POLICY_AMOUNTS = ("total", "totalGuarantee", "unmanaged")
OVERCOMMIT_AMOUNTS = ("factors", "overcommittedTotal", "used", "inqueue", "headroom")


def test_a_tenants_made_up_resources_stop_no_queues_status(
    attacked: tuple[Installed, Operator, Tenant],
) -> None:
    installed, operator, tenant = attacked
    cluster = installed.cluster
    eventually(lambda: objects.status(cluster, "queue", "dims-other").get("deserved"), timeout=30)
    series_before = metric_series(operator)

    # The attack: 16 held pods x 500 made-up extended resources, as the tenant.
    for index in range(PODS):
        tenant.kubectl("create", "-f", "-", input=json.dumps(attack_pod(index)))
    pods = cluster.get("pods", "-n", TENANT_NAMESPACE)["items"]
    assert len(pods) == PODS
    assert all(GATE in {g["name"] for g in p["spec"].get("schedulingGates", [])} for p in pods)

    # The tenant's pods are held, each told why: no node of the policy offers what it asks for.
    def told() -> list[str]:
        events = cluster.get(
            "events", "-n", TENANT_NAMESPACE, "--field-selector", "reason=AdmissionWaiting"
        )["items"]
        messages = [event["message"] for event in events]
        assert len(messages) == PODS, messages
        return messages

    for message in eventually(told, timeout=30):
        assert "which no node of policy all offers" in message, message
        assert f"and {NAMES_PER_POD - 5} more resources" in message, message

    def tenant_counted() -> bool:
        status = objects.status(cluster, "queue", "dims-tenant")
        assert status.get("gated") == PODS, status.get("gated")
        assert status["request"] == {"cpu": "1600m", "memory": "1Gi", "pods": str(PODS)}
        return True

    eventually(tenant_counted, timeout=30)

    # Every queue (the others' too) and the policy have only the resources the nodes offer.
    real = offered(installed)
    assert not any(name.startswith(MADE_UP_DOMAIN) for name in real)
    for name in QUEUES:
        status = objects.status(cluster, "queue", name)
        assert status_names(status, QUEUE_AMOUNTS) <= real, name
    policy = objects.status(cluster, "schedulerpolicy", "all")
    assert status_names(policy, POLICY_AMOUNTS) <= real
    assert status_names(policy.get("overcommit") or {}, OVERCOMMIT_AMOUNTS) <= real

    # Statuses keep being written: another queue's spec change shows, with its generation.
    cluster.kubectl("patch", "queue", "dims-other", "--type=merge", "-p", '{"spec":{"weight":3}}')
    generation = cluster.get("queue", "dims-other")["metadata"]["generation"]

    def followed() -> bool:
        for name in QUEUES:
            queue = cluster.get("queue", name)
            status = queue.get("status", {})
            assert status.get("observedGeneration") == queue["metadata"]["generation"], name
            ready = next(c for c in status["conditions"] if c["type"] == "Ready")
            assert ready["status"] == "True", (name, ready)
        return True

    eventually(followed, timeout=30)
    assert generation >= 2

    # Another team's pod is still admitted, scheduled and run.
    team_pod = objects.pod("team-0", "dims-team", cpu="500m", memory="256Mi")
    team_pod["metadata"]["namespace"] = TEAM_NAMESPACE
    cluster.apply(team_pod)

    def admitted() -> bool:
        got = cluster.get("pod", "team-0", "-n", TEAM_NAMESPACE)
        assert not got["spec"].get("schedulingGates"), got["spec"].get("schedulingGates")
        assert got["spec"].get("nodeName") in ("kwok-1", "kwok-2"), got["spec"].get("nodeName")
        return True

    eventually(admitted, timeout=30)

    # Nothing failed to be written, nothing is reported failing, and nothing new was logged
    # per round: the metric series are where they were (a few counters may have appeared).
    assert operator.metric("sharekeeper_writes_total", kind="Queue", outcome="error") == 0
    assert operator.metric("sharekeeper_writes_total", kind="SchedulerPolicy", outcome="error") == 0
    assert operator.metric("sharekeeper_status_not_written") == 0
    series_after = metric_series(operator)
    assert series_after["sharekeeper_queue_deserved"] == series_before["sharekeeper_queue_deserved"]
    assert sum(series_after.values()) <= sum(series_before.values()) + 50, series_after
    assert operator.health()["recomputeRounds"] >= 2  # /healthz answers 200
    assert "Traceback" not in operator.log.read_text(errors="replace"), operator.tail()
