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
import realnode
from objects import NAMESPACE
from operating import eventually

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

    def install_crds(self, path: Path, *names: str) -> None:
        """Apply the CRDs at ``path`` (a file or a folder) and return once each of ``names`` is
        Established. Polled by reading them: ``kubectl wait`` fails at once on a CRD whose
        status has no conditions yet, as one just created may not."""
        self.kubectl("apply", "-f", str(path))
        eventually(lambda: self._all_established(names), timeout=60)

    def _all_established(self, names: tuple[str, ...]) -> bool:
        listed = self.get("crd", *names)  # a List for several names, the object for one
        return all(map(_established, listed.get("items", [listed])))

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, *manifests: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))

    def discard_namespace(self, name: str) -> None:
        """Delete namespace ``name``, waiting only until its Jobs and pods are gone (their room
        on the nodes and in their queues is then free for the next test): the namespace
        controller itself waits 5 s before it starts on a deleted namespace, and 5 s more
        when pods are left, and the rest of the namespace goes meanwhile."""
        self.kubectl("delete", "jobs,pods", "--all", "-n", name, "--ignore-not-found",
                     "--wait=true", "--timeout=60s")  # fmt: skip
        self.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")


def _established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


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
    cluster.install_crds(CRDS, *(path.stem for path in sorted(CRDS.glob("*.yaml"))))
    cluster.kubectl("apply", "-k", str(MANIFESTS))
    cluster.kubectl("create", "namespace", NAMESPACE)
    token = cluster.kubectl(
        "create", "token", "sharekeeper", "-n", "sharekeeper", "--duration=2h"
    ).stdout.strip()
    kubeconfig = controlplane.write_token_kubeconfig(
        cluster.plane, directory / "operator.kubeconfig", token, "sharekeeper"
    )
    return Installed(cluster, kubeconfig)


@dataclass(frozen=True)
class NodeCluster:
    """A full control plane of its own (kube-scheduler and kube-controller-manager too) with a
    real node (``realnode.py``) next to it."""

    cluster: Cluster
    node: realnode.RealNode


class RealNodeBox:
    """The session's control plane with a real node: started when a test first asks for it
    (``get``), stopped at the end of the session or when a test closes it, and started anew if a
    test asks after that. It is a control plane of its own: the plain one's tests list nodes,
    and their stand-in metrics-server holds ``v1beta1.metrics.k8s.io``. Only one node runs on a
    host at a time (see ``realnode.py``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.running: NodeCluster | None = None
        # The host as it was before the node started, and Sharekeeper installed on the plane.
        self.before: dict[str, list[str]] = {}
        self._installed: Installed | None = None

    def get(self) -> NodeCluster:
        if self.running is None:
            realnode.cleanup_crashed()  # what a killed run left is not this session's change
            self.before = realnode.host_snapshot()
            # Full: kube-scheduler binds the pods the admission gate releases to the node.
            plane = controlplane.start(full=True)
            try:
                node = realnode.start(plane)
            except BaseException:
                plane.stop()
                raise
            cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl),
                              plane=plane)  # fmt: skip
            self.running = NodeCluster(cluster, node)
            self._installed = None
        return self.running

    def installed(self) -> Installed:
        """The running node's control plane with Sharekeeper's CRDs and manifests."""
        running = self.get()
        if self._installed is None:
            directory = self.directory / f"installed-{running.node.kubelet_port}"
            directory.mkdir(parents=True)
            self._installed = install_sharekeeper(running.cluster, directory)
            # The tests run the operator as a process; the Deployment's pod would only sit on
            # the node without its image.
            running.cluster.kubectl(
                "scale", "deployment/sharekeeper", "-n", "sharekeeper", "--replicas=0"
            )
        return self._installed

    def close(self) -> dict[str, dict[str, list[str]]]:
        """Stop the node and its control plane; return how the host differs from before the
        node started (``realnode.host_changes``: empty when it is as it was)."""
        if self.running is None:
            return {}
        running, self.running = self.running, None
        running.node.stop()
        assert running.cluster.plane is not None
        running.cluster.plane.stop()
        return realnode.host_changes(self.before, realnode.host_snapshot())
