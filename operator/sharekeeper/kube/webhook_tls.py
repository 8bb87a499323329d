"""The admission webhook's serving certificate, shared by every replica through a Secret.

kube-apiserver trusts the webhook through the ``caBundle`` of our MutatingWebhookConfiguration,
so every replica must serve the same certificate: the first replica to start makes one (with a
CA of its own) and stores it in a ``kubernetes.io/tls`` Secret, the others read it, and whoever
finds it expiring, or not naming the hosts it is served at, replaces it. The CA goes into the
configuration's ``caBundle``; kopf's ``WebhookServer`` serves the files ``write_files`` writes.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, Subject
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

logger = logging.getLogger(__name__)

TLS_CERT, TLS_KEY, CA_CERT = "tls.crt", "tls.key", "ca.crt"
BACKDATE = timedelta(hours=1)
"""Certificates start an hour early, so a replica (or kube-apiserver) whose clock is a little
behind the one that made them does not find them not yet valid."""
ROUNDS = 3
"""Read-then-write rounds of the Secret before giving up: replicas racing to write it settle
in two (one wins, the others read the winner's)."""


@dataclass(frozen=True, slots=True)
class ServingCert:
    ca_pem: bytes
    """The self-signed CA: what goes into ``caBundle``."""
    cert_pem: bytes
    """The serving certificate, signed by the CA."""
    key_pem: bytes
    """Its private key, PKCS8 PEM, unencrypted."""


def new_serving_cert(hosts: Sequence[str], *, now: datetime, days: int = 365) -> ServingCert:
    """A fresh CA (its key is thrown away: a renewal makes a new CA) and a certificate for
    ``hosts`` (IP addresses as IP SANs, the others as DNS SANs) that it signs."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    start, end = now - BACKDATE, now + timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sharekeeper webhook CA")])
    ca_key_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), start, end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(ca_key_id, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    # The CN is informational (clients match the SANs) and may not exceed 64 characters.
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])])
    cert = (
        _builder(subject, ca_name, key.public_key(), start, end)
        .add_extension(x509.SubjectAlternativeName([_name(h) for h in hosts]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCert(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey, start: datetime,
    end: datetime,
) -> x509.CertificateBuilder:  # fmt: skip
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _name(host: str) -> Subject:
    """The host as a SAN, and as the name a client verifies (the two are the same types)."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def covers(
    cert: ServingCert,
    hosts: Sequence[str],
    *,
    now: datetime,
    margin: timedelta = timedelta(days=30),
) -> bool:
    """Whether a TLS client trusting ``cert.ca_pem`` accepts ``cert`` for every host, now and
    ``margin`` from now, and the key is the certificate's. What a Secret holds is untrusted, so
    anything unreadable is simply not covering."""
    try:
        ca = x509.load_pem_x509_certificate(cert.ca_pem)
        leaf = x509.load_pem_x509_certificate(cert.cert_pem)
        key = serialization.load_pem_private_key(cert.key_pem, password=None)
        if key.public_key() != leaf.public_key():
            return False
        leaf.verify_directly_issued_by(ca)  # by the CA itself, not by the leaf as an anchor
        for when in (now, now + margin):
            policy = PolicyBuilder().store(Store([ca])).time(when)
            for host in hosts:
                # Chain, signature, validity period, SANs and serverAuth, as a client checks.
                policy.build_server_verifier(_name(host)).verify(leaf, [])
    except Exception:  # malformed PEM, DER or names, or a failed verification: all alike
        return False
    return True


def write_files(cert: ServingCert, directory: Path) -> tuple[Path, Path]:
    """Write ``tls.crt`` and ``tls.key`` (that one readable by us only) into ``directory``, each
    replaced whole, so kopf's server, which re-reads them when they change, never reads half a
    file."""
    directory.mkdir(parents=True, exist_ok=True)
    certfile, keyfile = directory / TLS_CERT, directory / TLS_KEY
    _replace(keyfile, cert.key_pem, 0o600)
    _replace(certfile, cert.cert_pem, 0o644)
    return certfile, keyfile


def _replace(path: Path, data: bytes, mode: int) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


async def ensure_serving_cert(
    client: AsyncClient, namespace: str, secret: str, hosts: Sequence[str], *, now: datetime
) -> ServingCert:
    """The certificate in the Secret ``namespace/secret`` if it covers ``hosts``; otherwise a new
    one, stored there first. Writes carry the resourceVersion read (a create, none), so when
    replicas race, one wins and the others read and serve the winner's."""
    fresh: ServingCert | None = None
    for _ in range(ROUNDS):
        try:
            stored: Secret | None = await client.get(Secret, secret, namespace=namespace)
        except ApiError as error:
            if error.status.code != 404:
                raise
            stored = None
        current = _from_secret(stored) if stored is not None else None
        if current is not None and covers(current, hosts, now=now):
            return current
        fresh = fresh or new_serving_cert(hosts, now=now)
        try:
            if stored is None:
                await client.create(_to_secret(fresh, ObjectMeta(name=secret, namespace=namespace)))
            else:
                await client.replace(_to_secret(fresh, stored.metadata, stored.type))
        except ApiError as error:
            if error.status.code != 409:
                raise
            logger.info("another replica wrote Secret %s/%s first: reading it", namespace, secret)
            continue
        logger.info(
            "%s the webhook serving certificate in Secret %s/%s for %s",
            "stored" if stored is None else "renewed", namespace, secret, ", ".join(hosts),
        )  # fmt: skip
        return fresh
    raise RuntimeError(
        f"Secret {namespace}/{secret} changed under every one of {ROUNDS} writes: "
        "do other replicas serve the webhook at other hosts?"
    )


def _from_secret(secret: Secret) -> ServingCert | None:
    """The certificate a Secret holds, None if it lacks a key or one is not base64."""
    data: dict[str, Any] = secret.data or {}
    try:
        return ServingCert(
            ca_pem=base64.b64decode(data[CA_CERT], validate=True),
            cert_pem=base64.b64decode(data[TLS_CERT], validate=True),
            key_pem=base64.b64decode(data[TLS_KEY], validate=True),
        )
    except (KeyError, TypeError, ValueError):  # binascii.Error is a ValueError
        return None


def _to_secret(
    cert: ServingCert, metadata: ObjectMeta | None, kind: str | None = "kubernetes.io/tls"
) -> Secret:
    """The Secret holding ``cert``; a replaced Secret keeps its metadata (resourceVersion
    included) and its type, which the API server does not let change."""
    data = {TLS_CERT: cert.cert_pem, TLS_KEY: cert.key_pem, CA_CERT: cert.ca_pem}
    return Secret(
        metadata=metadata,
        type=kind,
        data={key: base64.b64encode(value).decode() for key, value in data.items()},
    )


async def publish_client_config(
    client: AsyncClient, configuration: str, ca_pem: bytes, *, url: str | None
) -> bool:
    """Make every webhook of the MutatingWebhookConfiguration ``configuration`` trust ``ca_pem``
    (and, given ``url``, call ``url`` instead of a Service). False if the configuration does not
    exist. A concurrent change (the patch's resourceVersion test fails) is read and tried again
    once."""
    try:
        return await _publish_once(client, configuration, ca_pem, url)
    except ApiError as error:
        # 409, or 422: the test of the resourceVersion failed, as when another replica patched.
        if error.status.code not in {409, 422}:
            raise
        logger.info("MutatingWebhookConfiguration %s changed as we patched it", configuration)
    return await _publish_once(client, configuration, ca_pem, url)


async def _publish_once(
    client: AsyncClient, configuration: str, ca_pem: bytes, url: str | None
) -> bool:
    try:
        current = await client.get(MutatingWebhookConfiguration, configuration)
        patch = _client_config_patch(current, base64.b64encode(ca_pem).decode(), url)
        if patch:
            await client.patch(
                MutatingWebhookConfiguration, configuration, patch, patch_type=PatchType.JSON
            )
            logger.info(
                "published the webhook CA to MutatingWebhookConfiguration %s", configuration
            )
    except ApiError as error:
        if error.status.code != 404:
            raise
        logger.warning(
            "MutatingWebhookConfiguration %s does not exist: kube-apiserver will not call the "
            "webhook", configuration,
        )  # fmt: skip
        return False
    return True


def _client_config_patch(
    current: MutatingWebhookConfiguration, ca_bundle: str, url: str | None
) -> list[dict[str, Any]]:
    """The JSON patch setting every webhook's clientConfig, empty when nothing differs. It
    tests the resourceVersion read, so it lands only on the webhooks it was computed for."""
    operations: list[dict[str, Any]] = []
    for index, webhook in enumerate(current.webhooks or []):
        path = f"/webhooks/{index}/clientConfig"
        config = webhook.clientConfig
        if config.caBundle != ca_bundle:
            operations.append({"op": "add", "path": f"{path}/caBundle", "value": ca_bundle})
        if url is not None and config.url != url:
            operations.append({"op": "add", "path": f"{path}/url", "value": url})
        if url is not None and config.service is not None:
            operations.append({"op": "remove", "path": f"{path}/service"})
    if not operations:
        return []
    version = current.metadata.resourceVersion if current.metadata else None
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *operations]
