"""The webhook: what it answers to a review, where, that it reads reviews of pods bigger than
aiohttp's default body limit (1 MiB, which answered 413 and, with ``failurePolicy: Ignore``,
let such pods through ungated), and the process of its own that answers them."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import kopf
import pytest

from sharekeeper.handlers.admission import _serving
from sharekeeper.handlers.reviewing import REVIEW_LIMIT, WebhookServer, review
from sharekeeper.kube.webhook_tls import new_serving_cert, write_files
from sharekeeper.model.pods import ADMISSION_GATE, QUEUE_LABEL


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def post_review(server: kopf.WebhookServer, body: bytes) -> tuple[int, Any]:
    """POST ``body`` to a served handler; the HTTP status and what the handler was given."""
    seen: list[Any] = []

    async def handle(request: Any, **_: Any) -> dict[str, Any]:
        seen.append(request)
        return {"response": {"allowed": True}}

    async for config in server(handle):
        async with (
            aiohttp.ClientSession() as session,
            session.post(config["url"].rstrip("/") + "/gate", data=io.BytesIO(body)) as response,
        ):
            return response.status, seen[0] if seen else None
    raise AssertionError("the server yielded no configuration")


def big_review(size: int) -> bytes:
    """An AdmissionReview of about ``size`` bytes: a pod with one big environment variable."""
    pod = {"metadata": {"name": "big"}, "spec": {"containers": [{"name": "main", "env": [
        {"name": "PAD", "value": "x" * size}]}]}}  # fmt: skip
    return json.dumps({"request": {"uid": "1", "object": pod}}).encode()


@pytest.mark.parametrize(
    ("server_class", "status"),
    [(kopf.WebhookServer, 413), (WebhookServer, 200)],
    ids=["kopf-default", "ours"],
)
def test_a_review_of_a_pod_over_one_mib_is_read(
    server_class: type[kopf.WebhookServer], status: int
) -> None:
    server = server_class(addr="127.0.0.1", port=free_port(), host="127.0.0.1", insecure=True)
    got, seen = asyncio.run(post_review(server, big_review(3 * 1024 * 1024 - 4096)))
    assert got == status
    if status == 200:
        assert seen["request"]["object"]["metadata"]["name"] == "big"


def test_a_review_above_the_limit_is_still_refused() -> None:
    server = WebhookServer(addr="127.0.0.1", port=free_port(), host="127.0.0.1", insecure=True)
    got, seen = asyncio.run(post_review(server, big_review(REVIEW_LIMIT)))
    assert (got, seen) == (413, None)


def new_pod(**labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "team", "labels": labels},
        "spec": {"schedulingGates": [{"name": "example.com/other"}], "containers": []},
    }


def answer(request: Any) -> dict[str, Any]:
    """The review's response, its JSON patch decoded (None: no patch)."""
    response: dict[str, Any] = asyncio.run(review(request))["response"]
    if "patch" in response:
        assert response.pop("patchType") == "JSONPatch"
        response["patch"] = json.loads(base64.b64decode(response["patch"]))
    return response


def test_a_new_pod_that_names_a_queue_gets_the_gate_after_its_own() -> None:
    request = {"uid": "u-1", "operation": "CREATE", "object": new_pod(**{QUEUE_LABEL: "q"})}
    assert answer({"request": request}) == {
        "uid": "u-1",
        "allowed": True,
        "patch": [{"op": "add", "path": "/spec/schedulingGates",
                   "value": [{"name": "example.com/other"}, {"name": ADMISSION_GATE}]}],
    }  # fmt: skip


@pytest.mark.parametrize(
    "request_",
    [
        {"uid": "u-1", "operation": "CREATE", "object": new_pod()},
        {"uid": "u-1", "operation": "UPDATE", "object": new_pod(**{QUEUE_LABEL: "q"})},
        {"uid": "u-1", "operation": "CREATE", "object": ["not", "a", "pod"]},
        {"uid": "u-1", "operation": "CREATE", "object": {"metadata": "x", "spec": []}},
        {"uid": "u-1", "operation": "CREATE"},
    ],
    ids=[
        "names-no-queue",
        "not-a-creation",
        "object-not-a-mapping",
        "fields-malformed",
        "no-object",
    ],
)
def test_anything_else_is_allowed_unchanged(request_: dict[str, Any]) -> None:
    """A pod left alone that names a queue is then refused by the ValidatingAdmissionPolicy."""
    assert answer({"request": request_}) == {"uid": "u-1", "allowed": True}


@pytest.mark.parametrize("review_", [{}, {"request": "text"}, {"request": {"uid": 7}}])
def test_a_review_without_a_request_is_answered_not_failed(review_: dict[str, Any]) -> None:
    assert answer(review_)["allowed"] is True


def test_reviews_are_answered_at_the_configured_path_only() -> None:
    async def post(path: str) -> tuple[int, Any]:
        server = WebhookServer(addr="127.0.0.1", port=free_port(), host="127.0.0.1", insecure=True)
        body = {
            "request": {"uid": "u", "operation": "CREATE", "object": new_pod(**{QUEUE_LABEL: "q"})}
        }
        async for config in server(review):
            async with (
                aiohttp.ClientSession() as session,
                session.post(config["url"].rstrip("/") + path, json=body) as response,
            ):
                return response.status, await response.json() if response.ok else None
        raise AssertionError("the server yielded no configuration")

    status, answered = asyncio.run(post("/gate"))
    assert status == 200
    assert answered["response"]["patchType"] == "JSONPatch"
    assert asyncio.run(post("/other"))[0] == 404


def reviewing(directory: Path, port: int) -> list[str]:
    """The command ``admission.serve`` runs, for a webhook on 127.0.0.1:``port``."""
    return [sys.executable, "-m", "sharekeeper.handlers.reviewing", "127.0.0.1", str(port),
            str(directory), f"--parent={os.getpid()}"]  # fmt: skip


async def renewing() -> None:
    await asyncio.sleep(3600)


def test_the_webhook_process_answers_over_tls_and_ends_with_its_task(tmp_path: Path) -> None:
    """Ready (``listening``) once the process listens; cancelling the task ends the process
    and removes its certificate and key."""
    cert = new_serving_cert(["127.0.0.1"], now=datetime.now(UTC))
    files = tmp_path / "webhook"
    files.mkdir()
    write_files(cert, files)
    port = free_port()
    body = {"request": {"uid": "u", "operation": "CREATE", "object": new_pod(**{QUEUE_LABEL: "q"})}}

    async def scenario() -> tuple[Any, set[int]]:
        listening = asyncio.Event()
        others = children()  # a worker of pytest-xdist may run a control plane's processes
        serving = _serving(reviewing(files, port), listening, renewing(), files=files)
        task = asyncio.create_task(serving)
        await asyncio.wait_for(listening.wait(), 60)
        started = children() - others
        trusted = ssl.create_default_context(cadata=cert.ca_pem.decode())
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"https://127.0.0.1:{port}/gate", json=body, ssl=trusted) as response,
        ):
            answered = await response.json()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not listening.is_set()
        return answered, started

    answered, started = asyncio.run(scenario())
    assert answered["response"]["uid"] == "u"
    assert answered["response"]["patchType"] == "JSONPatch"
    assert started, "the webhook was answered by a process of its own"
    assert not any(Path(f"/proc/{child}").exists() for child in started)
    assert not files.exists()


def children() -> set[int]:
    """The processes this one started that have not been reaped."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def test_a_webhook_that_cannot_listen_ends_its_task_with_the_error(tmp_path: Path) -> None:
    """The task's end is what fails the liveness probe (``Probes``), as a stopped watch does."""
    write_files(new_serving_cert(["127.0.0.1"], now=datetime.now(UTC)), tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listening = asyncio.Event()
        with pytest.raises(ExceptionGroup) as stopped:
            asyncio.run(_serving(reviewing(tmp_path, port), listening, renewing(), files=tmp_path))
    assert stopped.group_contains(RuntimeError, match="exited")
    assert not listening.is_set()


def test_the_webhook_process_ends_when_the_operator_is_killed(tmp_path: Path) -> None:
    """SIGKILL gives the operator no chance to stop its child: the child ends by itself."""
    write_files(new_serving_cert(["127.0.0.1"], now=datetime.now(UTC)), tmp_path)
    command = reviewing(tmp_path, free_port())[3:]
    with subprocess.Popen(
        [sys.executable, "-c", "import os, subprocess, sys, time\n"
         f"child = subprocess.Popen([sys.executable, '-m', 'sharekeeper.handlers.reviewing',"
         f" *{command[:-1]!r}, f'--parent={{os.getpid()}}'], stdout=subprocess.PIPE)\n"
         "child.stdout.readline()\nprint(child.pid, flush=True)\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    ) as operator:  # fmt: skip
        assert operator.stdout is not None
        child = int(operator.stdout.readline())
        operator.kill()
        operator.wait()
    deadline = time.monotonic() + 30
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Alive and not a zombie (the child is reparented, and reaped by whoever adopts it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_webhook_process_whose_parent_is_not_the_operator_does_not_start(tmp_path: Path) -> None:
    command = [*reviewing(tmp_path, free_port())[:-1], f"--parent={os.getpid() + 1}"]
    assert subprocess.run(command, check=False, capture_output=True, timeout=60).returncode == 1
