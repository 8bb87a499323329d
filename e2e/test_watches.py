"""The operator's own watches of nodes, pods and PodGroups survive what networks and API servers
do to them: connections cut while objects change, resource versions that expired (410 Gone), a
first list that does not finish, a PodGroup CRD installed while it runs, and our own Queue CRD
deleted and installed again (while it runs, and before it starts).

The operator reaches the API server only through a TCP proxy the tests cut or hold
(``faults.TcpProxy``; TLS passes through it untouched); the tests change the cluster through the
API server directly. Outcomes are read where a person would read them: queue statuses, and the
operator's ``/readyz`` and ``/metrics``. The first tests check the tools themselves (the proxy,
what makes the API server answer 410, the PodGroup CRD) so that a failure below them points at
the operator.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
import objects
from clusters import CRDS, TARGET, Cluster, Installed, install_sharekeeper
from faults import TcpProxy, compact_etcd, etcd_revision, kubeconfig_via, watch_events
from objects import NAMESPACE, node, pod, policy, queue, status
from operating import Operator, eventually, start_operator

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="starts the operator as a process behind a proxy on 127.0.0.1"
)

# The operator polls discovery for the PodGroup API this often (seconds; 30 by default).
FAST_DISCOVERY = {"SHAREKEEPER_DISCOVERY_INTERVAL": "1"}
PODGROUP_CRD = Path(__file__).parent / "volcano" / "podgroups.yaml"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
PODGROUP_CRD_NAME = "podgroups.scheduling.volcano.sh"
QUEUE_CRD = CRDS / "queues.scheduling.sharekeeper.io.yaml"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Generous: the operator backs off between retries, and two cores run everything.
RECOVERY = 60.0


# --- the cluster the operator sees --------------------------------------------------------


def one_queue_with_two_pods(cluster: Cluster) -> None:
    """Queue q under one policy, with two bound pods: small (1 cpu, 1Gi) and large (2, 2Gi)."""
    cluster.apply(
        node("n1"), queue("q"), policy("shares"),
        pod("small", "q", "1", "1Gi", node_name="n1"),
        pod("large", "q", "2", "2Gi", node_name="n1"),
    )  # fmt: skip


def charged(cluster: Cluster, queue_name: str) -> tuple[dict[str, str], dict[str, str]]:
    """What the queue's status says its pods hold and ask for: (allocated, request)."""
    got = status(cluster, "queue", queue_name)
    return got.get("allocated", {}), got.get("request", {})


def charged_exactly(cluster: Cluster, queue_name: str, cpu: str, memory: str) -> bool:
    """Bound pods only, so allocated and request are the same amounts (the count of pods
    aside: these tests are about which pods are seen, ``test_operator`` counts them)."""
    amounts = {"cpu": cpu, "memory": memory}
    allocated, request = charged(cluster, queue_name)
    return (_without_pods(allocated), _without_pods(request)) == (amounts, amounts)


def _without_pods(amounts: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in amounts.items() if name != "pods"}


def delete_pod_now(cluster: Cluster, name: str) -> None:
    """Gone from the API server at once (no kubelet would ever confirm a graceful end)."""
    cluster.kubectl("delete", "pod", name, "-n", NAMESPACE, "--force", "--grace-period=0")


def another_write(cluster: Cluster) -> None:
    """One more revision in etcd, on an object the operator does not watch."""
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "tick", "namespace": NAMESPACE},
         "data": {"at": str(time.time_ns())}}
    )  # fmt: skip


def pod_in_group(name: str, group: str, cpu: str, memory: str, node_name: str) -> dict[str, Any]:
    """A bound pod that names no queue itself, only its Volcano PodGroup."""
    manifest = pod(name, "unused", cpu, memory, node_name=node_name)
    manifest["metadata"]["labels"] = {}
    manifest["metadata"]["annotations"] = {GROUP_ANNOTATION: group}
    return manifest


def pod_group(name: str, queue_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"queue": queue_name, "minMember": 1, **spec},
    }


def install_podgroup_crd(cluster: Cluster) -> None:
    cluster.install_crds(PODGROUP_CRD, PODGROUP_CRD_NAME)


def remove_podgroup_crd(cluster: Cluster) -> None:
    """Gone, with every PodGroup, before returning: the session's cluster is shared."""
    cluster.kubectl("delete", "-f", str(PODGROUP_CRD), "--ignore-not-found", "--wait=true")


def install_queue_crd(cluster: Cluster) -> None:
    cluster.install_crds(QUEUE_CRD, QUEUE_CRD.stem)


def delete_queue_crd(cluster: Cluster) -> None:
    """Gone, with every Queue, before returning."""
    cluster.kubectl("delete", "crd", QUEUE_CRD.stem, "--wait=true")


@pytest.fixture
def queue_crd_restored(cluster_with: Cluster) -> Iterator[Cluster]:
    """The session's cluster, emptied; the Queue CRD the test deletes is installed again after
    it, since every other test needs it."""
    try:
        yield cluster_with
    finally:
        install_queue_crd(cluster_with)


@pytest.fixture
def shared(cluster_with: Cluster) -> Cluster:
    """The session's cluster, emptied, with the namespace test objects live in."""
    cluster_with.kubectl("create", "namespace", NAMESPACE, check=False)
    return cluster_with


# --- the operator behind the proxy --------------------------------------------------------


@pytest.fixture
def proxy(cluster_with: Cluster) -> Iterator[TcpProxy]:
    """A proxy to the session's API server, forwarding."""
    assert cluster_with.plane is not None
    with TcpProxy.to(cluster_with.plane.server) as running:
        yield running


@contextlib.contextmanager
def operator_via(proxy: TcpProxy, kubeconfig: Path, directory: Path) -> Iterator[Operator]:
    """The operator acting as its ServiceAccount, with the API server only through ``proxy``."""
    via = kubeconfig_via(proxy, kubeconfig, directory / "via-proxy.kubeconfig")
    operator = start_operator(via, directory / "operator.log", env=FAST_DISCOVERY)
    try:
        yield operator
    finally:
        operator.stop(signal.SIGKILL)


def ready_body(operator: Operator) -> dict[str, Any]:
    """``/readyz``'s body, asserting it says 200."""
    code, body = readiness(operator)
    assert code == 200, f"/readyz says {code}: {body}"
    return body


def readiness(operator: Operator) -> tuple[int, dict[str, Any]]:
    """``/readyz``'s status and body, once the operator answers at all."""
    assert operator.process.poll() is None, f"operator exited:\n{operator.tail()}"
    try:
        return operator.ready()
    except (urllib.error.URLError, OSError) as error:
        raise AssertionError(f"/readyz does not answer: {error}") from error


def reports_served(operator: Operator, resource: str, served: bool) -> bool:
    """Whether ``/readyz`` says 200 and lists ``resource`` as not served exactly when it is not
    (PodGroups are not served either, unless a test installed Volcano's CRD)."""
    body = ready_body(operator)
    assert (resource not in body["notServed"]) is served, body
    return True


def serving(operator: Operator) -> Operator:
    """The operator, once its probes answer (it has not necessarily listed anything yet)."""
    operator.wait_rounds(0)
    return operator


# --- a control plane of our own, without the watch cache ---------------------------------


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Its own etcd and kube-apiserver, the API server with ``--watch-cache=false``: every watch
    is served by etcd, so compacting etcd expires the resource versions before it (see
    ``test_without_the_watch_cache_a_watch_from_a_compacted_revision_is_gone``)."""
    with controlplane.running(apiserver_flags=["--watch-cache=false"]) as plane:
        cluster = Cluster(kubeconfig=plane.kubeconfig, kubectl_path=str(plane.kubectl), plane=plane)
        yield install_sharekeeper(cluster, tmp_path_factory.mktemp("uncached"))


# --- the tools ----------------------------------------------------------------------------


def current_resource_version(cluster: Cluster, collection: str) -> str:
    """The resource version a list of ``collection`` (an API path) is consistent with: now."""
    listed = json.loads(cluster.kubectl("get", "--raw", collection).stdout)
    version: str = listed["metadata"]["resourceVersion"]
    return version


def stream_ended(events: Iterator[dict[str, Any]]) -> bool:
    """Whether the watch has no next event because its connection ended or broke."""
    try:
        next(events)
    except (StopIteration, OSError, http.client.HTTPException):
        return True
    return False


def test_the_proxy_forwards_cuts_holds_and_resumes(cluster: Cluster, tmp_path: Path) -> None:
    """TLS goes through the proxy with the server certificate verified; a cut ends an open watch
    and refuses new connections; a request made while held completes once resumed."""
    assert cluster.plane is not None
    with TcpProxy.to(cluster.plane.server) as proxy:
        via = Cluster(
            kubeconfig_via(proxy, cluster.kubeconfig, tmp_path / "via.kubeconfig"),
            cluster.kubectl_path,
            cluster.plane,
        )
        default = ("get", "namespace", "default", "-o", "name", "--request-timeout=10s")
        assert via.kubectl(*default).stdout.strip() == "namespace/default"

        path = "/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3Ddefault"
        with contextlib.closing(watch_events(via.kubeconfig, path)) as events:
            assert next(events)["type"] == "ADDED"
            proxy.cut()
            assert stream_ended(events)
        refused = via.kubectl(*default, check=False)
        assert refused.returncode != 0
        assert refused.stdout == ""

        proxy.resume()
        assert via.kubectl(*default).stdout.strip() == "namespace/default"

        proxy.hold()
        accepted = proxy.accepted
        waiting = subprocess.Popen(
            [via.kubectl_path, f"--kubeconfig={via.kubeconfig}", "get", "namespace", "default",
             "-o", "name"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            eventually(lambda: proxy.accepted > accepted)
            time.sleep(1)  # a chance to get through, which a held proxy must not give it
            assert waiting.poll() is None, "the request went through a held proxy"
            proxy.resume()
            out, err = waiting.communicate(timeout=30)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.communicate()
        assert waiting.returncode == 0, err
        assert out.strip() == "namespace/default"


def test_with_the_watch_cache_compacting_etcd_does_not_expire_a_recent_watch(
    shared: Cluster,
) -> None:
    """The session's API server runs with its watch cache (the default), which serves a watch
    from its own window of recent events; compacting etcd does not shorten that window. This is
    why the 410 test below needs an API server of its own."""
    assert shared.plane is not None
    since = current_resource_version(shared, f"/api/v1/namespaces/{NAMESPACE}/configmaps")
    another_write(shared)
    another_write(shared)
    assert compact_etcd(shared.plane) > int(since)
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion={since}"
    with contextlib.closing(watch_events(shared.kubeconfig, path)) as events:
        first = next(events)
    assert first["type"] in {"ADDED", "MODIFIED"}, first
    assert first["object"]["metadata"]["name"] == "tick"


def test_without_the_watch_cache_a_watch_from_a_compacted_revision_is_gone(
    uncached: Installed,
) -> None:
    """With ``--watch-cache=false`` a watch goes to etcd, and one from a revision etcd compacted
    away is answered as clients see it: HTTP 200, then one ERROR event with a Status of code 410,
    reason Expired (not an HTTP 410)."""
    cluster = uncached.cluster
    assert cluster.plane is not None
    since = current_resource_version(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods")
    another_write(cluster)
    another_write(cluster)
    compacted = compact_etcd(cluster.plane)
    assert compacted > int(since) + 1
    assert etcd_revision(cluster.plane) >= compacted
    path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={since}"
    with contextlib.closing(watch_events(cluster.kubeconfig, path)) as events:
        first = next(events)
    assert first["type"] == "ERROR", first
    assert (first["object"]["code"], first["object"]["reason"]) == (410, "Expired")


def test_the_podgroup_crd_takes_volcano_podgroups(shared: Cluster) -> None:
    """e2e/volcano/podgroups.yaml applies, and PodGroups with the fields Sharekeeper reads are
    stored as written; a mistyped minMember is refused."""
    try:
        install_podgroup_crd(shared)
        shared.apply(
            pod_group("training", "q", minResources={"cpu": 2, "memory": "4Gi"}, extra="kept")
        )
        stored = shared.get("podgroup", "training", "-n", NAMESPACE)
        assert stored["spec"] == {
            "queue": "q", "minMember": 1, "minResources": {"cpu": 2, "memory": "4Gi"},
            "extra": "kept",
        }  # fmt: skip
        table = shared.kubectl("get", "pg", "-n", NAMESPACE).stdout.splitlines()
        assert table[0].split()[:4] == ["NAME", "STATUS", "MINMEMBER", "QUEUE"]
        assert table[1].split()[:3] == ["training", "1", "q"]  # no status.phase yet
        mistyped = yaml.safe_dump(pod_group("bad", "q", minMember="many"))
        refused = shared.kubectl("apply", "-f", "-", input=mistyped, check=False)
        assert refused.returncode != 0
        assert "spec.minMember" in refused.stderr
    finally:
        remove_podgroup_crd(shared)


# --- the operator -------------------------------------------------------------------------


def test_a_pod_deleted_while_the_watch_is_cut_is_uncharged_after_reconnecting(
    cluster_with: Cluster, operator_kubeconfig: Path, proxy: TcpProxy, tmp_path: Path
) -> None:
    """Every connection of the operator is reset and it cannot reconnect while a pod is deleted;
    once it can, the deletion reaches its store and the queue's status drops by that pod."""
    one_queue_with_two_pods(cluster_with)
    with operator_via(proxy, operator_kubeconfig, tmp_path) as operator:
        eventually(lambda: charged_exactly(cluster_with, "q", "3", "3Gi"), timeout=RECOVERY)
        restarts = operator.metric("sharekeeper_watch_restarts_total", resource="pods")

        proxy.cut()
        delete_pod_now(cluster_with, "large")
        proxy.resume()

        eventually(lambda: charged_exactly(cluster_with, "q", "1", "1Gi"), timeout=RECOVERY)
        assert operator.metric("sharekeeper_watch_restarts_total", resource="pods") > restarts


def test_an_expired_resource_version_relists_and_forgets_the_deleted_pod(
    uncached: Installed, tmp_path: Path
) -> None:
    """The operator's pod watch resumes from a resource version the API server no longer has: it
    gets 410 Gone, lists again, and drops the pod deleted meanwhile that no event announced.

    What makes kube-apiserver v1.34 answer 410 to a watch from an old resourceVersion (read in
    k8s.io/apiserver storage/cacher, checked by the two tests above): with the watch cache (the
    default) a watch is served from the API server's in-memory window of recent events of that
    resource, which keeps at least 75 s of them (``max(75s, --request-timeout + 15s)``) and grows
    to 102,400 events within that time; only a resourceVersion older than the oldest event still
    in the window is expired ("too old resource version"), and compacting etcd does not touch the
    window. Without the watch cache (``--watch-cache=false``) the watch goes to etcd, and a
    revision etcd compacted away is expired ("The resourceVersion for the provided watch is too
    old."). Either way the answer is HTTP 200 and an ERROR event with code 410, reason Expired.
    Forcing the first in a test takes over 75 s, so this test runs an API server without the
    watch cache and compacts etcd while the operator is cut off from it.
    """
    cluster = uncached.cluster
    assert cluster.plane is not None
    objects.clean_slate(cluster)
    one_queue_with_two_pods(cluster)
    with (
        TcpProxy.to(cluster.plane.server) as proxy,
        operator_via(proxy, uncached.operator_kubeconfig, tmp_path) as operator,
    ):
        eventually(lambda: charged_exactly(cluster, "q", "3", "3Gi"), timeout=RECOVERY)
        relists = operator.metric(
            "sharekeeper_watch_relists_total", resource="pods", reason="expired"
        )

        proxy.cut()
        delete_pod_now(cluster, "large")
        # One more revision, so that the compaction lands past the deletion's: the operator
        # cannot resume from right before the deletion and receive it as an event.
        another_write(cluster)
        compact_etcd(cluster.plane)
        proxy.resume()

        eventually(
            lambda: (
                operator.metric(
                    "sharekeeper_watch_relists_total", resource="pods", reason="expired"
                )
                > relists
            ),
            timeout=RECOVERY,
        )
        eventually(lambda: charged_exactly(cluster, "q", "1", "1Gi"), timeout=RECOVERY)


def test_a_podgroup_crd_installed_after_start_is_watched(
    cluster_with: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    """The operator starts where Volcano is not installed; the PodGroup CRD arrives later and,
    without a restart, a pod that names only its PodGroup is charged to the PodGroup's queue."""
    remove_podgroup_crd(cluster_with)
    cluster_with.apply(
        node("n1"), queue("q"), policy("shares"),
        pod("driver", "q", "1", "1Gi", node_name="n1"),
        pod_in_group("worker", "training", "2", "4Gi", node_name="n1"),
    )  # fmt: skip
    operator = start_operator(operator_kubeconfig, tmp_path / "operator.log", env=FAST_DISCOVERY)
    try:
        eventually(lambda: ready_body(operator), timeout=RECOVERY)
        # The worker's PodGroup does not exist: it is charged nowhere, the driver is.
        eventually(lambda: charged_exactly(cluster_with, "q", "1", "1Gi"), timeout=RECOVERY)

        install_podgroup_crd(cluster_with)
        cluster_with.apply(pod_group("training", "q", minResources={"cpu": "2", "memory": "4Gi"}))

        eventually(lambda: charged_exactly(cluster_with, "q", "3", "5Gi"), timeout=RECOVERY)
    finally:
        operator.stop(signal.SIGKILL)
        remove_podgroup_crd(cluster_with)


def test_our_queue_crd_deleted_and_installed_again_is_watched_again(
    queue_crd_restored: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    """The Queue CRD is deleted under the running operator: the process lives on, liveness and
    readiness stay 200, ``/readyz`` and ``/metrics`` say queues are not served, and the queues
    are gone from its store (the policy governs none). Once the CRD is back, a new Queue gets
    its status without a restart."""
    cluster = queue_crd_restored
    one_queue_with_two_pods(cluster)
    operator = start_operator(operator_kubeconfig, tmp_path / "operator.log", env=FAST_DISCOVERY)
    try:
        eventually(lambda: charged_exactly(cluster, "q", "3", "3Gi"), timeout=RECOVERY)

        delete_queue_crd(cluster)

        eventually(lambda: reports_served(operator, "queues", served=False), timeout=RECOVERY)
        assert operator.metric("sharekeeper_watch_served", resource="queues") == 0
        eventually(
            lambda: status(cluster, "schedulerpolicy", "shares").get("queues") == 0,
            timeout=RECOVERY,
        )
        assert "recomputeRounds" in operator.health()

        install_queue_crd(cluster)
        # The same name as before: a new object, whose status must be written even though it
        # comes out the same as the deleted one's.
        cluster.apply(queue("q"))

        eventually(lambda: charged_exactly(cluster, "q", "3", "3Gi"), timeout=RECOVERY)
        assert reports_served(operator, "queues", served=True)
        assert operator.metric("sharekeeper_watch_served", resource="queues") == 1
        assert operator.process.poll() is None, operator.tail()
    finally:
        operator.stop(signal.SIGKILL)


def test_started_without_our_queue_crd_the_loops_run_and_it_is_watched_once_installed(
    queue_crd_restored: Cluster, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    """The operator starts while the Queue CRD is missing: it is ready (there is nothing to
    list), says queues are not served, and its loops run (the policy's status is written).
    Once the CRD is installed, a Queue gets its status without a restart."""
    cluster = queue_crd_restored
    cluster.apply(node("n1"), policy("shares"), pod("small", "q", "1", "1Gi", node_name="n1"))
    delete_queue_crd(cluster)
    operator = start_operator(operator_kubeconfig, tmp_path / "operator.log", env=FAST_DISCOVERY)
    try:
        eventually(lambda: reports_served(operator, "queues", served=False), timeout=RECOVERY)
        eventually(
            lambda: status(cluster, "schedulerpolicy", "shares").get("nodes") == 1,
            timeout=RECOVERY,
        )

        install_queue_crd(cluster)
        cluster.apply(queue("q"))

        eventually(lambda: charged_exactly(cluster, "q", "1", "1Gi"), timeout=RECOVERY)
        assert reports_served(operator, "queues", served=True)
    finally:
        operator.stop(signal.SIGKILL)


def test_not_ready_until_the_first_lists_complete(
    cluster_with: Cluster, operator_kubeconfig: Path, proxy: TcpProxy, tmp_path: Path
) -> None:
    """While the API server takes the operator's requests but answers none, ``/readyz`` says
    503 and which lists are missing, and liveness still answers (a slow API server is no reason
    to restart the operator); once the answers flow, ``/readyz`` says 200."""
    one_queue_with_two_pods(cluster_with)
    proxy.hold()
    with operator_via(proxy, operator_kubeconfig, tmp_path) as operator:
        eventually(lambda: proxy.accepted > 0, timeout=RECOVERY)  # its requests are out, held
        code, body = eventually(lambda: readiness(operator), timeout=RECOVERY)
        assert code == 503, body
        assert body["ready"] is False, body
        assert not all(body["lists"].values()), body
        assert "recomputeRounds" in serving(operator).health()

        proxy.resume()

        body = eventually(lambda: ready_body(operator), timeout=RECOVERY)
        assert body["ready"] is True, body
        assert all(body["lists"].values()), body
        eventually(lambda: charged_exactly(cluster_with, "q", "3", "3Gi"), timeout=RECOVERY)
