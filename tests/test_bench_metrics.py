"""How the benchmarks read the operator's histograms (benchmarks/kubeapi.py): the figures they
report are deltas of scraped series, checked here on a fixed exposition."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from kubeapi import cumulative_share, histogram

EXPOSITION = """\
# HELP pause_seconds Pauses
# TYPE pause_seconds histogram
pause_seconds_bucket{generation="0",le="0.01"} 5.0
pause_seconds_bucket{generation="0",le="+Inf"} 6.0
pause_seconds_count{generation="0"} 6.0
pause_seconds_sum{generation="0"} 0.03
pause_seconds_bucket{generation="2",le="0.01"} 0.0
pause_seconds_bucket{generation="2",le="+Inf"} 2.0
pause_seconds_count{generation="2"} 2.0
pause_seconds_sum{generation="2"} 0.9
"""


def test_a_histogram_is_summed_over_the_series_that_carry_the_labels_asked_for() -> None:
    every = histogram(EXPOSITION, "pause_seconds")
    full = histogram(EXPOSITION, "pause_seconds", {"generation": "2"})
    assert every is not None
    assert full is not None
    assert (every.count, round(every.sum, 6), every.buckets[0.01]) == (8.0, 0.93, 5.0)
    assert (full.count, full.sum, full.buckets[float("inf")]) == (2.0, 0.9, 2.0)
    none_yet = histogram(EXPOSITION, "pause_seconds", {"generation": "1"})
    assert none_yet is not None
    assert (none_yet.count, none_yet.buckets) == (0.0, {})
    assert histogram(EXPOSITION, "other_seconds") is None


def test_the_delta_between_two_scrapes_counts_only_what_fell_between() -> None:
    before = histogram(EXPOSITION, "pause_seconds", {"generation": "2"})
    after = histogram(
        EXPOSITION.replace('count{generation="2"} 2.0', 'count{generation="2"} 5.0')
        .replace('sum{generation="2"} 0.9', 'sum{generation="2"} 2.4')
        .replace('generation="2",le="+Inf"} 2.0', 'generation="2",le="+Inf"} 5.0'),
        "pause_seconds",
        {"generation": "2"},
    )
    assert after is not None
    delta = after.since(before)
    assert delta.count == 3.0
    assert round(delta.sum, 6) == 1.5
    assert delta.slowest_at_most == float("inf")


TOP = """\
File: kube-scheduler
Type: cpu
Duration: 60s, Total samples = 2.39s ( 3.98%)
      flat  flat%   sum%        cum   cum%
     0.09s  3.77%  3.77%      1.01s 42.26%  k8s.io/kubernetes/pkg/scheduler/backend/queue.(*PriorityQueue).moveAllToActiveOrBackoffQueue
         0     0%     0%      0.97s 40.59%  k8s.io/kubernetes/pkg/scheduler/backend/queue.(*PriorityQueue).MoveAllToActiveOrBackoffQueue
     0.22s  9.21% 12.97%      0.60s 25.10%  k8s.io/kubernetes/pkg/scheduler/backend/queue.(*PriorityQueue).movePodsToActiveOrBackoffQueue
"""  # noqa: E501  (go tool pprof -top -cum, cut)


def test_a_functions_share_of_a_profile_is_read_by_the_end_of_its_name() -> None:
    assert cumulative_share(TOP, ".movePodsToActiveOrBackoffQueue") == 25.10
    # The exported name, not the unexported one beside it that ends the same way.
    assert cumulative_share(TOP, ".MoveAllToActiveOrBackoffQueue") == 40.59
    assert cumulative_share(TOP, ".ScheduleOne") == 0.0


API_SERVER = """\
# HELP apiserver_request_duration_seconds_other Not the one asked for.
# TYPE apiserver_request_duration_seconds_other gauge
apiserver_request_duration_seconds_other 7
# HELP apiserver_request_duration_seconds Latency.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{resource="pods",subresource="",verb="POST",le="0.1"} 50
apiserver_request_duration_seconds_bucket{resource="pods",subresource="",verb="POST",le="0.5"} 90
apiserver_request_duration_seconds_bucket{resource="pods",subresource="",verb="POST",le="+Inf"} 100
apiserver_request_duration_seconds_count{resource="pods",subresource="",verb="POST"} 100
apiserver_request_duration_seconds_sum{resource="pods",subresource="",verb="POST"} 30
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="0.1"} 9
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="0.5"} 9
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="+Inf"} 9
apiserver_request_duration_seconds_count{resource="pods",subresource="binding",verb="POST"} 9
apiserver_request_duration_seconds_sum{resource="pods",subresource="binding",verb="POST"} 0.1
"""  # noqa: E501


def test_a_quantile_is_interpolated_in_its_bucket_as_prometheus_does() -> None:
    """Of 100 pod creations, 50 within 0.1 s, 40 more within 0.5 s, 10 beyond: the median is at
    the first bucket's bound, p75 halfway between the bounds, and p99, beyond the last bound,
    is that bound. A pod's binding (the same name and verb, a subresource) is not counted."""
    created = histogram(API_SERVER, "apiserver_request_duration_seconds",
                        {"verb": "POST", "resource": "pods", "subresource": ""})  # fmt: skip
    assert created is not None
    delta = created.since(None)
    assert delta.quantile(0.5) == 0.1
    assert delta.quantile(0.75) == 0.1 + 0.4 * 25 / 40
    assert delta.quantile(0.99) == 0.5
    assert delta.latency_json() == {"observations": 100, "mean": 0.3, "p50": 0.1, "p99": 0.5}
    assert created.since(created).quantile(0.5) is None
