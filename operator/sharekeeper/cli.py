"""The ``sharekeeper`` command: flags and environment in, one command run.

``run`` builds the one settings object (``settings.Settings``) and starts the operator
(``runtime``, where it is wired); ``simulate`` and ``convert`` reuse the engine without a cluster;
``explain`` computes what ``simulate`` computes from one list of the cluster and explains one
queue or node; ``release`` lets a namespace's pods through the admission gate; ``crds``
writes the CustomResourceDefinitions generated from ``api/``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sharekeeper import __version__
from sharekeeper.settings import LeaseSettings

if TYPE_CHECKING:
    from sharekeeper.settings import Settings
    from sharekeeper.simulate.reading import Inputs


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `simulate` and `--version` do not pay for kopf's import.
    from sharekeeper import runtime

    return runtime.run(_settings(args))


def _settings(args: argparse.Namespace) -> Settings:
    """The flags and the environment, as the one settings object."""
    from sharekeeper.settings import (
        DISCOVERY_INTERVAL_ENV,
        LeaseSettings,
        Settings,
        WatchSettings,
        WebhookSettings,
    )

    webhook = None
    if args.webhook_address is not None:
        webhook = WebhookSettings(
            address=args.webhook_address, namespace=args.namespace, url=args.webhook_url
        )
    elif args.webhook_url is not None:
        raise SystemExit("sharekeeper run: --webhook-url needs --webhook-bind-address")
    lease = None
    if args.leader_elect:
        # Unique per process, as client-go's: a restarted pod is a new candidate.
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        try:
            lease = LeaseSettings(
                namespace=args.leader_elect_resource_namespace,
                identity=identity,
                name=args.leader_elect_resource_name,
                lease_seconds=args.leader_elect_lease_duration,
                renew_deadline_seconds=args.leader_elect_renew_deadline,
                retry_seconds=args.leader_elect_retry_period,
            )
        except ValueError as error:
            raise SystemExit(f"sharekeeper run: {error}") from None
    watches = WatchSettings()
    interval = os.environ.get(DISCOVERY_INTERVAL_ENV)
    if interval is not None:
        try:
            watches = WatchSettings(discovery_interval_seconds=float(interval))
        except ValueError:
            raise SystemExit(
                f"sharekeeper run: ${DISCOVERY_INTERVAL_ENV} is not a number of seconds: "
                f"{interval!r}"
            ) from None
    return Settings(
        probe_address=args.probe_address,
        metrics_address=args.metrics_address,
        lease=lease,
        webhook=webhook,
        verbose=args.verbose,
        watches=watches,
    )


def _bind_address(text: str) -> tuple[str, int] | None:
    """A listening address as controller-runtime's flags take it: ``HOST:PORT``, ``:PORT``
    (every interface), ``[::1]:PORT``; ``0`` (or port 0) turns the server off."""
    if text == "0":
        return None
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected [HOST]:PORT or 0, not {text!r}")
    return (host.strip("[]") or "0.0.0.0", int(port)) if int(port) else None


def _without_cyclic_collector() -> None:
    """For a command that reads a whole cluster once and exits: the objects it reads hold no
    cycles, yet the cyclic collector would walk them again and again while hundreds of
    thousands pile up (half of ``simulate``'s time at 150,000 pods). Nothing it could free
    outlives the command."""
    gc.disable()


_HELD_TO_EXIT: list[object] = []
"""What the last ``simulate`` or ``explain`` read and computed (the objects, the store made of
them, the report), held so that returning does not free it object by object: ``console`` ends
the process without freeing it. At 150,000 pods, freeing the store and report on return took
0.6 s of ``simulate``'s 10.8 s, and freeing the objects once read cost 0.4 s more than the fresh
pages the report then needs. Each command replaces the last one's, so a caller of ``main``
holds one run at most."""


def _hold_to_exit(*values: object) -> None:
    _HELD_TO_EXIT[:] = values


def _simulate(args: argparse.Namespace) -> int:
    from sharekeeper.model.documents import one_line
    from sharekeeper.model.objects import ObjectError
    from sharekeeper.simulate.reading import parse_objects, read_objects
    from sharekeeper.simulate.rendering import render
    from sharekeeper.simulate.report import Context, build_report

    # The store warns of each object it cannot read, as the operator should; simulate names
    # them all in its one error line instead.
    logging.basicConfig(level=logging.ERROR)
    _without_cyclic_collector()
    now = time.time() if args.now is None else args.now
    try:
        objects = read_objects(args.files)
        inputs = parse_objects(objects)
        explained = args.explain[1] if args.explain and args.explain[0] == "queue" else None
        context = Context(
            now_seconds=now, seed=args.seed, placements=args.placements, explained=explained
        )
        report = build_report(inputs, context)
    except ObjectError as error:
        print(f"sharekeeper simulate: {one_line(str(error))}", file=sys.stderr)
        return 2
    _hold_to_exit(objects, inputs, report)
    if args.explain is not None:
        return _explained(report, inputs, args.explain, args.output, "simulate")
    weights = {str(queue.name): queue.weight for queue in inputs.queues}
    parents = {str(queue.name): queue.parent for queue in inputs.queues}
    sys.stdout.write(render(report, weights, args.output, parents))
    return 0


def _release(args: argparse.Namespace) -> int:
    """Every pod of the namespace out of the admission gate, through the kubeconfig."""
    from sharekeeper.kube.listing import ClusterUnreachable
    from sharekeeper.kube.releasing import release_namespace
    from sharekeeper.model.documents import one_line

    try:
        released = release_namespace(args.namespace)
    except ClusterUnreachable as error:
        print(f"sharekeeper release: {one_line(str(error))}", file=sys.stderr)
        return 2
    for name in released.pods:
        print(f"pod/{name} released")
    for failure in released.failed:
        print(f"sharekeeper release: {failure}", file=sys.stderr)
    if not released.pods and not released.failed:
        print(f"no pod of namespace {args.namespace} is held by the admission gate")
    return 1 if released.failed else 0


def _explain_target(text: str) -> tuple[str, str]:
    from sharekeeper.simulate.explaining import parse_target

    try:
        return parse_target(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _explain(args: argparse.Namespace) -> int:
    """``simulate``'s computation on one list of the cluster, then one object explained."""
    import io

    from sharekeeper.kube.listing import ClusterUnreachable, list_objects
    from sharekeeper.model.documents import one_line
    from sharekeeper.model.objects import ObjectError
    from sharekeeper.simulate.explaining import published_qos
    from sharekeeper.simulate.reading import parse_objects
    from sharekeeper.simulate.report import Context, build_report, share_section

    logging.basicConfig(level=logging.ERROR)  # objects the operator cannot read are left out
    _without_cyclic_collector()
    try:
        objects = list_objects()
        inputs = parse_objects(objects, strict=False)
        # simulate's warnings (pods naming a queue that does not exist) are about other queues,
        # and the operator reports them as Events.
        with contextlib.redirect_stderr(io.StringIO()):
            explained = args.name if args.kind == "queue" else None
            context = Context(now_seconds=time.time(), seed=0, explained=explained)
            report = build_report(inputs, context, [share_section, published_qos])
    except (ClusterUnreachable, ObjectError) as error:
        print(f"sharekeeper explain: {one_line(str(error))}", file=sys.stderr)
        return 2
    _hold_to_exit(objects, inputs, report)
    return _explained(report, inputs, (args.kind, args.name), args.output, "explain")


def _explained(
    report: dict[str, Any], inputs: Inputs, target: tuple[str, str], output: str, command: str
) -> int:
    from sharekeeper.model.documents import one_line
    from sharekeeper.simulate.explaining import NotFound, explain
    from sharekeeper.simulate.explaining import render as render_facts

    kind, name = target
    try:
        facts = explain(report, inputs, ("node" if kind == "node" else "queue", name))
    except NotFound as error:
        print(f"sharekeeper {command}: {one_line(str(error))}", file=sys.stderr)
        return 2
    sys.stdout.write(render_facts(facts, output))
    return 0


def _convert(args: argparse.Namespace) -> int:
    from sharekeeper.api.base import read
    from sharekeeper.api.policy import SchedulerPolicy
    from sharekeeper.model.documents import one_line
    from sharekeeper.model.objects import ObjectError
    from sharekeeper.model.volcano_config import read_config, scheduler_policy

    try:
        conversion = scheduler_policy(read_config(args.file), name=args.name)
        read(SchedulerPolicy, conversion.manifest)  # never print what kubectl apply refuses
    except ObjectError as error:
        print(f"sharekeeper convert: {one_line(str(error))}", file=sys.stderr)
        return 2
    for warning in conversion.warnings:
        print(f"sharekeeper convert: warning: {one_line(warning)}", file=sys.stderr)
    for note in conversion.untranslated:
        print(f"sharekeeper convert: not translated: {one_line(note)}", file=sys.stderr)
    sys.stdout.write(yaml.safe_dump(conversion.manifest, sort_keys=False))
    return 0


def _crds(args: argparse.Namespace) -> int:
    from sharekeeper.api.crds import generated, write

    if args.directory is None:
        sys.stdout.write("---\n".join(generated().values()))
    else:
        for path in write(args.directory):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharekeeper",
        description="Queue shares, overcommit, GPU-proportional reservation and node QoS.",
    )
    parser.add_argument("--version", action="version", version=f"sharekeeper {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the operator against the current kubeconfig")
    lease = {f.name: f.default for f in dataclasses.fields(LeaseSettings)}
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="take turns with other replicas through a coordination.k8s.io Lease: only the "
        "leader writes, evicts, throttles or taints (default: act alone)",
    )
    run.add_argument(
        "--leader-elect-resource-namespace",
        default=os.environ.get("POD_NAMESPACE", "sharekeeper"),
        metavar="NAMESPACE",
        help="the Lease's namespace (default: $POD_NAMESPACE, else sharekeeper)",
    )
    run.add_argument(
        "--leader-elect-resource-name", default=lease["name"], metavar="NAME",
        help=f"the Lease's name (default: {lease['name']})",
    )  # fmt: skip
    for flag, field, meaning in (
        ("lease-duration", "lease_seconds",
         "how long a candidate waits, after the leader's last renewal it saw, before taking "
         "the Lease"),
        ("renew-deadline", "renew_deadline_seconds",
         "how long the leader keeps acting while it cannot renew"),
        ("retry-period", "retry_seconds", "how often the leader renews and a candidate tries"),
    ):  # fmt: skip
        run.add_argument(
            f"--leader-elect-{flag}", type=float, default=lease[field], metavar="SECONDS",
            help=f"{meaning} (default: {lease[field]:g}s)",
        )  # fmt: skip
    # In a pod the kubelet probes, and Prometheus scrapes, the pod's IP; anywhere else nothing
    # but this machine needs the probes and metrics, so they stay on loopback.
    host = "0.0.0.0" if "KUBERNETES_SERVICE_HOST" in os.environ else "127.0.0.1"
    for address_flag, port_flag, dest, port, serves in (
        ("--health-probe-bind-address", "--liveness-port", "probe_address", 8080,
         "/healthz and /readyz"),
        ("--metrics-bind-address", "--metrics-port", "metrics_address", 9090, "/metrics"),
    ):  # fmt: skip
        server = run.add_mutually_exclusive_group()
        server.add_argument(
            address_flag, dest=dest, type=_bind_address, default=(host, port),
            metavar="[HOST]:PORT",
            help=f"where {serves} are served; ':PORT' is every interface, 0 is off "
            f"(default: :{port} in a pod, 127.0.0.1:{port} elsewhere)",
        )  # fmt: skip
        server.add_argument(
            port_flag, dest=dest, type=lambda text: _bind_address(f"{host}:{text}"),
            default=(host, port), metavar="PORT",
            help=f"the port of {serves} alone, on the default host; 0 is off",
        )  # fmt: skip
    run.add_argument(
        "--webhook-bind-address", dest="webhook_address", type=_bind_address, default=None,
        metavar="[HOST]:PORT",
        help="serve the admission webhook (HTTPS) here: new pods of namespaces labelled "
        "sharekeeper.io/admission=enabled are gated until their queue has room "
        "(docs/admission.md; default: off)",
    )  # fmt: skip
    run.add_argument(
        "--webhook-url", metavar="URL",
        help="publish this base URL in the MutatingWebhookConfiguration instead of the "
        "sharekeeper-webhook Service (a local control plane, e.g. https://127.0.0.1:9443)",
    )  # fmt: skip
    run.add_argument(
        "--namespace", default=os.environ.get("POD_NAMESPACE", "sharekeeper"),
        help="the operator's namespace: its webhook Service and certificate Secret "
        "(default: $POD_NAMESPACE, else sharekeeper)",
    )  # fmt: skip
    run.add_argument("-v", "--verbose", action="store_true")
    run.set_defaults(handler=_run)

    release = commands.add_parser(
        "release",
        help="let every pod of a namespace through the admission gate now (docs/admission.md)",
    )
    release.add_argument("--namespace", "-n", required=True)
    release.set_defaults(handler=_release)

    simulate = commands.add_parser(
        "simulate", help="print what the operator would publish for objects read from files"
    )
    simulate.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        type=Path,
        required=True,
        help="YAML file of Kubernetes objects (multi-document or kind: List); repeatable",
    )
    simulate.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    simulate.add_argument(
        "--now",
        type=float,
        help="epoch seconds for time-dependent results (GuaranteeQuota Random order); "
        "default: the current time",
    )
    simulate.add_argument("--seed", type=int, default=0, help="seed of the Random elastic order")
    simulate.add_argument(
        "--placements",
        action="store_true",
        help="also print, for every pending pod, the nodes the proportional predicate lets it "
        "onto (output grows with pending pods x nodes)",
    )
    simulate.add_argument(
        "--explain",
        type=_explain_target,
        metavar="[queue/|node/]NAME",
        help="instead of the report, explain one queue (NAME or queue/NAME) or node "
        "(node/NAME): every number and the bound that decided it; -o json for the same facts",
    )
    simulate.set_defaults(handler=_simulate)

    explain = commands.add_parser(
        "explain",
        help="explain one queue's or node's numbers, computed from the current kubeconfig's "
        "cluster as the operator computes them",
    )
    explain.add_argument("kind", choices=("queue", "node"))
    explain.add_argument("name")
    explain.add_argument("-o", "--output", choices=("text", "json"), default="text")
    explain.set_defaults(handler=_explain)

    convert = commands.add_parser(
        "convert",
        help="turn a Volcano scheduler configuration (or its ConfigMap) into a SchedulerPolicy",
    )
    convert.add_argument(
        "file",
        type=Path,
        help="volcano-scheduler.conf, or the ConfigMap holding it (YAML or JSON)",
    )
    convert.add_argument("--name", default="default", help="name of the SchedulerPolicy")
    convert.set_defaults(handler=_convert)

    crds = commands.add_parser(
        "crds", help="generate the CustomResourceDefinitions from the API models"
    )
    crds.add_argument(
        "directory", type=Path, nargs="?", help="write one file per CRD here (default: stdout)"
    )
    crds.set_defaults(handler=_crds)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


def console() -> None:
    """The installed command: ``main``, its output flushed, and the process ends without
    freeing what it holds object by object. ``simulate`` and ``explain`` hold a whole cluster
    (1.2 GiB at 150,000 pods): freeing it took 1.3 to 1.5 s of ``simulate``'s 15 to 18 s
    (benchmarks/README.md), and the system takes it back at once."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError):
            stream.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    console()
