"""Kueue, the peer: its manager built from the Go module proxy, cached, and run as a process
against the local full control plane (``e2e/controlplane.py``, ``start(full=True)``).

Pinned release: KUEUE_VERSION. Its go.mod has no replace directives, so ``go install
sigs.k8s.io/kueue/cmd/kueue@v<version>`` builds it as released (its own go.sum, checked against
the checksum database), into ``<cache_root>/kueue-v<version>-<hash>/bin/kueue``, next to the
Kubernetes binaries and keyed the same way (by the pin). Its Kubernetes libraries are v0.34,
matching the control plane's v1.34; its stored API is v1beta1 only, so no conversion webhook is
needed (the 0.15 releases store v1beta1 and serve v1beta2 through one).

Its CRDs come from the module's own source in the Go module cache (``go mod download -json``
names the directory; they are under ``config/components/crd/bases``). They are large (the
Workload's is over the 256 KiB client-side apply annotation), so they are applied server-side.

How it runs here, and why:

- **No webhooks.** Nothing registers Kueue's Mutating/ValidatingWebhookConfigurations, so the
  API server never calls them. Jobs are created already suspended with the label
  ``kueue.x-k8s.io/queue-name``, which is what its Job webhook would have made of them and what
  its Job reconciler acts on. Its webhook server still starts (the manager serves it whether
  anything calls it or not) on a free 127.0.0.1 port, with a certificate we make for 127.0.0.1.
- **Internal certificate management on.** With it off, the manager insists on reading a
  metrics certificate from a fixed path under /etc; with it on, its certificate rotator fills
  the Secret ``kueue-webhook-server-cert`` (created empty, as Kueue's manifests do), finds no
  webhook configuration to inject a CA into (it says so in the log and goes on), and waits for
  a certificate in the webhook's certificate directory: ours.
- Leader election off; health, metrics and pprof on free 127.0.0.1 ports; the visibility API
  server (feature VisibilityOnDemand, which listens on every address) off; only the
  ``batch/job`` integration; the client rate limits and controller concurrency of Kueue's
  shipped configuration (``config/components/manager/controller_manager_config.yaml``: qps 50,
  burst 100, 5 Job and 5 Workload workers).
- It acts as the ServiceAccount ``kueue-system/kueue-controller-manager`` bound to
  ``cluster-admin`` (not Kueue's narrower ClusterRole: nothing here measures RBAC), so that the
  API server's audit log names it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import controlplane

KUEUE_VERSION = "0.14.8"
MODULE = "sigs.k8s.io/kueue"
API = "kueue.x-k8s.io/v1beta1"
NAMESPACE = "kueue-system"
ACCOUNT = "kueue-controller-manager"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
FLAVOR = "default-flavor"

Json = dict[str, Any]


# --- building --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleSource:
    """The release's source as the Go module cache holds it."""

    directory: Path
    commit: str

    @property
    def crds(self) -> list[Path]:
        return sorted((self.directory / "config" / "components" / "crd" / "bases").glob("*.yaml"))


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("building Kueue needs the Go toolchain on PATH")
    return go


def module_source() -> ModuleSource:
    """Download (or find) the pinned release in the module cache: ``go mod download -json``."""
    done = subprocess.run(
        [_go(), "mod", "download", "-json", f"{MODULE}@v{KUEUE_VERSION}"],
        capture_output=True, text=True, check=False, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {MODULE}@v{KUEUE_VERSION} failed:\n{done.stdout}"
                           f"{done.stderr}")  # fmt: skip
    found = json.loads(done.stdout)
    if "Error" in found:
        raise RuntimeError(f"go mod download {MODULE}@v{KUEUE_VERSION}: {found['Error']}")
    return ModuleSource(Path(found["Dir"]), str(found.get("Origin", {}).get("Hash", "")))


def bin_path() -> Path:
    """Where the pinned manager is cached: outside the repository, keyed by the pin."""
    pin = hashlib.sha256(f"{MODULE}@v{KUEUE_VERSION} cmd/kueue".encode()).hexdigest()[:12]
    return controlplane.cache_root() / f"kueue-v{KUEUE_VERSION}-{pin}" / "bin" / "kueue"


def ensure_binary() -> Path:
    """The cached manager; built once (``go install``) when missing."""
    target = bin_path()
    if target.is_file():
        return target
    source = module_source()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent.parent))
    version = "sigs.k8s.io/kueue/pkg/version"
    ldflags = (f"-s -w -X {version}.GitVersion=v{KUEUE_VERSION}"
               f" -X {version}.GitCommit={source.commit}")  # fmt: skip
    env = {**os.environ, "GOFLAGS": "-trimpath -mod=readonly", "CGO_ENABLED": "0",
           "GO111MODULE": "on", "GOBIN": str(staging)}  # fmt: skip
    try:
        controlplane._run_go(  # the build helper of our own binaries
            [_go(), "install", "-v", f"-ldflags={ldflags}",
             f"{MODULE}/cmd/kueue@v{KUEUE_VERSION}"],
            Path(tempfile.gettempdir()), env, f"compiling kueue v{KUEUE_VERSION}",
        )  # fmt: skip
        os.replace(staging / "kueue", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# --- installing ------------------------------------------------------------------------------


def install(kubectl: Any, source: ModuleSource, workdir: Path, plane: Any) -> Path:
    """Kueue's CRDs, its namespace, the empty webhook Secret, its ServiceAccount bound to
    cluster-admin; returns a kubeconfig acting as that account. ``kubectl`` is the
    ``Cluster.kubectl`` of the e2e helpers."""
    for crd in source.crds:
        kubectl("apply", "--server-side", "-f", str(crd))
    names = (path.stem.split("_", 1) for path in source.crds)  # <group>_<plural>.yaml
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{plural}.{group}" for group, plural in names))  # fmt: skip
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "kueue-bench-cluster-admin"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]},
    ]  # fmt: skip
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                   "items": objects}))  # fmt: skip
    token = kubectl("create", "token", ACCOUNT, "-n", NAMESPACE, "--duration=12h").stdout.strip()
    return controlplane.write_token_kubeconfig(plane, workdir / "kueue.kubeconfig", token, ACCOUNT)


def flavor() -> Json:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}


def cluster_queue(name: str, quota: dict[str, str], cohort: str | None) -> Json:
    """A ClusterQueue of one flavor with ``quota`` as nominal quota, in ``cohort`` (borrowing
    unbounded, no preemption: Kueue's defaults) or in none."""
    spec: Json = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": sorted(quota),
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": resource, "nominalQuota": amount}
                            for resource, amount in sorted(quota.items())
                        ],
                    }
                ],
            }
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> Json:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


# --- running ---------------------------------------------------------------------------------


def configuration(*, webhook_port: int, cert_dir: Path, health: int, metrics: int,
                  pprof: int, qps: float = 50, burst: int = 100) -> str:  # fmt: skip
    """The manager's Configuration (config.kueue.x-k8s.io/v1beta1), as JSON (which is YAML)."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "internalCertManagement": {"enable": True, "webhookSecretName": WEBHOOK_SECRET},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}"},
        "pprofBindAddress": f"127.0.0.1:{pprof}",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": qps, "burst": burst},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
    }
    return json.dumps(config, indent=2)


@dataclass
class Kueue:
    process: subprocess.Popen[bytes]
    log: Path
    health_port: int
    metrics_port: int
    pprof_port: int

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.health_port}/readyz"
            with urllib.request.urlopen(url, timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.alive():
                raise RuntimeError(f"kueue exited ({self.process.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"kueue not ready after {timeout:.0f} s:\n{self.tail()}")
            time.sleep(0.5)

    def stop(self, grace: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start(binary: Path, kubeconfig: Path, workdir: Path, log: Path, *, qps: float = 50,
          extra_args: Sequence[str] = ()) -> Kueue:  # fmt: skip
    """The manager as a process acting through ``kubeconfig``, with client limits ``qps`` and
    twice that as burst (the shipped configuration's 50 and 100 by default); returns once it
    has started (``wait_ready`` waits for its readiness probe)."""
    certs = workdir / "kueue-certs"
    if not (certs / "tls.crt").exists():
        certs.mkdir(parents=True, exist_ok=True)
        ca = controlplane.openssl_ca(certs, "kueue-bench-ca")
        crt, key = controlplane.openssl_cert(certs, "kueue-webhook", ca, usage="serverAuth",
                                             hosts=("127.0.0.1",))  # fmt: skip
        os.replace(crt, certs / "tls.crt")
        os.replace(key, certs / "tls.key")
    ports = [controlplane.free_port() for _ in range(4)]
    config = workdir / "kueue-config.yaml"
    config.write_text(configuration(webhook_port=ports[0], cert_dir=certs, health=ports[1],
                                    metrics=ports[2], pprof=ports[3], qps=qps,
                                    burst=int(2 * qps)))  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(binary), f"--config={config}", "--zap-log-level=info", *extra_args],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return Kueue(process, log, ports[1], ports[2], ports[3])
