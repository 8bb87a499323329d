"""The admission webhook's own process: it answers AdmissionReviews, and does nothing else.

The operator (``handlers.admission``) starts it with the directory of the certificate's files
and keeps them current. A review needs nothing but the pod (``gates_with_admission``), so it is
answered here, away from the operator's event loop: answered there, a review waited behind the
writes and their watch echoes, the rounds' threads and the collector (p99 180-207 ms while the
operator recomputed at 4,000 queues, 13-14 ms here: benchmarks/README.md, "the webhook in a
process of its own"). kopf's server takes the requests (TLS, and the files read again when
they change).

``python -m sharekeeper.handlers.reviewing ADDRESS PORT DIRECTORY --parent PID`` writes
``LISTENING`` on its standard output once it listens. It ends with the operator's process
(Linux), on SIGTERM, and ignores SIGINT: a Ctrl-C in a terminal reaches the operator, which
stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ctypes
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import kopf
from aiohttp import web

from sharekeeper.model.pods import gates_with_admission
from sharekeeper.settings import LOG_FORMAT

HANDLER_ID = "gate"
"""Where reviews are answered, ``/<id>``: the configuration's ``clientConfig`` path."""
LISTENING = "LISTENING"
"""The line written once the server listens."""
REVIEW_LIMIT = 4 * 1024 * 1024
"""The largest AdmissionReview the webhook reads, in bytes: the API server accepts request
bodies up to 3 MiB, and the review carries the pod, with its defaults, in an envelope.
aiohttp's default (1 MiB) answered 413 to bigger pods, and ``failurePolicy: Ignore`` let them
through ungated. Were a review larger still (JSON escapes can outgrow what a pod was sent
as), the webhook fails and ``sharekeeper-admission-at-creation`` refuses the pod."""


class WebhookServer(kopf.WebhookServer):
    """kopf's webhook server, reading reviews up to ``REVIEW_LIMIT`` at ``/<HANDLER_ID>`` only.
    kopf (pinned to 1.45) builds its aiohttp application, with the default body limit and a
    route for any path, inside ``__call__`` and hands each request to ``_serve``; the request is
    checked and given the larger limit on the way, before anything reads its body."""

    @staticmethod
    async def _serve(fn: kopf.WebhookFn, request: web.Request) -> web.Response:
        if request.match_info.get("id") != HANDLER_ID:
            raise web.HTTPNotFound(reason=f"reviews are answered at /{HANDLER_ID}")
        larger = request.clone(client_max_size=REVIEW_LIMIT)
        response: web.Response = await kopf.WebhookServer._serve(fn, larger)
        return response


async def review(request: Mapping[str, Any], **_: Any) -> dict[str, Any]:
    """The answer to one AdmissionReview: allowed, and a new pod that names a queue gets the
    admission gate (a JSON patch). Whatever else the review holds is allowed unchanged; a pod
    that should have been gated and was not is then refused by the ValidatingAdmissionPolicy."""
    payload = request.get("request")
    payload = payload if isinstance(payload, Mapping) else {}
    answer: dict[str, Any] = {"uid": str(payload.get("uid") or ""), "allowed": True}
    pod = payload.get("object")
    if payload.get("operation") == "CREATE" and isinstance(pod, Mapping):
        gates = gates_with_admission(pod)
        if gates is not None:
            patch = [{"op": "add", "path": "/spec/schedulingGates", "value": gates}]
            answer["patchType"] = "JSONPatch"
            answer["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}


async def answer_reviews(server: WebhookServer) -> None:
    """Until cancelled or the server fails: ``LISTENING`` once it first listens (it starts
    again, listening anew, when the certificate's files change)."""
    told = False
    # Typed for kopf's own admission function (with its private review types); ours takes and
    # gives the same JSON.
    async for _ in server(cast(kopf.WebhookFn, review)):
        if not told:
            print(LISTENING, flush=True)
            told = True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sharekeeper.handlers.reviewing")
    parser.add_argument("address", help="the interface to listen on; empty: every one")
    parser.add_argument("port", type=int)
    parser.add_argument("directory", type=Path, help="where tls.crt and tls.key are")
    parser.add_argument("--parent", type=int, required=True, help="the operator's process id")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not _ends_with(args.parent):
        print(f"the process that started this one is not {args.parent}: ended", file=sys.stderr)
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format=LOG_FORMAT)
    if not args.verbose:
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    server = WebhookServer(
        addr=args.address, port=args.port, certfile=str(args.directory / "tls.crt"),
        pkeyfile=str(args.directory / "tls.key"),
    )  # fmt: skip
    asyncio.run(answer_reviews(server))
    return 0


def _ends_with(parent: int) -> bool:
    """Ask for SIGTERM when the parent's process ends (Linux), however it ends; False if it has
    ended already (then this process belongs to another)."""
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    return os.getppid() == parent


if __name__ == "__main__":
    sys.exit(main())
