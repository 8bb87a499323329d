"""Operator runtime: the watches that feed the cluster store, the loops' lifetime, the probes,
and the process entry point.

kopf runs the process (start-up, clean-up, signals) but watches nothing: its per-object workers
and index barrier cost time quadratic in the number of objects (minutes at a few thousand),
and a cluster of the size we are built for has 150,000 pods and 10,000 queues. Our own watches
(``cluster.watching``) feed every kind, our own resources included, into ``cluster.store``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import httpx2 as httpx  # lightkube's HTTP client
import kopf
import prometheus_client
from lightkube import AsyncClient

from sharekeeper import telemetry
from sharekeeper.cluster.leadership import Leadership, LeaseSettings
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.cluster.usage import MetricsApiUsage
from sharekeeper.cluster.watching import ListWatch, Resource, Sink, WatchSettings, http_client
from sharekeeper.handlers import admission
from sharekeeper.handlers.probes import Probes
from sharekeeper.loops.mirroring import Mirroring
from sharekeeper.loops.qos import QosLoop
from sharekeeper.loops.recompute import Recompute
from sharekeeper.publish.actions import KubeActuator
from sharekeeper.publish.events import EventRecorder, recorder_for
from sharekeeper.publish.kubernetes import KubeWriter
from sharekeeper.publish.mirror_writes import MirrorWriter

logger = logging.getLogger(__name__)

NODES = Resource("nodes", "", "v1", "nodes")
# Finished pods hold no resources: the API server leaves them out (and a pod that finishes
# arrives as a deletion).
PODS = Resource("pods", "", "v1", "pods", "status.phase!=Succeeded,status.phase!=Failed")
PODGROUPS = Resource("podgroups", "scheduling.volcano.sh", "v1beta1", "podgroups", optional=True)
NAMESPACES = Resource("namespaces", "", "v1", "namespaces")
# Only their namespace, name and UID are kept: a pod is exempt from QoS actions as a
# DaemonSet's only if the DaemonSet its controller reference names exists.
DAEMONSETS = Resource("daemonsets", "apps", "v1", "daemonsets")
# Our CRDs can be deleted and installed again under a running operator: their objects leave the
# store with them, and they are watched again once served (a missing CRD is a warning).
QUEUES = Resource(
    "queues", "scheduling.sharekeeper.io", "v1alpha1", "queues",
    optional=True, warn_when_not_served=True,
)  # fmt: skip
POLICIES = Resource(
    "schedulerpolicies", "scheduling.sharekeeper.io", "v1alpha1", "schedulerpolicies",
    optional=True, warn_when_not_served=True,
)  # fmt: skip
QOS_POLICIES = Resource(
    "nodeqosensurancepolicies", "ensurance.sharekeeper.io", "v1alpha1", "nodeqosensurancepolicies",
    optional=True, warn_when_not_served=True,
)  # fmt: skip
# Volcano's Queues, mirrored as ours while a SchedulerPolicy has queueSource Volcano, and only
# listed and watched then (the watch is wanted). The name tells them from our queues.
VOLCANO_QUEUES = Resource(
    "queues.scheduling.volcano.sh", "scheduling.volcano.sh", "v1beta1", "queues", optional=True
)

DISCOVERY_INTERVAL_ENV = "SHAREKEEPER_DISCOVERY_INTERVAL"
"""Seconds between looks for a CRD that is not served: Volcano's PodGroups, ours (default 30)."""


def _settings() -> WatchSettings:
    interval = float(os.environ.get(DISCOVERY_INTERVAL_ENV, "30"))
    return WatchSettings(discovery_interval_seconds=interval)


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Our log lines are for operators of the operator; only warnings belong in Events.
    settings.posting.level = logging.WARNING
    # kopf watches nothing here; skipping its CRD scan spares a cluster-wide permission.
    settings.scanning.disabled = True
    client = memo["client"] = AsyncClient(field_manager="sharekeeper")
    webhook: admission.WebhookSettings | None = memo.get("webhook")
    renewing = [] if webhook is None else [await admission.serve(webhook, client, settings)]
    http = memo["http"] = http_client()
    store = ClusterStore()
    writer = KubeWriter(client)
    recompute = memo["recompute"] = Recompute(writer, store, evictor=writer)
    store.on_change = recompute.wake
    store.on_status = recompute.status_seen
    qos_loop = memo["qos"] = QosLoop(KubeActuator(client), writer, MetricsApiUsage(client), store)

    def forget(kind: str, name: str) -> None:
        recompute.forget(kind, name)
        qos_loop.forget(kind, name)

    store.on_gone = forget
    events = recorder_for(client)
    report_unreadable = _unreadable_events(events, memo)
    for kind_store in (store.nodes, store.pods, store.pod_groups):
        kind_store.on_problem = report_unreadable
    watch_settings = _settings()
    sinks: dict[Resource, Sink] = {
        NODES: store.nodes,
        PODS: store.pods,
        PODGROUPS: store.pod_groups,
        NAMESPACES: store.namespaces,
        DAEMONSETS: store.daemonsets,
        QUEUES: store.queues,
        POLICIES: store.policies,
        QOS_POLICIES: store.qos_policies,
    }
    watches = {r.name: ListWatch(http, r, sink, watch_settings) for r, sink in sinks.items()}
    policies_listed = watches[POLICIES.name].synced

    def volcano_wanted() -> bool | None:
        """Whether a policy has queueSource Volcano; not known before the policies are."""
        return store.mirroring_wanted() if policies_listed.is_set() else None

    volcano = watches[VOLCANO_QUEUES.name] = ListWatch(
        http, VOLCANO_QUEUES, store.volcano_queues, watch_settings, wanted=volcano_wanted
    )

    async def warning(target: Mapping[str, str], reason: str, message: str) -> None:
        await events.post(target, reason, message, warning=True)

    mirroring = memo["mirroring"] = Mirroring(MirrorWriter(http), warning, store, volcano)

    def policies_changed() -> None:
        volcano.reconsider()
        mirroring.wake()

    store.on_policies = policies_changed
    store.on_origin = mirroring.origin_seen
    store.on_mirror = mirroring.wake
    loops = (recompute, qos_loop, mirroring)
    tasks = [
        *(asyncio.create_task(w.run(), name=f"watch {name}") for name, w in watches.items()),
        asyncio.create_task(
            _synced(watches.values(), loops, policies_listed, volcano), name="sync"
        ),
    ]
    lease: LeaseSettings | None = memo.get("lease")
    leadership = Leadership(client, lease) if lease is not None else None
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
    memo["tasks"] = tasks + renewing
    probes = memo["probes"] = Probes(
        [t for t in tasks if t.get_name() != "sync"],
        watches,
        lambda: {
            "recomputeRounds": recompute.rounds,
            "qosChecks": qos_loop.checks,
            "mirrorRounds": mirroring.rounds,
        },
        [recompute.health, qos_loop.health, mirroring.health],
        (lambda: leadership.leading) if leadership is not None else (lambda: True),
    )
    address: tuple[str, int] | None = memo.get("probe_address")
    if address is not None:
        await probes.start(*address)


API_VERSIONS = {"Node": "v1", "Pod": "v1", "PodGroup": "scheduling.volcano.sh/v1beta1"}


def _unreadable_events(
    events: EventRecorder, memo: kopf.Memo
) -> Callable[[str, Hashable, str], None]:
    """A Warning Event on an object the store cannot read, once per distinct problem."""
    posting: set[asyncio.Task[None]] = memo.setdefault("event_tasks", set())

    def report(kind: str, key: Hashable, problem: str) -> None:
        namespace, name = key if isinstance(key, tuple) else ("", key)
        target = {
            "apiVersion": API_VERSIONS[kind],
            "kind": kind,
            "name": str(name),
            "namespace": str(namespace),
        }
        task = asyncio.create_task(events.post(target, "Unreadable", problem, warning=True))
        posting.add(task)  # held until done: the loop keeps only weak references to tasks
        task.add_done_callback(posting.discard)

    return report


async def _synced(
    watches: Any,
    loops: tuple[Recompute, QosLoop, Mirroring],
    policies_listed: asyncio.Event,
    volcano: ListWatch,
) -> None:
    """Let the loops start once every initial list is in the store (the Volcano Queues' too,
    when the policies want them)."""
    await policies_listed.wait()
    volcano.reconsider()  # the policies are known now: whether Volcano Queues are wanted too
    await asyncio.gather(*(watch.synced.wait() for watch in watches))
    logger.info("every initial list is in the store")
    # The store now holds millions of long-lived objects without cycles; a full collection of
    # the cyclic garbage collector walks them all (a third of a second at 30,000 pods). Freeze
    # them out of its way.
    gc.collect()
    gc.freeze()
    for loop in loops:
        loop.store_synced.set()


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
    client: AsyncClient | None = memo.get("client")
    if client is not None:
        await client.close()
    http: httpx.AsyncClient | None = memo.get("http")
    if http is not None:
        await http.aclose()


def run(
    *,
    lease: LeaseSettings | None,
    probe_address: tuple[str, int] | None,
    metrics_address: tuple[str, int] | None,
    webhook: admission.WebhookSettings | None,
    verbose: bool,
) -> int:
    """The operator until it is stopped; ``None`` for an address leaves that server off, for
    ``lease`` means this replica acts alone, without leader election, and for ``webhook``
    that no pod is gated by this replica."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # One line per HTTP request is noise at thousands of writes (or pod creations) a
        # minute: our client's requests, the webhook's access log, kopf's per-review lines.
        for noisy in ("httpx2", "aiohttp.access", "kopf.objects"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    if metrics_address is not None:
        host, port = metrics_address
        prometheus_client.start_http_server(port, addr=host)
    # kopf's own peering is not used: it pauses operators, it does not elect one (and kopf
    # watches nothing here); the Lease above is how replicas take turns.
    if webhook is not None:
        admission.register()
    kopf.run(
        clusterwide=True,
        standalone=True,
        memo=kopf.Memo(probe_address=probe_address, lease=lease, webhook=webhook),
    )
    return 0
