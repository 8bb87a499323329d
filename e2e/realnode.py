"""A real node next to a local control plane: containerd, runc and the kubelet run pods for real,
and metrics-server reads their usage from the kubelet, all on 127.0.0.1.

``start(plane)`` runs, as plain processes with every file under ``<plane.workdir>/node``:

- a holder process in the node's cgroup (``/sharekeeper-node-<hash>`` in every hierarchy) that
  unshares a mount and a cgroup namespace, mounts every cgroup hierarchy afresh there, so that
  the node's cgroup is their root, and sleeps. containerd and the kubelet join its namespaces:
  the kubelet's node usage (cAdvisor's root cgroup) is then the node's own (containerd, the
  kubelet, the pods), not the whole machine's, and every mount they make stays there
  (``--propagation slave``) and goes when its last process does. The node's cgroup weighs
  NODE_CPU_SHARES, so its pods get what their limits allow while a few other processes
  compete;

- containerd (Debian's package, with runc and the CNI plugins: ``make node-packages``), its own
  socket, root, state and runc root there. Its images are built here, not pulled: BUSYBOX_IMAGE,
  a busybox root filesystem from Debian's ``busybox-static``, and PAUSE_IMAGE, the same layer
  running busybox ``sleep`` for ever as the pod sandbox (named in containerd's config). Pods use
  them with ``imagePullPolicy: Never``.
- the kubelet (built from the wrapper module, see ``controlplane.ensure_binaries``), registering
  the node NODE_NAME, ``127.0.0.1``: the kubelet refuses a loopback ``--node-ip``, but
  ``--hostname-override=127.0.0.1`` gives the node that InternalIP. It serves on 127.0.0.1 with
  a certificate of our CA, authenticating and authorizing callers through the API server. Pods
  get an address on the bridge BRIDGE (no gateway, no masquerading, no iptables rule), which
  only they can reach.
- metrics-server (at its release, built like kwok), scraping that kubelet every 15 s (it refuses
  less) and registered as ``v1beta1.metrics.k8s.io`` through an APIService, behind the API
  server's aggregation layer, as the stand-in ``metrics_server.py`` is.

The API server's node proxy refuses loopback node addresses (``address not allowed``), so
``kubectl logs``, ``exec`` and ``port-forward`` do not work here; read the kubelet
(``kubelet_get``) instead. ``kubectl top`` works (metrics.k8s.io is not the node proxy).

What it changes on the host, and how ``stop()`` undoes it (``cleanup_orphans(state_dir)`` does
the same after a crash, from the record ``start`` writes first, in RECORDS; ``start`` cleans up
first after every recorded node whose kubelet and containerd died without it, such as one of a
test session that was killed, wherever its state directory was):

- sysctls: the kubelet sets ``vm.overcommit_memory``, ``vm.panic_on_oom``, ``kernel.panic``,
  ``kernel.panic_on_oops`` and ``kernel.keys.root_max*``; every one in SYSCTLS is recorded before
  and written back if it changed;
- cgroups: the node's cgroup and everything the kubelet and runc create below it
  (``kubepods/...``); its processes are killed and the tree removed;
- processes: the kubelet first (SIGTERM), then everything in the node's cgroup (the holder,
  containerd, the shims, which outlive containerd, and the containers), then whatever names the
  state directory in its command line (metrics-server). Process state is read from ``/proc``: a
  zombie counts as gone (PID 1 may reap late);
- mounts: none on the host (they are in the node's mount namespace); any found under the state
  directory or the paths below are unmounted, deepest first;
- network: the bridge BRIDGE (deleted; the pods' veths go with their network namespaces) and
  the namespaces' files in ``/run/netns`` (removed);
- directories outside the state directory that the kubelet and containerd hard-code
  (HOST_PATHS: ``/var/lib/kubelet/device-plugins``, ``/var/lib/cni``, ``/run/containerd``, ...):
  those that did not exist before are removed.

Only one node runs on a host at a time (the kubelet's device-plugin directory and containerd's
shim sockets are fixed paths). Needs root and Linux with cgroup v1 (``unavailable()`` says why
not).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import hashlib
import io
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import controlplane

NODE_NAME = "127.0.0.1"
# Every pod the tests run uses these, with imagePullPolicy: Never.
BUSYBOX_IMAGE = "sharekeeper.local/busybox:static"
PAUSE_IMAGE = "sharekeeper.local/pause:static"
# The node carries this label (for a policy's nodeSelector).
NODE_LABEL = ("sharekeeper.io/real-node", "true")
BRIDGE = "skbr0"
POD_SUBNET = "10.254.254.0/24"

# What the node runs on, from Debian's packages (scripts/node-packages.sh).
HOST_BINARIES = {
    "containerd": "/usr/bin/containerd",
    "containerd-shim-runc-v2": "/usr/bin/containerd-shim-runc-v2",
    "ctr": "/usr/bin/ctr",
    "runc": "/usr/sbin/runc",
    "bridge": "/usr/lib/cni/bridge",
    "host-local": "/usr/lib/cni/host-local",
    "loopback": "/usr/lib/cni/loopback",
    "busybox": "/bin/busybox",
}
CNI_BIN_DIR = "/usr/lib/cni"

# Sysctls the kubelet (and a bridge) may change; recorded at start, written back at stop.
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
)

# Directories outside the state directory that the kubelet, containerd, its shims or the CNI
# plugins create at fixed paths; those that did not exist before the node started are removed
# (children before parents).
HOST_PATHS = (
    "/var/lib/kubelet/device-plugins",
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/run/containerd",
    "/run/netns",
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/containerd",
    "/opt/containerd",
    "/etc/cni",
    "/opt/cni",
)
NETNS_DIR = Path("/run/netns")
# Host-wide, one file per node ever started and not yet cleaned up: what the host was like
# before it, and where its state is. Outside the state directory, so that the next start finds
# a node whose run died, and in /run, which a reboot clears as it does everything recorded.
RECORDS = Path("/run/sharekeeper-nodes")
SOCKET_PATH_MAX = 104
"""containerd refuses a unix socket path longer than this."""
CGROUP_ROOT = Path("/sys/fs/cgroup")

# metrics-server behind the aggregator, as the stand-in is registered (metrics_api.py).
METRICS_APISERVICE = "v1beta1.metrics.k8s.io"
METRICS_SERVICE = ("kube-system", "metrics-server")
METRIC_RESOLUTION = "15s"  # metrics-server refuses less

PROCESSES = ("node", "containerd", "kubelet", "metrics-server")
# The node's cgroup weighs as much as eight busy processes of the host's root cgroup: its pods
# get the CPU their limits allow while a few other processes compete (the default, 1024, would
# weigh as one).
NODE_CPU_SHARES = 8192


def _log(message: str) -> None:
    print(f"[real-node] {message}", file=sys.stderr, flush=True)


def unavailable() -> str | None:
    """Why a real node cannot run on this machine, or None if it can."""
    if sys.platform != "linux":
        return "a real node needs Linux"
    if os.geteuid() != 0:
        return "a real node needs root (containerd, runc and the kubelet change the host)"
    missing = [path for path in HOST_BINARIES.values() if not os.access(path, os.X_OK)]
    if missing:
        return (
            f"a real node needs Debian's containerd, runc, containernetworking-plugins and "
            f"busybox-static (missing {', '.join(missing)}): run `make node-packages`"
        )
    hierarchies = _cgroup_hierarchies()
    if not any(path.name == "cpu" or "cpu" in path.name.split(",") for path in hierarchies):
        return "a real node needs cgroup v1 with the cpu controller (the kubelet is set up so)"
    return None


# --- images --------------------------------------------------------------------------------------

_IMAGE_FORMAT = "1"  # bump when the images built below change


def _busybox_layer() -> bytes:
    """An uncompressed layer: busybox and a link per applet in /bin, the usual directories, root
    and nobody; every header fixed, so the same busybox gives the same bytes."""
    busybox = Path(HOST_BINARIES["busybox"])
    applets = subprocess.run(
        [str(busybox), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:

        def add(name: str, kind: bytes, *, mode: int, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for directory in ("bin", "dev", "etc", "proc", "root", "sys", "tmp", "var"):
            add(directory, tarfile.DIRTYPE, mode=0o1777 if directory == "tmp" else 0o755)
        add("bin/busybox", tarfile.REGTYPE, mode=0o755, data=busybox.read_bytes())
        for applet in sorted(set(applets) - {"busybox"}):
            add(f"bin/{applet}", tarfile.SYMTYPE, mode=0o777, link="busybox")
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        add("etc/passwd", tarfile.REGTYPE, mode=0o644, data=passwd)
        add("etc/group", tarfile.REGTYPE, mode=0o644, data=b"root:x:0:\nnogroup:x:65534:\n")
    return out.getvalue()


def _image_config(diff_id: str, config: dict[str, object]) -> bytes:
    return json.dumps(
        {"architecture": "amd64", "os": "linux",
         "config": {"Env": ["PATH=/bin"], **config},
         "rootfs": {"type": "layers", "diff_ids": [diff_id]}},
        sort_keys=True,
    ).encode()  # fmt: skip


def images_archive() -> Path:
    """A docker-archive (``docker save``) tar holding BUSYBOX_IMAGE and PAUSE_IMAGE, built from
    the host's static busybox once and cached beside the binaries, keyed by that busybox."""
    busybox = Path(HOST_BINARIES["busybox"]).read_bytes()
    key = hashlib.sha256(busybox + _IMAGE_FORMAT.encode()).hexdigest()[:12]
    target = controlplane.cache_root() / f"node-images-{key}" / "images.tar"
    if target.is_file():
        return target
    layer = _busybox_layer()
    diff_id = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    configs = {
        BUSYBOX_IMAGE: _image_config(diff_id, {"Cmd": ["sh"]}),
        # The sandbox only holds the pod's namespaces: sleep for ever (68 years), as PID 1 of
        # its own PID namespace, which nothing else joins.
        PAUSE_IMAGE: _image_config(diff_id, {"Entrypoint": ["/bin/sleep", "2147483647"]}),
    }
    manifest = [
        {"Config": f"{hashlib.sha256(config).hexdigest()}.json", "RepoTags": [name],
         "Layers": [f"{diff_id.removeprefix('sha256:')}/layer.tar"]}
        for name, config in configs.items()
    ]  # fmt: skip
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))

        add(f"{diff_id.removeprefix('sha256:')}/layer.tar", layer)
        for config in configs.values():
            add(f"{hashlib.sha256(config).hexdigest()}.json", config)
        add("manifest.json", json.dumps(manifest).encode())
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(out.getvalue())
    os.replace(partial, target)
    _log(f"built the images {BUSYBOX_IMAGE} and {PAUSE_IMAGE} into {target}")
    return target


# --- the host: what we change and how it is undone ---------------------------------------------


def _cgroup_hierarchies(*, unified: bool = False) -> list[Path]:
    """The cgroup v1 hierarchies (``/sys/fs/cgroup/cpu``, ...); with ``unified``, the cgroup v2
    one too (``/sys/fs/cgroup/unified`` on a hybrid host, where the kubelet creates our root as
    well)."""
    kinds = ("cgroup", "cgroup2") if unified else ("cgroup",)
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] in kinds:
            found.append(Path(_unescape(left.split()[4])))
    return sorted(set(found))


def _unescape(path: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are octal escapes there."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, char)
    return path


def mount_points() -> list[str]:
    """Every mount point of our mount namespace, in mount order."""
    return [
        _unescape(line.split()[4]) for line in Path("/proc/self/mountinfo").read_text().splitlines()
    ]


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: Iterable[str] = SYSCTLS) -> dict[str, str]:
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text().strip()
    return values


def _links() -> list[str]:
    return sorted(path.name for path in Path("/sys/class/net").iterdir())


def _cgroup_name(state_dir: Path) -> str:
    return f"sharekeeper-node-{hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]}"


def _record_file(state_dir: Path) -> Path:
    return RECORDS / f"{_cgroup_name(state_dir)}.json"


def _record(state_dir: Path) -> dict[str, object]:
    """What ``cleanup_orphans`` needs to put the host back: taken before anything starts."""
    return {
        "state_dir": str(state_dir),
        "sysctls": read_sysctls(),
        "existed": [path for path in HOST_PATHS if os.path.lexists(path)],
        "netns": sorted(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else [],
        "links": _links(),
        "cgroup": _cgroup_name(state_dir),
    }


def _proc_state(pid: int) -> str | None:
    """The process's state letter from /proc (``R``, ``S``, ``Z``...), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def _gone(pid: int) -> bool:
    """Exited: no longer in /proc, or a zombie (whoever its parent is, it will reap it; PID 1
    here may take its time)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
    return _proc_state(pid) in (None, "Z", "X")


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _ours(state_dir: Path) -> list[int]:
    """Live processes whose command line names the state directory: containerd, the kubelet,
    metrics-server and the shims (whose ``-address`` is containerd's socket there)."""
    marker = str(state_dir.resolve())
    me = os.getpid()
    return [pid for pid in _pids() if pid != me and marker in _cmdline(pid) and not _gone(pid)]


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _stop_processes(pids: list[int], grace: float) -> None:
    """SIGTERM, then SIGKILL whatever is left after ``grace`` seconds; until all are gone."""
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.05)
    _signal_all([pid for pid in pids if not _gone(pid)], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            left = [pid for pid in pids if not _gone(pid)]
            raise RuntimeError(f"processes {left} survive SIGKILL")
        time.sleep(0.05)


def _cgroup_dirs(name: str) -> list[Path]:
    """Our cgroup tree in every hierarchy, children before parents."""
    found: list[Path] = []
    for hierarchy in _cgroup_hierarchies(unified=True):
        root = hierarchy / name
        if root.is_dir():
            found.extend(Path(d) for d, _, _ in os.walk(root, topdown=False))
    return found


def _cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for directory in _cgroup_dirs(name):
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
    return {pid for pid in pids if not _gone(pid)}


def _kill_cgroup_tasks(name: str) -> None:
    """SIGKILL every process in our cgroup tree (the containers), until there is none."""
    deadline = time.monotonic() + 15
    while pids := _cgroup_pids(name):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {sorted(pids)} in the cgroups {name} survive SIGKILL")
        _signal_all(pids, signal.SIGKILL)
        time.sleep(0.05)


def _remove_cgroups(name: str) -> None:
    deadline = time.monotonic() + 10
    for directory in _cgroup_dirs(name):
        while True:
            try:
                directory.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as error:  # EBUSY while a killed task is still leaving
                if error.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise RuntimeError(f"cannot remove the cgroup {directory}: {error}") from error
                time.sleep(0.05)


_MNT_DETACH = 2


def _unmount_under(prefixes: Iterable[str]) -> None:
    """Unmount every mount at or below one of ``prefixes``, deepest (latest) first, until none
    is left; lazily if one is busy."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    roots = [prefix.rstrip("/") for prefix in prefixes]

    def under() -> list[str]:
        return [m for m in mount_points() if any(m == r or m.startswith(r + "/") for r in roots)]

    for _ in range(100):
        targets = under()
        if not targets:
            return
        for target in reversed(targets):
            if libc.umount2(target.encode(), 0) != 0:
                libc.umount2(target.encode(), _MNT_DETACH)
    raise RuntimeError(f"still mounted: {under()}")


def cleanup_orphans(state_dir: Path) -> None:
    """Put the host back as it was before the node of ``state_dir`` started, whatever is left
    of it (after ``stop``, or after a crash that killed containerd and the kubelet but not the
    shims and containers), then remove ``state_dir``. Reads the record ``start`` wrote first;
    without one (the node never got that far), only processes naming the state directory and
    mounts under it are dealt with. Safe to call twice."""
    state_dir = state_dir.resolve()
    record_file = _record_file(state_dir)
    record: dict[str, object] = {}
    if record_file.is_file():
        record = json.loads(record_file.read_text())
    cgroup = str(record.get("cgroup", _cgroup_name(state_dir)))
    # The kubelet first (it would start containers again), metrics-server, then the containers
    # by cgroup, then containerd and its shims (which survive containerd).
    marker = str(state_dir)
    kubelet = [p for p in _ours(state_dir) if f"--root-dir={marker}/kubelet" in _cmdline(p)]
    _stop_processes(kubelet, grace=10)
    _kill_cgroup_tasks(cgroup)
    _stop_processes(_ours(state_dir), grace=10)
    _kill_cgroup_tasks(cgroup)
    # Our network namespaces: those in /run/netns that were not there before.
    netns_before = set(record.get("netns", []))  # type: ignore[call-overload]
    new_netns = []
    if NETNS_DIR.is_dir() and record:
        new_netns = [NETNS_DIR / n for n in os.listdir(NETNS_DIR) if n not in netns_before]
    existed = set(record.get("existed", HOST_PATHS))  # type: ignore[call-overload]
    created = [path for path in HOST_PATHS if path not in existed]
    _unmount_under([marker, *map(str, new_netns), *created])
    for path in new_netns:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    links_before = set(record.get("links", []))  # type: ignore[call-overload]
    if record and BRIDGE not in links_before and BRIDGE in _links():
        subprocess.run(["ip", "link", "delete", BRIDGE], check=True, capture_output=True)
    _remove_cgroups(cgroup)
    sysctls = record.get("sysctls", {})
    assert isinstance(sysctls, dict)
    for name, value in read_sysctls(sysctls).items():
        if value != sysctls[name]:
            _sysctl_path(name).write_text(f"{sysctls[name]}\n")
    for path in created:  # HOST_PATHS lists children before parents
        if path == str(NETNS_DIR):
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only if empty: someone else may have added to it meanwhile
        else:
            shutil.rmtree(path, ignore_errors=True)
    if any(m == marker or m.startswith(marker + "/") for m in mount_points()):
        raise RuntimeError(f"mounts remain under {state_dir}; it is not removed")
    shutil.rmtree(state_dir, ignore_errors=True)
    record_file.unlink(missing_ok=True)


def _daemons(state_dir: Path) -> list[int]:
    """The node's containerd and kubelet, if they run (its shims and containers outlive them)."""
    marker = str(state_dir.resolve())
    commands = (f"{HOST_BINARIES['containerd']} --config={marker}/", f"--root-dir={marker}/kubelet")
    return [pid for pid in _ours(state_dir) if any(c in _cmdline(pid) for c in commands)]


def cleanup_crashed() -> None:
    """Put the host back after every recorded node whose containerd and kubelet are gone (its
    run was killed before it could stop it). A recorded node that still runs is an error: one
    node per host."""
    for record_file in sorted(RECORDS.glob("*.json")):
        state_dir = Path(json.loads(record_file.read_text())["state_dir"])
        if _daemons(state_dir):
            raise RuntimeError(
                f"a node runs from {state_dir}; only one node runs on a host at a time: stop it"
                " first (`e2e/local-cluster down` if it is the local cluster's)"
            )
        _log(f"cleaning up after a node whose run died: {state_dir}")
        cleanup_orphans(state_dir)


# --- checking the host ----------------------------------------------------------------------------

# What a node's processes run: its programs (containerd's shims too), and busybox's sleep of the
# sandbox; the containers' own processes are in the node's cgroups. Matched on the program, not
# anywhere in the command line: another test worker's `openssl genrsa -out .../metrics-server.key`
# is no node's.
_NODE_PROGRAMS = ("containerd", "kubelet", "metrics-server", "runc")
_SANDBOX_COMMAND = "sleep 2147483647"
# Sysctls that change by themselves.
_VOLATILE_SYSCTLS = ("kernel/random/", "kernel/ns_last_pid", "kernel/pty/nr")


def host_snapshot() -> dict[str, list[str]]:
    """What a node could leave behind on the host, to compare before and after one ran: the
    processes that look like a node's (by command line or cgroup), every mount point, the
    top-level cgroups of every hierarchy and every cgroup below one of ours or the kubelet's,
    iptables and ip6tables rules and chains, the sysctls under kernel/, vm/,
    net/ipv4/ip_forward, net/ipv4/conf/all/ and net/bridge/, network links and namespaces, and
    which of HOST_PATHS exist."""
    processes = []
    for pid in _pids():
        if pid == os.getpid() or _gone(pid):
            continue
        command = _cmdline(pid)
        try:
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        program = os.path.basename(command.split(" ", 1)[0])
        if (
            program.startswith(_NODE_PROGRAMS)
            or _SANDBOX_COMMAND in command
            or "sharekeeper-node-" in cgroups
        ):
            processes.append(f"{pid} {command.strip()}")
    cgroups = []
    for hierarchy in _cgroup_hierarchies(unified=True):
        for top in hierarchy.iterdir():
            if not top.is_dir():
                continue
            cgroups.append(str(top))
            if top.name.startswith(("sharekeeper-node-", "kubepods")):
                cgroups.extend(d for d, _, _ in os.walk(top))
    rules = []
    for save in ("iptables-save", "ip6tables-save"):
        if shutil.which(save):
            out = subprocess.run([save], check=False, capture_output=True, text=True).stdout
            rules += [f"{save}: {line}" for line in out.splitlines()
                      if line and not line.startswith("#")]  # fmt: skip
    sysctls = []
    for top in ("kernel", "vm", "net/ipv4/ip_forward", "net/ipv4/conf/all", "net/bridge"):
        base = Path("/proc/sys") / top
        files = (
            [base] if base.is_file() else [Path(d) / f for d, _, fs in os.walk(base) for f in fs]
        )
        for path in files:
            name = str(path.relative_to("/proc/sys"))
            if name.startswith(_VOLATILE_SYSCTLS):
                continue
            with contextlib.suppress(OSError):
                sysctls.append(f"{name}={' '.join(path.read_text().split())}")
    return {
        "processes": sorted(processes),
        "mounts": sorted(mount_points()),
        "cgroups": sorted(cgroups),
        "iptables": sorted(rules),
        "sysctls": sorted(sysctls),
        "links": _links(),
        "netns": sorted(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else [],
        "paths": [path for path in HOST_PATHS if os.path.lexists(path)],
    }


def host_changes(
    before: dict[str, list[str]], after: dict[str, list[str]]
) -> dict[str, dict[str, list[str]]]:
    """What differs between two ``host_snapshot``s: per kind, what is ``new`` and what is
    ``gone`` (processes: only new ones, since others may end meanwhile); empty when nothing
    differs."""
    changes = {}
    for kind, was in before.items():
        new = sorted(set(after[kind]) - set(was))
        gone = [] if kind == "processes" else sorted(set(was) - set(after[kind]))
        if new or gone:
            changes[kind] = {"new": new, "gone": gone}
    return changes


# --- the node ----------------------------------------------------------------------------------


@dataclass
class RealNode:
    """A running containerd + kubelet + metrics-server next to a control plane."""

    plane: controlplane.ControlPlane
    state_dir: Path
    kubelet_port: int
    kubelet_healthz_port: int
    metrics_port: int
    pids: dict[str, int] = field(default_factory=dict)
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    # Seconds from the kubelet's start to the node's Ready condition (0 when loaded from state).
    ready_seconds: float = 0.0

    @property
    def name(self) -> str:
        return NODE_NAME

    @property
    def socket(self) -> Path:
        """containerd's CRI and API socket."""
        return _containerd_sockets(self.state_dir)[0]

    @property
    def kubelet_url(self) -> str:
        return f"https://127.0.0.1:{self.kubelet_port}"

    @property
    def metrics_url(self) -> str:
        return f"https://127.0.0.1:{self.metrics_port}"

    @property
    def ca(self) -> Path:
        """The CA of the kubelet's and metrics-server's serving certificates."""
        return self.state_dir / "node-ca.crt"

    @property
    def cgroup(self) -> str:
        """Our cgroup root (the kubelet's ``cgroupRoot``) in every v1 hierarchy."""
        return _cgroup_name(self.state_dir)

    def log(self, name: str) -> Path:
        return self.state_dir / f"{name}.log"

    def to_state(self) -> dict[str, object]:
        return {
            "state_dir": str(self.state_dir),
            "kubelet_port": self.kubelet_port,
            "kubelet_healthz_port": self.kubelet_healthz_port,
            "metrics_port": self.metrics_port,
            "pids": self.pids,
        }

    @classmethod
    def load(cls, plane: controlplane.ControlPlane) -> RealNode | None:
        """The node of ``plane`` that ``start`` recorded in its state directory, if any."""
        path = plane.workdir / "node" / "node.json"
        if not path.is_file():
            return None
        state = json.loads(path.read_text())
        return cls(
            plane=plane,
            state_dir=Path(state["state_dir"]),
            kubelet_port=int(state["kubelet_port"]),
            kubelet_healthz_port=int(state["kubelet_healthz_port"]),
            metrics_port=int(state["metrics_port"]),
            pids={str(k): int(v) for k, v in state["pids"].items()},
        )

    def alive(self) -> bool:
        return all(name in self.pids and not _gone(self.pids[name]) for name in PROCESSES)

    def kubelet_get(self, path: str) -> bytes:
        """GET ``path`` from the kubelet itself (``/pods``, ``/metrics/resource``...), as the
        admin, verifying its certificate."""
        context = ssl.create_default_context(cafile=str(self.ca))
        request = urllib.request.Request(
            f"{self.kubelet_url}{path}",
            headers={"Authorization": f"Bearer {self.plane.admin_token}"},
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            body: bytes = response.read()
        return body

    def stop(self) -> None:
        """Unregister metrics-server (if the API server still answers), stop everything and put
        the host back as it was (``cleanup_orphans``). Safe to call twice."""
        if self.state_dir.exists() and self.plane.alive():
            namespace, name = METRICS_SERVICE
            for args in (("apiservice", METRICS_APISERVICE), ("service", name, "-n", namespace),
                         ("node", NODE_NAME)):  # fmt: skip
                _kubectl(self.plane, "delete", *args, "--ignore-not-found", "--wait=false",
                         check=False)  # fmt: skip
        cleanup_orphans(self.state_dir)
        for child in self.children.values():
            child.wait()
        self.children.clear()
        self.pids.clear()


def _kubectl(
    plane: controlplane.ControlPlane, *args: str, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}", *args],
        input=input, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def _spawn(
    node: RealNode, name: str, argv: list[str], detached: bool, *, in_node: bool = True
) -> None:
    """Start ``name``; ``in_node``: in the node's cgroup and in the holder's mount and cgroup
    namespaces, where that cgroup is the root (see ``_start_holder``); the holder itself is in
    the cgroup, not yet in the namespaces."""
    joins = in_node or name == "node"
    if in_node:
        argv = ["nsenter", f"--target={node.pids['node']}", "--mount", "--cgroup", "--", *argv]
    hierarchies = _cgroup_hierarchies(unified=True)
    cgroup = node.cgroup

    def before_exec() -> None:
        for hierarchy in hierarchies if joins else ():
            (hierarchy / cgroup / "cgroup.procs").write_text("0")
        if not detached:
            controlplane._die_with_parent()

    with node.log(name).open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=before_exec,  # noqa: PLW1509
        )
    node.pids[name] = proc.pid
    node.children[name] = proc


def _cgroup_mounts() -> list[tuple[str, str, str]]:
    """(fstype, options, mount point) of every cgroup hierarchy mounted on the host."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, options = right.split()[:3]
        if fstype in ("cgroup", "cgroup2"):
            wanted = [o for o in options.split(",") if o not in ("rw", "ro")]
            if fstype == "cgroup" and all(o.startswith("name=") for o in wanted):
                wanted.insert(0, "none")  # a named hierarchy without controllers
            found.append((fstype, ",".join(wanted), _unescape(left.split()[4])))
    return found


def _start_holder(node: RealNode, detached: bool, timeout: float) -> None:
    """The node's namespaces: a process in our cgroup that unshares a mount and a cgroup
    namespace, mounts every cgroup hierarchy afresh there (so that our cgroup is their root),
    and sleeps. containerd and the kubelet join it, so the kubelet's node usage (the root
    cgroup's, as cAdvisor reads it) is the node's own, not the whole machine's; and every mount
    they make stays in that namespace (``--propagation slave``) and goes with it."""
    ready = node.state_dir / "namespaces-ready"
    lines = ["set -e", "umount --recursive --lazy /sys/fs/cgroup",
             "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup"]  # fmt: skip
    for fstype, options, point in _cgroup_mounts():
        lines += [f"mkdir -p {point}", f"mount -t {fstype} -o {options or 'rw'} {fstype} {point}"]
    lines += [f"touch {ready}", "exec sleep infinity"]
    script = node.state_dir / "namespaces.sh"
    script.write_text("\n".join(lines) + "\n")
    _spawn(node, "node", ["unshare", "--mount", "--cgroup", "--propagation", "slave", "--",
                          "sh", str(script)], detached, in_node=False)  # fmt: skip
    _wait(node, "node", "its namespaces", ready.exists, timeout)


def _wait(node: RealNode, name: str, what: str, ready: object, timeout: float) -> None:
    """Until ``ready()`` is true; raises with the log's tail if ``name`` exits or time runs out."""
    assert callable(ready)
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if _gone(node.pids[name]):
            last = "it exited"
            break
        try:
            if ready():
                return
        # A probe that hangs (``ctr version`` while containerd starts on a busy host) is a
        # "not yet" like one that fails.
        except (OSError, RuntimeError, urllib.error.URLError, subprocess.TimeoutExpired) as error:
            last = str(error)
        time.sleep(0.1)
    tail = node.log(name).read_text(errors="replace").splitlines()[-30:]
    raise RuntimeError(f"{name}: {what} not within {timeout:.0f}s ({last}); log tail:\n"
                       + "\n".join(tail))  # fmt: skip


def _https_ok(url: str, ca: Path) -> bool:
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return bool(response.status == 200)


def _make_cgroups(name: str) -> None:
    """Our cgroup in every hierarchy, the root of the node's (see ``_start_holder``); in cpuset,
    with its parent's CPUs and memory nodes, without which no task may join it. Its CPU weight
    is NODE_CPU_SHARES."""
    for hierarchy in _cgroup_hierarchies(unified=True):
        path = hierarchy / name
        path.mkdir(exist_ok=True)
        if (hierarchy / "cpuset.cpus").exists():
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((hierarchy / knob).read_text())
        if (path / "cpu.shares").exists():
            (path / "cpu.shares").write_text(str(NODE_CPU_SHARES))


def _containerd_sockets(state: Path) -> tuple[Path, Path]:
    """containerd's gRPC (CRI and API) and ttrpc sockets for a node whose state is ``state``."""
    containerd = state / "containerd"
    return containerd / "containerd.sock", containerd / "containerd.sock.ttrpc"


def _containerd_config(state: Path) -> str:
    containerd = state / "containerd"
    grpc, ttrpc = _containerd_sockets(state)
    return f"""version = 2
root = "{containerd / "root"}"
state = "{containerd / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{grpc}"

[ttrpc]
  address = "{ttrpc}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{containerd / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Without CAP_SYS_RESOURCE runc may not lower a container's oom_score_adj below ours.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{state / "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{state / "cni" / "net.d"}"
"""


def _cni_config(state: Path) -> str:
    return json.dumps(
        {"cniVersion": "0.4.0", "name": "sharekeeper",
         "plugins": [{"type": "bridge", "bridge": BRIDGE, "isGateway": False, "ipMasq": False,
                      "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                               "dataDir": str(state / "cni" / "ipam")}}]},
        indent=2,
    )  # fmt: skip


def _kubelet_config(node: RealNode, certs: tuple[Path, Path]) -> str:
    state = node.state_dir
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": node.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": node.kubelet_healthz_port,
            "tlsCertFile": str(certs[0]),
            "tlsPrivateKeyFile": str(certs[1]),
            # Callers are who the API server says they are, allowed what RBAC allows them.
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True}},
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{node.socket}",
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "failSwapOn": False,
            # No iptables chains of the kubelet's on the host.
            "makeIPTablesUtilChains": False,
            "podLogsDir": str(state / "pod-logs"),
            "staticPodPath": "",
            "maxPods": 32,
            "serializeImagePulls": False,
        },
        indent=2,
    )


def start(
    plane: controlplane.ControlPlane, *, detached: bool = False, timeout: float = 90.0
) -> RealNode:
    """Start the node next to ``plane`` (see the module docstring) and wait until it is Ready
    and ``metrics.k8s.io`` answers through the API server."""
    reason = unavailable()
    if reason:
        raise RuntimeError(reason)
    state = (plane.workdir / "node").resolve()
    longest = max(_containerd_sockets(state), key=lambda socket: len(str(socket)))
    if len(str(longest)) > SOCKET_PATH_MAX:
        raise RuntimeError(
            f"the node's directory {state} is too long for containerd: its socket {longest} "
            f"would be {len(str(longest))} characters, over {SOCKET_PATH_MAX}; start the control "
            "plane in a shorter directory (SHAREKEEPER_LOCAL_CLUSTER_DIR for local-cluster)"
        )
    binaries = controlplane.ensure_binaries(node=True)
    images = images_archive()
    cleanup_crashed()
    if state.exists():
        cleanup_orphans(state)  # what a node here left before it wrote its record
    state.mkdir(parents=True)
    # The record first: whatever happens next, cleanup_orphans can undo it.
    RECORDS.mkdir(parents=True, exist_ok=True)
    _record_file(state).write_text(json.dumps(_record(state), indent=2))
    node = RealNode(
        plane=plane,
        state_dir=state,
        kubelet_port=controlplane.free_port(),
        kubelet_healthz_port=controlplane.free_port(),
        metrics_port=controlplane.free_port(),
    )
    try:
        _start(node, binaries, images, detached, timeout)
    except BaseException:
        node.stop()
        raise
    (state / "node.json").write_text(json.dumps(node.to_state(), indent=2))
    return node


def _start(node: RealNode, binaries: Path, images: Path, detached: bool, timeout: float) -> None:
    plane, state = node.plane, node.state_dir
    _make_cgroups(node.cgroup)
    _start_holder(node, detached, timeout)
    ca = controlplane.openssl_ca(state, "node-ca")
    kubelet_cert = controlplane.openssl_cert(
        state, "kubelet", ca, usage="serverAuth", hosts=("127.0.0.1", "localhost")
    )
    namespace, service = METRICS_SERVICE
    metrics_cert = controlplane.openssl_cert(
        state, "metrics-server", ca, usage="serverAuth",
        hosts=(f"{service}.{namespace}.svc", "127.0.0.1"),
    )  # fmt: skip
    (state / "cni" / "net.d").mkdir(parents=True)
    (state / "cni" / "net.d" / "10-sharekeeper.conflist").write_text(_cni_config(state))
    (state / "containerd").mkdir()
    config = state / "containerd" / "config.toml"
    config.write_text(_containerd_config(state))
    started = time.monotonic()
    _spawn(node, "containerd", [HOST_BINARIES["containerd"], f"--config={config}"], detached)
    ctr = [HOST_BINARIES["ctr"], f"--address={node.socket}", "--namespace=k8s.io"]

    def containerd_up() -> bool:
        version = subprocess.run([*ctr, "version"], check=False, capture_output=True, timeout=10)
        return version.returncode == 0

    _wait(node, "containerd", "its socket", containerd_up, timeout)
    subprocess.run([*ctr, "images", "import", str(images)], check=True, capture_output=True,
                   timeout=timeout)  # fmt: skip
    _log(f"containerd up with the images in {time.monotonic() - started:.1f}s")
    kubelet_config = state / "kubelet.yaml"
    kubelet_config.write_text(_kubelet_config(node, kubelet_cert))
    label, value = NODE_LABEL
    started = time.monotonic()
    _spawn(
        node,
        "kubelet",
        [
            str(binaries / "kubelet"),
            f"--config={kubelet_config}",
            f"--kubeconfig={plane.kubeconfig}",
            f"--root-dir={state / 'kubelet'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-labels={label}={value}",
            "--v=1",
        ],
        detached,
    )

    def node_ready() -> bool:
        result = _kubectl(plane, "get", "node", NODE_NAME, "-o",
                          "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
                          check=False)  # fmt: skip
        return result.stdout.strip() == "True"

    _wait(node, "kubelet", "node Ready", node_ready, timeout)
    node.ready_seconds = time.monotonic() - started
    _log(f"node {NODE_NAME} Ready {node.ready_seconds:.1f}s after the kubelet started")
    started = time.monotonic()
    front_proxy_ca = plane.front_proxy_ca
    _spawn(
        node,
        "metrics-server",
        [
            str(binaries / "metrics-server"),
            "--bind-address=127.0.0.1",
            f"--secure-port={node.metrics_port}",
            f"--cert-dir={state / 'metrics-server-certs'}",
            f"--tls-cert-file={metrics_cert[0]}",
            f"--tls-private-key-file={metrics_cert[1]}",
            f"--kubeconfig={plane.kubeconfig}",
            f"--authentication-kubeconfig={plane.kubeconfig}",
            f"--authorization-kubeconfig={plane.kubeconfig}",
            # Only the aggregator, with its front-proxy client certificate, may say who asks.
            f"--requestheader-client-ca-file={front_proxy_ca}",
            f"--requestheader-allowed-names={controlplane.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--kubelet-certificate-authority={ca[0]}",
            "--kubelet-preferred-address-types=InternalIP",
            "--kubelet-use-node-status-port",
            f"--metric-resolution={METRIC_RESOLUTION}",
            "--v=1",
        ],
        detached,
        in_node=False,  # a cluster add-on: its CPU is not the node's
    )
    # Not /readyz: it waits for pod metrics too, which a node without pods never has.
    _wait(node, "metrics-server", "/livez",
          lambda: _https_ok(f"{node.metrics_url}/livez", ca[0]), timeout)  # fmt: skip
    _register_metrics_api(node, ca[0], timeout)
    _log(f"metrics-server serving metrics.k8s.io in {time.monotonic() - started:.1f}s")


def _register_metrics_api(node: RealNode, ca: Path, timeout: float) -> None:
    namespace, name = METRICS_SERVICE
    objects = [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": METRICS_APISERVICE},
         "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                  "groupPriorityMinimum": 100, "versionPriority": 100,
                  "service": {"name": name, "namespace": namespace, "port": node.metrics_port},
                  "caBundle": base64.b64encode(ca.read_bytes()).decode()}},
    ]  # fmt: skip
    _kubectl(node.plane, "apply", "-f", "-",
             input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))  # fmt: skip

    def served() -> bool:
        path = f"/apis/metrics.k8s.io/v1beta1/nodes/{NODE_NAME}"
        result = _kubectl(node.plane, "get", "--raw", path, check=False)
        return result.returncode == 0

    _wait(node, "metrics-server", "NodeMetrics through the API server", served, timeout)


@contextlib.contextmanager
def running(plane: controlplane.ControlPlane) -> Iterator[RealNode]:
    node = start(plane)
    try:
        yield node
    finally:
        node.stop()
