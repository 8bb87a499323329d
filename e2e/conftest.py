"""End-to-end fixtures: one real API server per test session.

``E2E_TARGET=local`` (the default) starts etcd + kube-apiserver on 127.0.0.1 (see
``controlplane.py``); ``E2E_TARGET=kind`` uses the cluster of the current kubeconfig, which
``e2e/kind/run.sh`` has created and deployed the operator into.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "crds"
MANIFESTS = REPO / "manifests"
TARGET = os.environ.get("E2E_TARGET", "local")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@dataclass
class Cluster:
    """A reachable API server and the means to talk to it as a person would."""

    kubeconfig: Path
    kubectl_path: str
    plane: controlplane.ControlPlane | None

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args],
            check=False,  # checked below, with kubectl's own message
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, *manifests: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if TARGET == "kind":
        kubectl = shutil.which("kubectl")
        assert kubectl, "E2E_TARGET=kind needs kubectl on PATH"
        kubeconfig = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
        yield Cluster(kubeconfig=kubeconfig, kubectl_path=kubectl, plane=None)
        return
    assert TARGET == "local", f"E2E_TARGET must be local or kind, not {TARGET!r}"
    with controlplane.running() as plane:
        yield Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> Cluster:
    """The cluster with our CRDs installed and established."""
    cluster.kubectl("apply", "-f", str(CRDS))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        *(f"crd/{path.stem}" for path in sorted(CRDS.glob("*.yaml"))),
    )  # fmt: skip
    return cluster


@pytest.fixture(scope="session")
def deployed(crds: Cluster) -> Cluster:
    """The cluster with the operator's namespace, ServiceAccount, RBAC and Deployment applied."""
    crds.kubectl("apply", "-k", str(MANIFESTS))
    return crds
