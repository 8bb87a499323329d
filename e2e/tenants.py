"""A hostile tenant, as the security tests play it: a ServiceAccount bound to the built-in
ClusterRole ``edit`` in its own namespace and nowhere else, impersonated through kubectl.

``edit`` is what a platform team usually hands a team: pods, jobs, PodDisruptionBudgets and the
like in its namespace, nothing cluster-scoped, no RBAC of its own. Whatever such a tenant can do
to another team, to the queues or to the operator is an attack the tests assert is stopped.

``edit`` is an aggregated ClusterRole: its rules are filled by kube-controller-manager. The plain
control plane runs none, so ``make_tenant`` fills them itself (``fill_aggregated_roles``).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from clusters import Cluster

ADMISSION_LABEL = "sharekeeper.io/admission=enabled"


@dataclass(frozen=True)
class Tenant:
    cluster: Cluster
    namespace: str
    account: str = "tenant"

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.account}"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as the tenant, in its namespace."""
        return self.cluster.kubectl(
            f"--as={self.user}", "-n", self.namespace, *args, input=input, check=check
        )


def fill_aggregated_roles(cluster: Cluster, names: tuple[str, ...] = ("view", "edit")) -> None:
    """What kube-controller-manager's aggregation controller does for ``names``: each role's
    rules become those of every ClusterRole its aggregationRule selects (recursively).

    Only a role that has no rules yet is filled: on the plain control plane (no
    kube-controller-manager) the built-in ``view`` and ``edit`` are empty, and this fills them
    once; on the full cluster the controller has filled them (or will, with the same rules), so
    this changes nothing there. Calling it again is harmless."""
    roles = {role["metadata"]["name"]: role for role in cluster.get("clusterroles")["items"]}

    def rules_of(name: str, seen: frozenset[str]) -> list[Any]:
        role = roles[name]
        aggregation = role.get("aggregationRule")
        if not aggregation:
            return list(role.get("rules") or [])
        found: list[Any] = []
        for selector in aggregation.get("clusterRoleSelectors") or []:
            wanted = (selector.get("matchLabels") or {}).items()
            for other in sorted(roles.keys() - seen - {name}):
                if wanted <= (roles[other]["metadata"].get("labels") or {}).items():
                    found += [r for r in rules_of(other, seen | {name}) if r not in found]
        return found

    for name in names:
        if roles[name].get("rules"):
            continue  # filled already, by the controller or an earlier call
        rules = rules_of(name, frozenset())
        assert rules, f"nothing aggregates into {name}"
        cluster.kubectl(
            "patch", "clusterrole", name, "--type=merge", "-p", json.dumps({"rules": rules})
        )


def make_tenant(cluster: Cluster, namespace: str, *, admission: bool = True) -> Tenant:
    """The namespace (opted in to admission unless told otherwise), its ServiceAccount and the
    RoleBinding that gives it ``edit`` there (``edit`` filled first where no controller has:
    ``fill_aggregated_roles``). The caller deletes the namespace."""
    fill_aggregated_roles(cluster)
    cluster.kubectl("create", "namespace", namespace)
    if admission:
        cluster.kubectl("label", "namespace", namespace, ADMISSION_LABEL)
    cluster.kubectl("create", "serviceaccount", "tenant", "-n", namespace)
    cluster.kubectl(
        "create", "rolebinding", "tenant-edit", "-n", namespace, "--clusterrole=edit",
        f"--serviceaccount={namespace}:tenant",
    )  # fmt: skip
    tenant = Tenant(cluster, namespace)
    can = tenant.kubectl("auth", "can-i", "create", "pods").stdout.strip()
    assert can == "yes", can
    return tenant
