"""The composition root: every part of the running operator built and wired here, and run
under kopf.

kopf runs the process (start-up, clean-up, signals) and its server, in a process of its own
(``handlers.admission``), takes the admission webhook's requests, but it watches nothing: its
per-object workers and index barrier cost time quadratic in the number of objects (minutes at
a few thousand), and a cluster of the size we are built for has 150,000 pods and 10,000 queues. Our
own watches (``kube.watching``) feed every kind (``kube.kinds``), our own resources included,
into ``cluster.store``; the loops read it and write through the one writer (``kube.writing``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable, Mapping
from typing import Any

import kopf

from sharekeeper import collector, telemetry
from sharekeeper.api.mirroring import QueueOrigin
from sharekeeper.cluster.store import ClusterStore, Listeners
from sharekeeper.handlers import admission
from sharekeeper.handlers.probes import Probes
from sharekeeper.kube import kinds
from sharekeeper.kube.clients import Clients, connect
from sharekeeper.kube.events import EventRecorder
from sharekeeper.kube.leadership import Leadership
from sharekeeper.kube.transient import Retrying
from sharekeeper.kube.usage import MetricsApiUsage
from sharekeeper.kube.watching import ListWatch
from sharekeeper.kube.writing import KubeWriter
from sharekeeper.loops.lane import Lane
from sharekeeper.loops.mirroring import Mirroring
from sharekeeper.loops.qos import QosLoop
from sharekeeper.loops.recompute import Recompute
from sharekeeper.settings import LOG_FORMAT, Settings

logger = logging.getLogger(__name__)

COLLECTOR_OFF_AT_MOST_SECONDS = 300.0
"""The initial lists are read without the cyclic garbage collector for this long at most
(``_synced``); at 150,000 pods they take under a minute."""


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ours: Settings = memo["settings"]
    # Our log lines are for operators of the operator; only warnings belong in Events.
    settings.posting.level = logging.WARNING
    # kopf watches nothing here; skipping its CRD scan spares a cluster-wide permission.
    settings.scanning.disabled = True
    clients = memo["clients"] = connect()
    client, http = clients.typed, clients.http
    webhook, verbose = ours.webhook, ours.verbose
    served = None if webhook is None else await admission.serve(webhook, client, verbose=verbose)
    writer = KubeWriter(
        clients.api, concurrency=ours.write_concurrency, retrying=Retrying(ours.writes),
        events=EventRecorder(clients.api, ours.events),
    )  # fmt: skip
    # The loops are built after the store they read, and the store tells them of changes:
    # these call them once they exist (the watches, which feed the store, start after both).
    recompute: Recompute
    qos_loop: QosLoop
    mirroring: Mirroring
    volcano: ListWatch

    def changed() -> None:
        recompute.wake()

    def status_seen(kind: str, name: str, status: Mapping[str, Any]) -> None:
        recompute.status_seen(kind, name, status)

    def forget(kind: str, name: str) -> None:
        recompute.forget(kind, name)
        qos_loop.forget(kind, name)

    def origin_seen(name: str, old: QueueOrigin | None, new: QueueOrigin | None) -> None:
        mirroring.origin_seen(name, old, new)

    def mirror() -> None:
        mirroring.wake()

    def policies_changed() -> None:
        volcano.reconsider()
        mirroring.wake()

    def unreadable(kind: str, key: Hashable, problem: str) -> None:
        namespace, name = key if isinstance(key, tuple) else ("", key)
        target = kinds.reference(kind, str(name), namespace=str(namespace))
        _spawn(memo, writer.event(target, "Unreadable", problem, warning=True))

    store = ClusterStore(
        Listeners(
            change=changed,
            status=status_seen,
            gone=forget,
            origin=origin_seen,
            mirror=mirror,
            policies=policies_changed,
            problem=unreadable,
        )
    )
    # The share round and the QoS check compute in threads of one process: one at a time, since
    # under the GIL two at once each take as long as both (benchmarks/README.md).
    lane = Lane()
    recompute = memo["recompute"] = Recompute(
        writer, store, ours.rounds, lane=lane, refreezer=collector.Refreezer()
    )
    qos_loop = memo["qos"] = QosLoop(writer, MetricsApiUsage(http), store, lane=lane)
    stores = store.by_kind
    streams = clients.api.lines
    watches = {
        r.name: ListWatch(http, r, stores[r.kind], ours.watches, streams=streams)
        for r in kinds.STORED
    }
    policies_listed = watches[kinds.POLICIES.name].synced

    def volcano_wanted() -> bool | None:
        """Whether a policy has queueSource Volcano; not known before the policies are."""
        return store.mirroring_wanted() if policies_listed.is_set() else None

    volcano = watches[kinds.VOLCANO_QUEUES.name] = ListWatch(
        http, kinds.VOLCANO_QUEUES, store.volcano_queues, ours.watches, streams=streams,
        wanted=volcano_wanted,
    )  # fmt: skip
    mirroring = memo["mirroring"] = Mirroring(writer, store, volcano, settings=ours.rounds)
    loops: list[Recompute | QosLoop | Mirroring] = [recompute, qos_loop, mirroring]
    tasks = [
        *(asyncio.create_task(w.run(), name=f"watch {name}") for name, w in watches.items()),
        asyncio.create_task(
            _synced(watches.values(), loops, policies_listed, volcano, recompute.first_round),
            name="sync",
        ),
    ]
    leadership = Leadership(client, ours.lease) if ours.lease is not None else None
    if leadership is None:
        telemetry.LEADER.set(1)
        tasks += [
            asyncio.create_task(recompute.run(), name="recompute"),
            asyncio.create_task(qos_loop.run(), name="qos"),
            asyncio.create_task(mirroring.run(), name="mirroring"),
        ]
    else:

        async def lead() -> None:
            await asyncio.gather(recompute.run(), qos_loop.run(), mirroring.run())

        tasks.append(asyncio.create_task(leadership.run(lead), name="leadership"))
    memo["tasks"] = tasks = tasks + ([] if served is None else [served.task])
    probes = memo["probes"] = Probes(
        [t for t in tasks if t.get_name() != "sync"],
        watches,
        lambda: {
            "recomputeRounds": recompute.rounds,
            "pendingWrites": recompute.pending_writes,
            "qosChecks": qos_loop.checks,
            "mirrorRounds": mirroring.rounds,
        },
        [recompute.health, qos_loop.health, mirroring.health],
        (lambda: leadership.leading) if leadership is not None else (lambda: True),
        listening={} if served is None else {"webhook": served.listening},
    )
    if ours.probe_address is not None:
        await probes.start(*ours.probe_address)


def _spawn(memo: kopf.Memo, work: Any) -> None:
    """A task held until done: the event loop keeps only weak references to tasks."""
    posting: set[asyncio.Task[None]] = memo.setdefault("event_tasks", set())
    task = asyncio.create_task(work)
    posting.add(task)
    task.add_done_callback(posting.discard)


async def _synced(
    watches: Any,
    loops: list[Recompute | QosLoop | Mirroring],
    policies_listed: asyncio.Event,
    volcano: ListWatch,
    first_round: asyncio.Event,
) -> None:
    """Let the loops start once every initial list is in the store (the Volcano Queues' too,
    when the policies want them).

    The lists fill the store with millions of long-lived objects without cycles, which the
    cyclic garbage collector would walk again and again as they arrive (it doubles the time to
    read 150,000 pods), and a full collection after would walk them all (a third of a second at
    30,000 pods). So it is off while they are read, for ``COLLECTOR_OFF_AT_MOST_SECONDS`` at
    most (a list that keeps failing must not leave it off), and they are frozen out of its way
    once in; so is the per-queue state the first share round makes (``collector``)."""
    collecting = collector.hold_back()
    back_on = asyncio.get_running_loop().call_later(
        COLLECTOR_OFF_AT_MOST_SECONDS, collector.let_go, collecting
    )
    try:
        await policies_listed.wait()
        volcano.reconsider()  # the policies are known now: whether Volcano Queues are wanted too
        await asyncio.gather(*(watch.synced.wait() for watch in watches))
        logger.info("every initial list is in the store")
        collector.settle()
    finally:
        back_on.cancel()
        collector.let_go(collecting)
    for loop in loops:
        loop.store_synced.set()
    await first_round.wait()
    collector.settle()
    logger.info("the first round's long-lived state is frozen")


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    tasks: list[asyncio.Task[None]] = memo.get("tasks", [])
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    probes: Probes | None = memo.get("probes")
    if probes is not None:
        await probes.stop()
    clients: Clients | None = memo.get("clients")
    if clients is not None:
        await clients.close()


def run(settings: Settings) -> int:
    """The operator until it is stopped."""
    logging.basicConfig(
        level=logging.DEBUG if settings.verbose else logging.INFO,
        format=LOG_FORMAT,
    )
    if not settings.verbose:
        # One line per HTTP request is noise at thousands of writes (or pod creations) a
        # minute: our client's requests, the webhook's access log.
        for noisy in ("httpx2", "aiohttp.access"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    collector.tune()
    if settings.metrics_address is not None:
        host, port = settings.metrics_address
        telemetry.serve(host, port)
    # kopf's own peering is not used: it pauses operators, it does not elect one (and kopf
    # watches nothing here); the Lease is how replicas take turns.
    kopf.run(clusterwide=True, standalone=True, memo=kopf.Memo(settings=settings))
    return 0
