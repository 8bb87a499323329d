"""The simulate report: one JSON-shaped dict, built by contributors, one per engine.

A contributor takes the inputs and the simulation context and returns a partial report;
partial reports are merged key by key (``schedulerPolicies.<name>`` may get its share status
from one engine and its ``overcommit`` from another). Adding an engine's section is one call:
``CONTRIBUTORS.append(my_section)``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

from sharekeeper.cluster.snapshots import share_snapshot
from sharekeeper.engine.gates import GateDecisions
from sharekeeper.engine.proportional import PendingPod
from sharekeeper.engine.qos import accept_all, node_actions
from sharekeeper.engine.shares import ShareSnapshot
from sharekeeper.model.documents import one_line
from sharekeeper.model.objects import MutableObj, Obj, rfc3339
from sharekeeper.model.qos import TAINT, WATERLINES_ANNOTATION
from sharekeeper.pipeline.qos import (
    Outcomes,
    actions_in_order,
    cluster_check,
    node_outputs,
    policy_statuses,
    unreachable_message,
)
from sharekeeper.pipeline.shares import publication
from sharekeeper.pipeline.statuses import not_bound_text, waiting_text
from sharekeeper.simulate.reading import Inputs
from sharekeeper.simulate.victims import explained_queue


@dataclass(frozen=True, slots=True)
class Context:
    now_seconds: float
    seed: int
    placements: bool = False
    """Also answer the proportional predicate for every pending pod: O(pending pods x nodes)
    in output size, so only when asked (``--placements``)."""
    explained: str | None = None
    """The queue ``explain`` asks about: why each of its running pods is or is not a reclaim
    victim is added (``explainedQueue``), at a cost per pod listed, so only for that one."""


Contributor = Callable[[Inputs, Context], Obj]


def snapshot_of(inputs: Inputs, context: Context) -> ShareSnapshot:
    return share_snapshot(
        inputs.store,
        inputs.queues,
        inputs.policies,
        now_seconds=context.now_seconds,
        seed=context.seed,
    )


def share_section(inputs: Inputs, context: Context) -> Obj:
    """Queue and policy statuses, node annotations, and the proportional predicate."""
    pending = [
        PendingPod(f"{pod.namespace}/{pod.name}", pod.request)
        for pod in (record.share for record in inputs.store.pods.records.values())
        if pod.pending and context.placements
    ]
    held = inputs.store.pods.held()
    snapshot = snapshot_of(inputs, context)
    published = publication(
        snapshot, inputs.node_policies, pending, held=held,
        unbound=inputs.store.pods.released_unbound(), pods=inputs.store.pods,
        now=context.now_seconds,
    )  # fmt: skip
    for message in published.unknown_queues:  # as the operator: an Event, not a refusal
        print(
            f"sharekeeper simulate: warning: {message}, which does not exist: charged to no queue",
            file=sys.stderr,
        )
    return {
        "queues": dict(published.queues),
        "schedulerPolicies": dict(published.policies),
        "nodes": {
            name: {"annotations": dict(annotations)}
            for name, annotations in sorted(published.nodes.items())
        },
        **({"placements": dict(published.placements)} if context.placements else {}),
        **(
            {"admission": admission_view(published.gates)}
            if held or published.gates.not_bound
            else {}
        ),
        **(
            {"explainedQueue": explained_queue(published, context.explained)}
            if context.explained is not None
            else {}
        ),
    }


def admission_view(gates: GateDecisions) -> MutableObj:
    """What one round does with the pods the admission gate holds: which go, in order, and
    why each other one waits (the text of its Event); per queue, the pods it keeps held in its
    admission order, with their places, then those in no line (``position`` null), each with
    why it waits, naming every pod (for whoever reads the whole input); and the released pods
    past their bind timeout (the text of their ``NotBound`` Event)."""
    view: MutableObj = {
        "released": [f"{namespace}/{name}" for namespace, name in gates.released],
        "waiting": {
            f"{namespace}/{name}": waiting_text(why, namespace)
            for (namespace, name), why in gates.waiting.items()
        },
        "queues": held_by_queue(gates),
    }
    if gates.not_bound:
        view["notBound"] = {
            f"{namespace}/{name}": not_bound_text(stuck)
            for (namespace, name), stuck in gates.not_bound.items()
        }
    return view


def held_by_queue(gates: GateDecisions) -> MutableObj:
    """Queue -> its held pods: its line first, in order, then the pods held for it in no line
    (by name). O(held pods)."""
    queues: dict[str, list[MutableObj]] = {}
    for queue, line in sorted(gates.lines.items()):
        queues[str(queue)] = [
            {"pod": str(key), "position": place,
             "waits": waiting_text(gates.waiting[key], names_all=True)}
            for place, key in enumerate(line, 1)
        ]  # fmt: skip
    lined = {key for line in gates.lines.values() for key in line}
    for key, why in gates.waiting.items():
        if key not in lined:
            queues.setdefault(why.queue, []).append(
                {"pod": str(key), "position": None, "waits": waiting_text(why, names_all=True)}
            )
    return dict(sorted(queues.items()))


def qos_section(inputs: Inputs, context: Context) -> Obj:
    """One node QoS check with usage from the NodeMetrics/PodMetrics objects read, every
    action accepted; counters and throttle state come from the input's status. A rule no
    selected node can cross (a unit mistake, most often) is also warned about on stderr."""
    records = inputs.store.qos_policies.sorted_records()
    if not records:
        return {}
    # As the QoS loop hands them over: the spec as the store read it, and the status.
    policies = [{**r.spec, "status": r.status} for r in records if r.spec is not None]
    node_metrics = inputs.raw.get("NodeMetrics")
    store = inputs.store
    nodes = [r.qos for r in store.nodes.sorted_records() if r.qos is not None]
    check = cluster_check(
        policies,
        nodes,
        store.pods.qos_views_on,
        store.namespaces.records,
        node_metrics=node_metrics,
        pod_metrics=inputs.raw.get("PodMetrics", ()) if node_metrics is not None else None,
        now=int(context.now_seconds),
    )
    for policy, rules in sorted(check.unreachable.items()):
        for rule in rules:
            message = one_line(f"{policy}: {unreachable_message(rule)}")
            print(f"sharekeeper simulate: warning: {message}", file=sys.stderr)
    outcomes = {}
    for node_check in check.nodes:
        report = accept_all(node_actions(node_check.result, node_check.node))
        preview = accept_all(node_actions(node_check.result, node_check.node, preview=True))
        outcomes[node_check.node.name] = Outcomes.from_reports(report, preview)
    stamp = rfc3339(context.now_seconds)
    current = {r.name: r.status for r in records}
    return {
        "nodeQosEnsurancePolicies": policy_statuses(check, outcomes, current, now=stamp),
        "nodes": {
            name: {
                # A calm node gets no waterlines annotation, as in the cluster.
                "annotations": {}
                if out["waterlines"] is None
                else {WATERLINES_ANNOTATION: out["waterlines"]},
                "taints": [dict(TAINT)] if out["tainted"] else [],
            }
            for name, out in node_outputs(check).items()
        },
        "actions": actions_in_order(outcomes),
    }


CONTRIBUTORS: list[Contributor] = [share_section, qos_section]


def build_report(
    inputs: Inputs, context: Context, contributors: list[Contributor] = CONTRIBUTORS
) -> MutableObj:
    report: MutableObj = {"queues": {}, "schedulerPolicies": {}}
    for contributor in contributors:
        _merge(report, contributor(inputs, context))
    return report


def _merge(into: MutableObj, part: Obj) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), MutableMapping):
            _merge(into[key], value)
        else:
            into[key] = value
