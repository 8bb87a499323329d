"""Leader election against a fake Lease API that keeps resourceVersions, as the API server does:
who leads, when another takes over, and that a leader that cannot renew stops acting in time."""

from __future__ import annotations

import asyncio
import copy
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
    """One replica's way to the shared Lease API; ``cut`` it to kill the replica silently."""

    def __init__(self, api: FakeLeases) -> None:
        self.api = api
        self.cut = False

    def __getattr__(self, verb: str) -> Any:
        if self.cut:
            raise httpx.ConnectError("this replica is gone")
        return getattr(self.api, verb)


FAST = {"lease_seconds": 0.6, "renew_deadline_seconds": 0.4, "retry_seconds": 0.05}


def candidate(api: FakeLeases | Connection, identity: str) -> Leadership:
    settings = LeaseSettings(namespace="sharekeeper", identity=identity, **FAST)
    return Leadership(api, settings)  # type: ignore[arg-type]


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
    first, second = candidate(to_a, "a"), candidate(api, "b")
    acting_a, acting_b = Acting(), Acting()

    async def scenario() -> float:
        a = asyncio.create_task(first.run(acting_a))
        await asyncio.sleep(0.2)
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
        loop = asyncio.get_running_loop()
        died = loop.time()
        while not acting_b.running:
            await asyncio.sleep(0.01)
        took = loop.time() - died
        assert second.leading
        assert api.holder == "b"
        b.cancel()
        await asyncio.gather(a, b, return_exceptions=True)
        return took

    took = asyncio.run(scenario())
    # b waits out the lease it saw renewed last (0.6 s), never much more.
    assert 0.3 < took < 1.5


def test_a_clean_shutdown_hands_the_lease_over_at_once() -> None:
    api = FakeLeases()
    first, second = candidate(api, "a"), candidate(api, "b")

    async def scenario() -> float:
        a = asyncio.create_task(first.run(Acting()))
        await asyncio.sleep(0.2)
        b = asyncio.create_task(second.run(Acting()))
        await asyncio.sleep(0.2)
        loop = asyncio.get_running_loop()
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        assert api.holder is None  # released
        stopped = loop.time()
        while not second.leading:
            await asyncio.sleep(0.01)
        took = loop.time() - stopped
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
        return took

    assert asyncio.run(scenario()) < 0.3  # the next try, not the lease duration


def test_a_leader_that_cannot_renew_stops_acting_before_another_may_take_over() -> None:
    api = FakeLeases()
    leader = candidate(api, "a")
    acting = Acting()

    async def scenario() -> None:
        task = asyncio.create_task(leader.run(acting))
        await asyncio.sleep(0.2)
        assert acting.running
        api.down = True
        loop = asyncio.get_running_loop()
        cut = loop.time()
        while acting.running:
            await asyncio.sleep(0.01)
        stopped_after = loop.time() - cut
        # Within the renew deadline (+ one retry), before the lease duration runs out.
        assert stopped_after < FAST["lease_seconds"]
        assert not leader.leading
        api.down = False
        while not acting.running:
            await asyncio.sleep(0.01)
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
        await asyncio.sleep(0.15)
        assert not acting.running
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def test_settings_must_leave_the_leader_time_to_stop() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseSettings(namespace="n", identity="i", lease_seconds=10, renew_deadline_seconds=10)
