"""A hostile tenant against admission, on a whole cluster in a box: a ServiceAccount with the
built-in ClusterRole ``edit`` in its own namespace (``tenants.make_tenant``), the operator
serving the webhook, the API server enforcing ``manifests/admission-policies.yaml``.

Each attack below worked before those policies (and, for the big pod, before the webhook read
reviews over 1 MiB): ``edit`` may patch, label and create pods at will, and the webhook alone
never refused anything. Each test asserts the refusal and the message a person is given, and
that what Sharekeeper itself does still works."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import controlplane
import objects
from admitting import (
    AS_OPERATOR,
    NOWHERE,
    POLICIES,
    QUEUE_LABEL,
    SMP_REMOVE_GATE,
    admitting_operator,
    held,
    namespace_of,
    pod,
    refused,
)
from clusters import Cluster, Installed
from operating import SERVICE_ACCOUNT, Operator, eventually
from sharekeeper.model.pods import ADMISSION_GATE, ADMITTED_ANNOTATION, release_patch
from tenants import Tenant, make_tenant

RELEASE = json.dumps(release_patch("2026-01-01T00:00:00Z"))


def create(tenant: Tenant, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The tenant creates ``obj`` in its namespace (``create``, not ``apply``: apply would copy
    the whole object into an annotation)."""
    return tenant.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj), check=False)


def created(tenant: Tenant, obj: dict[str, Any]) -> dict[str, Any]:
    result = create(tenant, obj)
    assert result.returncode == 0, result.stderr
    got: dict[str, Any] = json.loads(result.stdout)
    return got


def get_pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.get("pod", name, "-n", namespace)
    return got


def running(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """Until the pod is let through, bound by the scheduler and run by kwok."""

    def check() -> dict[str, Any]:
        got = get_pod(cluster, namespace, name)
        assert not held(got), "still held"
        assert got["status"].get("phase") == "Running", got["status"]
        return got

    return eventually(check, timeout=40)


# --- the cluster: the operator serving the webhook, the policies in force ---------------------


@pytest.fixture(scope="module")
def admitting(
    full_installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Installed, Operator]]:
    """The nodes and policy every admission module uses (``admitting.kwok_nodes``), and the
    operator serving the webhook at a loopback URL, from when the webhook and every policy are
    in force."""
    log = tmp_path_factory.mktemp("admission-policies") / "operator.log"
    with admitting_operator(
        full_installed, log, env={"SHAREKEEPER_DISCOVERY_INTERVAL": "1"}
    ) as operator:
        yield full_installed, operator


@pytest.fixture
def tenant(
    admitting: tuple[Installed, Operator], request: pytest.FixtureRequest
) -> Iterator[Tenant]:
    """A namespace of the test's own, opted in to admission, and its ``edit`` tenant."""
    cluster = admitting[0].cluster
    name = namespace_of(request)
    tenant = make_tenant(cluster, name)
    try:
        yield tenant
    finally:
        cluster.discard_namespace(name)


@pytest.fixture
def queue(admitting: tuple[Installed, Operator]) -> Iterator[str]:
    """A queue with room (the policy shares 8 cpu; the tests' pods ask for 100m)."""
    cluster = admitting[0].cluster
    cluster.apply(objects.queue("tenants"))
    try:
        yield "tenants"
    finally:
        cluster.kubectl("delete", "queue", "tenants", "--wait=false")


# --- what must keep working ---------------------------------------------------------------------


def test_the_policies_type_check_cleanly(admitting: tuple[Installed, Operator]) -> None:
    cluster = admitting[0].cluster
    selector = "app.kubernetes.io/name=sharekeeper"

    def checked() -> list[dict[str, Any]]:
        found = cluster.get("validatingadmissionpolicies", "-l", selector)
        policies = {p["metadata"]["name"]: p for p in found["items"]}
        assert set(policies) == set(POLICIES), sorted(policies)
        for name, policy in policies.items():
            checking = policy.get("status", {}).get("typeChecking")
            assert checking is not None, f"{name} not type-checked yet"
            assert checking.get("expressionWarnings", []) == [], (name, checking)
        return list(policies.values())

    eventually(checked, timeout=30)
    bindings = cluster.get("validatingadmissionpolicybindings", "-l", selector)
    assert {(b["spec"]["policyName"], tuple(b["spec"]["validationActions"]))
            for b in bindings["items"]} == {(name, ("Deny",)) for name in POLICIES}  # fmt: skip


def test_the_operator_releases_a_tenants_held_pod_end_to_end(
    admitting: tuple[Installed, Operator], tenant: Tenant, queue: str
) -> None:
    cluster = admitting[0].cluster
    new = created(tenant, pod("work", queue))
    assert held(new), "the webhook gates it at creation"
    got = running(cluster, tenant.namespace, "work")
    assert got["spec"]["nodeName"] in {"kwok-1", "kwok-2"}
    assert got["metadata"]["annotations"][ADMITTED_ANNOTATION]
    assert got["metadata"]["labels"][QUEUE_LABEL] == queue


# --- 1. walking past admission ------------------------------------------------------------------


def test_a_tenant_cannot_remove_the_gate_with_a_strategic_merge_patch(tenant: Tenant) -> None:
    assert held(created(tenant, pod("waiting", NOWHERE)))
    attack = tenant.kubectl("patch", "pod", "waiting", "-p", SMP_REMOVE_GATE, check=False)
    refused(
        attack, "sharekeeper-pod-updates",
        "only Sharekeeper removes the scheduling gate sharekeeper.io/admission from pod waiting",
        "AdmissionWaiting", "sharekeeper:releasers",
        f"sharekeeper release --namespace {tenant.namespace}",
    )  # fmt: skip
    assert held(get_pod(tenant.cluster, tenant.namespace, "waiting"))


def test_a_tenant_cannot_remove_the_gate_with_a_json_patch(tenant: Tenant) -> None:
    assert held(created(tenant, pod("waiting", NOWHERE)))
    for patch in (
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        [{"op": "replace", "path": "/spec/schedulingGates", "value": []}],
    ):
        attack = tenant.kubectl(
            "patch", "pod", "waiting", "--type=json", "-p", json.dumps(patch), check=False
        )
        refused(attack, "sharekeeper-pod-updates", "sharekeeper:releasers")
    assert held(get_pod(tenant.cluster, tenant.namespace, "waiting"))


def test_a_pod_cannot_be_bound_at_creation(tenant: Tenant) -> None:
    """Before: a pod with ``spec.nodeName`` was never gated (gates are refused on bound pods)
    and ran on the node at once, in its queue or unmanaged."""
    refused(
        create(tenant, pod("bound", "tenants", node="kwok-1")),
        "sharekeeper-admission-at-creation",
        "pod bound names queue tenants and cannot be bound at creation: remove spec.nodeName",
    )
    refused(
        create(tenant, pod("bound-nameless", node="kwok-1")),
        "sharekeeper-admission-at-creation",
        f"label pod bound-nameless (or its template) {QUEUE_LABEL}=<queue>",
    )
    assert tenant.kubectl("get", "pods", "-o", "name").stdout.strip() == ""


# --- 2. hiding or moving usage ------------------------------------------------------------------


def test_a_pod_that_names_no_queue_is_refused_with_what_to_do(tenant: Tenant) -> None:
    """Before: created ungated and unmanaged (its usage in no queue), ready to be labelled
    into another queue later."""
    refused(
        create(tenant, pod("nameless")),
        "sharekeeper-admission-at-creation",
        f"pods of namespace {tenant.namespace} wait for admission and must name their queue",
        f"label pod nameless (or its template) {QUEUE_LABEL}=<queue>",
    )


def test_a_pod_cannot_move_to_another_queue(tenant: Tenant) -> None:
    assert held(created(tenant, pod("mover", NOWHERE)))
    message = "cannot change after creation: create a new pod"
    moves = [
        ("label", "pod", "mover", "--overwrite", f"{QUEUE_LABEL}=tenants"),
        ("annotate", "pod", "mover", "scheduling.volcano.sh/queue-name=tenants"),
        ("annotate", "pod", "mover", "scheduling.k8s.io/group-name=someones-group"),
    ]
    for move in moves:
        refused(
            tenant.kubectl(*move, check=False), "sharekeeper-queue-immutable",
            "the queue of pod mover", message,
        )  # fmt: skip
    got = get_pod(tenant.cluster, tenant.namespace, "mover")
    assert got["metadata"]["labels"][QUEUE_LABEL] == NOWHERE
    # Other labels are the tenant's own business.
    tenant.kubectl("label", "pod", "mover", "team=blue")


def test_a_running_pod_cannot_leave_its_queue(tenant: Tenant, queue: str) -> None:
    """Before: removing the label made a running pod unmanaged, its usage out of its queue."""
    created(tenant, pod("leaver", queue))
    running(tenant.cluster, tenant.namespace, "leaver")
    refused(
        tenant.kubectl("label", "pod", "leaver", f"{QUEUE_LABEL}-", check=False),
        "sharekeeper-queue-immutable", "the queue of pod leaver", "cannot change after creation",
    )  # fmt: skip
    got = get_pod(tenant.cluster, tenant.namespace, "leaver")
    assert got["metadata"]["labels"][QUEUE_LABEL] == queue


# --- 3b. the gate where admission is off --------------------------------------------------------


def test_the_gate_is_refused_in_a_namespace_that_did_not_opt_in(
    admitting: tuple[Installed, Operator],
) -> None:
    """Before: such a pod counted as held in its queue (blocking the queue's held pods behind
    it) and nothing there would ever release it."""
    cluster = admitting[0].cluster
    outsider = make_tenant(cluster, "policies-not-opted-in", admission=False)
    try:
        refused(
            create(outsider, pod("squatter", "tenants", gated=True)),
            "sharekeeper-gate-opt-in",
            "namespace policies-not-opted-in has not opted in to admission",
            "remove the gate from pod squatter",
        )
        # Without admission, pods are neither gated nor refused.
        assert not held(created(outsider, pod("plain", "tenants")))
        assert not held(created(outsider, pod("nameless")))
        # Nor can the gate come later: Kubernetes itself refuses an update that adds a
        # scheduling gate, before any policy is asked (so the policy matches creations only).
        adding = json.dumps({"spec": {"schedulingGates": [{"name": ADMISSION_GATE}]}})
        later = outsider.kubectl("patch", "pod", "plain", "--type=merge", "-p", adding,
                                 check=False)  # fmt: skip
        assert later.returncode != 0, later.stdout
        message = " ".join(later.stderr.split())
        assert "only deletion is allowed" in message, message
        assert "ValidatingAdmissionPolicy" not in message, message
    finally:
        cluster.kubectl("delete", "namespace", outsider.namespace, "--wait=false")


# --- 6. a pod over 1 MiB -------------------------------------------------------------------------


def test_a_pod_over_one_mib_is_gated_never_let_through(tenant: Tenant) -> None:
    """Before: the webhook answered 413 (aiohttp's 1 MiB limit) and ``failurePolicy: Ignore``
    let the pod through ungated. 1.2 MiB: over that limit, under etcd's 1.5 MiB."""
    big = pod("big", NOWHERE, pad=1200 * 1024)
    assert len(json.dumps(big)) > 1024 * 1024
    result = create(tenant, big)
    if result.returncode != 0:  # refused is safe too; it must then be by our policy
        refused(result, "sharekeeper-admission-at-creation", "was not given the admission gate")
        pytest.fail(f"the webhook did not read the big pod:\n{result.stderr}")
    assert held(json.loads(result.stdout))
    assert held(get_pod(tenant.cluster, tenant.namespace, "big"))


# --- fail closed --------------------------------------------------------------------------------


def test_while_the_webhook_is_down_pods_that_name_a_queue_are_refused(
    admitting: tuple[Installed, Operator], tenant: Tenant
) -> None:
    """Before: ``failurePolicy: Ignore`` let them through ungated. The webhook is made
    unreachable by pointing its configuration at a closed port (the operator writes its own
    URL back only when it starts, so the test puts it back itself)."""
    cluster = admitting[0].cluster
    config = cluster.get("mutatingwebhookconfiguration", "sharekeeper-admission")
    url = config["webhooks"][0]["clientConfig"]["url"]
    dead = f"https://127.0.0.1:{controlplane.free_port()}/gate"

    def point_at(target: str) -> None:
        patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": target}]
        cluster.kubectl(
            "patch", "mutatingwebhookconfiguration", "sharekeeper-admission", "--type=json",
            "-p", json.dumps(patch),
        )  # fmt: skip

    def dry_run_refused() -> bool:
        answer = tenant.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(pod("x", NOWHERE)),
            check=False,
        )  # fmt: skip
        return answer.returncode != 0

    point_at(dead)
    try:
        eventually(dry_run_refused, timeout=30)
        refused(
            create(tenant, pod("orphan", NOWHERE)),
            "sharekeeper-admission-at-creation",
            f"pod orphan names queue {NOWHERE} but was not given the admission gate",
            "refused rather than let through ungated",
            "kubectl get pods -n sharekeeper",
        )
    finally:
        point_at(url)
        eventually(lambda: not dry_run_refused(), timeout=30)
    assert held(created(tenant, pod("orphan", NOWHERE)))


# --- the operator's own account -----------------------------------------------------------------


def raw_patch(cluster: Cluster, path: str, body: dict[str, Any], user: str) -> tuple[int, str]:
    """PATCH (strategic merge) ``path`` as the admin impersonating ``user``: kubectl cannot
    patch pods/resize without reading it first, which the operator may not."""
    assert cluster.plane is not None
    request = urllib.request.Request(
        cluster.plane.server + path, method="PATCH", data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {cluster.plane.admin_token}",
            "Content-Type": "application/strategic-merge-patch+json",
            "Impersonate-User": user,
        },
    )  # fmt: skip
    context = ssl.create_default_context(
        cafile=str(cluster.plane.workdir / "certs" / "apiserver.crt")
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def test_the_operator_account_cannot_change_a_kube_system_pod(
    admitting: tuple[Installed, Operator],
) -> None:
    """Before: RBAC's ``patch`` on pods let the operator's account (or whoever holds its token)
    change any pod's image, labels or owners anywhere. Its own writes still go: CPU throttling
    through pods/resize and evictions."""
    cluster = admitting[0].cluster
    name = "admission-policies-victim"
    # Pending on no node: kwok's running pods report no container resources, and the API
    # server refuses to resize a pod whose node does not say it supports that.
    victim = pod(name)
    victim["spec"]["nodeSelector"] = {"e2e.sharekeeper.io/nodes": "none"}
    cluster.kubectl("create", "-n", "kube-system", "-f", "-", input=json.dumps(victim))
    try:
        as_operator = (*AS_OPERATOR, "-n", "kube-system")
        toleration = '[{"op":"add","path":"/spec/tolerations/-","value":{"operator":"Exists"}}]'
        for change, message in [
            (("set", "image", f"pod/{name}", "main=evil:1"),
             "may not change a pod's containers, images"),
            (("label", "pod", name, "tier=owned"), "may not change a pod's labels"),
            (("annotate", "pod", name, "note=x"),
             "may set only the annotation sharekeeper.io/admitted"),
            (("patch", "pod", name, "--type=json", "-p", toleration),
             "may not change a pod's containers, images, tolerations"),
        ]:  # fmt: skip
            refused(
                cluster.kubectl(*as_operator, *change, check=False),
                "sharekeeper-pod-updates", message,
            )  # fmt: skip
        got = get_pod(cluster, "kube-system", name)
        assert got["spec"]["containers"][0]["image"] == "example/app:1"
        assert "tier" not in got["metadata"].get("labels", {})
        # CPU throttling: the resize subresource is not the pod, and goes by.
        limit = {"name": "main", "resources": {"limits": {"cpu": "150m"}}}
        path = f"/api/v1/namespaces/kube-system/pods/{name}/resize"
        status, answer = raw_patch(
            cluster, path, {"spec": {"containers": [limit]}}, SERVICE_ACCOUNT
        )
        assert status == 200, answer
        resources = get_pod(cluster, "kube-system", name)["spec"]["containers"][0]["resources"]
        assert resources["limits"]["cpu"] == "150m"
        # Eviction: a create on pods/eviction, which goes by too.
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": name, "namespace": "kube-system"}}  # fmt: skip
        cluster.kubectl(
            *AS_OPERATOR, "create", "--raw",
            f"/api/v1/namespaces/kube-system/pods/{name}/eviction", "-f", "-",
            input=json.dumps(eviction),
        )  # fmt: skip
    finally:
        cluster.kubectl(
            "delete", "pod", name, "-n", "kube-system", "--ignore-not-found", "--wait=false"
        )


def test_the_operator_account_still_releases_a_held_pod(tenant: Tenant) -> None:
    assert held(created(tenant, pod("waiting", NOWHERE)))
    tenant.cluster.kubectl(
        *AS_OPERATOR, "patch", "pod", "waiting", "-n", tenant.namespace, "-p", RELEASE
    )
    got = get_pod(tenant.cluster, tenant.namespace, "waiting")
    assert not held(got)
    assert got["metadata"]["annotations"][ADMITTED_ANNOTATION] == "2026-01-01T00:00:00Z"


# --- a person's manual release ------------------------------------------------------------------


def test_a_member_of_the_releasers_group_can_let_a_held_pod_go(tenant: Tenant) -> None:
    """The group lifts only the policy; RBAC still decides whose pods a member may patch (here
    ``edit`` in the tenant's namespace, bound to the person)."""
    cluster = tenant.cluster
    cluster.kubectl(
        "create", "rolebinding", "alice-edit", "-n", tenant.namespace, "--clusterrole=edit",
        "--user=alice",
    )  # fmt: skip
    assert held(created(tenant, pod("waiting", NOWHERE)))
    patch = ("patch", "pod", "waiting", "-n", tenant.namespace, "-p", SMP_REMOVE_GATE)
    refused(
        cluster.kubectl("--as=alice", *patch, check=False),
        "sharekeeper-pod-updates", "sharekeeper:releasers",
    )  # fmt: skip
    cluster.kubectl("--as=alice", "--as-group=sharekeeper:releasers", *patch)
    assert not held(get_pod(cluster, tenant.namespace, "waiting"))
