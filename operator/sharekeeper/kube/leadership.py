"""Leader election on a ``coordination.k8s.io/v1`` Lease, as every controller-runtime operator
does it (client-go's ``leaderelection``): one replica acts, the others watch and wait.

- A candidate takes the Lease when nobody holds it, or when the holder has not renewed it for
  ``lease_seconds`` *as this candidate observed it* (its own clock, from the moment it last saw
  the record change), so clock skew between replicas does not matter.
- The leader renews every ``retry_seconds``. If it cannot renew for ``renew_deadline_seconds``
  (shorter than ``lease_seconds``), it stops acting at once, before anyone else may take the
  Lease, and becomes a candidate again. Updates carry the resourceVersion read, so two
  candidates never both win.
- On a clean shutdown the leader releases the Lease (holder cleared), so the next replica takes
  over at its next try instead of after ``lease_seconds``.

``Leadership.run(lead)`` runs ``lead()`` while leading and cancels it the moment leadership is
lost; the watches (and so the store) keep running on every replica, which is why a new leader
is ready within one round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from sharekeeper import telemetry
from sharekeeper.settings import LeaseSettings

logger = logging.getLogger(__name__)


class Leadership:
    def __init__(
        self,
        client: AsyncClient,
        settings: LeaseSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._settings = settings
        self._clock = clock
        self.leading = False
        """Whether ``lead`` runs now."""
        self._holds = False
        """Whether the Lease names us (still true while stepping down on shutdown)."""
        self._observed: tuple[str, str] | None = None
        """(holder, renewTime) of the record last read, and when it last changed (our clock)."""
        self._observed_at = 0.0

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        try:
            while True:
                await self._until_acquired()
                await self._lead_while_renewed(lead)
        finally:
            if self._holds:
                await asyncio.shield(self._release())

    async def _lead_while_renewed(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``lead()`` until the Lease is lost (or ``lead`` ends); cancelled at once then."""
        settings = self._settings
        self._holds = True
        self._set_leading(True)
        renewed = self._clock()
        acting = asyncio.create_task(lead(), name="leading")
        try:
            while True:
                await asyncio.wait({acting}, timeout=settings.retry_seconds)
                if acting.done():
                    acting.result()  # a loop that crashed takes the process down, as before
                    return
                held = await self._try_renew()
                if held:
                    renewed = self._clock()
                    continue
                if held is None or self._clock() - renewed > settings.renew_deadline_seconds:
                    logger.warning(
                        "lost the lease %s/%s (%s): stopping",
                        settings.namespace, settings.name,
                        "another replica holds it" if held is None
                        else f"not renewed for {self._clock() - renewed:.0f}s",
                    )  # fmt: skip
                    self._holds = False
                    return
        finally:
            self._set_leading(False)
            acting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acting

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            logger.info(
                "%s leadership of %s/%s",
                "acquired" if leading else "gave up",
                self._settings.namespace,
                self._settings.name,
            )
            if leading:
                telemetry.LEADERSHIP_TRANSITIONS.inc()
        self.leading = leading
        telemetry.LEADER.set(1 if leading else 0)

    async def _until_acquired(self) -> None:
        while not await self._try_acquire():
            await asyncio.sleep(self._settings.retry_seconds)

    async def _try_acquire(self) -> bool:
        return await self._attempt(acquiring=True) is True

    async def _try_renew(self) -> bool | None:
        """True: renewed; False: not this time (try again); None: another replica holds it."""
        return await self._attempt(acquiring=False)

    async def _attempt(self, *, acquiring: bool) -> bool | None:
        """One read-modify-write of the Lease: True if we hold it afterwards, None if another
        replica holds it, False if we could not tell (the API server unreachable, a conflict
        with another candidate: try again)."""
        settings = self._settings
        try:
            try:
                lease = await self._client.get(Lease, settings.name, namespace=settings.namespace)
            except ApiError as error:
                if error.status.code != 404:
                    raise
                # No Lease (first start, or someone deleted it): whoever creates it holds it.
                try:
                    await self._client.create(self._record(None))
                except ApiError as lost:
                    if lost.status.code == 409:
                        return None
                    raise
                return True
            spec = lease.spec or LeaseSpec()
            self._observe(spec)
            holder = spec.holderIdentity or ""
            if holder != settings.identity:
                if not acquiring:
                    return None
                duration = spec.leaseDurationSeconds or settings.lease_seconds
                if holder and self._clock() - self._observed_at <= duration:
                    return None
            await self._client.replace(self._record(lease))
            return True
        except ApiError as error:
            if error.status.code != 409:  # 409: another candidate got there first
                logger.warning("lease %s/%s: %s", settings.namespace, settings.name, error)
            return False
        except Exception as error:  # the API server unreachable, a timeout
            logger.warning("lease %s/%s: %r", settings.namespace, settings.name, error)
            return False

    def _observe(self, spec: LeaseSpec) -> None:
        seen = (spec.holderIdentity or "", str(spec.renewTime))
        if seen != self._observed:
            self._observed = seen
            self._observed_at = self._clock()

    def _record(self, current: Lease | None) -> Lease:
        """The Lease held by us, renewed now (a transition counted when we take it over)."""
        settings = self._settings
        now = datetime.now(UTC)
        spec = current.spec if current is not None and current.spec else LeaseSpec()
        taking_over = spec.holderIdentity != settings.identity
        metadata = (
            current.metadata
            if current is not None and current.metadata
            else ObjectMeta(name=settings.name, namespace=settings.namespace)
        )
        return Lease(
            metadata=metadata,
            spec=LeaseSpec(
                holderIdentity=settings.identity,
                leaseDurationSeconds=round(settings.lease_seconds),
                acquireTime=now if taking_over else spec.acquireTime,
                renewTime=now,
                leaseTransitions=(spec.leaseTransitions or 0) + (1 if taking_over else 0),
            ),
        )

    async def _release(self) -> None:
        """Hand the Lease back on shutdown, so the next replica need not wait it out."""
        settings = self._settings
        self._holds = False
        try:
            lease = await self._client.get(Lease, settings.name, namespace=settings.namespace)
            spec: Any = lease.spec
            if spec is None or spec.holderIdentity != settings.identity:
                return
            spec.holderIdentity = None
            spec.leaseDurationSeconds = 1
            await self._client.replace(lease)
            logger.info("released the lease %s/%s", settings.namespace, settings.name)
        except Exception as error:
            logger.warning("could not release the lease: %r", error)
