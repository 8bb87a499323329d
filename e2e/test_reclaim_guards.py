"""Reclaim's guarantees on a whole cluster in a box (``docs/reclaim.md``, "Guarantees"): a
PodDisruptionBudget that refuses an eviction sends the plan to the next victim and nothing is
deleted; a Volcano PodGroup at its ``minMember`` goes whole or not at all; a plan a budget
refuses whole is not sent again round after round; once a reclaim has settled, nothing more is
evicted for two minutes.

Two fake nodes of 4 cpu (``admitting.kwok_nodes``), queues ``a`` and ``b`` of equal weight under
the policy ``all`` (``admission.borrow``, overcommit factor 1, reclaim after 2 s, at most 10
evictions per round). Queue ``a`` fills the nodes with Job pods of 1 cpu; ``b`` then asks for
its deserved share. Evictions are counted from the API server's audit log (the operator's
``pods/eviction`` creates and their answers), refusals also from the operator's
``sharekeeper_reclaim_evictions_refused_total``. The Jobs re-create what is evicted: the new
pods wait behind the gate (their queue is at its deserved share)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import objects
from admitting import (
    QUEUE_LABEL,
    RECLAIM_POLICY,
    admitting_operator,
    held,
    live,
    opted_in_namespace,
    pods_of,
    reclaim_policy,
)
from clusters import Cluster, Installed
from fakenodes import job
from operating import Operator, eventually, operator_writes

POLICY = RECLAIM_POLICY
PODGROUP_CRD = Path(__file__).parent / "volcano" / "podgroups.yaml"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
JOB_LABEL = "batch.kubernetes.io/job-name"
GUARDED = {"guarded": "yes"}
REFUSED_METRIC = "sharekeeper_reclaim_evictions_refused_total"
QUIET_SECONDS = 120  # issue 24: no eviction for two minutes once a reclaim has settled
REFUSAL_WINDOW = 10  # seconds watched while a budget refuses every victim


@pytest.fixture(scope="module")
def admitting(
    full_installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Installed, Operator]]:
    """The operator serving the webhook (``admitting.admitting_operator``), with Volcano's
    PodGroup CRD installed and discovered within a second."""
    with admitting_operator(
        full_installed,
        tmp_path_factory.mktemp("reclaim-guards") / "operator.log",
        apply=[reclaim_policy("Off")],
        files=[PODGROUP_CRD],
        env={"SHAREKEEPER_DISCOVERY_INTERVAL": "1"},
    ) as operator:
        yield full_installed, operator


@pytest.fixture
def space(admitting: tuple[Installed, Operator], request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, opted in to admission, with queues ``a`` and ``b`` and
    the policy in mode On; the policy is Off again at the end."""
    cluster = admitting[0].cluster
    try:
        with opted_in_namespace(cluster, request) as name:
            cluster.apply(reclaim_policy("On"), objects.queue("a"), objects.queue("b"))
            yield name
    finally:
        cluster.apply(reclaim_policy("Off"))


# --- what the cluster shows ----------------------------------------------------------------


def live_by_job(installed: Installed, namespace: str) -> Counter[str]:
    return Counter(
        pod["metadata"]["labels"].get(JOB_LABEL, "")
        for pod in pods_of(installed, namespace)
        if live(pod)
    )


def names_of(installed: Installed, namespace: str, job_name: str) -> set[str]:
    """The pods of Job ``job_name`` as they are now."""
    return {
        pod["metadata"]["name"]
        for pod in pods_of(installed, namespace)
        if pod["metadata"]["labels"].get(JOB_LABEL) == job_name
    }


def still_live(installed: Installed, namespace: str, names: set[str]) -> set[str]:
    """Which of ``names`` exist and are live."""
    return {
        pod["metadata"]["name"]
        for pod in pods_of(installed, namespace)
        if pod["metadata"]["name"] in names and live(pod)
    }


def a_job(
    name: str, namespace: str, count: int, *, labels: dict[str, str] | None = None, **more: Any
) -> dict[str, Any]:
    """``count`` pods of 1 cpu in queue ``a`` (unless ``labels`` say otherwise) that run ten
    minutes; evicted pods count as failed, so the Job may lose many before it gives up."""
    made = job(name, namespace, completions=count, parallelism=count, cpu="1", memory="64Mi",
               run_for="600s", labels=labels or {QUEUE_LABEL: "a"}, **more)  # fmt: skip
    made["spec"]["backoffLimit"] = 100
    return made


def b_job(name: str, namespace: str, count: int) -> dict[str, Any]:
    return a_job(name, namespace, count, labels={QUEUE_LABEL: "b"})


def budget(name: str, namespace: str, pods: int) -> dict[str, Any]:
    """A PodDisruptionBudget that allows no disruption of the ``pods`` ``GUARDED`` pods: all
    must stay available (``maxUnavailable`` would need a controller with a scale subresource,
    which a Job is not)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": pods, "selector": {"matchLabels": GUARDED}},
    }


def wait_budget(cluster: Cluster, namespace: str, name: str, healthy: int) -> None:
    """Until the disruption controller has counted the budget's pods (it allows none)."""

    def counted() -> bool:
        status = cluster.get("pdb", name, "-n", namespace).get("status", {})
        assert status.get("currentHealthy") == healthy, status
        assert status.get("disruptionsAllowed") == 0, status
        return True

    eventually(counted, timeout=30)


# --- what the operator did, from the audit log -----------------------------------------------


@dataclass(frozen=True)
class Eviction:
    pod: str
    code: int

    @property
    def accepted(self) -> bool:
        return self.code == 201


def audit_mark(cluster: Cluster) -> int:
    """Where the operator's writes stand in the audit log now."""
    assert cluster.plane is not None
    return len(operator_writes(cluster.plane.audit_log))


def evictions(cluster: Cluster, namespace: str, since: int) -> list[Eviction]:
    """The operator's Eviction requests for pods of ``namespace`` since audit mark ``since``,
    in order, with the API server's answer."""
    assert cluster.plane is not None
    return [
        Eviction(str(ref.get("name")), int(entry.get("responseStatus", {}).get("code", 0)))
        for entry in operator_writes(cluster.plane.audit_log)[since:]
        if (ref := entry.get("objectRef", {})).get("resource") == "pods"
        and ref.get("subresource") == "eviction"
        and ref.get("namespace") == namespace
        and entry["verb"] == "create"
    ]


def pod_deletions(cluster: Cluster, since: int) -> list[str]:
    """The operator's deletes of pods (anywhere) since audit mark ``since``."""
    assert cluster.plane is not None
    return [
        f"{entry['verb']} {ref.get('namespace')}/{ref.get('name')}"
        for entry in operator_writes(cluster.plane.audit_log)[since:]
        if entry["verb"] in ("delete", "deletecollection")
        and (ref := entry.get("objectRef", {})).get("resource") == "pods"
        and not ref.get("subresource")
    ]


def refusals_counted(
    operator: Operator, before: float, cluster: Cluster, namespace: str, since: int
) -> None:
    """The operator's refusal counter went up by the refusals the API server answered."""

    def counted() -> bool:
        counted = operator.metric(REFUSED_METRIC, policy=POLICY) - before
        refused = [e for e in evictions(cluster, namespace, since) if not e.accepted]
        assert counted == len(refused), (counted, refused)
        return True

    eventually(counted, timeout=10)


# --- the tests -------------------------------------------------------------------------------


def test_a_budget_refuses_and_the_next_victim_goes_instead(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    """a's youngest pods, the first ones the order would evict, are under a budget that allows
    no disruption: their evictions are refused, older pods of a go instead, b's pods run."""
    installed, operator = admitting
    cluster = installed.cluster
    since = audit_mark(cluster)
    refused_before = operator.metric(REFUSED_METRIC, policy=POLICY)
    cluster.apply(a_job("old", space, 4))
    eventually(lambda: live_by_job(installed, space) == Counter({"old": 4}), timeout=60)
    time.sleep(1.1)  # start times are whole seconds: the guarded pods are younger
    cluster.apply(a_job("young", space, 4, labels={QUEUE_LABEL: "a", **GUARDED}),
                  budget("keep-young", space, 4))  # fmt: skip
    eventually(lambda: live_by_job(installed, space) == Counter({"old": 4, "young": 4}), timeout=60)
    guarded = names_of(installed, space, "young")
    old = names_of(installed, space, "old")
    wait_budget(cluster, space, "keep-young", healthy=4)

    cluster.apply(b_job("want", space, 2))

    def b_runs() -> bool:
        # At every look: no guarded pod evicted, terminating or gone.
        assert still_live(installed, space, guarded) == guarded
        return live_by_job(installed, space)["want"] == 2

    eventually(b_runs, timeout=90)
    # a's Job replaces its two evicted pods: they wait (a is at its deserved share).
    eventually(lambda: sum(held(p) for p in pods_of(installed, space)) == 2, timeout=60)
    assert live_by_job(installed, space) == Counter({"old": 2, "young": 4, "want": 2})
    assert still_live(installed, space, guarded) == guarded

    tried = evictions(cluster, space, since)
    refused = [e for e in tried if not e.accepted]
    accepted = [e for e in tried if e.accepted]
    # The first choice was a guarded pod (the youngest), and the budget refused it.
    assert tried, "no eviction was tried"
    assert tried[0].pod in guarded, tried
    assert tried[0].code == 429, tried
    assert {e.pod for e in refused} <= guarded, tried
    assert {e.code for e in refused} == {429}, tried
    # Just enough went instead, all of them older pods of a.
    assert len(accepted) == 2, tried
    assert {e.pod for e in accepted} <= old, tried
    assert pod_deletions(cluster, since) == []

    refusals_counted(operator, refused_before, cluster, space, since)
    said = operator.log.read_text(errors="replace")
    assert f"eviction of {space}/{tried[0].pod} for {space}/" in said


def podgroup(name: str, namespace: str, queue: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queue": queue, "minMember": min_member},
    }


def test_a_gang_goes_whole_or_not_at_all(admitting: tuple[Installed, Operator], space: str) -> None:
    """a runs four single pods under a budget that allows no disruption and a PodGroup of four
    at its ``minMember``. While b asks for 1 cpu, evicting the gang whole would take a below
    its deserved share and one member alone would split it: nothing of it goes. Once b asks
    for 4 cpu, the whole gang goes, in one plan."""
    installed, operator = admitting
    cluster = installed.cluster
    since = audit_mark(cluster)
    refused_before = operator.metric(REFUSED_METRIC, policy=POLICY)
    cluster.apply(
        podgroup("gang", space, "a", 4),
        budget("keep-singles", space, 4),
        a_job("singles", space, 4, labels={QUEUE_LABEL: "a", **GUARDED}),
        # The gang's pods name their PodGroup only, which names the queue.
        a_job("gang", space, 4, labels={}, annotations={GROUP_ANNOTATION: "gang"}),
    )
    eventually(lambda: live_by_job(installed, space) == Counter({"singles": 4, "gang": 4}),
               timeout=60)  # fmt: skip
    gang = names_of(installed, space, "gang")
    singles = names_of(installed, space, "singles")
    wait_budget(cluster, space, "keep-singles", healthy=4)

    def whole() -> None:
        assert still_live(installed, space, gang) == gang, "the gang was split"
        assert still_live(installed, space, singles) == singles

    # b deserves 1 cpu, a 7: a's singles are refused by their budget, and the gang may only
    # go whole, which would leave a at 4.
    cluster.apply(b_job("one", space, 1))

    def refused_all_singles() -> bool:
        whole()
        tried = evictions(cluster, space, since)
        assert {e.pod for e in tried} == singles, tried
        return True

    eventually(refused_all_singles, timeout=60)
    done = int(operator.health().get("recomputeRounds", 0))
    for _ in range(2):  # some rounds more: still nothing of the gang goes
        done += 1
        operator.wait_rounds(done)
        whole()
    tried = evictions(cluster, space, since)
    assert not any(e.accepted for e in tried), tried
    assert live_by_job(installed, space)["one"] == 0

    # b asks for 4 cpu in all: b and a deserve 4 each, and the whole gang may go.
    cluster.apply(b_job("three", space, 3))

    def b_runs() -> bool:
        assert still_live(installed, space, singles) == singles
        running = live_by_job(installed, space)
        return running["one"] == 1 and running["three"] == 3

    eventually(b_runs, timeout=90)
    assert still_live(installed, space, gang) == set()
    tried = evictions(cluster, space, since)
    accepted = [e.pod for e in tried if e.accepted]
    assert sorted(accepted) == sorted(gang), tried
    # One after another, as one unit of one plan: no other eviction in between.
    first = next(i for i, e in enumerate(tried) if e.accepted)
    assert all(e.accepted for e in tried[first : first + 4]), tried
    assert {e.pod for e in tried if not e.accepted} == singles, tried
    assert pod_deletions(cluster, since) == []
    refusals_counted(operator, refused_before, cluster, space, since)


def test_a_refused_plan_is_not_sent_again_round_after_round(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    """Every pod of a is under a budget that allows no disruption, and b's pod waits for one
    of them. Nothing changes in the cluster, so each round would plan the same evictions and be
    refused the same way: after a round whose evictions were all refused the operator pauses
    (``error_backoff_seconds``, 5 s) instead of planning and sending them again at once."""
    installed, _ = admitting
    cluster = installed.cluster
    since = audit_mark(cluster)
    cluster.apply(budget("keep-all", space, 8),
                  a_job("all", space, 8, labels={QUEUE_LABEL: "a", **GUARDED}))  # fmt: skip
    eventually(lambda: live_by_job(installed, space) == Counter({"all": 8}), timeout=60)
    wait_budget(cluster, space, "keep-all", healthy=8)
    cluster.apply(b_job("one", space, 1))
    eventually(lambda: evictions(cluster, space, since), timeout=60)
    start = len(evictions(cluster, space, since))
    time.sleep(REFUSAL_WINDOW)
    tried = evictions(cluster, space, since)
    assert not any(e.accepted for e in tried), tried
    assert live_by_job(installed, space) == Counter({"all": 8})
    # A round tries each of the 8 pods once. Five such rounds in 10 s (the rest of the first,
    # one every 5 s, and a spare one or two for other events) at most; round after round,
    # about three a second, it was more than 200.
    again = len(tried) - start
    assert again <= 5 * 8, f"{again} refused evictions sent again in {REFUSAL_WINDOW} s"


def test_a_settled_reclaim_evicts_nothing_more_for_two_minutes(
    admitting: tuple[Installed, Operator], space: str
) -> None:
    """a fills the nodes, b asks for 2 cpu: two of a's pods are evicted and b's two run. a's
    Job makes two new pods, which wait behind the gate (a is at its deserved share) and reclaim
    nothing. Then for two minutes, with a share round every few seconds (a weight change of a
    queue without pods, which changes no one's share): no eviction at all."""
    installed, operator = admitting
    cluster = installed.cluster
    since = audit_mark(cluster)
    cluster.apply(objects.queue("idle"))
    cluster.apply(a_job("fill", space, 8))
    eventually(lambda: live_by_job(installed, space) == Counter({"fill": 8}), timeout=60)
    cluster.apply(b_job("want", space, 2))
    eventually(lambda: live_by_job(installed, space)["want"] == 2, timeout=90)
    eventually(lambda: sum(held(p) for p in pods_of(installed, space)) == 2, timeout=60)
    settled = evictions(cluster, space, since)
    assert [e.accepted for e in settled] == [True, True], settled
    assert live_by_job(installed, space) == Counter({"fill": 6, "want": 2})

    deadline = time.monotonic() + QUIET_SECONDS
    pokes = 0
    while time.monotonic() < deadline:
        done = int(operator.health().get("recomputeRounds", 0))
        pokes += 1
        cluster.apply(objects.queue("idle", weight=1 + pokes % 2))
        operator.wait_rounds(done + 1)
        time.sleep(5)
        assert evictions(cluster, space, since) == settled
    assert pokes >= 10
    assert live_by_job(installed, space) == Counter({"fill": 6, "want": 2})
    assert sum(held(p) for p in pods_of(installed, space)) == 2
    assert pod_deletions(cluster, since) == []
