"""Faults the operator must come through with nothing lost and nothing duplicated: another client
overwriting our fields, the API server out of reach for 30 s, a fraction of our writes refused
with 500, and a flood of 5,000 pods.

Each test prints its figures (times, counts, latencies) on one line starting with ``FAULT``
(``pytest -s`` shows them) and asserts the outcome; time bounds are asserted with a margin for
two loaded cores, and the measured time is what the report quotes.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import TARGET, Cluster
from faults import (
    HealthPoller,
    RefusingWebhook,
    TcpProxy,
    api_call,
    kubeconfig_via,
    refusals_seen,
    watch_events,
)
from objects import NAMESPACE, deserved, node, pod, policy, queue, status
from operating import SERVICE_ACCOUNT, Operator, eventually, start_operator

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="drives the local control plane and the operator's process"
)

QUEUES_API = "/apis/scheduling.sharekeeper.io/v1alpha1/queues"
POLICIES_API = "/apis/scheduling.sharekeeper.io/v1alpha1/schedulerpolicies"
FACTORS = "sharekeeper.io/overcommit-factors"
RESTORE_BOUND = 2.0
"""The issue's bound on restoring an overwritten field, in seconds."""
RECOVERY = 90.0
"""After a 30 s outage: the watches back off up to 30 s between tries (jittered)."""


def figures(test: str, **values: Any) -> None:
    shown = " ".join(
        f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
        for key, value in values.items()
    )
    print(f"\nFAULT {test}: {shown}")


def admin(cluster: Cluster, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return api_call(cluster.kubeconfig, method, path, body)


# --- (a) another client overwrites our fields -----------------------------------------------


def restored_after(
    cluster: Cluster, collection: str, name: str, overwrite: dict[str, Any], subresource: str
) -> float:
    """Seconds from another client's write (``overwrite``, a merge patch) to the operator's
    write that puts the value back, as a watch from the overwrite's version sees them."""
    path = f"{collection}/{name}{subresource}"
    before = admin(cluster, "GET", f"{collection}/{name}")
    overwritten = admin(cluster, "PATCH", path, overwrite)
    written_at = time.monotonic()
    version = overwritten["metadata"]["resourceVersion"]
    assert ours(overwritten) != ours(before), "the overwrite changed nothing"
    watch = f"{collection}?watch=1&fieldSelector=metadata.name%3D{name}&resourceVersion={version}"
    with contextlib.closing(watch_events(cluster.kubeconfig, watch, timeout=30)) as events:
        for event in events:
            if ours(event["object"]) == ours(before):
                return time.monotonic() - written_at
    raise AssertionError(f"{name}: the watch ended before the value was restored")


def ours(obj: dict[str, Any]) -> Any:
    """The fields the tests overwrite: a queue's deserved, a policy's counts, a node's factors."""
    annotations = obj["metadata"].get("annotations") or {}
    got = obj.get("status") or {}
    return (got.get("deserved"), got.get("nodes"), got.get("queues"), annotations.get(FACTORS))


def test_fields_another_client_overwrites_are_restored(
    cluster_with: Cluster, operator: Operator
) -> None:
    """A queue's ``status.deserved``, a policy's ``status.nodes`` and a node's overcommit factors,
    each overwritten by the admin: the operator puts each back within 2 s. The queue is also
    overwritten the moment the operator's own write to it shows, before any round ran after it
    (the race where our remembered write hid the other client's for good)."""
    cluster_with.apply(
        node("n1"), queue("q"), policy("shares"), pod("p", "q", "6", "6Gi", node_name="n1")
    )
    eventually(lambda: deserved(cluster_with, "q") == ("6", "6Gi"))
    eventually(lambda: status(cluster_with, "schedulerpolicy", "shares").get("nodes") == 1)
    eventually(lambda: FACTORS in (cluster_with.get("node", "n1")["metadata"]["annotations"]))
    time.sleep(1)  # the echoes of those writes are in: no round is due

    times = {
        "queue": restored_after(
            cluster_with, QUEUES_API, "q", {"status": {"deserved": {"cpu": "99"}}}, "/status"
        ),
        "policy": restored_after(
            cluster_with, POLICIES_API, "shares", {"status": {"nodes": 7}}, "/status"
        ),
        "node": restored_after(
            cluster_with, "/api/v1/nodes", "n1",
            {"metadata": {"annotations": {FACTORS: '{"cpu":9}'}}}, "",
        ),
    }  # fmt: skip

    # The race: the operator writes (a capability lowers deserved), and the admin overwrites as
    # soon as that write shows, before the operator's next round.
    queues = admin(cluster_with, "GET", QUEUES_API)
    since = queues["metadata"]["resourceVersion"]
    cluster_with.apply(queue("q", capability={"cpu": "4"}))
    watch = f"{QUEUES_API}?watch=1&fieldSelector=metadata.name%3Dq&resourceVersion={since}"
    with contextlib.closing(watch_events(cluster_with.kubeconfig, watch, timeout=30)) as events:
        for event in events:
            if (event["object"].get("status") or {}).get("deserved", {}).get("cpu") == "4":
                break
    times["queue-right-after-our-write"] = restored_after(
        cluster_with, QUEUES_API, "q", {"status": {"deserved": {"cpu": "98"}}}, "/status"
    )
    figures("overwrite", **{f"restore_s[{what}]": took for what, took in times.items()})
    for what, took in times.items():
        assert took < RESTORE_BOUND, f"{what}: restored after {took:.2f}s"
    assert deserved(cluster_with, "q") == ("4", "6Gi")


# --- (b) the API server out of reach for 30 s -----------------------------------------------


@contextlib.contextmanager
def operator_via(proxy: TcpProxy, kubeconfig: Path, directory: Path) -> Iterator[Operator]:
    """The operator acting as its ServiceAccount, with the API server only through ``proxy``."""
    via = kubeconfig_via(proxy, kubeconfig, directory / "via-proxy.kubeconfig")
    operator = start_operator(via, directory / "operator.log")
    try:
        yield operator
    finally:
        operator.stop(signal.SIGKILL)


def events_of(cluster: Cluster, kind: str, name: str, reason: str) -> tuple[int, int]:
    """The Events about this object (by uid: earlier tests' objects had the same names) with
    ``reason``: how many Event objects, and their total count."""
    uid = cluster.get(kind, name)["metadata"]["uid"]
    found = cluster.get(
        "events", "-n", "default",
        "--field-selector", f"involvedObject.uid={uid},reason={reason}",
    )["items"]  # fmt: skip
    return len(found), sum(event.get("count") or 1 for event in found)


@pytest.mark.timeout(240)
def test_thirty_seconds_without_the_api_server(
    cluster_with: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    """Every connection of the operator is cut for 30 s, just after a weight change that makes a
    queue overused (so its status write and Event meet the outage), and another weight changes
    during it. The same process recovers on its own, both changes show, the Event is posted
    once, and ``/healthz`` says 200 throughout: failed writes do not fail a round, and a loop is
    stale only when its rounds fail (``loops.health``)."""
    cluster_with.apply(
        node("n1"), queue("a", weight=3), queue("b", weight=1), policy("shares"),
        pod("steady", "a", "5", "5Gi", node_name="n1"), pod("waiting", "b", "12", "12Gi"),
    )  # fmt: skip
    assert cluster_with.plane is not None
    with (
        TcpProxy.to(cluster_with.plane.server) as proxy,
        operator_via(proxy, operator_kubeconfig, tmp_path) as operator,
    ):
        eventually(lambda: deserved(cluster_with, "a") == ("5", "5Gi"), timeout=60)
        assert events_of(cluster_with, "queue", "a", "AllocatedAboveDeserved") == (0, 0)
        errors_before = operator.metric("sharekeeper_writes_total", outcome="error")
        retries_before = operator.metric("sharekeeper_write_retries_total")

        with HealthPoller(operator, interval=0.5) as health:
            cluster_with.apply(queue("a", weight=1))  # a: 4 cpu deserved, 5 allocated
            proxy.cut()
            cut_at = time.monotonic()
            time.sleep(10)
            cluster_with.apply(queue("b", weight=3))  # a: 2 cpu, b: 6 cpu
            time.sleep(max(0.0, 30 - (time.monotonic() - cut_at)))
            proxy.resume()
            outage = time.monotonic() - cut_at
            eventually(
                lambda: (
                    (deserved(cluster_with, "a"), deserved(cluster_with, "b"))
                    == (("2", "5Gi"), ("6", "12Gi"))
                ),
                timeout=RECOVERY,
            )
            converged = time.monotonic() - cut_at - outage

        codes = [answer.code for answer in health.answers]
        # The Event follows the status write it tells of.
        eventually(lambda: events_of(cluster_with, "queue", "a", "AllocatedAboveDeserved")[0])
        events = events_of(cluster_with, "queue", "a", "AllocatedAboveDeserved")
        figures(
            "outage",
            outage_s=outage,
            converged_after_s=converged,
            writes_given_up=int(
                operator.metric("sharekeeper_writes_total", outcome="error") - errors_before
            ),
            retries=int(operator.metric("sharekeeper_write_retries_total") - retries_before),
            healthz_polls=len(codes),
            healthz_not_200=sum(code != 200 for code in codes),
            healthz_max_s=max(answer.seconds for answer in health.answers),
            overused_events=events,
        )
        assert operator.process.poll() is None, operator.tail()  # the same process throughout
        assert status(cluster_with, "queue", "a")["overused"] is True
        assert events == (1, 1)  # one Event object, counted once
        assert set(codes) == {200}, codes


# --- (c) a fraction of our writes refused with 500 ------------------------------------------


def many_queues(count: int) -> list[dict[str, Any]]:
    """``count`` queues of weights 1..4 under one policy, each with a bound and a pending pod,
    on three nodes: every weight change moves every queue's deserved."""
    objects: list[dict[str, Any]] = [
        node("n1"), node("n2"), node("n3"), policy("shares"),
    ]  # fmt: skip
    for index in range(count):
        name = f"q{index:02d}"
        objects += [
            queue(name, weight=1 + index % 4),
            pod(f"{name}-bound", name, "500m", "1Gi", node_name=f"n{1 + index % 3}"),
            pod(f"{name}-waiting", name, "2", "2Gi"),
        ]
    return objects


def simulated_queues(objects: list[dict[str, Any]], directory: Path) -> dict[str, Any]:
    """What ``sharekeeper simulate`` says the queues' statuses are for ``objects``."""
    manifest = directory / "objects.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    printed = subprocess.run(
        [sys.executable, "-m", "sharekeeper.cli", "simulate", "-o", "json", "-f", str(manifest)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    queues: dict[str, Any] = json.loads(printed.stdout)["queues"]
    return queues


def numbers(statuses: dict[str, Any]) -> dict[str, Any]:
    """What a round computes, without the bookkeeping only a live object has."""
    kept = ("deserved", "allocated", "request", "realCapability", "share", "overused")
    return {name: {key: got.get(key) for key in kept} for name, got in statuses.items()}


def published_queues(cluster: Cluster) -> dict[str, Any]:
    return {
        item["metadata"]["name"]: item.get("status", {}) for item in cluster.get("queues")["items"]
    }


@pytest.mark.timeout(180)
def test_writes_refused_with_500_are_retried_and_none_is_lost(
    cluster_with: Cluster, operator: Operator, tmp_path: Path
) -> None:
    """An admission webhook makes the API server refuse 40% of the operator's status and node
    writes with 500, while 20 queues are created and then every weight changes: every refused
    write is retried (or given up and sent again by a later round) and every queue ends with
    exactly what ``simulate`` computes. Each refusal is counted once: as a retry or as a write
    given up. A refusal the API server never got (it asks a webhook again when a call fails) is
    not one the operator could see: per admission request only the last answer counts."""
    objects = many_queues(20)
    retries_before = operator.metric("sharekeeper_write_retries_total", reason="http_500")
    errors_before = operator.metric("sharekeeper_writes_total", outcome="error")
    timeouts_before = operator.metric("sharekeeper_write_retries_total", reason="timeout")
    with RefusingWebhook(
        cluster_with, tmp_path / "webhook", user=SERVICE_ACCOUNT, fraction=0.4
    ) as webhook:
        time.sleep(2)  # the API server loads the webhook configuration
        cluster_with.apply(*objects)
        expected = numbers(simulated_queues(objects, tmp_path))
        eventually(lambda: numbers(published_queues(cluster_with)) == expected, timeout=60)
        for obj in objects:
            if obj["kind"] == "Queue":
                obj["spec"]["weight"] = 5 - obj["spec"]["weight"]
        cluster_with.apply(*(obj for obj in objects if obj["kind"] == "Queue"))
        expected = numbers(simulated_queues(objects, tmp_path))
        eventually(lambda: numbers(published_queues(cluster_with)) == expected, timeout=60)

        def accounted() -> tuple[int, int, int]:
            """Once no write is under way: every refusal was retried or its write given up."""
            reviews = webhook.reviews
            refused = refusals_seen(reviews)
            retried = (
                operator.metric("sharekeeper_write_retries_total", reason="http_500")
                - retries_before
            )
            given_up = operator.metric("sharekeeper_writes_total", outcome="error") - errors_before
            assert retried + given_up == refused, {
                "retried (500)": retried,
                "given up": given_up,
                "refusals the operator could see": refused,
                "refusals answered": sum(review.refused for review in reviews),
                "retried after a client timeout": operator.metric(
                    "sharekeeper_write_retries_total", reason="timeout"
                )
                - timeouts_before,
            }
            return refused, int(retried), int(given_up)

        refused, retried, given_up = eventually(accounted, timeout=30)
        reviews = webhook.reviews
        attempted = len({review.uid for review in reviews})
        asked_again = len(reviews) - attempted

    published = numbers(published_queues(cluster_with))
    lost = sum(got != expected[name] for name, got in published.items())
    figures(
        "refusals",
        writes_attempted=attempted,
        webhook_asked_again=asked_again,
        refused_500=refused,
        retried=retried,
        given_up_then_resent=given_up,
        lost=lost,
    )
    assert refused > 0
    assert lost == 0


# --- (d) a flood of 5,000 pods ----------------------------------------------------------------


def create_pods(cluster: Cluster, manifests: list[dict[str, Any]], workers: int = 8) -> None:
    """POST every pod, ``workers`` keep-alive connections at a time, as the admin."""
    config = json.loads(cluster.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]
    token = config["users"][0]["user"]["token"]
    host, port = server["server"].removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=server["certificate-authority"])
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def create(share: list[dict[str, Any]]) -> None:
        connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=60)
        try:
            for manifest in share:
                connection.request("POST", path, json.dumps(manifest), headers)
                answer = connection.getresponse()
                body = answer.read()
                assert answer.status == 201, body[:500]
        finally:
            connection.close()

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, [manifests[i::workers] for i in range(workers)]))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


class Sampler:
    """``measure()`` every ``every`` seconds in a thread, while in the ``with`` block."""

    def __init__(self, measure: Callable[[], float], every: float) -> None:
        self._measure = measure
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.samples: list[float] = []

    def _sample(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(self._measure())

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.timeout(240)
def test_a_flood_of_five_thousand_pods(cluster_with: Cluster, operator: Operator) -> None:
    """5,000 bound pods created as fast as eight connections go, spread over ten queues and ten
    nodes: ``/healthz`` answers every poll (every 100 ms) throughout, and every queue ends
    charged exactly its 500 pods."""
    queues, pods_per_queue = 10, 500
    cluster_with.apply(
        policy("shares"),
        *(node(f"n{i}", cpu="64", memory="256Gi") for i in range(10)),
        *(queue(f"q{i}") for i in range(queues)),
    )
    eventually(lambda: deserved(cluster_with, "q0")[0] is not None)
    manifests = [
        pod(f"flood-{q}-{i}", f"q{q}", "100m", "64Mi", node_name=f"n{i % 10}")
        for q in range(queues)
        for i in range(pods_per_queue)
    ]
    pid = operator.process.pid
    rss_before = rss_mib(pid)
    with Sampler(lambda: rss_mib(pid), every=0.5) as rss, HealthPoller(operator, 0.1) as health:
        started = time.monotonic()
        create_pods(cluster_with, manifests)
        created = time.monotonic() - started
        expected = {"cpu": "50", "memory": "32000Mi", "pods": "500"}

        def charged_in_full() -> bool:
            for i in range(queues):
                got = status(cluster_with, "queue", f"q{i}")
                assert got.get("allocated") == expected, (f"q{i}", got.get("allocated"))
            return True

        eventually(charged_in_full, timeout=60)
        converged = time.monotonic() - started - created
    codes = [answer.code for answer in health.answers]
    figures(
        "flood",
        pods=len(manifests),
        created_s=created,
        pods_per_s=len(manifests) / created,
        converged_after_s=converged,
        healthz_polls=len(codes),
        healthz_not_200=sum(code != 200 for code in codes),
        healthz_p50_ms=1000 * statistics.median(answer.seconds for answer in health.answers),
        healthz_p99_ms=1000 * health.percentile(0.99),
        healthz_max_ms=1000 * max(answer.seconds for answer in health.answers),
        rss_before_mib=rss_before,
        rss_peak_mib=max([rss_before, *rss.samples]),
        rss_after_mib=rss_mib(pid),
        cpus=os.cpu_count(),
    )
    assert set(codes) == {200}, codes
    assert operator.process.poll() is None
