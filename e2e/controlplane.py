"""A real local Kubernetes control plane: etcd + kube-apiserver on 127.0.0.1.

By default there is no kubelet, scheduler or controller manager: nodes are plain objects and
pods are created already bound. That is all Sharekeeper needs, since it only reads nodes and
pods and writes custom-resource status, node annotations, taints, evictions and resizes.

kube-apiserver is not packaged anywhere we can install from, so the binaries (kube-apiserver,
kubectl and etcd; kube-controller-manager and kube-scheduler for the full mode; the kubelet for a
real node, ``realnode.py``) are built from the Go module proxy by the wrapper module committed in
``e2e/k8sbins`` (its go.mod pins every module, its go.sum every module's hash, and the build may
not change either), and cached outside the repository, keyed by those pins: the first build takes
a while, later runs reuse it. kwok and metrics-server are installed at their releases, each with
its own go.sum, into the same directory.

The full mode (``start(full=True)``) is a whole cluster in a box: kube-controller-manager,
kube-scheduler and kwok run next to the pair, so Jobs and Deployments create pods, the real
scheduler binds them and kwok plays the kubelet of fake nodes. It is a control plane of its own,
never the plain one: the node-lifecycle controller would taint the plain tests' heartbeat-less
nodes and evict their pods. kwok manages only nodes annotated ``kwok.x-k8s.io/node: fake`` (and
the pods bound to them), following our own stages (``KWOK_CONFIG``), not kwok's defaults:

- node-initialize: a managed node that is not Ready becomes Ready (conditions, addresses, node
  info); the capacity and allocatable it was created with are kept.
- node-heartbeat: a Ready node's conditions are refreshed every 10-20 min; kwok renews its
  Lease (40 s) every 10 s, which is the heartbeat the node-lifecycle controller watches.
- pod-ready: a pod bound to a managed node, without a podIP and not being deleted, goes Running
  and Ready at once, with a podIP from 10.244.0.0/16 (fake nodes have no address, so there is
  no hostIP).
- pod-complete: a Running pod owned by a Job (an ownerReference of kind Job), not being deleted,
  becomes Succeeded (containers terminated, reason Completed; Ready False, reason PodCompleted)
  after the Go duration in its annotation ``pod-complete.stage.kwok.x-k8s.io/delay`` ("5s"),
  1 s when absent. Pods of anything else keep running.
- pod-delete: a pod with a deletionTimestamp loses its finalizers and is deleted at once.

The box is sized so that neither kwok nor the Job controller is what a benchmark measures: kwok
plays pod stages with 32 workers and renews Leases with 8 (its defaults, 4 and 4, left 1,000 to
2,700 cpu of pods bound and not Running for minutes at 240 nodes and 10,000 Jobs), and
kube-controller-manager syncs Jobs with 20 workers (its default, 5, then left Jobs without pods
while the gate had released room for them; benchmarks/README.md, "The large size").

Used three ways: the pytest fixtures in ``e2e/conftest.py``, the ``e2e/local-cluster`` command
for people, and the demo.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The wrapper module that builds every binary but kwok. Its go.mod is the one place the
# Kubernetes version is written: bump it there (and the k8s.io staging replaces beside it), then
# `make lock` refreshes go.sum.
WRAPPER_MODULE = Path(__file__).parent / "k8sbins"


def _required_version(module: str) -> str:
    """The version the wrapper's go.mod requires of ``module``, without the leading "v"."""
    found = re.search(
        rf"^\s*(?:require\s+)?{re.escape(module)} v(\S+)",
        (WRAPPER_MODULE / "go.mod").read_text(),
        re.MULTILINE,
    )
    if found is None:
        raise RuntimeError(f"{WRAPPER_MODULE / 'go.mod'} requires no {module}")
    return found[1]


KUBERNETES_VERSION = _required_version("k8s.io/kubernetes")

BINARIES = ("kube-apiserver", "kubectl", "etcd")
# The rest of a cluster, for the full mode (see ``start``): built only when asked for, so that a
# cache holding BINARIES gains these without rebuilding those.
FULL_BINARIES = ("kube-controller-manager", "kube-scheduler", "kwok")
# A real node (``realnode.py``): the kubelet, from the wrapper like the control plane, and
# metrics-server; built only when asked for, as FULL_BINARIES are.
NODE_BINARIES = ("kubelet", "metrics-server")

# kwok is a module of its own, installed at its release (checked against its own go.sum and the
# checksum database) rather than built from the wrapper, whose dependency versions it would move.
KWOK_VERSION = "0.7.0"
# metrics-server likewise, at its release, with its own go.sum: it requires newer k8s.io
# libraries than the Kubernetes version the wrapper pins.
METRICS_SERVER_VERSION = "0.9.0"

# The packages the wrapper module builds (every binary but kwok). etcd is built at the version
# kube-apiserver's own go.mod requires: the pairing Kubernetes was released and tested with.
_WRAPPER_PACKAGES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "./cmd/etcd",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
}

# Every write by a service account, one JSON line each: tests count the operator's writes
# from the API server's own record rather than trusting the operator to count them.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
"""

# kwok manages the nodes carrying this annotation, and only those (see the module docstring).
FAKE_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# How long a Job's pod runs on a fake node before it succeeds: a Go duration such as "5s".
POD_COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"

# The conditions kwok writes on a fake node, now (node-initialize and node-heartbeat below).
_NODE_CONDITIONS = """      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
"""

# kwok's workers (the module docstring says why so many), then its stages, after its v0.7.0
# node/fast, node/heartbeat-with-lease, pod/fast and pod/general ones (rules in the module
# docstring). Spelt out here so that a kwok upgrade cannot change what the tests see, and to make
# the completion delay a per-pod annotation without jitter.
KWOK_CONFIG = (
    """apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 32
  nodeLeaseParallelism: 8
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
      - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn,
         values: ["True"]}
  next:
    statusTemplate: |
"""
    + _NODE_CONDITIONS
    + """      addresses:
      {{ with .status.addresses }}
      {{ YAML . 1 }}
      {{ else }}
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
      {{ end }}
      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      {{ $nodeInfo := .status.nodeInfo }}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: {{ or $nodeInfo.architecture "amd64" }}
        bootID: {{ or $nodeInfo.bootID `""` }}
        containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion $kwokVersion }}
        kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}
        kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}
        kubeletVersion: {{ or $nodeInfo.kubeletVersion $kwokVersion }}
        machineID: {{ or $nodeInfo.machineID `""` }}
        operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
        osImage: {{ or $nodeInfo.osImage `""` }}
        systemUUID: {{ or $nodeInfo.systemUUID `""` }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
      - {key: .status.phase, operator: In, values: [Running]}
      - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In,
         values: ["True"]}
  delay: {durationMilliseconds: 600000, jitterDurationMilliseconds: 1200000}
  next:
    statusTemplate: |
"""
    + _NODE_CONDITIONS
    + """---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
      - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
      - {key: .status.podIP, operator: DoesNotExist}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )
        ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
      - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
      - {key: .status.phase, operator: In, values: [Running]}
      - {key: '.metadata.ownerReferences.[].kind', operator: In, values: [Job]}
  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        reason: PodCompleted
        status: "False"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        reason: PodCompleted
        status: "False"
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
      - {key: .metadata.deletionTimestamp, operator: Exists}
  next:
    finalizers: {empty: true}
    delete: true
"""
)

# The aggregation layer: kube-apiserver proxies aggregated APIs (metrics.k8s.io in the e2e tests)
# with this client certificate, signed by the front-proxy CA the aggregated server trusts for
# its X-Remote-User headers.
FRONT_PROXY_CLIENT = "front-proxy-client"

_OPENSSL_CA = """[req]
distinguished_name = dn
x509_extensions = ca
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
"""


def cache_root() -> Path:
    """Where built binaries live: outside the repository, shared by every checkout."""
    explicit = os.environ.get("SHAREKEEPER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sharekeeper"


def bin_dir() -> Path:
    """The cache directory of this checkout's pins: a change to go.mod, go.sum or the kwok or
    metrics-server version builds anew instead of reusing binaries built from other pins."""
    pins = hashlib.sha256(KWOK_VERSION.encode())
    pins.update(METRICS_SERVER_VERSION.encode())
    for name in ("go.mod", "go.sum"):
        pins.update((WRAPPER_MODULE / name).read_bytes())
    return cache_root() / f"kubernetes-v{KUBERNETES_VERSION}-{pins.hexdigest()[:12]}" / "bin"


def _log(message: str) -> None:
    print(f"[local-cluster] {message}", file=sys.stderr, flush=True)


def ensure_binaries(*, full: bool = False, node: bool = False) -> Path:
    """Return the directory holding BINARIES, FULL_BINARIES too when ``full`` and NODE_BINARIES
    when ``node``; build only the ones missing from it."""
    target = bin_dir()
    wanted = BINARIES + (FULL_BINARIES if full else ()) + (NODE_BINARIES if node else ())
    missing = [name for name in wanted if not (target / name).is_file()]
    if not missing:
        return target
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(
            "building the Kubernetes binaries needs the Go toolchain (go >= 1.24) on PATH; "
            f"or put prebuilt {', '.join(missing)} into {target}"
        )
    _log(f"building {', '.join(missing)} into {target} (once; up to ~30 min on a cold cache)")
    target.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    staging = workdir / "out"
    # -mod=readonly: a build that would have to change go.mod or go.sum fails instead.
    env = {
        **os.environ,
        "GOFLAGS": "-trimpath -mod=readonly",
        "CGO_ENABLED": "0",
        "GO111MODULE": "on",
    }
    try:
        from_wrapper = [name for name in missing if name in _WRAPPER_PACKAGES]
        if from_wrapper:
            _build_from_wrapper(go, env, names=from_wrapper, staging=staging)
        if "kwok" in missing:
            kwok = f"sigs.k8s.io/kwok/cmd/kwok@v{KWOK_VERSION}"
            _run_go([go, "install", "-v", "-ldflags=-s -w", kwok], workdir,
                    {**env, "GOBIN": str(staging)}, "compiling kwok")  # fmt: skip
        if "metrics-server" in missing:
            # Its release's version, where its own Makefile writes it.
            version = f"-X k8s.io/client-go/pkg/version.gitVersion=v{METRICS_SERVER_VERSION}"
            metrics_server = "sigs.k8s.io/metrics-server/cmd/metrics-server"
            metrics_server += f"@v{METRICS_SERVER_VERSION}"
            _run_go([go, "install", "-v", f"-ldflags=-s -w {version}", metrics_server], workdir,
                    {**env, "GOBIN": str(staging)}, "compiling metrics-server")  # fmt: skip
        target.mkdir(parents=True, exist_ok=True)
        for name in missing:
            os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _log(f"built {', '.join(missing)} in {target}")
    return target


def _build_from_wrapper(go: str, env: dict[str, str], *, names: list[str], staging: Path) -> None:
    minor = KUBERNETES_VERSION.split(".")[1]
    ldflags = " ".join(
        f"-X {pkg}.{var}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for var in (f"gitVersion=v{KUBERNETES_VERSION}", "gitMajor=1", f"gitMinor={minor}",
                    "gitTreeState=clean")
    )  # fmt: skip
    _run_go(
        [go, "build", "-v", "-ldflags", f"-s -w {ldflags}", "-o", str(staging) + "/",
         *(_WRAPPER_PACKAGES[name] for name in names)],
        WRAPPER_MODULE, env, "compiling",
    )  # fmt: skip


def _run_go(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    """Run a go command, echoing a progress line per package so a long build is visibly alive."""
    _log(f"{what}: {' '.join(argv[:3])} ...")
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for count, line in enumerate(proc.stdout, start=1):
        tail = [*tail[-39:], line.rstrip()]
        if count % 100 == 0:
            _log(f"{what}: {count} steps, {time.monotonic() - started:.0f}s, at {line.strip()}")
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed in {cwd}:\n" + "\n".join(tail))
    _log(f"{what}: done in {time.monotonic() - started:.0f}s")


def openssl_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA, ``<name>.crt`` and ``<name>.key`` in ``directory``."""
    crt, key = directory / f"{name}.crt", directory / f"{name}.key"
    config = directory / f"{name}.cnf"
    config.write_text(_OPENSSL_CA)
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-x509", "-new", "-key", str(key), "-subj", f"/CN={name}", "-days", "3650",
             "-config", str(config), "-out", str(crt))  # fmt: skip
    return crt, key


def openssl_cert(
    directory: Path,
    name: str,
    ca: tuple[Path, Path],
    *,
    usage: str,
    hosts: tuple[str, ...] = (),
) -> tuple[Path, Path]:
    """A key and a certificate signed by ``ca`` for ``usage`` (serverAuth or clientAuth), with
    common name ``name`` and the ``hosts`` (DNS names or IPs) as subject alternative names."""
    crt, key, csr = (directory / f"{name}.{suffix}" for suffix in ("crt", "key", "csr"))
    extensions = directory / f"{name}.ext"
    lines = ["basicConstraints = critical,CA:FALSE",
             "keyUsage = critical,digitalSignature,keyEncipherment",
             f"extendedKeyUsage = {usage}"]  # fmt: skip
    if hosts:
        names = (f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hosts)
        lines.append(f"subjectAltName = {','.join(names)}")
    extensions.write_text("\n".join(lines) + "\n")
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", f"/CN={name}", "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-set_serial", f"0x{os.urandom(8).hex()}", "-days", "3650",
             "-extfile", str(extensions), "-out", str(crt))  # fmt: skip
    return crt, key


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


# Every port this process has handed out. The kernel may offer a port again as soon as the probe
# socket closes, so two ports asked for one after the other can be the same one (a CI run gave the
# kubelet and metrics-server both 35031, and metrics-server failed to bind).
_handed_out: set[int] = set()
_handing_out = threading.Lock()


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now, and not one this process handed out before."""
    with _handing_out:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent dies, so a killed pytest leaks nothing."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


# The processes of a control plane in start order (the last three in the full mode only); they
# stop in the reverse order.
PROCESSES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver pair (and, when ``full``, the rest of a cluster) and the
    files that describe it."""

    workdir: Path
    server: str
    kubeconfig: Path
    bin_dir: Path
    admin_token: str
    pids: dict[str, int] = field(default_factory=dict)
    # Our own children, kept so that stop() reaps them; empty when loaded from a state file.
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    # etcd's client URL (plain HTTP on loopback): its JSON gateway answers /v3/kv/... requests.
    etcd_url: str = ""
    # Each process's command line, extra environment and whether it was detached, so that
    # start_process can start a stopped one again exactly as it was; empty when loaded from a
    # state file.
    commands: dict[str, tuple[list[str], dict[str, str], bool]] = field(
        default_factory=dict, repr=False
    )
    # kube-controller-manager, kube-scheduler and kwok run too (see the module docstring).
    full: bool = False
    # The health URL of each of those three (etcd's and kube-apiserver's follow from the fields
    # above).
    health_urls: dict[str, str] = field(default_factory=dict)

    @property
    def audit_log(self) -> Path:
        """One JSON line per write made by a service account (see AUDIT_POLICY)."""
        return self.workdir / "audit.log"

    @property
    def front_proxy_ca(self) -> Path:
        """The CA of the client certificate the aggregator proxies with (see FRONT_PROXY_CLIENT)."""
        return self.workdir / "front-proxy-ca.crt"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    def env(self) -> dict[str, str]:
        """Environment in which kubectl and clients talk to this control plane."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def to_state(self) -> dict[str, object]:
        return {
            "workdir": str(self.workdir),
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "bin_dir": str(self.bin_dir),
            "admin_token": self.admin_token,
            "pids": self.pids,
            "etcd_url": self.etcd_url,
            "full": self.full,
            "health_urls": self.health_urls,
        }

    @classmethod
    def from_state(cls, state: dict[str, object]) -> ControlPlane:
        pids, health_urls = state["pids"], state.get("health_urls", {})
        assert isinstance(pids, dict)
        assert isinstance(health_urls, dict)
        return cls(
            workdir=Path(str(state["workdir"])),
            server=str(state["server"]),
            kubeconfig=Path(str(state["kubeconfig"])),
            bin_dir=Path(str(state["bin_dir"])),
            admin_token=str(state["admin_token"]),
            pids={str(k): int(v) for k, v in pids.items()},
            etcd_url=str(state.get("etcd_url", "")),
            full=bool(state.get("full", False)),
            health_urls={str(k): str(v) for k, v in health_urls.items()},
        )

    def alive(self) -> bool:
        return bool(self.pids) and all(_pid_alive(pid) for pid in self.pids.values())

    def stop(self) -> None:
        """Stop a real node started next to it (``realnode.py``: its containers, mounts and
        changes to the host go first), then the processes in the reverse of their start order
        (the apiserver before etcd), then remove every file. Safe to call twice."""
        node_dir = self.workdir / "node"
        if node_dir.exists():
            import realnode  # realnode imports this module: imported here, when needed

            realnode.cleanup_orphans(node_dir)
        for name in reversed(PROCESSES):
            pid = self.pids.pop(name, None)
            if pid is not None:
                _terminate(pid)
            child = self.children.pop(name, None)
            if child is not None:
                child.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def stop_process(self, name: str, grace: float = 10.0) -> int | None:
        """Stop one process (a name in PROCESSES) with SIGTERM and wait until it has exited,
        SIGKILL after ``grace`` seconds; its files stay for ``start_process``. Returns its exit
        status (``-9``: it had to be killed), ``None`` if it is not our child."""
        pid = self.pids.pop(name)
        child = self.children.pop(name, None)
        if child is None:
            _terminate(pid, grace)
            return None
        # Through Popen rather than _terminate, whose reaping would lose the exit status.
        child.terminate()
        try:
            return child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()
            return child.wait()

    def start_process(self, name: str, timeout: float = 90.0) -> None:
        """Start a process ``stop_process`` stopped with the command line it first had (the same
        port, data directory and flags) and wait until it says it is ready."""
        argv, env, detached = self.commands[name]
        _spawn(self, name, argv, detached, env)
        self.wait_ready(name, timeout)
        state = self.workdir / "state.json"
        if state.exists():  # `local-cluster down` stops the pids it lists
            state.write_text(json.dumps(self.to_state(), indent=2))

    def wait_ready(self, name: str, timeout: float = 90.0) -> None:
        """Until the process answers its health check with 200 (etcd ``/health``, kube-apiserver
        ``/readyz``, which needs etcd, the others their ``health_urls``); raises with the log's
        tail if it does not within ``timeout`` seconds."""
        if name == "etcd":
            _wait_http(f"{self.etcd_url}/health", None, timeout, self, name)
        elif name == "kube-apiserver":
            _wait_http(f"{self.server}/readyz", self.admin_token, timeout, self, name)
        else:
            _wait_http(self.health_urls[name], None, timeout, self, name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); reap it if it is one.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _terminate(pid: int, grace: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.05)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while _pid_alive(pid):
            time.sleep(0.05)


def start(
    workdir: Path | None = None,
    *,
    detached: bool = False,
    timeout: float = 90.0,
    apiserver_flags: Sequence[str] = (),
    full: bool = False,
) -> ControlPlane:
    """Start etcd and kube-apiserver on free loopback ports and wait until the API is ready;
    when ``full``, then kube-controller-manager, kube-scheduler and kwok too, and wait until
    they are healthy.

    ``detached`` processes outlive the caller (the ``local-cluster up`` command); otherwise they
    are killed with it, so an interrupted test run leaves nothing behind. ``apiserver_flags`` go
    last on kube-apiserver's command line, so they override ours (e.g. ``--watch-cache=false``).
    """
    binaries = ensure_binaries(full=full)
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="sharekeeper-cp-"))
    workdir.mkdir(parents=True, exist_ok=True)
    token = os.urandom(16).hex()
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    plane = ControlPlane(
        workdir=workdir,
        server=server,
        kubeconfig=workdir / "kubeconfig",
        bin_dir=binaries,
        admin_token=token,
        full=full,
    )
    try:
        (workdir / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        (workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        subprocess.run(
            ["openssl", "genrsa", "-out", str(workdir / "sa.key"), "2048"],
            check=True,
            capture_output=True,
        )
        front_proxy_ca = openssl_ca(workdir, "front-proxy-ca")
        proxy_client = openssl_cert(workdir, FRONT_PROXY_CLIENT, front_proxy_ca, usage="clientAuth")
        etcd_url = plane.etcd_url = f"http://127.0.0.1:{etcd_port}"
        _spawn(
            plane,
            "etcd",
            [
                str(binaries / "etcd"),
                "--name=local",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=local=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            detached,
        )
        _wait_http(f"{etcd_url}/health", None, timeout, plane, "etcd")
        _spawn(
            plane,
            "kube-apiserver",
            [
                str(binaries / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--cert-dir={workdir / 'certs'}",
                f"--token-auth-file={workdir / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={workdir / 'sa.key'}",
                f"--service-account-signing-key-file={workdir / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                # No controller manager runs, so nothing would create the default ServiceAccount
                # token; pods are created by the tests and need no SA admission.
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                f"--audit-policy-file={workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={workdir / 'audit.log'}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                # The aggregation layer, for APIServices such as metrics.k8s.io. No
                # --enable-aggregator-routing: it routes to EndpointSlice addresses, which may not
                # be loopback, and rejects ExternalName services; the default (cluster IP)
                # resolver sends an ExternalName service to its name, e.g. 127.0.0.1.
                f"--requestheader-client-ca-file={front_proxy_ca[0]}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={proxy_client[0]}",
                f"--proxy-client-key-file={proxy_client[1]}",
                # Open watches are closed within 5 s of SIGTERM; the default waits out the 60 s
                # request timeout, past our stop grace, which then kills the process instead.
                "--shutdown-watch-termination-grace-period=5s",
                "--v=1",
                *apiserver_flags,
            ],
            detached,
        )
        _wait_http(f"{server}/readyz", token, timeout, plane, "kube-apiserver")
        _write_kubeconfig(plane)
        if full:
            _start_cluster_components(plane, detached, timeout)
        (workdir / "state.json").write_text(json.dumps(plane.to_state(), indent=2))
    except BaseException:
        plane.stop()
        raise
    return plane


def _start_cluster_components(plane: ControlPlane, detached: bool, timeout: float) -> None:
    """kube-controller-manager, kube-scheduler and kwok, all acting as the admin (so that their
    writes stay out of the audit log, which records service accounts')."""
    workdir, binaries, kubeconfig = plane.workdir, plane.bin_dir, plane.kubeconfig
    controller_manager_port, scheduler_port, kwok_port = free_port(), free_port(), free_port()
    plane.health_urls = {
        "kube-controller-manager": f"https://127.0.0.1:{controller_manager_port}/healthz",
        # /readyz waits for the scheduler's informers to sync, /healthz does not.
        "kube-scheduler": f"https://127.0.0.1:{scheduler_port}/readyz",
        "kwok": f"http://127.0.0.1:{kwok_port}/healthz",
    }
    _spawn(
        plane,
        "kube-controller-manager",
        [
            str(binaries / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={controller_manager_port}",
            f"--cert-dir={workdir / 'kube-controller-manager-certs'}",
            # No --authentication/authorization-kubeconfig (nor for the scheduler): they would
            # look for a client CA the API server does not have (it takes tokens) and log errors
            # about it; the health endpoints are open anyway, and nothing else calls these.
            "--leader-elect=false",
            # No cloud and no pod networks: node CIDRs, routes and load balancers stay off.
            "--controllers=*,-node-ipam-controller,-cloud-node-lifecycle-controller,"
            "-node-route-controller,-service-lb-controller",
            f"--service-account-private-key-file={workdir / 'sa.key'}",
            f"--root-ca-file={workdir / 'certs' / 'apiserver.crt'}",
            "--concurrent-job-syncs=20",
            "--v=1",
        ],
        detached,
    )
    _spawn(
        plane,
        "kube-scheduler",
        [
            str(binaries / "kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={scheduler_port}",
            f"--cert-dir={workdir / 'kube-scheduler-certs'}",
            "--leader-elect=false",
            "--v=1",
        ],
        detached,
    )
    config = workdir / "kwok-config.yaml"
    config.write_text(KWOK_CONFIG)
    annotation, value = FAKE_NODE_ANNOTATION
    _spawn(
        plane,
        "kwok",
        [
            str(binaries / "kwok"),
            f"--kubeconfig={kubeconfig}",
            f"--config={config}",
            f"--manage-nodes-with-annotation-selector={annotation}={value}",
            f"--server-address=127.0.0.1:{kwok_port}",
            # Pod IPs apart from the service range (10.0.0.0/24).
            "--cidr=10.244.0.0/16",
            # Kubelet-like Leases in kube-node-lease, the heartbeat the node-lifecycle controller
            # watches (without the flag kwok keeps none).
            "--node-lease-duration-seconds=40",
        ],
        detached,
        # kwok also reads $KWOK_WORKDIR/kwok.yaml (by default ~/.kwok/kwok.yaml), which could
        # add someone's own stages to ours.
        {"KWOK_WORKDIR": str(workdir / "kwok")},
    )
    for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
        plane.wait_ready(name, timeout)


def _spawn(
    plane: ControlPlane,
    name: str,
    argv: list[str],
    detached: bool,
    env: dict[str, str] | None = None,
) -> None:
    extra_env = env or {}
    with (plane.workdir / f"{name}.log").open("ab") as out:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **extra_env},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal goes to us; we stop them in order
            # Runs only async-signal-safe prctl(2) between fork and exec.
            preexec_fn=None if detached else _die_with_parent,  # noqa: PLW1509
        )
    plane.pids[name] = proc.pid
    plane.children[name] = proc
    plane.commands[name] = (argv, extra_env, detached)


def _wait_http(url: str, token: str | None, timeout: float, plane: ControlPlane, name: str) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only a readiness probe; clients verify the cert
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not _pid_alive(plane.pids[name]):
            break
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError) as error:
            last = str(error)
        time.sleep(0.2)
    log = (plane.workdir / f"{name}.log").read_text(errors="replace").splitlines()[-30:]
    raise RuntimeError(
        f"{name} did not become ready at {url} ({last}); log tail:\n" + "\n".join(log)
    )


def _write_kubeconfig(plane: ControlPlane) -> None:
    # kube-apiserver wrote a self-signed serving cert for 127.0.0.1 whose file also carries its
    # CA, so clients can verify TLS instead of skipping it.
    ca = plane.workdir / "certs" / "apiserver.crt"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": plane.server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": "admin", "user": {"token": plane.admin_token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
    }
    plane.kubeconfig.write_text(json.dumps(config, indent=2))


def write_token_kubeconfig(plane: ControlPlane, path: Path, token: str, user: str) -> Path:
    """A kubeconfig for the same server acting as someone else (e.g. the operator's SA)."""
    config = json.loads(plane.kubeconfig.read_text())
    config["users"] = [{"name": user, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = user
    path.write_text(json.dumps(config, indent=2))
    return path


@contextlib.contextmanager
def running(
    workdir: Path | None = None, *, apiserver_flags: Sequence[str] = (), full: bool = False
) -> Iterator[ControlPlane]:
    plane = start(workdir, apiserver_flags=apiserver_flags, full=full)
    try:
        yield plane
    finally:
        plane.stop()
