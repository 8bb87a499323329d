"""The writes of mirroring (``publish.mirrors``): create, merge-patch and delete Queues, as plain
JSON over the watches' HTTP client, each tried again through transient failures
(``publish.retrying``) and at most ``concurrency`` at a time.

Answers that settle a write are returned, not raised: the Queue exists already (409 on create),
is gone (404), or is no longer the one decided for (409: the UID precondition failed). The next
round reads the store again and decides anew. Anything else (422, 403, a write given up) raises.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2 as httpx  # lightkube's HTTP client

from sharekeeper import telemetry
from sharekeeper.publish.diffing import Json
from sharekeeper.publish.retrying import Retrying, http_status

QUEUES_PATH = "/apis/scheduling.sharekeeper.io/v1alpha1/queues"
FIELD_MANAGER = {"fieldManager": "sharekeeper"}
KIND = "QueueMirror"
"""The kind in ``sharekeeper_writes_total`` and ``sharekeeper_write_retries_total``."""


class MirrorWriter:
    def __init__(
        self, http: httpx.AsyncClient, *, concurrency: int = 16, retrying: Retrying | None = None
    ) -> None:
        self._http = http
        self._slots = asyncio.Semaphore(concurrency)
        self._retrying = retrying or Retrying()

    async def create(self, body: Json) -> Json | None:
        """The Queue as created; None when one of that name exists already."""
        return await self._send("created", "POST", QUEUES_PATH, json=body, settled=(409,))

    async def patch(self, name: str, body: Json) -> Json | None:
        """The Queue as patched; None when it is gone or is another object now."""
        return await self._send(
            "patched", "PATCH", f"{QUEUES_PATH}/{name}",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/merge-patch+json"},
            settled=(404, 409),
        )  # fmt: skip

    async def delete(self, name: str, uid: str) -> bool:
        """Deleted if it still is the object with ``uid`` (True); False when it is gone already
        or is another object now."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        answer = await self._send(
            "deleted", "DELETE", f"{QUEUES_PATH}/{name}", json=options, settled=(404, 409)
        )
        return answer is not None

    async def _send(
        self, done: str, method: str, path: str, *, settled: tuple[int, ...], **request: Any
    ) -> Json | None:
        params = FIELD_MANAGER if method != "DELETE" else None

        async def attempt() -> Json:
            async with self._slots:
                response = await self._http.request(method, path, params=params, **request)
            response.raise_for_status()
            answer: Json = response.json()
            return answer

        try:
            answer = await self._retrying(KIND, attempt)
        except Exception as error:
            code = http_status(error)
            if code in settled:
                telemetry.WRITES.labels(KIND, "gone" if code == 404 else "conflict").inc()
                return None
            telemetry.WRITES.labels(KIND, "error").inc()
            raise
        telemetry.WRITES.labels(KIND, done).inc()
        return answer
