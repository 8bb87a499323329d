"""The webhook's serving certificate: that a TLS client trusting the CA accepts it, when it
counts as covering the hosts, the files kopf serves, and how replicas share it through a Secret
and publish its CA to the MutatingWebhookConfiguration.

The Secret and MutatingWebhookConfiguration APIs here are fakes standing in for the API server
(resourceVersions, 409 on a stale write, 422 on a failed JSON patch ``test``, an immutable
Secret type); the e2e tests exercise the real one."""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
import ssl
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx2 as httpx
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from sharekeeper.kube.webhook_tls import (
    ServingCert,
    covers,
    ensure_serving_cert,
    new_serving_cert,
    publish_client_config,
    write_files,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IP, DNS = "127.0.0.1", "sharekeeper-webhook.sharekeeper.svc"
HOSTS = [IP, DNS]
NAMESPACE, SECRET, CONFIGURATION = "sharekeeper", "sharekeeper-webhook-tls", "sharekeeper-admission"


def api_error(code: int) -> ApiError:
    request = httpx.Request("PUT", "https://127.0.0.1/api/v1/namespaces/sharekeeper/secrets")
    body = {"kind": "Status", "status": "Failure", "code": code, "message": f"HTTP {code}"}
    return ApiError(request=request, response=httpx.Response(code, json=body, request=request))


def handshake(certfile: Path, keyfile: Path, ca_pem: bytes, server_hostname: str) -> None:
    """A TLS handshake in memory between a server as kopf's (``load_cert_chain`` of the files)
    and a client trusting only ``ca_pem``, as kube-apiserver with the caBundle."""
    server_context = ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certfile, keyfile)
    client_context = ssl.create_default_context(cadata=ca_pem.decode())
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    from_server, from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, from_client, server_hostname=server_hostname)
    server = server_context.wrap_bio(to_server, from_server, server_side=True)
    pending = [client, server]
    for _ in range(10):
        for end in list(pending):
            try:
                end.do_handshake()
                pending.remove(end)
            except ssl.SSLWantReadError:
                pass
        to_server.write(from_client.read())
        to_client.write(from_server.read())
        if not pending:
            return
    raise AssertionError("the handshake did not finish")


@pytest.mark.parametrize("host", [IP, DNS])
def test_a_client_trusting_the_ca_accepts_the_served_certificate(host: str, tmp_path: Path) -> None:
    cert = new_serving_cert(HOSTS, now=datetime.now(UTC))
    certfile, keyfile = write_files(cert, tmp_path)
    handshake(certfile, keyfile, cert.ca_pem, host)


def test_a_client_refuses_the_certificate_for_another_host_or_ca(tmp_path: Path) -> None:
    cert = new_serving_cert(HOSTS, now=datetime.now(UTC))
    certfile, keyfile = write_files(cert, tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(certfile, keyfile, cert.ca_pem, "other.sharekeeper.svc")
    other_ca = new_serving_cert(HOSTS, now=datetime.now(UTC)).ca_pem
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(certfile, keyfile, other_ca, IP)


def test_the_certificate_names_its_hosts_and_serves_only_tls_servers() -> None:
    leaf = x509.load_pem_x509_certificate(new_serving_cert(HOSTS, now=NOW, days=90).cert_pem)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == [IP]
    assert sans.get_values_for_type(x509.DNSName) == [DNS]
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == IP
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert leaf.not_valid_after_utc == NOW + timedelta(days=90)
    assert leaf.not_valid_before_utc < NOW


CERT = new_serving_cert(HOSTS, now=NOW)
OTHER = new_serving_cert(HOSTS, now=NOW)


@pytest.mark.parametrize(
    ("cert", "hosts", "now", "covered"),
    [
        (CERT, HOSTS, NOW, True),
        (CERT, [DNS], NOW + timedelta(days=300), True),
        (CERT, [IP, "other.sharekeeper.svc"], NOW, False),
        (CERT, ["127.0.0.2"], NOW, False),
        (CERT, HOSTS, NOW + timedelta(days=340), False),  # expires within the 30 days' margin
        (CERT, HOSTS, NOW + timedelta(days=400), False),
        (CERT, HOSTS, NOW - timedelta(minutes=10), True),  # a clock a little behind
        (CERT, HOSTS, NOW - timedelta(days=1), False),  # not yet valid
        (ServingCert(OTHER.ca_pem, CERT.cert_pem, CERT.key_pem), HOSTS, NOW, False),
        (ServingCert(CERT.ca_pem, CERT.cert_pem, OTHER.key_pem), HOSTS, NOW, False),
        (ServingCert(b"garbage", CERT.cert_pem, CERT.key_pem), HOSTS, NOW, False),
        (ServingCert(CERT.ca_pem, b"", CERT.key_pem), HOSTS, NOW, False),
        (ServingCert(CERT.ca_pem, CERT.cert_pem, b"\xff" * 40), HOSTS, NOW, False),
        (ServingCert(CERT.cert_pem, CERT.cert_pem, CERT.key_pem), HOSTS, NOW, False),  # no CA
        (CERT, ["not a host name!"], NOW, False),
    ],
)
def test_covers(cert: ServingCert, hosts: list[str], now: datetime, covered: bool) -> None:
    assert covers(cert, hosts, now=now) is covered


def test_the_margin_is_how_long_the_certificate_must_stay_valid() -> None:
    later = NOW + timedelta(days=340)
    assert covers(CERT, HOSTS, now=later, margin=timedelta(days=20))
    assert not covers(CERT, HOSTS, now=later, margin=timedelta(days=30))


def test_write_files_keeps_the_key_private_and_replaces_both_whole(tmp_path: Path) -> None:
    directory = tmp_path / "tls"
    certfile, keyfile = write_files(OTHER, directory)
    assert write_files(CERT, directory) == (certfile, keyfile)
    assert (certfile.read_bytes(), keyfile.read_bytes()) == (CERT.cert_pem, CERT.key_pem)
    assert stat.S_IMODE(keyfile.stat().st_mode) == 0o600
    assert sorted(path.name for path in directory.iterdir()) == ["tls.crt", "tls.key"]


class FakeSecrets:
    """Secrets by name in one namespace, with resourceVersions: a create of an existing one and
    a replace carrying a stale resourceVersion are 409, a change of type 422. ``interloper``
    runs once, just before our first write, as another replica writing between our read and
    our write would."""

    def __init__(self) -> None:
        self.secrets: dict[str, Secret] = {}
        self.version = 0
        self.calls: list[str] = []
        self.interloper: Callable[[], None] | None = None

    async def get(self, kind: type[Secret], name: str, *, namespace: str) -> Secret:
        assert (kind, namespace) == (Secret, NAMESPACE)
        self.calls.append("get")
        if name not in self.secrets:
            raise api_error(404)
        return copy.deepcopy(self.secrets[name])

    async def create(self, secret: Secret) -> Secret:
        self.calls.append("create")
        self._interlope()
        assert secret.metadata is not None
        assert secret.metadata.namespace == NAMESPACE
        if secret.metadata.name in self.secrets:
            raise api_error(409)
        return self.store(secret)

    async def replace(self, secret: Secret) -> Secret:
        self.calls.append("replace")
        self._interlope()
        assert secret.metadata is not None
        assert secret.metadata.name is not None
        stored = self.secrets[secret.metadata.name]
        assert stored.metadata is not None
        if secret.metadata.resourceVersion != stored.metadata.resourceVersion:
            raise api_error(409)
        if secret.type != stored.type:
            raise api_error(422)
        return self.store(secret)

    def _interlope(self) -> None:
        interloper, self.interloper = self.interloper, None
        if interloper is not None:
            interloper()

    def store(self, secret: Secret) -> Secret:
        self.version += 1
        stored = copy.deepcopy(secret)
        assert stored.metadata is not None
        assert stored.metadata.name is not None
        stored.metadata.resourceVersion = str(self.version)
        self.secrets[stored.metadata.name] = stored
        return copy.deepcopy(stored)

    def put(self, data: dict[str, str], kind: str = "kubernetes.io/tls") -> None:
        """A Secret as another replica (or a person) left it."""
        metadata = ObjectMeta(name=SECRET, namespace=NAMESPACE, labels={"kept": "yes"})
        self.store(Secret(metadata=metadata, type=kind, data=data))

    def put_cert(self, cert: ServingCert) -> None:
        pems = {"tls.crt": cert.cert_pem, "tls.key": cert.key_pem, "ca.crt": cert.ca_pem}
        self.put({key: base64.b64encode(pem).decode() for key, pem in pems.items()})

    def held(self) -> tuple[Secret, ServingCert]:
        secret = self.secrets[SECRET]
        data = secret.data or {}
        pems = [base64.b64decode(data[key]) for key in ("ca.crt", "tls.crt", "tls.key")]
        return secret, ServingCert(*pems)


def ensure(api: FakeSecrets, hosts: list[str] = HOSTS, now: datetime = NOW) -> ServingCert:
    client = cast(AsyncClient, api)
    return asyncio.run(ensure_serving_cert(client, NAMESPACE, SECRET, hosts, now=now))


def test_the_first_replica_stores_a_certificate_the_next_ones_read() -> None:
    api = FakeSecrets()
    first = ensure(api)
    assert api.calls == ["get", "create"]
    secret, held = api.held()
    assert held == first
    assert secret.type == "kubernetes.io/tls"
    assert covers(first, HOSTS, now=NOW)
    api.calls.clear()
    assert ensure(api, now=NOW + timedelta(days=100)) == first
    assert api.calls == ["get"]


def test_a_replica_that_loses_the_race_to_create_serves_the_winners() -> None:
    api = FakeSecrets()
    api.interloper = lambda: api.put_cert(OTHER)
    assert ensure(api) == OTHER
    assert api.calls == ["get", "create", "get"]
    assert api.held()[1] == OTHER


def test_an_expiring_certificate_is_renewed_keeping_the_secrets_metadata() -> None:
    api = FakeSecrets()
    api.put_cert(CERT)
    later = NOW + timedelta(days=340)
    renewed = ensure(api, now=later)
    assert api.calls == ["get", "replace"]
    assert renewed != CERT
    assert covers(renewed, HOSTS, now=later)
    secret, held = api.held()
    assert held == renewed
    assert secret.metadata is not None
    assert secret.metadata.labels == {"kept": "yes"}


def test_a_certificate_for_other_hosts_is_replaced() -> None:
    api = FakeSecrets()
    api.put_cert(new_serving_cert(["old.sharekeeper.svc"], now=NOW))
    renewed = ensure(api)
    assert api.calls == ["get", "replace"]
    assert api.held()[1] == renewed


def test_a_replica_that_loses_the_race_to_replace_serves_the_winners() -> None:
    api = FakeSecrets()
    api.put_cert(new_serving_cert(["old.sharekeeper.svc"], now=NOW))
    api.interloper = lambda: api.put_cert(OTHER)
    assert ensure(api) == OTHER
    assert api.calls == ["get", "replace", "get"]


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({}, "kubernetes.io/tls"),
        ({"tls.crt": "not base64!", "tls.key": "", "ca.crt": ""}, "kubernetes.io/tls"),
        ({"tls.crt": "Zm9v", "tls.key": "Zm9v", "ca.crt": "Zm9v"}, "kubernetes.io/tls"),
        ({"ca.crt": "Zm9v"}, "Opaque"),  # the type cannot change: kept
    ],
)
def test_an_unreadable_secret_is_replaced(data: dict[str, str], kind: str) -> None:
    api = FakeSecrets()
    api.put(data, kind)
    cert = ensure(api)
    secret, held = api.held()
    assert (held, secret.type) == (cert, kind)
    assert covers(cert, HOSTS, now=NOW)


def test_replicas_that_keep_overwriting_each_other_give_up() -> None:
    class Fighting(FakeSecrets):
        async def create(self, secret: Secret) -> Secret:
            self.calls.append("create")
            self.put_cert(new_serving_cert(["elsewhere.sharekeeper.svc"], now=NOW))
            raise api_error(409)

        async def replace(self, secret: Secret) -> Secret:
            self.calls.append("replace")
            raise api_error(409)

    api = Fighting()
    with pytest.raises(RuntimeError, match="other hosts"):
        ensure(api)
    assert api.calls == ["get", "create", "get", "replace", "get", "replace"]


def test_other_api_errors_are_raised() -> None:
    api = FakeSecrets()

    async def forbidden(*args: Any, **kwargs: Any) -> Secret:
        raise api_error(403)

    api.get = forbidden  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        ensure(api)


def webhook(name: str, client_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": client_config,
    }


SERVICE = {"namespace": NAMESPACE, "name": "sharekeeper-webhook", "path": "/mutate"}
URL = "https://127.0.0.1:9443/mutate"
BUNDLE = base64.b64encode(CERT.ca_pem).decode()


class FakeConfigurations:
    """MutatingWebhookConfigurations by name, patched by JSON patch (the ops used here) with
    a failed ``test`` a 422, as kube-apiserver answers. ``interloper`` runs once, just before
    our first patch."""

    def __init__(self, *webhooks: dict[str, Any]) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        if webhooks:
            self.objects[CONFIGURATION] = {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": CONFIGURATION, "resourceVersion": "1"},
                "webhooks": list(webhooks),
            }
        self.calls: list[str] = []
        self.patches: list[list[dict[str, Any]]] = []
        self.interloper: Callable[[dict[str, Any]], None] | None = None

    async def get(
        self, kind: type[MutatingWebhookConfiguration], name: str
    ) -> MutatingWebhookConfiguration:
        assert kind is MutatingWebhookConfiguration
        self.calls.append("get")
        if name not in self.objects:
            raise api_error(404)
        stored = copy.deepcopy(self.objects[name])
        return cast(MutatingWebhookConfiguration, MutatingWebhookConfiguration.from_dict(stored))

    async def patch(
        self,
        kind: type[MutatingWebhookConfiguration],
        name: str,
        patch: list[dict[str, Any]],
        *,
        patch_type: PatchType,
    ) -> None:
        assert (kind, patch_type) == (MutatingWebhookConfiguration, PatchType.JSON)
        self.calls.append("patch")
        self.patches.append(patch)
        if name not in self.objects:
            raise api_error(404)
        current = self.objects[name]
        interloper, self.interloper = self.interloper, None
        if interloper is not None:
            interloper(current)
            current["metadata"]["resourceVersion"] += "'"
        patched = copy.deepcopy(current)
        for operation in patch:
            *parents, last = operation["path"].split("/")[1:]
            target: Any = patched
            for step in parents:
                target = target[int(step)] if isinstance(target, list) else target[step]
            if operation["op"] == "test":
                if target.get(last) != operation["value"]:
                    raise api_error(422)
            elif operation["op"] == "add":
                target[last] = operation["value"]
            else:
                assert operation["op"] == "remove"
                del target[last]
        patched["metadata"]["resourceVersion"] += "'"
        self.objects[name] = patched

    def client_configs(self) -> list[dict[str, Any]]:
        return [hook["clientConfig"] for hook in self.objects[CONFIGURATION]["webhooks"]]


def publish(api: FakeConfigurations, url: str | None) -> bool:
    client = cast(AsyncClient, api)
    return asyncio.run(publish_client_config(client, CONFIGURATION, CERT.ca_pem, url=url))


def test_every_webhook_trusts_the_ca_and_calls_the_url() -> None:
    api = FakeConfigurations(
        webhook("pods.sharekeeper.io", {"service": SERVICE}),
        webhook("queues.sharekeeper.io", {"url": URL, "caBundle": "b2xk"}),
    )
    assert publish(api, URL)
    assert api.client_configs() == [{"url": URL, "caBundle": BUNDLE}] * 2
    assert api.patches == [
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
            {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": BUNDLE},
            {"op": "add", "path": "/webhooks/0/clientConfig/url", "value": URL},
            {"op": "remove", "path": "/webhooks/0/clientConfig/service"},
            {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": BUNDLE},
        ]
    ]
    api.calls.clear()
    assert publish(api, URL)
    assert api.calls == ["get"]  # nothing differs: nothing written


def test_without_a_url_the_service_is_kept() -> None:
    api = FakeConfigurations(webhook("pods.sharekeeper.io", {"service": SERVICE}))
    assert publish(api, None)
    assert api.client_configs() == [{"service": SERVICE, "caBundle": BUNDLE}]


def test_a_configuration_changed_while_patching_is_read_and_patched_again() -> None:
    api = FakeConfigurations(webhook("pods.sharekeeper.io", {"service": SERVICE}))

    def prepend_a_webhook(current: dict[str, Any]) -> None:
        current["webhooks"].insert(0, webhook("first.sharekeeper.io", {"url": URL}))

    api.interloper = prepend_a_webhook
    assert publish(api, URL)
    assert api.calls == ["get", "patch", "get", "patch"]
    assert api.client_configs() == [{"url": URL, "caBundle": BUNDLE}] * 2


def test_a_second_conflict_is_raised() -> None:
    api = FakeConfigurations(webhook("pods.sharekeeper.io", {"service": SERVICE}))

    async def conflict(*args: Any, **kwargs: Any) -> None:
        api.calls.append("patch")
        raise api_error(409)

    api.patch = conflict  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        publish(api, URL)
    assert api.calls == ["get", "patch", "get", "patch"]


def test_a_missing_configuration_is_reported_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeConfigurations()
    with caplog.at_level(logging.WARNING, logger="sharekeeper.kube.webhook_tls"):
        assert not publish(api, URL)
    assert f"MutatingWebhookConfiguration {CONFIGURATION} does not exist" in caplog.text
