"""A stand-in for metrics-server: ``metrics.k8s.io/v1beta1`` over HTTPS, with usage the test sets.

Registered as an APIService with the real kube-apiserver (see the ``metrics_server`` fixture in
``conftest.py``), so clients read usage through the API server's aggregation layer exactly as
they would from metrics-server: same paths, same objects (``timestamp``, ``window``, ``usage``),
same authentication and RBAC in front. Only the numbers come from the test::

    server.set_node("n1", cpu="3500m", memory="6Gi")
    server.set_pod("team", "web", containers={"main": {"cpu": "1", "memory": "1Gi"}})

Quantities are served as given; metrics-server itself writes nanocores and Ki (``"3500000000n"``,
``"6291456Ki"``), which a test may pass to mimic it.

With ``client_ca`` the server, like metrics-server behind the aggregator, accepts only clients
with a certificate from that CA whose common name is one of ``allowed_clients``, and takes the
user from the aggregator's ``X-Remote-User`` header (kept in ``requests``).

Stdlib only: a ``ThreadingHTTPServer`` in a thread, TLS per connection in the handler thread.
``stop()`` (or leaving the ``with`` block) closes the listener and every open connection and
joins every thread.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import controlplane

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP_VERSION}"

RESOURCES = [
    {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
     "verbs": ["get", "list"]},
    {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
     "verbs": ["get", "list"]},
]  # fmt: skip

Json = dict[str, Any]

# Empty OpenAPI documents: the aggregator downloads them from every APIService (and logs an
# error for a 404); clients of metrics.k8s.io do not use them.
OPENAPI: dict[str, Json] = {
    "/openapi/v2": {
        "swagger": "2.0",
        "info": {"title": "metrics", "version": VERSION},
        "paths": {},
    },
    "/openapi/v3": {"paths": {}},
}


@dataclass(frozen=True)
class Request:
    """One request as the server saw it: who asked (per the aggregator's headers) for what."""

    method: str
    path: str
    user: str | None
    groups: tuple[str, ...]


class HttpError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str) -> Json:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


class MetricsServer:
    """Serves metrics.k8s.io/v1beta1 from in-memory usage; every method is thread-safe."""

    def __init__(
        self,
        workdir: Path,
        *,
        hosts: Collection[str] = (),
        client_ca: Path | None = None,
        allowed_clients: Collection[str] = (controlplane.FRONT_PROXY_CLIENT,),
        window: str = "10s",
    ) -> None:
        """``hosts``: extra names for the serving certificate; the aggregator checks it against
        ``<service>.<namespace>.svc`` of the APIService."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.window = window
        self._allowed_clients = frozenset(allowed_clients)
        self._lock = threading.Lock()
        self._nodes: dict[str, Json] = {}
        self._pods: dict[tuple[str, str], Json] = {}
        self._requests: list[Request] = []
        self.ca_file, ca_key = controlplane.openssl_ca(workdir, "metrics-ca")
        cert, key = controlplane.openssl_cert(
            workdir, "metrics-server", (self.ca_file, ca_key),
            usage="serverAuth", hosts=("localhost", "127.0.0.1", *hosts),
        )  # fmt: skip
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._require_client_cert = client_ca is not None
        if client_ca is not None:
            self._context.load_verify_locations(cafile=client_ca)
            self._context.verify_mode = ssl.CERT_REQUIRED
        self.port = controlplane.free_port()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_bundle(self) -> bytes:
        """PEM of the CA that signed the serving certificate (the APIService's caBundle)."""
        return self.ca_file.read_bytes()

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> MetricsServer:
        if self._server is None:
            server = _Server(("127.0.0.1", self.port), _Handler, self)
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"metrics-server:{self.port}",
                daemon=True,
            )
            thread.start()
            self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop listening, cut every open connection, join every thread. Safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.shutdown()  # serve_forever returns
        thread.join()
        server.server_close()

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The server is gone (connection refused) inside the block, back on the same port after."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- usage -------------------------------------------------------------------------------

    def set_node(
        self,
        name: str,
        *,
        cpu: str,
        memory: str,
        labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
    ) -> None:
        with self._lock:
            self._nodes[name] = {
                "metadata": {"name": name, "labels": dict(labels or {})},
                "timestamp": rfc3339(timestamp or datetime.now(UTC)),
                "window": self.window,
                "usage": {"cpu": cpu, "memory": memory},
            }

    def remove_node(self, name: str) -> None:
        with self._lock:
            self._nodes.pop(name, None)

    def set_pod(
        self,
        namespace: str,
        name: str,
        containers: Mapping[str, Mapping[str, str]],
        *,
        labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
    ) -> None:
        """``containers``: container -> usage, e.g. ``{"main": {"cpu": "1", "memory": "1Gi"}}``."""
        with self._lock:
            self._pods[(namespace, name)] = {
                "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
                "timestamp": rfc3339(timestamp or datetime.now(UTC)),
                "window": self.window,
                "containers": [
                    {"name": container, "usage": dict(usage)}
                    for container, usage in containers.items()
                ],
            }

    def remove_pod(self, namespace: str, name: str) -> None:
        with self._lock:
            self._pods.pop((namespace, name), None)

    def clear(self) -> None:
        """Forget all usage (and the request log)."""
        with self._lock:
            self._nodes.clear()
            self._pods.clear()
            self._requests.clear()

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    # --- serving (called from handler threads) -----------------------------------------------

    def _record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def _respond(self, path: str, query: Mapping[str, list[str]], accept: str) -> Json:
        if path == "/apis":
            # No aggregated discovery (apidiscovery.k8s.io/v2): a client that asks only for it
            # gets 406 and falls back to /apis/<group>/<version>, as the aggregator does.
            offers = [part.strip() for part in accept.split(",") if part.strip()]
            if offers and all("apidiscovery.k8s.io" in offer for offer in offers):
                raise HttpError(406, "NotAcceptable", "only legacy discovery is served")
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group()]}
        if path == f"/apis/{GROUP}":
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group()}
        if path == PREFIX:
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": GROUP_VERSION, "resources": RESOURCES}  # fmt: skip
        if not path.startswith(PREFIX + "/"):
            raise HttpError(404, "NotFound", f"the server could not find {path}")
        if "watch" in query and query["watch"] != ["false"]:
            raise HttpError(405, "MethodNotAllowed", "watch is not supported by metrics.k8s.io")
        labels = _label_selector(query.get("labelSelector", [""])[0])
        fields = _field_selector(query.get("fieldSelector", [""])[0])
        parts = path[len(PREFIX) + 1 :].split("/")
        with self._lock:
            match parts:
                case ["nodes"]:
                    return _list("NodeMetrics", self._nodes.values(), labels, fields)
                case ["nodes", name]:
                    return _get("NodeMetrics", "nodes", name, self._nodes.get(name))
                case ["pods"]:
                    return _list("PodMetrics", self._pods.values(), labels, fields)
                case ["namespaces", namespace, "pods"]:
                    items = [obj for (ns, _), obj in self._pods.items() if ns == namespace]
                    return _list("PodMetrics", items, labels, fields)
                case ["namespaces", namespace, "pods", name]:
                    obj = self._pods.get((namespace, name))
                    return _get("PodMetrics", "pods", f"{namespace}/{name}", obj)
        raise HttpError(404, "NotFound", f"the server could not find {path}")

    @staticmethod
    def _group() -> Json:
        version = {"groupVersion": GROUP_VERSION, "version": VERSION}
        return {"name": GROUP, "versions": [version], "preferredVersion": version}


def _get(kind: str, resource: str, name: str, stored: Json | None) -> Json:
    if stored is None:
        raise HttpError(404, "NotFound", f'{resource}.{GROUP} "{name}" not found')
    return _object(kind, stored)


def _list(
    kind: str,
    objects: Iterable[Json],
    labels: list[tuple[str, str, str]],
    fields: list[tuple[str, str]],
) -> Json:
    items = [
        _object(kind, obj)
        for obj in objects
        if _matches(obj["metadata"].get("labels", {}), labels)
        and all(obj["metadata"].get(key) == value for key, value in fields)
    ]
    items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    return {"kind": f"{kind}List", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}


def _object(kind: str, stored: Json) -> Json:
    obj = json.loads(json.dumps(stored))
    # metrics-server stamps every object it serves with the time of the response.
    obj["metadata"]["creationTimestamp"] = rfc3339(datetime.now(UTC))
    return {"kind": kind, "apiVersion": GROUP_VERSION, **obj}


def _label_selector(text: str) -> list[tuple[str, str, str]]:
    """Equality-based selectors (``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``) as (op, key, value)."""
    terms = []
    for raw in filter(None, (part.strip() for part in text.split(","))):
        if " in " in raw or " notin " in raw or "(" in raw:
            raise HttpError(400, "BadRequest", f"set-based selector not supported here: {raw}")
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            terms.append(("!=", key.strip(), value.strip()))
        elif "=" in raw:
            key, value = raw.replace("==", "=").split("=", 1)
            terms.append(("=", key.strip(), value.strip()))
        elif raw.startswith("!"):
            terms.append(("!", raw[1:].strip(), ""))
        else:
            terms.append(("", raw, ""))
    return terms


def _matches(labels: Mapping[str, str], terms: list[tuple[str, str, str]]) -> bool:
    for op, key, value in terms:
        ok = {
            "!=": labels.get(key) != value,
            "=": labels.get(key) == value,
            "!": key not in labels,
            "": key in labels,
        }[op]
        if not ok:
            return False
    return True


def _field_selector(text: str) -> list[tuple[str, str]]:
    pairs = []
    for raw in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = raw.replace("==", "=").partition("=")
        if not sep or key not in ("metadata.name", "metadata.namespace"):
            raise HttpError(400, "BadRequest", f"field selector not supported: {raw}")
        pairs.append((key.removeprefix("metadata."), value))
    return pairs


class _Server(ThreadingHTTPServer):
    """Accepts in the serving thread, does the TLS handshake in the connection's own thread.

    Keeps every connection and connection thread, so that stop() can cut and join them all
    (ThreadingMixIn joins only non-daemon threads, and an idle keep-alive connection would
    otherwise hold its thread until the client hangs up)."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: MetricsServer
    ) -> None:
        self.owner = owner
        self._open: set[socket.socket] = set()
        self._workers: list[threading.Thread] = []
        self._open_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        worker = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"metrics-server:{self.server_address[1]}:{client_address[1]}",
            daemon=True,
        )
        with self._open_lock:
            self._workers = [t for t in self._workers if t.is_alive()]
            self._workers.append(worker)
            self._open.add(request)
        worker.start()

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            tls = self.owner._context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # no or bad client certificate, or the peer went away
        with self._open_lock:
            self._open.discard(request)
            self._open.add(tls)
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            with self._open_lock:
                self._open.discard(tls)
            with contextlib.suppress(OSError):
                tls.close()

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Close the listener, cut every connection, join every connection thread."""
        super().server_close()
        with self._open_lock:
            connections, workers = list(self._open), list(self._workers)
        for connection in connections:
            # The plain socket's shutdown: a reader blocked in the handshake or on an idle
            # keep-alive connection sees EOF and returns, with its SSL object left intact.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(connection, socket.SHUT_RDWR)
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                raise RuntimeError(f"{worker.name} did not stop")

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection cut at stop(), or a client that went away: nothing to report


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is closed after this long
    server: _Server

    def do_GET(self) -> None:
        owner = self.server.owner
        url = urlsplit(self.path)
        user = self.headers.get("X-Remote-User")
        owner._record(
            Request("GET", url.path, user, tuple(self.headers.get_all("X-Remote-Group") or ()))
        )
        if url.path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain")
            return
        try:
            if owner._require_client_cert:
                self._authenticate(user)
            if url.path in OPENAPI:  # the aggregator merges these into the API server's documents
                body = OPENAPI[url.path]
            else:
                accept = self.headers.get("Accept", "")
                body = owner._respond(url.path, parse_qs(url.query), accept)
        except HttpError as error:
            body = status(error.code, error.reason, error.message)
            self._send(error.code, json.dumps(body).encode(), "application/json")
            return
        self._send(200, json.dumps(body).encode(), "application/json")

    def _authenticate(self, user: str | None) -> None:
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        subject = dict(pair[0] for pair in (peer or {}).get("subject", ()))
        if subject.get("commonName") not in self.server.owner._allowed_clients or not user:
            raise HttpError(401, "Unauthorized", "Unauthorized")

    def _refuse(self) -> None:
        body = status(405, "MethodNotAllowed", f"{self.command} is not supported")
        self._send(405, json.dumps(body).encode(), "application/json")

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are kept in MetricsServer.requests
