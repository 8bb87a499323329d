"""When a loop counts as stale: what fails ``/healthz``."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request

from sharekeeper.handlers.probes import Probes
from sharekeeper.loops.health import STALE_ROUNDS, LoopHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_loop_that_keeps_failing_becomes_stale_after_its_rounds_and_recovers() -> None:
    clock = Clock()
    health = LoopHealth("qos", lambda: 10.0, clock)
    health.started()
    health.failed(ValueError("bad sample"))
    clock.now += STALE_ROUNDS * 10.0 - 1
    assert health.stale() is None  # failing, but not for long enough
    clock.now += 2
    reason = health.stale()
    assert reason is not None
    assert reason.startswith("qos: no round succeeded for 61s")
    assert "ValueError: bad sample" in reason
    health.started()
    health.succeeded()
    assert health.stale() is None


def test_a_round_that_never_ends_is_stale() -> None:
    clock = Clock()
    health = LoopHealth("recompute", lambda: 5.0, clock)
    health.started()
    clock.now += STALE_ROUNDS * 5.0 + 1
    assert health.stale() == "recompute: one round has run for 31s"


def test_an_idle_loop_is_not_stale() -> None:
    """The recompute loop runs only when something changed: a quiet hour is health."""
    clock = Clock()
    health = LoopHealth("recompute", lambda: 5.0, clock)
    clock.now += 3600
    assert health.stale() is None


def test_healthz_fails_while_a_loop_is_stale_and_passes_again_after_a_success() -> None:
    """Found: every share round failed and ``/healthz`` stayed 200."""
    clock = Clock()
    loop = LoopHealth("recompute", lambda: 5.0, clock)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def get() -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    async def scenario() -> list[tuple[int, dict[str, object]]]:
        probes = Probes([], {}, lambda: {"recomputeRounds": 3}, [loop])
        await probes.start("127.0.0.1", port)
        answers = [await asyncio.to_thread(get)]
        loop.failed(OverflowError("int too large"))
        clock.now += STALE_ROUNDS * 5.0 + 1
        answers.append(await asyncio.to_thread(get))
        loop.succeeded()
        answers.append(await asyncio.to_thread(get))
        await probes.stop()
        return answers

    healthy, stale, recovered = asyncio.run(scenario())
    assert healthy == (200, {"recomputeRounds": 3})
    assert stale[0] == 500
    assert "OverflowError: int too large" in str(stale[1]["stale"])
    assert recovered[0] == 200


def test_readyz_waits_for_the_webhook_to_listen() -> None:
    """The Service sends reviews to ready replicas only: one whose webhook process is not
    listening yet (or any more) is not ready, though every list (here none) is in."""
    listening = asyncio.Event()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def get() -> tuple[int, object]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
                return answer.status, json.loads(answer.read())["listening"]
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())["listening"]

    async def scenario() -> list[tuple[int, object]]:
        probes = Probes([], {}, dict, listening={"webhook": listening})
        await probes.start("127.0.0.1", port)
        answers = [await asyncio.to_thread(get)]
        listening.set()
        answers.append(await asyncio.to_thread(get))
        listening.clear()
        answers.append(await asyncio.to_thread(get))
        await probes.stop()
        return answers

    assert asyncio.run(scenario()) == [
        (503, {"webhook": False}),
        (200, {"webhook": True}),
        (503, {"webhook": False}),
    ]
