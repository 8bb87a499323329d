"""The cluster e2e tests talk to, and where the repository's manifests are.

Test modules import from here (never from ``conftest``, whose module name pytest reuses for
every ``conftest.py`` it loads).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import controlplane
from objects import NAMESPACE

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "crds"
MANIFESTS = REPO / "manifests"
TARGET = os.environ.get("E2E_TARGET", "local")


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


@dataclass(frozen=True)
class Installed:
    """A cluster with Sharekeeper's CRDs and manifests, and a kubeconfig acting as its
    ServiceAccount (what the session fixtures give the shared cluster)."""

    cluster: Cluster
    operator_kubeconfig: Path


def install_sharekeeper(cluster: Cluster, directory: Path) -> Installed:
    """What the session fixtures ``deployed`` and ``operator_kubeconfig`` give, on a control
    plane of a module's own (one its tests may stop or reconfigure)."""
    assert cluster.plane is not None
    cluster.kubectl("apply", "-f", str(CRDS))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        *(f"crd/{path.stem}" for path in sorted(CRDS.glob("*.yaml"))),
    )  # fmt: skip
    cluster.kubectl("apply", "-k", str(MANIFESTS))
    cluster.kubectl("create", "namespace", NAMESPACE)
    token = cluster.kubectl(
        "create", "token", "sharekeeper", "-n", "sharekeeper", "--duration=2h"
    ).stdout.strip()
    kubeconfig = controlplane.write_token_kubeconfig(
        cluster.plane, directory / "operator.kubeconfig", token, "sharekeeper"
    )
    return Installed(cluster, kubeconfig)
