"""The benchmark's own API access: concurrent creates, timed paginated lists, the audit log and
the operator's Prometheus histograms.

Everything here talks HTTP with the project's HTTP library (httpx2, lightkube's client) and the
credentials of a kubeconfig, so what it measures is what any Python client of the same API
server pays, without kubectl's process start and table printing in the way.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import ssl
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sharekeeper.kube.transient import TRANSIENT_CODES

Json = dict[str, Any]

MAX_ATTEMPTS = 8
"""Attempts at a create the API server answers with one of ``TRANSIENT_CODES`` (the operator's
own policy of what is worth trying again)."""


@dataclass(frozen=True)
class ApiAccess:
    """Where the API server is and how to authenticate to it, read from a kubeconfig."""

    server: str
    ssl_context: ssl.SSLContext
    headers: dict[str, str]

    @classmethod
    def from_kubeconfig(cls, path: Path) -> ApiAccess:
        """The current context's server, CA and credentials: a bearer token (what
        ``controlplane.py`` writes for the admin) or a client certificate and key."""
        config = yaml.safe_load(path.read_text())
        context_name = config["current-context"]
        context = _named(config["contexts"], context_name)["context"]
        cluster = _named(config["clusters"], context["cluster"])["cluster"]
        user = _named(config["users"], context["user"])["user"]
        ssl_context = ssl.create_default_context()
        if "certificate-authority" in cluster:
            ssl_context.load_verify_locations(cafile=cluster["certificate-authority"])
        elif "certificate-authority-data" in cluster:
            pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
            ssl_context.load_verify_locations(cadata=pem)
        _load_client_certificate(ssl_context, user)
        headers = {"Authorization": f"Bearer {user['token']}"} if "token" in user else {}
        return cls(server=cluster["server"], ssl_context=ssl_context, headers=headers)

    def client(self, *, timeout: float = 120.0) -> httpx.Client:
        """A synchronous client, for lists and polls one request at a time."""
        return httpx.Client(
            base_url=self.server, verify=self.ssl_context, headers=self.headers, timeout=timeout
        )

    def async_client(self, connections: int, *, timeout: float = 120.0) -> httpx.AsyncClient:
        """An asynchronous client with up to ``connections`` HTTP/1.1 connections in use."""
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(
            base_url=self.server,
            verify=self.ssl_context,
            headers=self.headers,
            timeout=timeout,
            limits=limits,
        )


def _named(entries: list[Json], name: str) -> Json:
    return next(entry for entry in entries if entry["name"] == name)


def _load_client_certificate(context: ssl.SSLContext, user: Json) -> None:
    if "client-certificate" in user:
        context.load_cert_chain(user["client-certificate"], user["client-key"])
    elif "client-certificate-data" in user:
        # ssl loads a certificate chain from files only.
        with tempfile.TemporaryDirectory() as scratch:
            crt, key = Path(scratch) / "client.crt", Path(scratch) / "client.key"
            crt.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(crt, key)


# --- paths -------------------------------------------------------------------------------------

PLURALS = {
    "Node": "nodes",
    "Pod": "pods",
    "Namespace": "namespaces",
    "Queue": "queues",
    "SchedulerPolicy": "schedulerpolicies",
    "NodeQosEnsurancePolicy": "nodeqosensurancepolicies",
}


def collection_path(api_version: str, plural: str, namespace: str | None = None) -> str:
    """``/api/v1/nodes``, ``/api/v1/namespaces/team/pods``, ``/apis/<group>/<version>/queues``."""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


def path_of_collection_for(obj: Json) -> str:
    """Where ``obj`` is created (POSTed)."""
    namespace = obj["metadata"].get("namespace")
    return collection_path(obj["apiVersion"], PLURALS[obj["kind"]], namespace)


# --- creating many objects ---------------------------------------------------------------------


@dataclass(frozen=True)
class Creation:
    """How long it took to create ``count`` objects with ``in_flight`` requests at a time."""

    count: int
    seconds: float
    in_flight: int
    retries: int

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else math.inf

    def as_json(self) -> Json:
        return {
            "count": self.count,
            "seconds": round(self.seconds, 3),
            "per_second": round(self.per_second, 1),
            "in_flight": self.in_flight,
            "retries": self.retries,
        }


class CreateFailed(RuntimeError):
    pass


def create_all(access: ApiAccess, objects: Iterable[Json], *, in_flight: int = 32) -> Creation:
    """POST every object, ``in_flight`` requests at a time, over as many connections.

    ``objects`` is consumed lazily (a generator of 150,000 pods never sits in memory as a
    whole). Overload answers (429, 5xx) and dropped connections are retried after a pause; a
    retried create that finds the object already there (409) counts as created, since the
    first attempt may have gone through. Any other refusal raises ``CreateFailed``."""
    return asyncio.run(_create_all(access, objects, in_flight))


async def _create_all(access: ApiAccess, objects: Iterable[Json], in_flight: int) -> Creation:
    pending = iter(objects)
    created = retries = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal created, retries
        # One shared iterator: next() never yields to the event loop, so no two workers get
        # the same object.
        for obj in pending:
            retries += await _create_one(client, obj)
            created += 1

    started = time.perf_counter()
    async with access.async_client(in_flight) as client:
        await asyncio.gather(*(worker(client) for _ in range(in_flight)))
    return Creation(created, time.perf_counter() - started, in_flight, retries)


async def _create_one(client: httpx.AsyncClient, obj: Json) -> int:
    """Create ``obj``; return how many retries it took."""
    path = path_of_collection_for(obj)
    body = json.dumps(obj, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json"}
    problem = ""
    for attempt in range(MAX_ATTEMPTS):
        try:
            response = await client.post(path, content=body, headers=headers)
        except httpx.TransportError as error:
            problem = f"{type(error).__name__}: {error}"
        else:
            if response.status_code == 201:
                return attempt
            if response.status_code == 409 and attempt > 0:
                return attempt
            if response.status_code not in TRANSIENT_CODES:
                raise CreateFailed(
                    f"POST {path} {obj['metadata']['name']}: {response.status_code} "
                    f"{response.text[:500]}"
                )
            problem = f"HTTP {response.status_code}"
            await asyncio.sleep(float(response.headers.get("Retry-After", "0") or 0))
        await asyncio.sleep(min(5.0, 0.25 * 2**attempt))
    raise CreateFailed(f"POST {path} {obj['metadata']['name']}: gave up after {problem}")


# --- listing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListTiming:
    """One paginated LIST: items and pages read, bytes received, wall time."""

    path: str
    items: int
    pages: int
    bytes: int
    seconds: float

    def as_json(self) -> Json:
        return {
            "items": self.items,
            "pages": self.pages,
            "mebibytes": round(self.bytes / 2**20, 1),
            "seconds": round(self.seconds, 3),
        }


def pages(client: httpx.Client, path: str, *, limit: int = 500) -> Iterator[tuple[Json, int]]:
    """Each page of a paginated LIST (``limit`` + ``continue``), json-decoded, with its size."""
    params: dict[str, str | int] = {"limit": limit}
    while True:
        response = client.get(path, params=params)
        response.raise_for_status()
        page: Json = json.loads(response.content)
        yield page, len(response.content)
        token = page.get("metadata", {}).get("continue")
        if not token:
            return
        params = {"limit": limit, "continue": token}


def items(client: httpx.Client, path: str, *, limit: int = 500) -> Iterator[Json]:
    """Every item of a paginated LIST."""
    for page, _ in pages(client, path, limit=limit):
        yield from page.get("items") or []


def timed_list(client: httpx.Client, path: str, *, limit: int = 500) -> ListTiming:
    """Time a full paginated LIST of ``path``, decoding every page and keeping nothing: the
    floor under any controller's start, which must at least read every object once."""
    started = time.perf_counter()
    count = page_count = size = 0
    for page, page_bytes in pages(client, path, limit=limit):
        count += len(page.get("items") or [])
        page_count += 1
        size += page_bytes
    return ListTiming(path, count, page_count, size, time.perf_counter() - started)


# --- the audit log -----------------------------------------------------------------------------


@dataclass
class AuditTail:
    """One user's writes in the API server's JSON audit log, counted incrementally.

    ``operating.operator_writes`` re-reads the whole log each time; after twenty rounds of
    10,000 status writes the log holds hundreds of thousands of lines, so this reads only what
    was appended since the last call."""

    path: Path
    username: str
    count: int = 0
    by_resource: Counter[str] = field(default_factory=Counter)
    _offset: int = 0
    _partial: bytes = b""

    def writes(self) -> int:
        """How many writes ``username`` has made so far."""
        if not self.path.exists():
            return self.count
        with self.path.open("rb") as log:
            if self.path.stat().st_size < self._offset:
                raise RuntimeError(f"{self.path} was rotated: writes can no longer be counted")
            log.seek(self._offset)
            chunk = log.read()
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # an incomplete last line waits for the next call
        marker = json.dumps(self.username).encode()
        for line in lines:
            if marker not in line:
                continue
            entry = json.loads(line)
            if entry.get("user", {}).get("username") != self.username:
                continue
            self.count += 1
            ref = entry.get("objectRef", {})
            resource = "/".join(filter(None, (ref.get("resource"), ref.get("subresource"))))
            self.by_resource[f"{entry.get('verb')} {resource}"] += 1
        return self.count

    def wait_quiet(
        self,
        *,
        quiet_for: float,
        timeout: float,
        alive: Callable[[], bool] = lambda: True,
        done: Callable[[], bool] = lambda: True,
    ) -> float:
        """Wait until no write has been added for ``quiet_for`` seconds and ``done`` says the
        writer has nothing left to send; return the time waited. ``done`` tells a writer that
        finished from one that paused (the operator's collector walking its heap can stop its
        writes for seconds on a slow machine), and is asked only once the writes stopped.

        Raises TimeoutError after ``timeout`` seconds, RuntimeError when ``alive`` says no."""
        started = last_change = time.monotonic()
        seen = self.writes()
        while True:
            time.sleep(0.25)
            if not alive():
                raise RuntimeError("the operator exited")
            now, count = time.monotonic(), self.writes()
            if count != seen:
                seen, last_change = count, now
            elif now - last_change >= quiet_for:
                if done():
                    return now - started
                last_change = now  # paused, not finished: the quiet starts again
            if now - started > timeout:
                raise TimeoutError(f"writes still going after {timeout:.0f} s")


# --- Prometheus histograms ---------------------------------------------------------------------


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram as scraped: count, sum and cumulative bucket counts, summed over
    label sets if it has any."""

    count: float
    sum: float
    buckets: dict[float, float]

    def since(self, earlier: Histogram | None) -> HistogramDelta:
        """What was observed between ``earlier`` and this scrape."""
        if earlier is None:
            earlier = Histogram(0.0, 0.0, {})
        buckets = {le: n - earlier.buckets.get(le, 0.0) for le, n in self.buckets.items()}
        return HistogramDelta(self.count - earlier.count, self.sum - earlier.sum, buckets)


@dataclass(frozen=True)
class HistogramDelta:
    count: float
    sum: float
    buckets: dict[float, float]

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    @property
    def slowest_at_most(self) -> float | None:
        """The upper bound of the highest bucket that received an observation: every
        observation in the window took at most this long (``inf``: beyond the last bound)."""
        if not self.count:
            return None
        return min(le for le, n in self.buckets.items() if n >= self.count)

    def quantile(self, q: float) -> float | None:
        """As Prometheus' ``histogram_quantile``: linear within the bucket the quantile falls
        in, from the bucket below's bound (0 for the first); the highest finite bound when it
        falls beyond the last one."""
        if not self.count:
            return None
        rank, below, seen = q * self.count, 0.0, 0.0
        for bound, cumulative in sorted(self.buckets.items()):
            if cumulative >= rank and cumulative > seen:
                if math.isinf(bound):
                    return below
                return below + (bound - below) * (rank - seen) / (cumulative - seen)
            below, seen = bound, cumulative
        return below

    def as_json(self) -> Json:
        slowest = self.slowest_at_most
        return {
            "observations": int(self.count),
            "mean_seconds": None if self.mean is None else round(self.mean, 4),
            "slowest_at_most_seconds": (
                None if slowest is None else ("+Inf" if math.isinf(slowest) else slowest)
            ),
        }

    def latency_json(self) -> Json:
        """How many, their mean, p50 and p99 (interpolated in the buckets), in seconds."""
        p50, p99 = self.quantile(0.5), self.quantile(0.99)
        return {
            "observations": int(self.count),
            "mean": None if self.mean is None else round(self.mean, 4),
            "p50": None if p50 is None else round(p50, 4),
            "p99": None if p99 is None else round(p99, 4),
        }


def scrape(url: str) -> str:
    """The text exposition at ``url`` (the operator's ``/metrics``)."""
    response = httpx.get(url, timeout=10)
    response.raise_for_status()
    return response.text


def histogram(
    exposition: str, name: str, labels: Mapping[str, str] | None = None
) -> Histogram | None:
    """The histogram ``name`` from a text exposition, summed over its series that carry
    ``labels`` (every series without); None when the process does not export it."""
    wanted = (labels or {}).items()
    # Only its lines are parsed: the API server's exposition is tens of thousands of lines,
    # which Prometheus' parser reads in seconds.
    mine = "".join(
        line for line in exposition.splitlines(keepends=True)
        if line.startswith((name, f"# TYPE {name} ", f"# HELP {name} "))
    )  # fmt: skip
    for family in text_string_to_metric_families(mine):
        if family.name != name or family.type != "histogram":
            continue
        count = total = 0.0
        buckets: dict[float, float] = {}
        for sample in family.samples:
            if not wanted <= sample.labels.items():
                continue
            if sample.name == f"{name}_count":
                count += sample.value
            elif sample.name == f"{name}_sum":
                total += sample.value
            elif sample.name == f"{name}_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
        return Histogram(count, total, buckets)
    return None


# --- CPU profiles of the Go components -----------------------------------------------------------


def cpu_profile(client: httpx.Client, seconds: int, into: Path) -> None:
    """A CPU profile over the next ``seconds`` of the Go process ``client`` talks to (its
    ``/debug/pprof``), written to ``into``."""
    response = client.get("/debug/pprof/profile", params={"seconds": seconds}, timeout=seconds + 60)
    into.write_bytes(response.raise_for_status().content)


def pprof_top(profile: Path) -> str:
    """``go tool pprof -top -cum`` of ``profile`` (a Go CPU profile carries its own symbols)."""
    done = subprocess.run(
        ["go", "tool", "pprof", "-top", "-cum", str(profile)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def cumulative_share(top: str, function: str) -> float:
    """The cumulative share of samples (%) of the function whose full name ends with
    ``function``, in ``pprof_top``'s text; 0 when no sample was in it."""
    for line in top.splitlines():
        fields = line.split()
        # flat flat% sum% cum cum% name
        if len(fields) >= 6 and fields[5].endswith(function):
            return float(fields[4].rstrip("%"))
    return 0.0
