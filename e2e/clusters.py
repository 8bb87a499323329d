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
