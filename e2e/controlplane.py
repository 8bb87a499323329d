"""A real local Kubernetes control plane: etcd + kube-apiserver on 127.0.0.1.

There is no kubelet, scheduler or controller manager: nodes are plain objects and pods are
created already bound. That is all Sharekeeper needs, since it only reads nodes and pods and
writes custom-resource status, node annotations, taints, evictions and resizes.

kube-apiserver is not packaged anywhere we can install from, so the binaries (kube-apiserver,
kubectl and etcd) are built from the Go module proxy by a throwaway wrapper module and cached
outside the repository, keyed by version: the first build takes a while, later runs reuse it.

Used three ways: the pytest fixture in ``e2e/conftest.py``, the ``e2e/local-cluster`` command
for people, and the demo.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_VERSION = "1.34.4"

# Every k8s.io staging module of this Kubernetes minor. k8s.io/kubernetes requires them at
# v0.0.0 and replaces them with its own staging tree, which a consumer does not have; each one
# has to be pointed at its published v0.X.Y. Check the list against the release's go.mod
# (`grep '=> ./staging' go.mod`) when bumping KUBERNETES_VERSION.
STAGING_MODULES = (
    "api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
    "cloud-provider", "cluster-bootstrap", "code-generator", "component-base",
    "component-helpers", "controller-manager", "cri-api", "cri-client", "csi-translation-lib",
    "dynamic-resource-allocation", "endpointslice", "externaljwt", "kms", "kube-aggregator",
    "kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl", "kubelet", "metrics",
    "mount-utils", "pod-security-admission", "sample-apiserver", "sample-cli-plugin",
    "sample-controller",
)  # fmt: skip

BINARIES = ("kube-apiserver", "kubectl", "etcd")

# etcd is built from the same wrapper module, at the version kube-apiserver's own go.mod
# requires: the pairing Kubernetes was released and tested with.
_ETCD_MAIN = """package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""

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

_TOOLS_GO = """//go:build tools

package tools

import (
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
\t_ "k8s.io/kubernetes/cmd/kubectl"
)
"""


def cache_root() -> Path:
    """Where built binaries live: outside the repository, shared by every checkout."""
    explicit = os.environ.get("SHAREKEEPER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sharekeeper"


def bin_dir(version: str = KUBERNETES_VERSION) -> Path:
    return cache_root() / f"kubernetes-v{version}" / "bin"


def _log(message: str) -> None:
    print(f"[local-cluster] {message}", file=sys.stderr, flush=True)


def ensure_binaries(version: str = KUBERNETES_VERSION) -> Path:
    """Return the directory holding kube-apiserver, kubectl and etcd; build them if missing."""
    target = bin_dir(version)
    if all((target / name).is_file() for name in BINARIES):
        return target
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(
            "building kube-apiserver needs the Go toolchain (go >= 1.24) on PATH; "
            f"or put prebuilt {', '.join(BINARIES)} into {target}"
        )
    _log(f"building Kubernetes v{version} binaries into {target} (first run only; ~15-30 min)")
    target.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        _write_wrapper_module(workdir, version)
        env = {**os.environ, "GOFLAGS": "-trimpath", "CGO_ENABLED": "0", "GO111MODULE": "on"}
        _run_go([go, "mod", "tidy"], workdir, env, "resolving modules")
        minor = version.split(".")[1]
        ldflags = " ".join(
            f"-X {pkg}.{var}"
            for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
            for var in (f"gitVersion=v{version}", "gitMajor=1", f"gitMinor={minor}",
                        "gitTreeState=clean")
        )  # fmt: skip
        staging = workdir / "out"
        _run_go(
            [go, "build", "-v", "-ldflags", f"-s -w {ldflags}", "-o", str(staging) + "/",
             "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl", "./cmd/etcd"],
            workdir, env, "compiling",
        )  # fmt: skip
        target.mkdir(parents=True, exist_ok=True)
        for name in BINARIES:
            os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _log(f"built {', '.join(BINARIES)} in {target}")
    return target


def _write_wrapper_module(workdir: Path, version: str) -> None:
    minor_patch = version.split(".", 1)[1]
    replaces = "\n".join(
        f"\tk8s.io/{name} => k8s.io/{name} v0.{minor_patch}" for name in STAGING_MODULES
    )
    (workdir / "go.mod").write_text(
        "module sharekeeper.local/k8sbins\n\ngo 1.24.0\n\n"
        f"require k8s.io/kubernetes v{version}\n\nreplace (\n{replaces}\n)\n"
    )
    (workdir / "tools.go").write_text(_TOOLS_GO)
    (workdir / "cmd" / "etcd").mkdir(parents=True)
    (workdir / "cmd" / "etcd" / "main.go").write_text(_ETCD_MAIN)


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent dies, so a killed pytest leaks nothing."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver pair and the files that describe it."""

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
    # Each process's command line and whether it was detached, so that start_process can start
    # a stopped one again exactly as it was; empty when loaded from a state file.
    commands: dict[str, tuple[list[str], bool]] = field(default_factory=dict, repr=False)

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
        }

    @classmethod
    def from_state(cls, state: dict[str, object]) -> ControlPlane:
        pids = state["pids"]
        assert isinstance(pids, dict)
        return cls(
            workdir=Path(str(state["workdir"])),
            server=str(state["server"]),
            kubeconfig=Path(str(state["kubeconfig"])),
            bin_dir=Path(str(state["bin_dir"])),
            admin_token=str(state["admin_token"]),
            pids={str(k): int(v) for k, v in pids.items()},
            etcd_url=str(state.get("etcd_url", "")),
        )

    def alive(self) -> bool:
        return bool(self.pids) and all(_pid_alive(pid) for pid in self.pids.values())

    def stop(self) -> None:
        """Stop the apiserver before etcd, then remove every file. Safe to call twice."""
        for name in ("kube-apiserver", "etcd"):
            pid = self.pids.pop(name, None)
            if pid is not None:
                _terminate(pid)
            child = self.children.pop(name, None)
            if child is not None:
                child.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def stop_process(self, name: str, grace: float = 10.0) -> int | None:
        """Stop one process (``etcd`` or ``kube-apiserver``) with SIGTERM and wait until it has
        exited, SIGKILL after ``grace`` seconds; its files stay for ``start_process``. Returns its
        exit status (``-9``: it had to be killed), ``None`` if it is not our child."""
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
        argv, detached = self.commands[name]
        _spawn(self, name, argv, detached)
        self.wait_ready(name, timeout)
        state = self.workdir / "state.json"
        if state.exists():  # `local-cluster down` stops the pids it lists
            state.write_text(json.dumps(self.to_state(), indent=2))

    def wait_ready(self, name: str, timeout: float = 90.0) -> None:
        """Until etcd answers ``/health`` or kube-apiserver ``/readyz`` (which needs etcd) with
        200; raises with the log's tail if it does not within ``timeout`` seconds."""
        if name == "etcd":
            _wait_http(f"{self.etcd_url}/health", None, timeout, self, name)
        else:
            _wait_http(f"{self.server}/readyz", self.admin_token, timeout, self, name)


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
    version: str = KUBERNETES_VERSION,
    timeout: float = 90.0,
    apiserver_flags: Sequence[str] = (),
) -> ControlPlane:
    """Start etcd and kube-apiserver on free loopback ports and wait until the API is ready.

    ``detached`` processes outlive the caller (the ``local-cluster up`` command); otherwise they
    are killed with it, so an interrupted test run leaves nothing behind. ``apiserver_flags`` go
    last on kube-apiserver's command line, so they override ours (e.g. ``--watch-cache=false``).
    """
    binaries = ensure_binaries(version)
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
        (workdir / "state.json").write_text(json.dumps(plane.to_state(), indent=2))
    except BaseException:
        plane.stop()
        raise
    return plane


def _spawn(plane: ControlPlane, name: str, argv: list[str], detached: bool) -> None:
    with (plane.workdir / f"{name}.log").open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal goes to us; we stop them in order
            # Runs only async-signal-safe prctl(2) between fork and exec.
            preexec_fn=None if detached else _die_with_parent,  # noqa: PLW1509
        )
    plane.pids[name] = proc.pid
    plane.children[name] = proc
    plane.commands[name] = (argv, detached)


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
    workdir: Path | None = None, *, apiserver_flags: Sequence[str] = ()
) -> Iterator[ControlPlane]:
    plane = start(workdir, apiserver_flags=apiserver_flags)
    try:
        yield plane
    finally:
        plane.stop()
