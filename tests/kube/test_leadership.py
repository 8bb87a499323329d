"""Leader election against a fake Lease API that keeps resourceVersions, as the API server does:
who leads, when another takes over, and that a leader that cannot renew stops acting in time."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import pytest
from lightkube import ApiError
from lightkube.resources.coordination_v1 import Lease

from sharekeeper.kube.leadership import Leadership, LeaseSettings


def api_error(code: int) -> ApiError:
    request = httpx.Request("PUT", "https://127.0.0.1/apis/coordination.k8s.io/v1/leases")
    body = {"kind": "Status", "status": "Failure", "code": code, "message": f"HTTP {code}"}
    return ApiError(request=request, response=httpx.Response(code, json=body, request=request))


class FakeLeases:
    """One Lease; updates must carry the resourceVersion last read (else 409)."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.version = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise httpx.ConnectError("the API server is down")

    async def get(self, kind: Any, name: str, *, namespace: str) -> Lease:
        self._check()
        if self.lease is None:
            raise api_error(404)
        return copy.deepcopy(self.lease)

    async def create(self, lease: Lease) -> Lease:
        self._check()
        if self.lease is not None:
            raise api_error(409)
        return self._store(lease)

    async def replace(self, lease: Lease) -> Lease:
        self._check()
        assert lease.metadata is not None
        if lease.metadata.resourceVersion != str(self.version):
            raise api_error(409)
        return self._store(lease)

    def _store(self, lease: Lease) -> Lease:
        self.version += 1
        stored = copy.deepcopy(lease)
        assert stored.metadata is not None
        stored.metadata.resourceVersion = str(self.version)
        self.lease = stored
        return copy.deepcopy(stored)

    @property
    def holder(self) -> str | None:
        return self.lease.spec.holderIdentity if self.lease and self.lease.spec else None


class Connection:
    """One replica's way to the shared Lease API; ``cut`` it to kill the replica silently.
    ``reads`` counts the Lease reads it made: one per try."""

    def __init__(self, api: FakeLeases) -> None:
        self.api = api
        self.cut = False
        self.reads = 0

    def __getattr__(self, verb: str) -> Any:
        if self.cut:
            raise httpx.ConnectError("this replica is gone")
        if verb == "get":
            self.reads += 1
        return getattr(self.api, verb)


FAST = {"lease_seconds": 0.6, "renew_deadline_seconds": 0.4, "retry_seconds": 0.05}


class ManualClock:
    """A candidate's clock that moves only when the test moves it, so what a test asserts about
    the lease's timing does not depend on how fast this machine runs the event loop."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def candidate(
    api: FakeLeases | Connection, identity: str, clock: ManualClock | None = None
) -> Leadership:
    settings = LeaseSettings(namespace="sharekeeper", identity=identity, **FAST)
    if clock is None:
        return Leadership(api, settings)  # type: ignore[arg-type]
    return Leadership(api, settings, clock)  # type: ignore[arg-type]


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition``; the bound only stops a broken election from hanging the suite."""
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


class Acting:
    """A ``lead`` that records whether it runs."""

    def __init__(self) -> None:
        self.running = False
        self.terms = 0

    async def __call__(self) -> None:
        self.running = True
        self.terms += 1
        try:
            await asyncio.Event().wait()
        finally:
            self.running = False


def test_one_of_two_candidates_leads_and_the_other_takes_over_when_it_dies() -> None:
    api = FakeLeases()
    to_a = Connection(api)
    clock_b = ManualClock()
    first, second = candidate(to_a, "a"), candidate(api, "b", clock_b)
    acting_a, acting_b = Acting(), Acting()

    async def scenario() -> None:
        a = asyncio.create_task(first.run(acting_a))
        await until(lambda: acting_a.running)
        b = asyncio.create_task(second.run(acting_b))
        await asyncio.sleep(0.3)
        assert (first.leading, second.leading) == (True, False)
        assert (acting_a.running, acting_b.running) == (True, False)
        assert api.holder == "a"
        # a dies without a word (SIGKILL): it stops and cannot release; the Lease names it.
        to_a.cut = True
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        assert api.holder == "a"
        # b waits out the lease duration on its own clock: many tries later, not yet ...
        await asyncio.sleep(0.3)
        assert not acting_b.running
        assert api.holder == "a"
        # ... and takes over once its clock has passed it (the Lease says 1 s).
        clock_b.now += 1.1
        await until(lambda: acting_b.running)
        assert second.leading
        assert api.holder == "b"
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)

    asyncio.run(scenario())


def test_a_clean_shutdown_hands_the_lease_over_at_once() -> None:
    api = FakeLeases()
    to_b = Connection(api)
    # b's clock stands still: it could never see a's lease run out, only see it released.
    first, second = candidate(api, "a"), candidate(to_b, "b", ManualClock())

    async def scenario() -> None:
        a = asyncio.create_task(first.run(Acting()))
        await until(lambda: first.leading)
        b = asyncio.create_task(second.run(Acting()))
        await until(lambda: to_b.reads >= 2)
        assert not second.leading
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        assert api.holder is None  # released
        reads_before = to_b.reads
        await until(lambda: second.leading)
        assert api.holder == "b"
        assert to_b.reads - reads_before <= 1  # b's next try, not the lease duration
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)

    asyncio.run(scenario())


def test_a_leader_that_cannot_renew_stops_acting_before_another_may_take_over() -> None:
    api = FakeLeases()
    clock = ManualClock()
    leader = candidate(api, "a", clock)
    acting = Acting()

    async def scenario() -> None:
        task = asyncio.create_task(leader.run(acting))
        await until(lambda: acting.running)
        api.down = True
        # Renewals fail, but within the renew deadline (by its clock) the leader keeps acting.
        await asyncio.sleep(0.3)
        assert acting.running
        clock.now += FAST["renew_deadline_seconds"] + 0.01
        # Past it, the next failed renewal stops it: before the lease duration runs out for
        # anyone else (renew deadline < lease duration, which the settings enforce).
        await until(lambda: not acting.running)
        assert not leader.leading
        api.down = False
        await until(lambda: acting.running)
        assert acting.terms == 2  # leads again once the API answers
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def test_a_leader_whose_lease_was_taken_steps_down_at_the_next_renewal() -> None:
    api = FakeLeases()
    leader = candidate(api, "a")
    acting = Acting()

    async def scenario() -> None:
        task = asyncio.create_task(leader.run(acting))
        await asyncio.sleep(0.2)
        assert api.lease is not None
        assert api.lease.spec is not None
        api.lease.spec.holderIdentity = "intruder"  # e.g. someone edited the Lease
        api.version += 1
        await until(lambda: not acting.running)
        assert api.holder == "intruder"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def test_settings_must_leave_the_leader_time_to_stop() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseSettings(namespace="n", identity="i", lease_seconds=10, renew_deadline_seconds=10)
