"""Planning again after a refused eviction: the accepted evictions applied, the refused pod
excluded, so that the same rules pick the next victim.

The caller evicts a plan's victims in order through the Eviction API. At the first refusal
(a PodDisruptionBudget, or any other), it stops, and plans again with
``replan_inputs(inputs, accepted, refused)``: reclaimers whose victims are all gone now fit
where they were freed (a ``Reclaim`` without victims), the others get their victims again,
never the refused pod. The bound left for the round shrinks by what was evicted.
O(queues · depth + running pods).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim.state import queue_paths
from sharekeeper.engine.reclaim.values import PODS, ReclaimInputs
from sharekeeper.engine.resources import add, subtract


def replan_inputs(
    inputs: ReclaimInputs, accepted: Collection[PodKey], refused: Collection[PodKey]
) -> ReclaimInputs:
    """``inputs`` with the ``accepted`` evictions gone (from their queues and the queues above,
    their nodes and their PodGroups) and the ``refused`` pods excluded."""
    taken = set(accepted)
    gone = [pod for pods in inputs.running.values() for pod in pods if pod.key in taken]
    paths = queue_paths(inputs.queues)
    by_queue: dict[str, dict[str, int]] = {}
    by_node: dict[str, dict[str, int]] = {}
    by_group: dict[tuple[str, str], int] = {}
    for pod in gone:
        for name in paths.get(pod.queue, ()):
            by_queue[name] = add(by_queue.get(name, {}), pod.request)
        by_node[pod.node] = add(by_node.get(pod.node, {}), {**pod.request, PODS: 1})
        if pod.group:
            group = (pod.namespace, pod.group)
            by_group[group] = by_group.get(group, 0) + 1
    keys = {pod.key for pod in gone}
    return replace(
        inputs,
        queues=tuple(
            replace(q, allocated=subtract(q.allocated, by_queue[q.name]))
            if q.name in by_queue
            else q
            for q in inputs.queues
        ),
        nodes=tuple(
            replace(n, used=subtract(n.used, by_node[n.name])) if n.name in by_node else n
            for n in inputs.nodes
        ),
        running={
            queue: left
            for queue, pods in inputs.running.items()
            if (left := tuple(pod for pod in pods if pod.key not in keys))
        },
        gangs=tuple(
            replace(g, running=g.running - by_group.get((g.namespace, g.name), 0))
            for g in inputs.gangs
        ),
        excluded=inputs.excluded | frozenset(refused),
        rows=None,  # the queues' allocated moved: read from them
        settings=replace(
            inputs.settings, max_evictions=max(inputs.settings.max_evictions - len(gone), 0)
        ),
    )
