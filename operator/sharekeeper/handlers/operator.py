"""Operator runtime: kopf settings, the loops' lifetime, and the process entry point."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf
import prometheus_client
from lightkube import AsyncClient

from sharekeeper.cluster.usage import MetricsApiUsage
from sharekeeper.handlers import indexes, qos  # noqa: F401  (registers the handlers)
from sharekeeper.loops.qos import QosLoop
from sharekeeper.loops.recompute import Recompute
from sharekeeper.publish.actions import KubeActuator
from sharekeeper.publish.kubernetes import KubeWriter

logger = logging.getLogger(__name__)


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Our log lines are for operators of the operator; only warnings belong in Events.
    settings.posting.level = logging.WARNING
    # Finish long watches before idle proxies cut them; kopf reconnects by itself.
    settings.watching.server_timeout = 270
    settings.watching.client_timeout = 300
    # Finished pods hold no resources: let the API server leave them out of the pod watch.
    settings.watching.field_selectors["v1", "pods"] = "status.phase!=Succeeded,status.phase!=Failed"
    # Our CRDs are known; skipping the CRD watch spares a cluster-wide permission. Volcano
    # PodGroups are indexed when their CRD exists at start (restart after installing Volcano).
    settings.scanning.disabled = True
    client = memo["client"] = AsyncClient(field_manager="sharekeeper")
    writer = KubeWriter(client)
    memo["recompute"] = Recompute(writer)
    memo["qos"] = QosLoop(KubeActuator(client), writer, MetricsApiUsage(client))
    memo["loops"] = [
        asyncio.create_task(memo["recompute"].run(), name="recompute"),
        asyncio.create_task(memo["qos"].run(), name="qos"),
    ]


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    tasks: list[asyncio.Task[None]] = memo.get("loops", [])
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    client: AsyncClient | None = memo.get("client")
    if client is not None:
        await client.close()


@kopf.on.probe(id="recomputeRounds")
async def rounds(memo: kopf.Memo, **_: Any) -> int:
    """Liveness: fails (HTTP 500) when a loop has stopped."""
    for task in memo.get("loops", []):
        if task.done():
            raise RuntimeError(f"the {task.get_name()} loop has stopped")
    recompute: Recompute | None = memo.get("recompute")
    return 0 if recompute is None else recompute.rounds


@kopf.on.probe(id="qosChecks")
async def checks(memo: kopf.Memo, **_: Any) -> int:
    qos_loop: QosLoop | None = memo.get("qos")
    return 0 if qos_loop is None else qos_loop.checks


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
