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

from collections.abc import Collection, Mapping
from dataclasses import replace

from sharekeeper.engine.reclaim.state import queue_paths
from sharekeeper.engine.reclaim.values import PODS, PodKey, ReclaimInputs


def replan_inputs(
    inputs: ReclaimInputs, accepted: Collection[PodKey], refused: Collection[PodKey]
) -> ReclaimInputs:
    """``inputs`` with the ``accepted`` evictions gone (from their queues and the queues above,
    their nodes and their PodGroups) and the ``refused`` pods excluded."""
    gone = [pod for pod in inputs.running if pod.key in set(accepted)]
    paths = queue_paths(inputs.queues)
    by_queue: dict[str, dict[str, int]] = {}
    by_node: dict[str, dict[str, int]] = {}
    by_group: dict[tuple[str, str], int] = {}
    for pod in gone:
        for name in paths.get(pod.queue, ()):
            _add(by_queue.setdefault(name, {}), pod.request)
        _add(by_node.setdefault(pod.node, {}), {**pod.request, PODS: 1})
        if pod.group:
            group = (pod.namespace, pod.group)
            by_group[group] = by_group.get(group, 0) + 1
    keys = {pod.key for pod in gone}
    return replace(
        inputs,
        queues=tuple(
            replace(q, allocated=_less(q.allocated, by_queue[q.name])) if q.name in by_queue else q
            for q in inputs.queues
        ),
        nodes=tuple(
            replace(n, used=_less(n.used, by_node[n.name])) if n.name in by_node else n
            for n in inputs.nodes
        ),
        running=tuple(pod for pod in inputs.running if pod.key not in keys),
        gangs=tuple(
            replace(g, running=g.running - by_group.get((g.namespace, g.name), 0))
            for g in inputs.gangs
        ),
        excluded=inputs.excluded | frozenset(refused),
        settings=replace(
            inputs.settings, max_evictions=max(inputs.settings.max_evictions - len(gone), 0)
        ),
    )


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        if name != PODS or amount:
            into[name] = into.get(name, 0) + amount


def _less(amounts: Mapping[str, int], taken: Mapping[str, int]) -> dict[str, int]:
    result = dict(amounts)
    for name, amount in taken.items():
        result[name] = result.get(name, 0) - amount
    return result
