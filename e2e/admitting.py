"""The operator serving the admission webhook on the full cluster, with the API server enforcing
``manifests/admission-policies.yaml``: what the admission modules share (``test_admission.py``,
``test_tenant_admission.py``, ``test_admission_policies.py``, ``test_tenant_resource_names.py``).

``admitting_operator`` returns only once admission is really in force: the webhook gates a new
pod and every ValidatingAdmissionPolicy refuses what it should. Before that, a pod created in
the first seconds could be let through ungated (the webhook not yet called) and then refused by
the fail-closed ``sharekeeper-admission-at-creation``, and the test would flake.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import controlplane
import objects
from clusters import Cluster, Installed
from fakenodes import fake_node, wait_nodes_ready
from operating import SERVICE_ACCOUNT, Operator, eventually, start_operator
from sharekeeper.model.pods import ADMISSION_GATE
from tenants import ADMISSION_LABEL, Tenant, make_tenant

QUEUE_LABEL = "sharekeeper.io/queue"
NOWHERE = "no-such-queue"  # a pod of this queue is held for ever: the queue does not exist
AS_OPERATOR = (
    f"--as={SERVICE_ACCOUNT}",
    "--as-group=system:serviceaccounts",
    "--as-group=system:serviceaccounts:sharekeeper",
    "--as-group=system:authenticated",
)
SMP_REMOVE_GATE = json.dumps(
    {"spec": {"schedulingGates": [{"$patch": "delete", "name": ADMISSION_GATE}]}}
)
POLICIES = (
    "sharekeeper-pod-updates",
    "sharekeeper-gate-opt-in",
    "sharekeeper-admission-at-creation",
    "sharekeeper-queue-immutable",
)


def kwok_nodes() -> list[dict[str, Any]]:
    """The nodes every admission module uses, so that the modules agree on the cluster: two fake
    nodes of 4 cpu (the policy ``all`` shares 8 cpu)."""
    return [fake_node("kwok-1", cpu="4"), fake_node("kwok-2", cpu="4")]


@contextmanager
def admitting_operator(
    installed: Installed,
    log: Path,
    *,
    nodes: Sequence[dict[str, Any]] | None = None,
    apply: Sequence[dict[str, Any]] | None = None,
    files: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[Operator]:
    """The operator serving the webhook at a loopback URL it publishes in the
    MutatingWebhookConfiguration, from when admission is in force (``wait_in_force``) to the
    end of the ``with``, where it is killed.

    Before it starts: the manifests' Deployment is scaled to 0 (the operator runs here as a
    process; its replicas would take node room, unmanaged pods the policy reserves, and serve
    nothing: there is no route to Services), ``files`` are applied (``kubectl apply -f``), then
    ``nodes`` (``kwok_nodes()`` unless told) and ``apply`` (the SchedulerPolicy ``all`` unless
    told), and the nodes are waited for. ``env`` adds to the operator's environment; its log
    goes to ``log``."""
    cluster = installed.cluster
    cluster.kubectl("scale", "deployment/sharekeeper", "-n", "sharekeeper", "--replicas=0")
    for path in files:
        cluster.kubectl("apply", "-f", str(path))
    nodes = kwok_nodes() if nodes is None else nodes
    cluster.apply(*nodes, *([objects.policy("all")] if apply is None else apply))
    wait_nodes_ready(cluster, [node["metadata"]["name"] for node in nodes])
    port = controlplane.free_port()
    operator = start_operator(
        installed.operator_kubeconfig,
        log,
        env=env,
        args=[
            f"--webhook-bind-address=127.0.0.1:{port}",
            f"--webhook-url=https://127.0.0.1:{port}",
        ],
    )
    probe = f"admission-probe-{port}"  # a name of its own: the last one may still be going
    try:
        operator.wait_rounds(1)
        eventually(lambda: _published(cluster, port), timeout=30)
        wait_in_force(make_tenant(cluster, probe))
        yield operator
    finally:
        operator.stop(signal.SIGKILL)
        cluster.kubectl("delete", "namespace", probe, "--ignore-not-found", "--wait=false")


def _published(cluster: Cluster, port: int) -> bool:
    """The operator has written its URL and CA bundle into the webhook configuration."""
    config = cluster.get("mutatingwebhookconfiguration", "sharekeeper-admission")
    client = config["webhooks"][0]["clientConfig"]
    assert client.get("url") == f"https://127.0.0.1:{port}/gate", client
    assert client.get("caBundle")
    return True


def wait_in_force(probe: Tenant, timeout: float = 60) -> None:
    """Until the webhook and every policy are in force, asked through ``probe`` (a tenant whose
    namespace opted in to admission; its held pod ``probe`` stays there for the asking)."""
    probe.cluster.kubectl(
        "create", "-n", probe.namespace, "-f", "-",
        input=json.dumps(pod("probe", NOWHERE, gated=True)),
    )  # fmt: skip
    eventually(lambda: in_force(probe), timeout=timeout)


def in_force(probe: Tenant) -> bool:
    """The webhook gates a new pod of the probe's namespace, and each policy refuses what it
    should (all asked with --dry-run=server: nothing changes)."""
    dry = "--dry-run=server"
    answer = probe.kubectl("create", dry, "-o", "json", "-f", "-",
                           input=json.dumps(pod("new", NOWHERE)), check=False)  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    assert held(json.loads(answer.stdout)), "the webhook does not gate yet"
    kubectl = probe.kubectl
    updates, opt_in, at_creation, immutable = POLICIES
    refused(kubectl("patch", "pod", "probe", dry, "-p", SMP_REMOVE_GATE, check=False), updates)
    refused(
        probe.cluster.kubectl(
            *AS_OPERATOR, "label", "pod", "probe", "-n", probe.namespace, dry, "x=y", check=False
        ),
        updates,
    )
    refused(
        probe.cluster.kubectl(
            "create", dry, "-n", "default", "-f", "-",
            input=json.dumps(pod("gated", gated=True)), check=False,
        ),
        opt_in,
    )  # fmt: skip
    refused(
        kubectl("create", dry, "-f", "-", input=json.dumps(pod("nameless")), check=False),
        at_creation,
    )
    refused(
        kubectl("label", "pod", "probe", dry, "--overwrite", f"{QUEUE_LABEL}=b", check=False),
        immutable,
    )
    return True


def pod(
    name: str,
    queue: str | None = None,
    *,
    node: str | None = None,
    gated: bool = False,
    pad: int = 0,
) -> dict[str, Any]:
    """A small pod (100m cpu, limit 200m), naming ``queue`` by label; ``pad`` bytes more in an
    environment variable (annotations are capped at 256 KiB, a container's env is not)."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "example/app:1",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}},
    }
    if pad:
        container["env"] = [{"name": "PAD", "value": "x" * pad}]
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    if gated:
        spec["schedulingGates"] = [{"name": ADMISSION_GATE}]
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def held(obj: dict[str, Any]) -> bool:
    """The pod carries Sharekeeper's admission gate."""
    return any(gate["name"] == ADMISSION_GATE for gate in obj["spec"].get("schedulingGates") or [])


def refused(result: subprocess.CompletedProcess[str], policy: str, *phrases: str) -> None:
    """The API server refused the request through ``policy``, with a message holding each of
    ``phrases``."""
    assert result.returncode != 0, f"not refused:\n{result.stdout[:2000]}"
    message = " ".join(result.stderr.split())
    assert f"ValidatingAdmissionPolicy '{policy}'" in message, message
    for phrase in phrases:
        assert phrase in message, f"{phrase!r} not in {message!r}"


def namespace_of(request: pytest.FixtureRequest) -> str:
    """A namespace name of the test's own: its name, shortened."""
    name: str = request.node.name
    return name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")


@contextmanager
def opted_in_namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, opted in to admission; deleted at the end, with every
    Queue the test made."""
    name = namespace_of(request)
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, ADMISSION_LABEL)
    try:
        yield name
    finally:
        cluster.discard_namespace(name)
        cluster.kubectl("delete", "queues", "--all", "--wait=false")


def pods_of(installed: Installed, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = installed.cluster.get("pods", "-n", namespace)["items"]
    return items


RECLAIM_POLICY = "all"
"""The one SchedulerPolicy of the reclaim modules."""
RECLAIM_AFTER_SECONDS = 2
"""How long its pods wait before they may reclaim."""


def reclaim_policy(mode: str, max_evictions: int = 10) -> dict[str, Any]:
    """Every queue under one policy that borrows (queues may fill what others leave idle), at
    an overcommit factor of 1 (the gate holds pods until evicted ones are gone), reclaiming in
    ``mode`` for pods that have waited RECLAIM_AFTER_SECONDS."""
    return objects.policy(
        RECLAIM_POLICY,
        admission={"borrow": True},
        overcommit={"factor": 1},
        reclaim={
            "mode": mode,
            "afterSeconds": RECLAIM_AFTER_SECONDS,
            "maxEvictionsPerRound": max_evictions,
        },
    )


def live(pod: dict[str, Any]) -> bool:
    """Bound, not terminating, not finished."""
    return bool(
        pod["spec"].get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and pod["status"].get("phase") not in ("Succeeded", "Failed")
    )


def live_by_queue(installed: Installed, *namespaces: str) -> Counter[str]:
    """The live pods of ``namespaces``, counted by the queue they name."""
    return Counter(
        pod["metadata"]["labels"][QUEUE_LABEL]
        for namespace in namespaces
        for pod in pods_of(installed, namespace)
        if live(pod)
    )


def events_of(installed: Installed, namespace: str, reason: str) -> list[dict[str, Any]]:
    """The Events of ``namespace`` with ``reason``."""
    found = installed.cluster.get("events", "-n", namespace, "--field-selector", f"reason={reason}")
    items: list[dict[str, Any]] = found["items"]
    return items
