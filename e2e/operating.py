"""The operator under test: `sharekeeper run` as a separate process, acting as its
ServiceAccount from manifests/ (so RBAC gaps fail the tests), plus the means to watch it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

import controlplane

T = TypeVar("T")
SERVICE_ACCOUNT = "system:serviceaccount:sharekeeper:sharekeeper"


def eventually(check: Callable[[], T], *, timeout: float = 20.0, interval: float = 0.2) -> T:
    """Retry ``check`` until it returns something truthy without raising AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
            raise AssertionError(f"{check} returned {value!r}")
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)


@dataclass
class Operator:
    process: subprocess.Popen[bytes]
    liveness_port: int
    log: Path
    metrics_port: int = 0

    def health(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.liveness_port}/healthz"
        # The Deployment's liveness probe allows 5 s too.
        with urllib.request.urlopen(url, timeout=5) as response:
            health: dict[str, Any] = json.loads(response.read())
        return health

    def ready(self) -> tuple[int, dict[str, Any]]:
        """``GET /readyz`` on the liveness port: the HTTP status (200 ready, 503 not yet) and the
        JSON body. Raises ``URLError`` while nothing listens there."""
        url = f"http://127.0.0.1:{self.liveness_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, _json_object(response.read())
        except urllib.error.HTTPError as error:
            return error.code, _json_object(error.read())

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples called ``name`` (e.g. ``sharekeeper_watch_lists_total``) whose
        labels include ``labels``, from the operator's ``/metrics``: 0 when there are none, as a
        counter that has not counted yet is not exported."""
        assert self.metrics_port, "this operator was started without a metrics port"
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        # Only its lines are parsed: at 1,000 queues the whole answer is 8,000 lines, which
        # Prometheus' parser reads in a quarter of a second (a benchmark samples every 10 s).
        lines = "".join(
            line for line in text.splitlines(keepends=True)
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ")
        )  # fmt: skip
        return sum(
            sample.value
            for family in text_string_to_metric_families(lines)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def wait_rounds(self, rounds: int, timeout: float = 60) -> None:
        """Until ``rounds`` recompute rounds have completed (0: until the probe answers).

        An empty cluster gives the loop nothing to do, so it waits for the first object."""

        def done() -> bool:
            assert self.process.poll() is None, f"operator exited:\n{self.tail()}"
            try:
                return int(self.health().get("recomputeRounds", 0)) >= rounds
            except (urllib.error.URLError, OSError) as error:
                raise AssertionError(str(error)) from error

        eventually(done, timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_operator(
    kubeconfig: Path,
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
) -> Operator:
    """``sharekeeper run`` as the kubeconfig's user; ``env`` adds to (or overrides) ours, ``args``
    to the command line."""
    liveness, metrics = controlplane.free_port(), controlplane.free_port()
    environment = {**os.environ, "KUBECONFIG": str(kubeconfig), **(env or {})}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "sharekeeper.cli", "run",
             f"--health-probe-bind-address=127.0.0.1:{liveness}",
             f"--metrics-bind-address=127.0.0.1:{metrics}", *args],
            env=environment, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return Operator(process, liveness, log, metrics)


def _json_object(body: bytes) -> dict[str, Any]:
    """A response body that should be a JSON object; anything else is kept as ``{"body": ...}``
    so that an assertion on it prints what the server said."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return {"body": body.decode(errors="replace")}
    return parsed if isinstance(parsed, dict) else {"body": parsed}


def operator_writes(audit_log: Path) -> list[dict[str, Any]]:
    """The operator's writes so far, from the API server's audit log. A last line without its
    newline is one the API server is still writing: it is read at the next call."""
    if not audit_log.exists():
        return []
    text = audit_log.read_text()
    complete = text[: text.rfind("\n") + 1]
    entries = (json.loads(line) for line in complete.splitlines() if line.strip())
    return [entry for entry in entries if entry["user"]["username"] == SERVICE_ACCOUNT]


def describe_writes(writes: list[dict[str, Any]]) -> list[str]:
    def one(entry: dict[str, Any]) -> str:
        ref = entry.get("objectRef", {})
        target = "/".join(
            filter(None, (ref.get("resource"), ref.get("name"), ref.get("subresource")))
        )
        return f"{entry['verb']} {target}"

    return [one(entry) for entry in writes]
