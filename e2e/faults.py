"""Faults for e2e tests: a TCP proxy that breaks the way networks do, an admission webhook that
refuses writes, etcd compaction, and raw requests and watches to see what the API server
answers.

The proxy sits between a client (the operator) and the API server on 127.0.0.1 and copies bytes
both ways without reading them, so TLS passes through untouched: the API server's certificate is
for 127.0.0.1, which the proxy's address is too. It can

- ``cut()``: reset every open connection and refuse new ones (an API server or network outage);
- ``hold()``: accept connections but forward nothing, in either direction (a stalled network or
  an overloaded API server), so a request in flight neither completes nor fails;
- ``resume()``: forward again; held bytes and held connections go through.

Individual requests cannot be failed in a TLS stream the proxy does not read: a
``RefusingWebhook`` makes the API server itself refuse some writes, with a 500.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import socket
import ssl
import struct
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import controlplane

if TYPE_CHECKING:
    from clusters import Cluster
    from operating import Operator

Mode = Literal["forwarding", "holding", "refusing"]


class TcpProxy:
    """Forwards connections to 127.0.0.1:``port`` on to ``upstream`` (host, port), byte for byte.

    Use as a context manager; leaving it closes every connection it carried."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.1)  # the accept loop checks for close() this often
        self.port: int = self._listener.getsockname()[1]
        self._state = threading.Condition()
        self._mode: Mode = "forwarding"
        self._open: set[socket.socket] = set()
        self._closed = False
        self._accepted = 0
        self._acceptor = threading.Thread(target=self._accept_loop, name="proxy", daemon=True)

    @classmethod
    def to(cls, url: str) -> TcpProxy:
        """A proxy for the host and port of ``url`` (e.g. a control plane's ``server``)."""
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        return cls((parts.hostname, parts.port))

    @property
    def accepted(self) -> int:
        """Connections accepted so far, refused ones not counted: reconnecting clients show here."""
        with self._state:
            return self._accepted

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until ``resume()``."""
        with self._state:
            self._mode = "refusing"
            victims = list(self._open)
            self._open.clear()
            self._state.notify_all()
        for sock in victims:
            _reset(sock)

    def hold(self) -> None:
        """Accept connections but forward no byte, either way, until ``resume()``."""
        with self._state:
            self._mode = "holding"

    def resume(self) -> None:
        with self._state:
            self._mode = "forwarding"
            self._state.notify_all()

    def close(self) -> None:
        with self._state:
            self._closed = True
        self.cut()
        if self._acceptor.is_alive():
            self._acceptor.join()
        self._listener.close()

    def __enter__(self) -> TcpProxy:
        self._acceptor.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- the copying ------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                with self._state:
                    if self._closed:
                        return
                continue
            with self._state:
                refused = self._closed or self._mode == "refusing"
                if not refused:
                    self._open.add(client)
                    self._accepted += 1
            if refused:
                _reset(client)
                continue
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        """Connect ``client`` upstream (once forwarding) and copy both ways until either ends."""
        if not self._wait_forwarding(client):
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            self._drop(client)
            return
        upstream.settimeout(None)
        with self._state:
            alive = client in self._open
            if alive:
                self._open.add(upstream)
        if not alive:  # cut while connecting
            _reset(upstream)
            return
        threading.Thread(target=self._copy, args=(upstream, client), daemon=True).start()
        self._copy(client, upstream)

    def _copy(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self._wait_forwarding(source):
                    return
                target.sendall(data)
        except OSError:
            pass  # reset by the proxy (cut) or by either end
        finally:
            self._drop(source)
            self._drop(target)

    def _wait_forwarding(self, sock: socket.socket) -> bool:
        """Block while holding; False when ``sock`` was cut meanwhile."""
        with self._state:
            while self._mode == "holding" and sock in self._open:
                self._state.wait()
            return sock in self._open and self._mode == "forwarding"

    def _drop(self, sock: socket.socket) -> None:
        with self._state:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a crashed server or a dropped route looks to the peer.

    ``shutdown(SHUT_RD)`` first wakes a thread blocked in ``recv`` on it without sending a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
    sock.close()


def kubeconfig_via(proxy: TcpProxy, kubeconfig: Path, path: Path) -> Path:
    """A copy of ``kubeconfig`` whose server is the proxy (same scheme, CA and user)."""
    config = json.loads(kubeconfig.read_text())
    for cluster in config["clusters"]:
        parts = urlsplit(cluster["cluster"]["server"])
        netloc = f"127.0.0.1:{proxy.port}"
        cluster["cluster"]["server"] = urlunsplit(parts._replace(netloc=netloc))
    path.write_text(json.dumps(config, indent=2))
    return path


# --- etcd ---------------------------------------------------------------------------------


def _etcd(plane: controlplane.ControlPlane, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to etcd's JSON gateway (plain HTTP on loopback, see ``controlplane.start``)."""
    assert plane.etcd_url, "this control plane does not know its etcd URL"
    request = urllib.request.Request(
        f"{plane.etcd_url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def etcd_revision(plane: controlplane.ControlPlane) -> int:
    """etcd's current revision: every header carries it, even a range that finds nothing."""
    answer = _etcd(plane, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
    return int(answer["header"]["revision"])


def compact_etcd(plane: controlplane.ControlPlane) -> int:
    """Compact etcd's history up to its current revision (physically, before returning) and
    return that revision: no watch can start before it any more."""
    revision = etcd_revision(plane)
    _etcd(plane, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


# --- raw watches --------------------------------------------------------------------------


def watch_events(
    kubeconfig: Path, path: str, timeout: float = 10
) -> Generator[dict[str, Any], None, None]:
    """The events of ``GET path`` (a ``?watch=1`` URL) as the kubeconfig's user, one per line, as
    the API server sends them: an expired resource version is an ``ERROR`` event, not an HTTP
    error. Ends when the server ends the watch; ``timeout`` bounds each read."""
    config = json.loads(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    token = config["users"][0]["user"]["token"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    request = urllib.request.Request(
        f"{cluster['server']}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        while line := response.readline():
            event: dict[str, Any] = json.loads(line)
            yield event


# --- the API server's own answers ---------------------------------------------------------


def api_call(
    kubeconfig: Path, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One request as the kubeconfig's user (a token), a body being a merge patch; returns the
    decoded answer. Quicker and more precise to time than kubectl."""
    config = json.loads(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    token = config["users"][0]["user"]["token"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    request = urllib.request.Request(
        f"{cluster['server']}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/merge-patch+json",
        },
        method=method,
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


# --- writes refused by an admission webhook ----------------------------------------------


WEBHOOK_CONFIGURATION = "sharekeeper-e2e-refusals"


@dataclass(frozen=True)
class Review:
    """One write the webhook was asked about, and whether it refused it."""

    resource: str  # e.g. "queues/status", "nodes"
    name: str
    refused: bool
    uid: str
    """The admission request's: the API server asks again with the same one when a call fails."""


def refusals_seen(reviews: list[Review]) -> int:
    """The refusals the writer could have seen: per admission request, the answer the API server
    got last (a call whose answer was lost is made again, and only the last one counts)."""
    last = {review.uid: review.refused for review in reviews}
    return sum(last.values())


class RefusingWebhook:
    """A validating admission webhook that refuses a ``fraction`` of the writes it is asked about
    with 500, as an API server failing inside answers.

    kube-apiserver passes a denial's own code on to the client when it is 400 or more, with the
    webhook's message: the writer gets a real API server's 500, with a Status body, on a real
    request path. Entering the ``with`` block registers it for status writes of our Queues and
    SchedulerPolicies and for Node updates, by ``user`` only (a CEL ``matchConditions``), so
    that everyone else's writes pass untouched; leaving the block unregisters it. Which writes
    are refused is decided by a seeded random sequence.
    """

    def __init__(self, cluster: Cluster, workdir: Path, *, user: str, fraction: float) -> None:
        self._cluster = cluster
        self._user = user
        self._fraction = fraction
        self._random = random.Random(11)
        self._lock = threading.Lock()
        self._reviews: list[Review] = []
        workdir.mkdir(parents=True, exist_ok=True)
        self._ca, ca_key = controlplane.openssl_ca(workdir, "webhook-ca")
        cert, key = controlplane.openssl_cert(
            workdir, "webhook", (self._ca, ca_key), usage="serverAuth", hosts=("127.0.0.1",)
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        self._server = _ReviewServer(self)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def reviews(self) -> list[Review]:
        with self._lock:
            return list(self._reviews)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The AdmissionReview ``response`` to ``request``: allowed, or refused with the code."""
        resource = request["resource"]["resource"]
        if request.get("subResource"):
            resource = f"{resource}/{request['subResource']}"
        with self._lock:
            refused = self._random.random() < self._fraction
            self._reviews.append(
                Review(resource, request.get("name", ""), refused, str(request["uid"]))
            )
        answer: dict[str, Any] = {"uid": request["uid"], "allowed": not refused}
        if refused:
            answer["status"] = {
                "code": 500,
                "reason": "InternalError",
                "message": f"refused by the e2e fault webhook: {resource} {request.get('name')}",
            }
        return answer

    def __enter__(self) -> RefusingWebhook:
        self._thread.start()
        port = self._server.server_address[1]
        ca_bundle = base64.b64encode(self._ca.read_bytes()).decode()
        only_user = {"name": "only-the-operator",
                     "expression": f"request.userInfo.username == '{self._user}'"}  # fmt: skip
        rules = [
            {"apiGroups": ["scheduling.sharekeeper.io"], "apiVersions": ["v1alpha1"],
             "operations": ["UPDATE"], "resources": ["queues/status", "schedulerpolicies/status"],
             "scope": "Cluster"},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
             "resources": ["nodes"], "scope": "Cluster"},
        ]  # fmt: skip
        self._cluster.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": WEBHOOK_CONFIGURATION},
                "webhooks": [
                    {
                        "name": "refuse.faults.sharekeeper.io",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/review",
                            "caBundle": ca_bundle,
                        },
                        "rules": rules,
                        "matchConditions": [only_user],
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 5,
                    }
                ],
            }
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._cluster.kubectl(
                "delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION,
                "--ignore-not-found",
            )  # fmt: skip
        finally:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()


class _ReviewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, webhook: RefusingWebhook) -> None:
        super().__init__(("127.0.0.1", 0), _ReviewHandler)
        self.webhook = webhook


class _ReviewHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ReviewServer

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = self.server.webhook.answer(review["request"])
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the reviews are kept in RefusingWebhook.reviews


@dataclass(frozen=True, slots=True)
class HealthAnswer:
    asked_at: float
    """When the poll was made (``time.monotonic()``)."""
    code: int
    """The HTTP status, or 0 when nothing answered."""
    seconds: float
    """How long the answer took."""


class HealthPoller:
    """Polls an operator's ``/healthz`` every ``interval`` seconds in a thread, recording each
    answer (a context manager: polling runs inside the ``with``)."""

    def __init__(self, operator: Operator, interval: float) -> None:
        self._operator = operator
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self.answers: list[HealthAnswer] = []

    def _poll(self) -> None:
        while not self._stop.is_set():
            asked_at = time.monotonic()
            try:
                self._operator.health()
                code = 200
            except urllib.error.HTTPError as error:
                code = error.code
            except (urllib.error.URLError, OSError):
                code = 0
            took = time.monotonic() - asked_at
            self.answers.append(HealthAnswer(asked_at, code, took))
            self._stop.wait(max(0.0, self._interval - took))

    def between(self, start: float, end: float) -> Counter[int]:
        """How many polls made in ``[start, end)`` got each answer."""
        return Counter(a.code for a in self.answers if start <= a.asked_at < end)

    def percentile(self, share: float) -> float:
        """The answer time below which ``share`` of the answers came."""
        latencies = sorted(a.seconds for a in self.answers)
        return latencies[min(len(latencies) - 1, int(share * len(latencies)))]

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
