"""The deployment manifests on a real API server, and the operator's permissions under RBAC."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from clusters import Cluster
from operating import SERVICE_ACCOUNT


@dataclass(frozen=True)
class Access:
    """One request attribute set, as a SubjectAccessReview asks about it."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""  # "": in every namespace (or a cluster-scoped resource)
    name: str = ""  # "": any object

    def __str__(self) -> str:
        resource = "/".join(filter(None, (self.resource, self.subresource, self.name)))
        where = f"@{self.namespace}" if self.namespace else ""
        return f"{self.verb}-{self.group or 'core'}-{resource}{where}"


OURS = "scheduling.sharekeeper.io"
QOS = "ensurance.sharekeeper.io"
# Every verb the operator uses, on what it uses it.
ALLOWED = [
    *(Access(verb, OURS, plural) for verb in ("list", "watch")
      for plural in ("queues", "schedulerpolicies")),
    Access("list", QOS, "nodeqosensurancepolicies"),
    Access("watch", QOS, "nodeqosensurancepolicies"),
    Access("patch", OURS, "queues", "status"),
    Access("patch", OURS, "schedulerpolicies", "status"),
    Access("patch", QOS, "nodeqosensurancepolicies", "status"),
    # The Queues kept for Volcano Queues (queueSource: Volcano): created, spec patched, deleted.
    *(Access(verb, OURS, "queues") for verb in ("create", "patch", "delete")),
    Access("list", "", "nodes"),
    Access("watch", "", "nodes"),
    Access("patch", "", "nodes"),  # our annotations and the interference taint
    Access("list", "", "pods"),
    Access("watch", "", "pods"),
    Access("create", "", "pods", "eviction", namespace="team"),
    Access("patch", "", "pods", "resize", namespace="team"),
    Access("list", "", "namespaces"),
    Access("watch", "", "namespaces"),
    # DaemonSet UIDs: a pod is exempt from QoS as a DaemonSet's only if its DaemonSet exists.
    Access("list", "apps", "daemonsets"),
    Access("watch", "apps", "daemonsets"),
    Access("create", "", "events", namespace="default"),
    Access("patch", "", "events", namespace="default"),  # a repeat counted into its Event
    Access("list", "scheduling.volcano.sh", "podgroups"),
    Access("watch", "scheduling.volcano.sh", "podgroups"),
    Access("list", "scheduling.volcano.sh", "queues"),
    Access("watch", "scheduling.volcano.sh", "queues"),
    Access("list", "metrics.k8s.io", "nodes"),
    Access("list", "metrics.k8s.io", "pods"),
    *(Access(verb, "coordination.k8s.io", "leases", namespace="sharekeeper")
      for verb in ("get", "create", "update")),
    # Admission: the gate removed from a held pod; the webhook's CA published; its certificate.
    Access("patch", "", "pods", namespace="team"),
    *(Access(verb, "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
             name="sharekeeper-admission") for verb in ("get", "patch")),
    Access("create", "", "secrets", namespace="sharekeeper"),
    *(Access(verb, "", "secrets", namespace="sharekeeper", name="sharekeeper-webhook-tls")
      for verb in ("get", "update")),
]  # fmt: skip
# What a tenant who could borrow the operator's power would want, and the operator never does.
# Patch on nodes is granted (annotations and taints) and RBAC cannot narrow it to fields, so the
# operator could also change a node's labels or cordon it; it cannot rewrite a node (update),
# its status or delete it.
DENIED = [
    # Pods are patched (the admission gate; RBAC cannot narrow a patch to fields, the policy
    # sharekeeper-pod-updates does), never rewritten whole, nor their status.
    Access("update", "", "pods", namespace="kube-system"),
    Access("update", "", "pods", "status"),
    Access("patch", "", "pods", "ephemeralcontainers", namespace="kube-system"),
    Access("create", "", "pods", "exec", namespace="kube-system"),
    Access("create", "", "pods"),
    Access("delete", "", "pods"),  # evictions only, so PodDisruptionBudgets are honoured
    # Our objects: status only, never a user's spec (Queues mirroring Volcano Queues aside:
    # created, patched and deleted, never rewritten whole, and nothing else of ours).
    Access("update", OURS, "queues"),
    Access("deletecollection", OURS, "queues"),
    Access("patch", OURS, "schedulerpolicies"),
    Access("create", OURS, "schedulerpolicies"),
    Access("delete", OURS, "schedulerpolicies"),
    Access("create", QOS, "nodeqosensurancepolicies"),
    Access("patch", QOS, "nodeqosensurancepolicies"),
    Access("update", "", "nodes"),
    Access("delete", "", "nodes"),
    Access("patch", "", "nodes", "status"),
    Access("get", "", "secrets", namespace="kube-system"),
    Access("get", "", "secrets", namespace="sharekeeper", name="other"),
    Access("list", "", "secrets"),
    Access(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        name="someone-elses",
    ),
    Access("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    Access("create", "", "serviceaccounts", "token", namespace="kube-system"),
    Access("patch", "apps", "deployments", namespace="kube-system"),
    # DaemonSets are read for their UIDs, never written.
    *(
        Access(verb, "apps", "daemonsets", namespace="kube-system")
        for verb in ("create", "patch", "update", "delete")
    ),
    Access("patch", "apiextensions.k8s.io", "customresourcedefinitions"),
    Access("patch", "scheduling.volcano.sh", "podgroups"),
    # Volcano's Queues are read, never written.
    *(
        Access(verb, "scheduling.volcano.sh", "queues")
        for verb in ("create", "patch", "update", "delete")
    ),
    Access("patch", "scheduling.volcano.sh", "queues", "status"),
    Access("create", "events.k8s.io", "events", namespace="default"),  # core/v1 Events only
    Access("bind", "rbac.authorization.k8s.io", "clusterroles"),
    # The Lease is the operator's own, in its own namespace: no other component's lease.
    Access("update", "coordination.k8s.io", "leases", namespace="kube-system"),
    Access("delete", "coordination.k8s.io", "leases", namespace="sharekeeper"),
    Access("impersonate", "", "users"),
]


def allowed(cluster: Cluster, access: Access) -> bool:
    """Ask the API server's authorizer, as a SubjectAccessReview, about the operator's account
    (with the groups every ServiceAccount token carries)."""
    attributes = {
        "verb": access.verb,
        "group": access.group,
        "resource": access.resource,
        "subresource": access.subresource,
        "namespace": access.namespace,
        "name": access.name,
    }
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": SERVICE_ACCOUNT,
            "groups": [
                "system:serviceaccounts",
                "system:serviceaccounts:sharekeeper",
                "system:authenticated",
            ],
            "resourceAttributes": attributes,
        },
    }
    answer = cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review))
    return bool(json.loads(answer.stdout)["status"].get("allowed"))


def test_manifests_create_the_operator_objects(deployed: Cluster) -> None:
    deployment = deployed.get("deployment", "sharekeeper", "-n", "sharekeeper")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["serviceAccountName"] == "sharekeeper"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # The kubelet probes, and Prometheus scrapes, the pod's IP: every interface.
    assert "--health-probe-bind-address=:8080" in container["args"]
    assert "--metrics-bind-address=:9090" in container["args"]
    # Two replicas take turns through the Lease in the pod's own namespace.
    assert deployment["spec"]["replicas"] == 2
    assert "--leader-elect" in container["args"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": "metadata.namespace"}}} in container["env"]  # fmt: skip
    # Every replica serves the admission webhook; it gates only namespaces that opt in. A
    # webhook nobody answers is passed by, and sharekeeper-admission-at-creation refuses the
    # pods it should have gated (test_tenant_admission.py).
    assert "--webhook-bind-address=:9443" in container["args"]
    webhook = deployed.get("mutatingwebhookconfiguration", "sharekeeper-admission")["webhooks"][0]
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["namespaceSelector"] == {"matchLabels": {"sharekeeper.io/admission": "enabled"}}
    assert webhook["rules"][0]["operations"] == ["CREATE"]


def test_two_replicas_stay_available_on_different_nodes(deployed: Cluster) -> None:
    deployment = deployed.get("deployment", "sharekeeper", "-n", "sharekeeper")
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in spread} == {
        ("kubernetes.io/hostname", 1, "ScheduleAnyway"),  # a one-node cluster still runs both
        ("topology.kubernetes.io/zone", 1, "ScheduleAnyway"),
    }
    budget = deployed.get("poddisruptionbudget", "sharekeeper", "-n", "sharekeeper")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_the_admission_policies_are_installed_and_enforced(deployed: Cluster) -> None:
    """What each refuses is in e2e/test_tenant_admission.py, on the full cluster."""
    selector = "app.kubernetes.io/name=sharekeeper"
    policies = deployed.get("validatingadmissionpolicies", "-l", selector)["items"]
    bindings = deployed.get("validatingadmissionpolicybindings", "-l", selector)["items"]
    names = {policy["metadata"]["name"] for policy in policies}
    assert names == {
        "sharekeeper-pod-updates",
        "sharekeeper-gate-opt-in",
        "sharekeeper-admission-at-creation",
        "sharekeeper-queue-immutable",
    }
    assert all(policy["spec"]["failurePolicy"] == "Fail" for policy in policies)
    # Pods only, never a subresource: pods/resize and pods/eviction go by.
    rules = [r for policy in policies for r in policy["spec"]["matchConstraints"]["resourceRules"]]
    assert {resource for rule in rules for resource in rule["resources"]} == {"pods"}
    assert {(b["spec"]["policyName"], tuple(b["spec"]["validationActions"])) for b in bindings} == {
        (name, ("Deny",)) for name in names
    }


@pytest.mark.parametrize("access", ALLOWED, ids=str)
def test_operator_may_do_what_it_needs(deployed: Cluster, access: Access) -> None:
    assert allowed(deployed, access)


@pytest.mark.parametrize("access", DENIED, ids=str)
def test_operator_may_do_nothing_more(deployed: Cluster, access: Access) -> None:
    assert not allowed(deployed, access)
