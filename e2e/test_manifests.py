"""The deployment manifests on a real API server, and the operator's permissions under RBAC."""

from __future__ import annotations

import json

import pytest

from clusters import Cluster
from operating import SERVICE_ACCOUNT

# (verb, group, resource, subresource)
ALLOWED = [
    ("watch", "scheduling.sharekeeper.io", "queues", ""),
    ("patch", "scheduling.sharekeeper.io", "queues", "status"),
    ("patch", "scheduling.sharekeeper.io", "schedulerpolicies", "status"),
    ("patch", "ensurance.sharekeeper.io", "nodeqosensurancepolicies", "status"),
    ("list", "", "nodes", ""),
    ("patch", "", "nodes", ""),
    ("watch", "", "pods", ""),
    ("patch", "", "pods", ""),
    ("create", "", "pods", "eviction"),
    ("patch", "", "pods", "resize"),
    ("create", "", "events", ""),
    ("create", "events.k8s.io", "events", ""),
    ("watch", "scheduling.volcano.sh", "podgroups", ""),
    ("list", "metrics.k8s.io", "nodes", ""),
    ("list", "metrics.k8s.io", "pods", ""),
]
DENIED = [
    ("delete", "", "pods", ""),  # evictions only, so PodDisruptionBudgets are honoured
    ("create", "", "pods", ""),
    ("update", "", "pods", "status"),
    ("update", "scheduling.sharekeeper.io", "queues", ""),  # never rewrite a user's spec
    ("delete", "scheduling.sharekeeper.io", "queues", ""),
    ("delete", "", "nodes", ""),
    ("patch", "", "nodes", "status"),
    ("get", "", "secrets", ""),
    ("patch", "apiextensions.k8s.io", "customresourcedefinitions", ""),
    ("patch", "scheduling.volcano.sh", "podgroups", ""),
]


def allowed(cluster: Cluster, verb: str, group: str, resource: str, subresource: str) -> bool:
    """Ask the API server's authorizer, as a SubjectAccessReview, about the operator's account."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": SERVICE_ACCOUNT,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:sharekeeper"],
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                "subresource": subresource,
            },
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


@pytest.mark.parametrize("attributes", ALLOWED, ids="/".join)
def test_operator_may_do_what_it_needs(
    deployed: Cluster, attributes: tuple[str, str, str, str]
) -> None:
    assert allowed(deployed, *attributes)


@pytest.mark.parametrize("attributes", DENIED, ids="/".join)
def test_operator_may_do_nothing_more(
    deployed: Cluster, attributes: tuple[str, str, str, str]
) -> None:
    assert not allowed(deployed, *attributes)
