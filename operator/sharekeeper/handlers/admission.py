"""The admission webhook: served by a process of its own, it puts the admission gate on new pods.

The MutatingWebhookConfiguration ``sharekeeper-admission`` (``manifests/webhook.yaml``) sends
pod creations of namespaces labelled ``sharekeeper.io/admission=enabled`` here. Its
``failurePolicy`` is Ignore, and the ValidatingAdmissionPolicy
``sharekeeper-admission-at-creation`` (``manifests/admission-policies.yaml``) refuses the pods
it should have gated and did not: while no replica serves, pods that name a queue are refused,
never let through ungated. Every replica
serves (the Service picks one), leader or not, with the one certificate kept in a Secret
(``kube.webhook_tls``); each start publishes that certificate's CA in the configuration,
and, on a cluster without Services that route (the local control plane), the URL to call.

The configuration is the manifest's, not kopf's (kopf's managed configurations have no
``namespaceSelector``). The reviews are answered by a child process (``handlers.reviewing``:
kopf's server and our answer), so that no share round or burst of watch events delays a pod's
creation; this module keeps the certificate and that process: a replica is ready once it
listens, and the task ends (failing the liveness probe) if it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sharekeeper.handlers.reviewing import HANDLER_ID, LISTENING
from sharekeeper.kube.clients import TypedClient
from sharekeeper.kube.webhook_tls import (
    ServingCert,
    ensure_serving_cert,
    publish_client_config,
    write_files,
)
from sharekeeper.settings import WebhookSettings

logger = logging.getLogger(__name__)

CONFIGURATION = "sharekeeper-admission"
"""The MutatingWebhookConfiguration in ``manifests/webhook.yaml``."""
STOP_SECONDS = 5.0
"""How long the webhook's process is given to end after SIGTERM before it is killed."""


RENEWAL_CHECK_SECONDS = 300.0
"""How often a running replica looks at the certificate (one GET): one renewed by another
replica, or within 30 days of expiry, is served (kopf re-reads the files within a minute) and
its CA published. A renewal makes a new CA, so until every replica has looked, requests that
reach a replica still serving the old certificate fail, and those pods are not gated."""


@dataclass(frozen=True)
class Webhook:
    task: asyncio.Task[None]
    """Serves and keeps the certificate current until cancelled; ends with an error if the
    webhook's process exits."""
    listening: asyncio.Event
    """Set while the webhook's process listens."""


async def serve(
    settings: WebhookSettings, client: TypedClient, *, verbose: bool = False
) -> Webhook:
    """Load (or make) the certificate, publish its CA (and URL), and start the process that
    answers the reviews; the task serving and keeping the certificate current is the caller's
    to cancel. The certificate and its key are written to a directory of their own for the
    process to read, removed when the task ends."""
    cert = await _published(settings, client)
    directory = Path(tempfile.mkdtemp(prefix="sharekeeper-webhook-"))
    write_files(cert, directory)
    host, port = settings.address
    command = [
        sys.executable, "-m", "sharekeeper.handlers.reviewing", host, str(port), str(directory),
        f"--parent={os.getpid()}", *(["--verbose"] if verbose else []),
    ]  # fmt: skip
    logger.info("admission webhook on %s:%d", host, port)
    listening = asyncio.Event()
    renewing = _renewing(settings, client, directory, cert)
    serving = _serving(command, listening, renewing, files=directory)
    task = asyncio.create_task(serving, name="webhook")
    return Webhook(task, listening)


async def _serving(
    command: Sequence[str],
    listening: asyncio.Event,
    renewing: Coroutine[Any, Any, None],
    *,
    files: Path,
) -> None:
    """Until cancelled: the webhook's process (``command``) and the certificate's renewal beside
    it. Should the process exit (its port taken, say), the task ends with the error, which
    fails the liveness probe. Once the process has ended, ``files`` (its certificate and key)
    are removed: a replica leaves no private key behind."""

    async def answering() -> None:
        process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
        try:
            assert process.stdout is not None
            async for line in process.stdout:
                if line.strip() == LISTENING.encode() and not listening.is_set():
                    logger.info("the admission webhook's process %d listens", process.pid)
                    listening.set()
            code = await process.wait()
        finally:
            listening.clear()
            await _ended(process)
        raise RuntimeError(f"the admission webhook's process {process.pid} exited with code {code}")

    try:
        async with asyncio.TaskGroup() as both:
            both.create_task(answering())
            both.create_task(renewing)
    except Exception:
        logger.exception(
            "the admission webhook stopped: new pods that name a queue are refused until it"
            " serves again"
        )
        raise
    finally:
        shutil.rmtree(files, ignore_errors=True)


async def _ended(process: asyncio.subprocess.Process) -> None:
    """The process ended: asked (SIGTERM), then told (SIGKILL) after ``STOP_SECONDS``."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):  # it ended just now
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), STOP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def _published(settings: WebhookSettings, client: TypedClient) -> ServingCert:
    """The Secret's certificate (made or renewed if need be), its CA in the configuration
    (written only when it differs)."""
    cert = await ensure_serving_cert(
        client, settings.namespace, settings.secret, settings.hosts, now=datetime.now(UTC)
    )
    url = None if settings.url is None else settings.url.rstrip("/") + f"/{HANDLER_ID}"
    if not await publish_client_config(client, CONFIGURATION, cert.ca_pem, url=url):
        logger.warning(
            "MutatingWebhookConfiguration %s is not installed (kubectl apply -k manifests/): "
            "no pod is gated",
            CONFIGURATION,
        )
    return cert


async def _renewing(
    settings: WebhookSettings, client: TypedClient, directory: Path, served: ServingCert
) -> None:
    while True:
        await asyncio.sleep(RENEWAL_CHECK_SECONDS)
        try:
            current = await _published(settings, client)
        except Exception:  # the next check tries again; the served certificate stays
            logger.exception("checking the webhook certificate failed")
            continue
        if current != served:  # kopf restarts its server when the files change: only then
            write_files(current, directory)
            logger.info("the webhook now serves a renewed certificate")
            served = current
