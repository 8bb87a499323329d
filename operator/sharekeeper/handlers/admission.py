"""The admission webhook: kopf serves it, and it puts the admission gate on new pods.

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
``namespaceSelector``). kopf's server takes the requests (TLS, renewed certificate files); each
review is answered here (``review``), not by kopf's admission handlers: those made a body, a
patch and their views per review and ran the handler in a thread, about a twentieth of the
operator's CPU under a stream of pods, and the garbage of every review.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import tempfile
from collections.abc import Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import kopf
from aiohttp import web

from sharekeeper.kube.clients import TypedClient
from sharekeeper.kube.webhook_tls import (
    ServingCert,
    ensure_serving_cert,
    publish_client_config,
    write_files,
)
from sharekeeper.model.pods import gates_with_admission
from sharekeeper.settings import WebhookSettings

logger = logging.getLogger(__name__)

CONFIGURATION = "sharekeeper-admission"
"""The MutatingWebhookConfiguration in ``manifests/webhook.yaml``."""
HANDLER_ID = "gate"
"""Where reviews are answered, ``/<id>``: the configuration's ``clientConfig`` path."""


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


RENEWAL_CHECK_SECONDS = 300.0
"""How often a running replica looks at the certificate (one GET): one renewed by another
replica, or within 30 days of expiry, is served (kopf re-reads the files within a minute) and
its CA published. A renewal makes a new CA, so until every replica has looked, requests that
reach a replica still serving the old certificate fail, and those pods are not gated."""


async def serve(settings: WebhookSettings, client: TypedClient) -> asyncio.Task[None]:
    """Load (or make) the certificate, serve reviews, and publish the CA (and URL); returns the
    task that serves and keeps the certificate current, for the caller to cancel."""
    directory = Path(tempfile.mkdtemp(prefix="sharekeeper-webhook-"))
    cert = await _published(settings, client)
    write_files(cert, directory)
    host, port = settings.address
    server = WebhookServer(
        addr=host, port=port, certfile=str(directory / "tls.crt"),
        pkeyfile=str(directory / "tls.key"), cadata=cert.ca_pem,
    )  # fmt: skip
    logger.info("admission webhook on %s:%d", host, port)
    return asyncio.create_task(
        _serving(server, _renewing(settings, client, directory, cert)), name="webhook"
    )


async def _serving(server: WebhookServer, renewing: Coroutine[Any, Any, None]) -> None:
    """Until cancelled: the server (which starts again, yielding a new client configuration,
    when the certificate files change; the configuration is the manifest's, kept current by
    ``_published``) and the certificate's renewal beside it. Should the server stop (its port
    taken, say), the task ends with the error, which fails the liveness probe."""

    async def answering() -> None:
        # Typed for kopf's own admission function (with its private review types); ours takes
        # and gives the same JSON.
        async for _ in server(cast(kopf.WebhookFn, review)):
            pass

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
