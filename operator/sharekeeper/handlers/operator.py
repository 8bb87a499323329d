"""Operator runtime: kopf settings and the process entry point."""

from __future__ import annotations

import logging
from typing import Any

import kopf
import prometheus_client


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Our handlers log for operators of the operator; only warnings belong in Events.
    settings.posting.level = logging.WARNING
    # Finish long watches well before idle proxies cut them, and notice a silent one.
    settings.watching.server_timeout = 270
    settings.watching.client_timeout = 300
    # Progress and diff-base annotations carry our own prefix, and status stays ours alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sharekeeper.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="sharekeeper.io", key="last-handled-configuration"
    )
    # Our CRDs are known; skipping discovery spares permissions on namespaces and CRDs.
    settings.scanning.disabled = True


@kopf.on.probe(id="alive")
async def alive(**_: Any) -> bool:
    return True


def run(*, standalone: bool, liveness_port: int, metrics_port: int, verbose: bool) -> int:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if metrics_port:
        prometheus_client.start_http_server(metrics_port)
    kopf.run(
        clusterwide=True,
        standalone=standalone,
        liveness_endpoint=f"http://0.0.0.0:{liveness_port}/healthz" if liveness_port else None,
    )
    return 0
