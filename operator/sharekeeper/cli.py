"""The ``sharekeeper`` command: the composition root.

``run`` starts the operator; the other subcommands reuse the engine without a cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sharekeeper import __version__


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `simulate` and `--version` do not pay for kopf's import.
    from sharekeeper.handlers import operator

    return operator.run(
        standalone=not args.peering,
        liveness_port=args.liveness_port,
        metrics_port=args.metrics_port,
        verbose=args.verbose,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharekeeper",
        description="Queue shares, overcommit, GPU-proportional reservation and node QoS.",
    )
    parser.add_argument("--version", action="version", version=f"sharekeeper {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the operator against the current kubeconfig")
    run.add_argument(
        "--peering",
        action="store_true",
        help="coordinate with other replicas through kopf peering (default: standalone)",
    )
    run.add_argument("--liveness-port", type=int, default=8080, help="0 disables the probe")
    run.add_argument("--metrics-port", type=int, default=9090, help="0 disables metrics")
    run.add_argument("-v", "--verbose", action="store_true")
    run.set_defaults(handler=_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
