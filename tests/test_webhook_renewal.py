"""A running replica serves the certificate the Secret holds now: a renewal (its own or
another replica's) reaches the served files and the configuration's caBundle, and the files
are not rewritten while the certificate stays (kopf restarts its server when they change).
The Secret and the configuration are stood in for by fakes here; e2e/test_admission.py runs the
real ones."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sharekeeper.handlers import admission
from sharekeeper.kube.webhook_tls import ServingCert, new_serving_cert, write_files


def test_a_renewed_certificate_is_served_and_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    first, renewed = (new_serving_cert(["127.0.0.1"], now=now) for _ in range(2))
    secret = [first]
    published: list[bytes] = []

    async def ensure(*_: Any, **__: Any) -> ServingCert:
        return secret[0]

    async def publish(client: Any, name: str, ca_pem: bytes, *, url: str | None) -> bool:
        published.append(ca_pem)
        return True

    monkeypatch.setattr(admission, "ensure_serving_cert", ensure)
    monkeypatch.setattr(admission, "publish_client_config", publish)
    monkeypatch.setattr(admission, "RENEWAL_CHECK_SECONDS", 0.01)
    settings = admission.WebhookSettings(("127.0.0.1", 0), "sharekeeper", url="https://x:1")

    async def scenario() -> None:
        served = await admission._published(settings, None)  # type: ignore[arg-type]
        assert served == first
        write_files(served, tmp_path)
        unchanged = (tmp_path / "tls.crt").stat().st_mtime_ns
        task = asyncio.create_task(admission._renewing(settings, None, tmp_path, served))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert (tmp_path / "tls.crt").stat().st_mtime_ns == unchanged  # not rewritten
        secret[0] = renewed  # another replica renewed it
        await asyncio.sleep(0.1)
        task.cancel()

    asyncio.run(scenario())
    assert (tmp_path / "tls.crt").read_bytes() == renewed.cert_pem
    assert (tmp_path / "tls.key").read_bytes() == renewed.key_pem
    assert published[0] == first.ca_pem
    assert published[-1] == renewed.ca_pem
