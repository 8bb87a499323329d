"""The top-size benchmark's cluster (benchmarks/bench_operator.py): its queue tree must be the
tree the operator reads, or the run measures something else than it says."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_operator import Workload
from sharekeeper.api.queue import queue_snapshot


def test_flat_queues_name_no_parent_and_every_one_takes_a_change() -> None:
    workload = Workload(nodes=10)
    queues = [queue_snapshot(obj) for obj in workload.queue_objects()]
    assert len(queues) == workload.queues == 20
    assert all(queue.parent is None for queue in queues)
    assert workload.change_targets() == [queue.name for queue in queues]


def test_a_tree_puts_the_pods_queues_at_the_leaves_under_full_levels_of_inner_queues() -> None:
    workload = Workload(nodes=40, tree_fanout=3)
    queues = {queue.name: queue for queue in map(queue_snapshot, workload.queue_objects())}
    assert len(queues) == workload.queues == 80 + 27 + 9 + 3

    children = Counter(queue.parent for queue in queues.values())
    tops = sorted(name for name, queue in queues.items() if queue.parent is None)
    assert workload.change_targets() == tops
    assert len(tops) == 3
    assert all(parent in queues for parent in children if parent is not None)
    assert max(count for parent, count in children.items() if parent is not None) == 3

    def depth(name: str) -> int:
        parent = queues[name].parent
        return 0 if parent is None else 1 + depth(parent)

    leaves = set(queues) - set(children)
    assert leaves == set(workload.queue_names())
    assert {depth(name) for name in leaves} == {3}
    pod_queues = {
        pod["metadata"]["labels"]["sharekeeper.io/queue"] for pod in workload.pod_objects()
    }
    assert pod_queues == leaves


def test_a_fanout_of_one_is_refused() -> None:
    with pytest.raises(ValueError, match="fanout"):
        Workload(nodes=40, tree_fanout=1)
