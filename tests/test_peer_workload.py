"""The side-by-side benchmark's workload and arithmetic (benchmarks/peers/workload.py): what the
figures mean must not depend on a cluster, so it is checked here without one."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import nearest_rank
from peers.workload import (
    Shape,
    backlog,
    fairness,
    jobs,
    mean_in,
    rate_in,
    saturation_window,
    summary,
    summary_by_weight,
    unfit_jobs,
)


def test_a_seed_is_a_workload() -> None:
    shape = Shape(jobs=200)
    assert jobs(shape) == jobs(shape)
    assert jobs(shape) != jobs(replace(shape, seed=shape.seed + 1))


def test_jobs_stay_in_the_shape_and_arrive_at_a_fixed_rate() -> None:
    shape = Shape(jobs=500, queues=7, max_pods=8, min_run_seconds=20, max_run_seconds=40,
                  jobs_per_second=4.0)  # fmt: skip
    work = jobs(shape)
    assert [job.at for job in work] == [index / 4.0 for index in range(500)]
    assert {job.pods for job in work} == set(range(1, 9))
    assert all(20 <= job.run_seconds <= 40 for job in work)
    assert {job.queue for job in work} == set(range(7))
    assert len({job.name for job in work}) == 500


def test_weights_cycle_through_their_range() -> None:
    shape = Shape(queues=6, min_weight=2, max_weight=5)
    assert [shape.weight(q) for q in range(6)] == [2, 3, 4, 5, 2, 3]


def test_the_small_size_fits_every_job_in_its_queue_and_saturates() -> None:
    shape = Shape()
    weights = [shape.weight(q) for q in range(shape.queues)]
    deserved = [shape.cluster_cpu_milli * w // sum(weights) for w in weights]
    assert unfit_jobs(shape, jobs(shape), deserved) == []
    assert shape.jobs_per_second > shape.jobs_per_second_at_capacity


def test_a_job_larger_than_its_queue_is_named() -> None:
    shape = Shape(jobs=50, queues=2, max_pods=8, pod_cpu_milli=1000)
    work = jobs(shape)
    unfit = unfit_jobs(shape, work, [4000, 100_000])
    assert unfit == [job.name for job in work if job.queue == 0 and job.pods > 4]
    assert unfit


def test_nearest_rank_and_summary() -> None:
    samples = [float(x) for x in range(1, 101)]
    assert nearest_rank(samples, 0.5) == 50
    assert nearest_rank(samples, 0.99) == 99
    assert nearest_rank([3.0], 0.99) == 3.0
    assert summary(samples) == {"count": 100, "mean": 50.5, "p50": 50.0, "p90": 90.0,
                                "p99": 99.0, "max": 100.0}  # fmt: skip
    assert summary([]) == {"count": 0}


def test_waits_are_summarised_by_the_weight_of_the_jobs_queue() -> None:
    shape = Shape(jobs=400, queues=8)  # weights 2, 3, 4, 5, 2, 3, 4, 5
    work = jobs(shape)
    waits = [(job, float(shape.weight(job.queue) * 10 + job.pods)) for job in work]
    found = summary_by_weight(shape, waits)
    assert list(found) == ["2", "3", "4", "5"]
    for weight, figures in found.items():
        mine = [wait for job, wait in waits if shape.weight(job.queue) == int(weight)]
        assert figures == summary(mine)
        assert int(weight) * 10 < figures["p50"] <= int(weight) * 10 + shape.max_pods
    assert sum(figures["count"] for figures in found.values()) == 400


def test_the_backlog_counts_submissions_before_admissions_at_equal_times() -> None:
    assert backlog([0.0, 1.0, 2.0], [1.0, 3.0, 4.0]) == [
        (0.0, 1), (1.0, 2), (1.0, 1), (2.0, 2), (3.0, 1), (4.0, 0)
    ]  # fmt: skip


def test_the_saturation_window_spans_the_backlog_above_a_quarter_of_its_peak() -> None:
    # Eight jobs at 0..7 s; nothing admitted until 8 s, then one a second.
    submitted = [float(t) for t in range(8)]
    admitted = [8.0 + t for t in range(8)]
    # Peak 8; a quarter is 2: reached at 1 s, last held until the admission at 14 s.
    assert saturation_window(submitted, admitted) == (1.0, 14.0)
    assert rate_in(admitted, (1.0, 14.0)) == pytest.approx(7 / 13)


def test_no_backlog_no_window() -> None:
    assert saturation_window([], []) is None
    assert rate_in([1.0], None) is None


def test_a_series_is_averaged_over_the_samples_inside_the_window() -> None:
    series = [(0.0, 100.0), (2.0, 10.0), (4.0, 20.0), (6.0, 60.0), (8.0, 500.0)]
    assert mean_in(series, (2.0, 6.0)) == pytest.approx(30.0)
    assert mean_in(series, (9.0, 10.0)) is None
    assert mean_in(series, None) is None


def test_fairness_of_queues_at_what_they_deserve() -> None:
    samples = [(float(t), {0: 10.0, 1: 20.0}) for t in range(10)]
    found = fairness(samples, {0: 10.0, 1: 20.0}, (0.0, 9.0))
    assert found["mean_distance"] == 0
    assert found["max_distance"] == 0
    assert found["jain_index"] == 1


def test_fairness_names_the_queue_farthest_from_its_share() -> None:
    samples = [(0.0, {0: 20.0, 1: 10.0}), (1.0, {0: 20.0}), (5.0, {0: 0.0, 1: 99.0})]
    found = fairness(samples, {0: 10.0, 1: 10.0, 2: 0.0}, (0.0, 1.0))
    # Inside the window: queue 0 at 2x, queue 1 at 0.5x on average (absent counts as 0).
    assert found["samples"] == 2
    assert found["max_ratio"] == 2.0
    assert found["min_ratio"] == 0.5
    assert found["farthest_queue"] == 0
    assert found["max_distance"] == 1.0
    assert found["jain_index"] == pytest.approx(2.5**2 / (2 * (4 + 0.25)), abs=1e-4)


def test_fairness_without_a_window_has_no_samples() -> None:
    assert fairness([(0.0, {0: 1.0})], {0: 1.0}, None) == {"samples": 0}


def test_our_policy_borrows_and_overcommits_only_as_asked() -> None:
    """``--borrow`` and ``--overcommit-factor`` must reach the policy as the operator reads it
    (a misspelt field would be refused, or silently read as the default)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
    from bench_kueue import our_policy
    from sharekeeper.api.policy import policy_spec

    assert policy_spec(our_policy(borrow=True)).nodes.borrow
    assert not policy_spec(our_policy()).nodes.borrow
    assert policy_spec(our_policy(overcommit=1)).nodes.overcommit.factor == 1
    assert policy_spec(our_policy()).nodes.overcommit.factor == Fraction(6, 5)


def test_our_capacity_queues_deserve_kueues_nominal_quotas() -> None:
    """``--our-sharing Capacity``: each Queue's spec.deserved is the quota Kueue's ClusterQueue
    gets, as the operator reads it."""
    from bench_kueue import our_policy, our_queues
    from sharekeeper.api.policy import policy_spec
    from sharekeeper.api.queue import queue_snapshot

    shape = Shape(queues=3)
    quotas = {q: {"cpu": 9249 + q, "memory": (q + 1) * 2**30} for q in range(3)}
    assert policy_spec(our_policy(sharing="Capacity")).shares.sharing.policy == "Capacity"
    for q, queue in enumerate(our_queues(shape, quotas)):
        assert queue_snapshot(queue).deserved == quotas[q]
    assert all("deserved" not in queue["spec"] for queue in our_queues(shape))


def test_a_cut_kueue_phase_is_cleaned_of_the_workloads_kueue_no_longer_releases() -> None:
    """Kueue is stopped before the clean-up, so its finalizer stays on the Workloads it had
    admitted: the clean-up takes it off those being deleted, and only those."""
    import httpx2 as httpx

    from bench_kueue import release_workloads

    path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/kueue-bench/workloads"
    items = [
        {"metadata": {"name": "held", "deletionTimestamp": "t", "finalizers": ["kueue"]}},
        {"metadata": {"name": "gone", "deletionTimestamp": "t", "finalizers": ["kueue"]}},
        {"metadata": {"name": "free", "deletionTimestamp": "t"}},
        {"metadata": {"name": "alive", "finalizers": ["kueue"]}},
    ]
    patched: list[tuple[str, bytes, str]] = []

    def serve(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"items": items})
        patched.append((request.url.path, request.content, request.headers["content-type"]))
        return httpx.Response(404 if request.url.path.endswith("/gone") else 200, json={})

    with httpx.Client(transport=httpx.MockTransport(serve), base_url="https://api") as client:
        release_workloads(client, path)
    finalizers_off = b'{"metadata":{"finalizers":null}}'
    merge = "application/merge-patch+json"
    assert patched == [
        (f"{path}/held", finalizers_off, merge),
        (f"{path}/gone", finalizers_off, merge),
    ]


class _Clock:
    """The clean-up's clock, for tests: each of its one-second sleeps moves it ten seconds (a
    poll of a busy API server)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += 10 * seconds


def _clean_up(
    serve: Callable[[Any], Any], paths: list[str], clock: _Clock, workloads: str | None = None
) -> None:
    """``empty_collections`` over ``paths`` against a mock API server that answers ``serve``,
    with a 600 s timeout."""
    import httpx2 as httpx

    from bench_kueue import empty_collections

    with httpx.Client(transport=httpx.MockTransport(serve), base_url="https://api") as client:
        empty_collections(
            client, paths, workloads=workloads, timeout=600, clock=clock, sleep=clock.sleep
        )


def test_a_clean_up_the_api_server_gives_up_on_is_waited_for_not_sent_again_at_once() -> None:
    """The API server answers a long collection delete with a 504 while the deletion goes on:
    the clean-up polls the counts, sends a delete again only once its collection stood still for
    ``RESEND_AFTER`` seconds, and returns when every collection is empty. (A mock transport
    and a fake clock: what is tested is the loop, not an API server.)"""
    import httpx2 as httpx

    from bench_kueue import RESEND_AFTER

    jobs, pods = "/apis/batch/v1/namespaces/ns/jobs", "/api/v1/namespaces/ns/pods"
    pods_left = iter([5, 4, 3, *[3] * 8, 0])
    clock = _Clock()
    deletes: list[tuple[str, float]] = []
    polls = [0]

    def serve(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "DELETE":
            deletes.append((path, clock.now))
            first_pods_delete = path == pods and len([d for d in deletes if d[0] == pods]) == 1
            return httpx.Response(504 if first_pods_delete else 200, json={})
        if path == pods:
            polls[0] += 1
            if polls[0] == 2:
                raise httpx.ReadTimeout("busy", request=request)
            left = next(pods_left)
        else:
            left = 0
        body = {"items": [{}] if left else [], "metadata": {"remainingItemCount": max(left - 1, 0)}}
        return httpx.Response(200, json=body)

    _clean_up(serve, [jobs, pods], clock)
    pods_deletes = [at for path, at in deletes if path == pods]
    assert len(pods_deletes) == 2, deletes
    # Sent again only after the counts had stood still for longer than RESEND_AFTER.
    last_fall = 30.0  # the third answered poll (5 -> 4 -> 3, one poll timed out between)
    assert pods_deletes[1] - last_fall > RESEND_AFTER
    assert next(pods_left, None) is None  # polled until empty


def test_a_clean_up_waits_while_it_shrinks_and_lists_the_workloads_only_when_it_deletes() -> None:
    """At the large size the deletes outlast the timeout while every poll finds fewer objects:
    the clean-up gives up only once nothing shrank for the timeout. Kueue's Workloads are
    listed (to take its finalizer off) when the deletes are sent, not at every poll: a list of
    thousands of them each second kept the API server from deleting. (A mock transport and a
    fake clock.)"""
    import httpx2 as httpx

    from bench_kueue import RESEND_AFTER

    workloads = "/apis/kueue.x-k8s.io/v1beta1/namespaces/kueue-bench/workloads"
    clock = _Clock()
    listed: list[float] = []

    def cluster(left: list[int]) -> Callable[[httpx.Request], httpx.Response]:
        def serve(request: httpx.Request) -> httpx.Response:
            if request.method == "DELETE":
                return httpx.Response(200, json={})
            if "limit" in request.url.params and request.url.params["limit"] == "500":
                listed.append(clock.now)
                return httpx.Response(200, json={"items": [], "metadata": {}})
            remaining = left.pop(0) if len(left) > 1 else left[0]
            items = [{}] if remaining else []
            body = {"items": items, "metadata": {"remainingItemCount": max(remaining - 1, 0)}}
            return httpx.Response(200, json=body)

        return serve

    # One fewer every poll for 1,000 s (100 polls), past a 600 s timeout: waited for.
    _clean_up(cluster(list(range(100, -1, -1))), [workloads], clock, workloads)
    assert clock.now >= 1000
    assert listed == [0.0]  # once, with the deletes: it never stood still for RESEND_AFTER

    # Standing still: the deletes (and the list) sent again every RESEND_AFTER, given up after
    # the timeout.
    clock.now, listed[:] = 0.0, []
    with pytest.raises(TimeoutError, match="none shrank for 600 s"):
        _clean_up(cluster([7]), [workloads], clock, workloads)
    assert 600 < clock.now <= 620
    assert len(listed) == int(600 // (RESEND_AFTER + 10)) + 1


def test_a_collection_that_stands_still_is_deleted_again_while_another_shrinks() -> None:
    """The API server stops a dropped collection delete where it was: the Jobs stood still at
    7,353 for minutes while their pods trickled away, and a clean-up that sent the deletes
    again only when no collection shrank never sent the Jobs' again. Each collection's delete
    goes again once that one stood still for ``RESEND_AFTER``. (A mock transport and a fake
    clock.)"""
    import httpx2 as httpx

    from bench_kueue import RESEND_AFTER

    jobs, pods = "/apis/batch/v1/namespaces/ns/jobs", "/api/v1/namespaces/ns/pods"
    clock = _Clock()
    deletes: list[tuple[str, float]] = []
    left = {jobs: 5, pods: 60}

    def serve(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "DELETE":
            deletes.append((path, clock.now))
            if path == jobs and len(deletes) > 2:  # the first delete of the Jobs was dropped
                left[jobs] = 0
            return httpx.Response(200, json={})
        if path == pods:
            left[pods] = max(left[pods] - 1, 0 if not left[jobs] else 1)
        remaining = left[path]
        more = {"remainingItemCount": max(remaining - 1, 0)}
        return httpx.Response(200, json={"items": [{}] if remaining else [], "metadata": more})

    _clean_up(serve, [jobs, pods], clock)
    jobs_sent = [at for path, at in deletes if path == jobs]
    # Again once the Jobs stood still for RESEND_AFTER, while the pods still shrank.
    assert len(jobs_sent) == 2
    assert RESEND_AFTER < jobs_sent[1] <= RESEND_AFTER + 20
    assert [path for path, _ in deletes].count(pods) == 1  # the pods, shrinking, never again
