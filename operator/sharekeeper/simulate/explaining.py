"""Every number of one queue or node, explained: ``sharekeeper explain`` (the cluster) and
``sharekeeper simulate --explain`` (files).

Pure: the simulate report (``report.build_report``: what the operator publishes, computed by the
pipeline the operator runs) and the inputs it was computed from go in; a JSON-shaped dict of
facts comes out, with camelCase keys and quantities as Kubernetes writes them. The text is
rendered from that dict alone, so ``-o json`` and the text always say the same.

A queue: its policy and sharing kind, the policy's total and Σ guarantee, the queue's weight,
guarantee, capability and realCapability; per resource its deserved and the bound that decided
it (``decidedBy``), with the water level L for a ``Level`` bound; what it requests and holds;
what one more PodGroup of it may still ask for under the policy's overcommit; its conditions
that hold. A node: allocatable, what the share loop annotates (policy, overcommit,
proportional reservation), the pods bound to it, and the waterlines of the last QoS check.

The water level is read back from the published numbers: the queues of one policy whose
deserved a dimension's level decided all deserve ``weight x L`` before rounding, and rounding
moves each by less than one internal unit. So L is the one value within a unit of every such
queue's ``deserved / weight``; "≈" marks it (and ``exact: false`` in JSON) unless every queue
gives the same whole number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import yaml

from sharekeeper.engine.overcommit import OvercommitQueue, quota_available
from sharekeeper.engine.shares import PolicySnapshot
from sharekeeper.engine.shares.snapshot import PolicyName
from sharekeeper.engine.shares.tree import path_from_root
from sharekeeper.model import jsontext
from sharekeeper.model.documents import one_line
from sharekeeper.model.nodes import (
    OVERCOMMIT_ALLOCATABLE,
    OVERCOMMIT_FACTORS,
    POLICY,
    PROPORTIONAL_AVAILABLE,
    PROPORTIONAL_RESERVED,
)
from sharekeeper.model.objects import MutableObj, Obj
from sharekeeper.model.qos import WATERLINES_ANNOTATION
from sharekeeper.model.quantities import (
    CPU,
    MEMORY,
    PODS,
    format_resources,
    to_internal,
    to_quantity,
)
from sharekeeper.pipeline.statuses import ordinal
from sharekeeper.simulate.reading import Inputs
from sharekeeper.simulate.rendering import gap_text, resources_text
from sharekeeper.simulate.report import Context

Kind = Literal["queue", "node"]
Target = tuple[Kind, str]

NO_WATERLINE = "no waterline crossed at the last check"
"""What a node without the waterlines annotation is told: its last check found it calm."""


class NotFound(LookupError):
    """The queue or node is not in the input (or could not be read); the message says which."""


def parse_target(text: str) -> Target:
    """``NAME`` (a queue), ``queue/NAME`` or ``node/NAME``, as ``--explain`` takes it."""
    kind, slash, name = text.partition("/")
    if not slash:
        kind, name = "queue", text
    kinds: dict[str, Kind] = {"queue": "queue", "queues": "queue", "node": "node", "nodes": "node"}
    if kind not in kinds or not name or "/" in name:
        raise ValueError(f"expected NAME, queue/NAME or node/NAME, not {text!r}")
    return kinds[kind], name


def explain(report: Obj, inputs: Inputs, target: Target) -> MutableObj:
    """The facts about ``target``; ``NotFound`` when the input has no such object."""
    kind, name = target
    return (
        queue_facts(report, inputs, name) if kind == "queue" else node_facts(report, inputs, name)
    )


def published_qos(inputs: Inputs, context: Context) -> Obj:
    """A report contributor in place of ``report.qos_section`` for a cluster: the node QoS facts
    as the operator's last check published them (each node's waterlines annotation, each
    NodeQosEnsurancePolicy's status). A check of its own would need live usage and would
    advance the policies' hysteresis; explaining reads what is there instead."""
    waterlines = {
        name: {"annotations": {WATERLINES_ANNOTATION: record.annotations[WATERLINES_ANNOTATION]}}
        for name, record in sorted(inputs.store.nodes.records.items())
        if WATERLINES_ANNOTATION in record.annotations
    }
    statuses = {
        record.name: dict(record.status)
        for record in inputs.store.qos_policies.sorted_records()
        if record.status
    }
    return {"nodes": waterlines, **({"nodeQosEnsurancePolicies": statuses} if statuses else {})}


# --- queues --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WaterLevel:
    """One policy's water level in one dimension, in internal units per unit of weight."""

    value: Fraction | None
    """None when the Level-bound queues share no level (their weights were raised, say)."""
    exact: bool
    queues: int
    """How many queues of the policy this level decided, in this dimension."""


def queue_facts(report: Obj, inputs: Inputs, name: str) -> MutableObj:
    status = report.get("queues", {}).get(name)
    spec = next((queue for queue in inputs.queues if queue.name == name), None)
    if status is None or spec is None:
        raise NotFound(_missing("queue", name, inputs.store.queues.problems.get(name)))
    policy = status.get("policy")
    policy_status: Obj = report.get("schedulerPolicies", {}).get(policy, {})
    policy_spec = next((p for p in inputs.policies if p.name == policy), None)
    parents = {str(queue.name): queue.parent for queue in inputs.queues}
    # In a tree the level is shared by the queue's siblings only: each parent is filled apart.
    weights = {
        str(queue.name): queue.weight
        for queue in inputs.queues
        if parents[str(queue.name)] == spec.parent
    }
    deserved: MutableObj = {}
    for dimension, amount in status.get("deserved", {}).items():
        decided = status.get("decidedBy", {}).get(dimension)
        entry: MutableObj = {"deserved": amount, "decidedBy": decided}
        if decided == "Level" and policy_spec is not None:
            entry |= _level_facts(report, weights, policy_spec, dimension, spec.weight)
        deserved[dimension] = entry
    conditions = [
        {"type": c.get("type"), "reason": c.get("reason"), "message": c.get("message")}
        for c in status.get("conditions", [])
        if c.get("status") == "True" and c.get("type") not in ("Ready", "Enqueueable")
    ]
    published = inputs.store.queues.records[name].status.get("deserved")
    return {
        "kind": "Queue",
        "name": name,
        "state": status.get("state"),
        "policy": policy,
        "path": path_from_root(name, parents),
        "sharing": _sharing(policy_spec),
        "policyNodes": policy_status.get("nodes"),
        "policyQueues": policy_status.get("queues"),
        "policyTotal": policy_status.get("total", {}),
        "unmanaged": policy_status.get("unmanaged", {}),
        "totalGuarantee": policy_status.get("totalGuarantee", {}),
        "weight": spec.weight,
        "guarantee": status.get("guarantee", {}),
        "capability": format_resources(spec.capability),
        "specDeserved": format_resources(spec.deserved),
        "realCapability": status.get("realCapability", {}),
        "deserved": deserved,
        "request": status.get("request", {}),
        "allocated": status.get("allocated", {}),
        "inqueue": status.get("inqueue", {}),
        "elastic": status.get("elastic", {}),
        "share": status.get("share"),
        "overused": status.get("overused"),
        "enqueue": _enqueue_facts(status, policy_status),
        "held": _held_facts(report, name),
        "notBound": {"count": status.get("notBound", 0), "pods": status.get("notBoundPods", [])},
        "reclaim": _reclaim_facts(report, name),
        "conditions": conditions,
        "publishedDeserved": published if isinstance(published, Mapping) else None,
    }


MAX_EXPLAINED_HELD = 50
"""Held pods of a queue listed, in admission order; the others are counted."""


def _held_facts(report: Obj, name: str) -> MutableObj:
    """The queue's held pods as the round left them: its line in admission order (``position``
    1 first), then those in no line, each with why it waits (every pod named: whoever runs
    ``explain`` reads every pod)."""
    pods = report.get("admission", {}).get("queues", {}).get(name, [])
    listed = pods[:MAX_EXPLAINED_HELD]
    return {
        "count": len(pods),
        "inLine": sum(pod.get("position") is not None for pod in pods),
        "pods": listed,
        "more": len(pods) - len(listed),
    }


def _reclaim_facts(report: Obj, name: str) -> Obj | None:
    """Why each running pod of the queue is or is not a reclaim victim (``victims``): only
    for an overused queue, and only when the report was built for it (``Context.explained``)."""
    explained: Obj = report.get("explainedQueue") or {}
    if explained.get("name") != name:
        return None
    facts: Obj | None = explained.get("reclaim")
    return facts


def _sharing(policy: PolicySnapshot | None) -> MutableObj | None:
    if policy is None:
        return None
    sharing = policy.sharing
    facts: MutableObj = {
        "policy": sharing.policy,
        "unmanaged": "Reserve" if sharing.reserve_unmanaged else "Ignore",
    }
    if sharing.policy == "ProportionOptimize":
        facts["priorityType"] = sharing.priority_type
    if sharing.policy == "GuaranteeQuota":
        facts["elasticOrder"] = sharing.elastic_order
    return facts


def _level_facts(
    report: Obj,
    weights: Mapping[str, int],
    policy: PolicySnapshot,
    dimension: str,
    weight: int,
) -> MutableObj:
    """``level`` and ``weightTimesLevel`` where one level decides: Proportion and
    ProportionOptimize water-fill by weight; GuaranteeQuota hands out a pool in stages."""
    if policy.sharing.policy not in ("Proportion", "ProportionOptimize"):
        return {}
    members = [
        (to_internal(dimension, status["deserved"][dimension]), weights[queue])
        for queue, status in sorted(report.get("queues", {}).items())
        if status.get("policy") == policy.name
        and status.get("decidedBy", {}).get(dimension) == "Level"
        and queue in weights
    ]
    level = water_level(members)
    if level.value is None:
        return {
            "level": None,
            "weightTimesLevel": None,
            "exact": False,
            "levelQueues": level.queues,
        }
    return {
        "level": to_quantity(dimension, round(level.value)),
        "weightTimesLevel": to_quantity(dimension, round(weight * level.value)),
        "exact": level.exact,
        "levelQueues": level.queues,
    }


def water_level(members: Iterable[tuple[int, int]]) -> WaterLevel:
    """The level shared by queues that deserve ``weight x L`` rounded to whole units, from their
    ``(deserved, weight)``: the one value within a unit of each ``deserved / weight`` (their
    mean by weight, moved into that range); None when there is none."""
    pairs = [(amount, weight) for amount, weight in members if weight > 0]
    if not pairs:
        return WaterLevel(None, exact=False, queues=0)
    ratios = {Fraction(amount, weight) for amount, weight in pairs}
    if len(ratios) == 1:
        (only,) = ratios
        return WaterLevel(only, exact=only.denominator == 1, queues=len(pairs))
    low = max(Fraction(amount - 1, weight) for amount, weight in pairs)
    high = min(Fraction(amount + 1, weight) for amount, weight in pairs)
    if low > high:
        return WaterLevel(None, exact=False, queues=len(pairs))
    mean = Fraction(sum(a for a, _ in pairs), sum(w for _, w in pairs))
    return WaterLevel(min(max(mean, low), high), exact=False, queues=len(pairs))


def _enqueue_facts(status: Obj, policy_status: Obj) -> MutableObj | None:
    """The policy's overcommit status and what one more PodGroup of the queue may ask for: in
    each dimension, the lesser of the policy's headroom and what the queue's realCapability
    leaves (Volcano's two enqueue checks, ``engine.overcommit``)."""
    overcommit = policy_status.get("overcommit")
    if overcommit is None:
        return None
    view = OvercommitQueue(
        name="",
        open=status.get("state") == "Open",
        allocated=_internal(status.get("allocated", {})),
        inqueue=_internal(status.get("inqueue", {})),
        elastic=_internal(status.get("elastic", {})),
        real_capability=_internal(status.get("realCapability", {})),
    )
    room = {name: max(amount, 0) for name, amount in (quota_available(view) or {}).items()}
    headroom = _internal(overcommit.get("headroom", {}))
    names = sorted((set(headroom) | set(room)) - {PODS})
    may = {
        name: min(headroom.get(name, 0), room.get(name, 0)) if view.open else 0 for name in names
    }
    enqueueable = next(
        (c for c in status.get("conditions", []) if c.get("type") == "Enqueueable"), None
    )
    return {
        "factors": overcommit.get("factors", {}),
        "overcommittedTotal": overcommit.get("overcommittedTotal", {}),
        "used": overcommit.get("used", {}),
        "inqueue": overcommit.get("inqueue", {}),
        "headroom": overcommit.get("headroom", {}),
        "capabilityRoom": format_resources({n: a for n, a in room.items() if n != PODS}),
        "nextPodGroupMayRequest": format_resources(may),
        "enqueueable": None
        if enqueueable is None
        else {k: enqueueable.get(k) for k in ("status", "reason", "message")},
    }


# --- nodes ---------------------------------------------------------------------------------------


def node_facts(report: Obj, inputs: Inputs, name: str) -> MutableObj:
    record = inputs.store.nodes.records.get(name)
    if record is None:
        raise NotFound(_missing("node", name, inputs.store.nodes.problems.get(name)))
    node: Obj = report.get("nodes", {}).get(name, {})
    annotations: Mapping[str, str] = node.get("annotations", {})
    allocatable = record.snapshot.allocatable
    used = inputs.store.totals().node_used.get(name, {})
    policy = annotations.get(POLICY)
    proportional = None
    if PROPORTIONAL_RESERVED in annotations:
        settings = inputs.node_policies.get(PolicyName(policy or ""))
        proportions = settings.proportions if settings is not None else {}
        proportional = {
            "reserved": _json(annotations[PROPORTIONAL_RESERVED]),
            "available": _json(annotations.get(PROPORTIONAL_AVAILABLE)),
            "resources": {
                resource: {
                    "idle": to_quantity(
                        resource, max(allocatable[resource] - used.get(resource, 0), 0)
                    ),
                    "perUnit": format_resources(
                        {CPU: proportion.cpu_milli, MEMORY: proportion.memory_bytes}
                    ),
                }
                for resource, proportion in sorted(proportions.items())
                if resource in allocatable
            },
        }
    return {
        "kind": "Node",
        "name": name,
        "policy": policy,
        "allocatable": format_resources(allocatable),
        "overcommitFactors": _json(annotations.get(OVERCOMMIT_FACTORS)),
        "overcommitAllocatable": _json(annotations.get(OVERCOMMIT_ALLOCATABLE)),
        "proportional": proportional,
        "pods": {
            "count": len(inputs.store.pods.on_node(name)),
            "requests": format_resources(used),
        },
        "qos": _qos_facts(report, name, annotations.get(WATERLINES_ANNOTATION)),
    }


def _qos_facts(report: Obj, name: str, waterlines: str | None) -> MutableObj:
    """The waterlines in force at the node's last check (its annotation), and what each
    NodeQosEnsurancePolicy's status says of the node: the gaps to close, why it could not act."""
    gaps: list[MutableObj] = []
    messages: list[str] = []
    policies: list[str] = []
    statuses: Obj = report.get("nodeQosEnsurancePolicies", {})
    for policy, status in sorted(statuses.items()):
        for entry in status.get("nodes") or []:
            if not isinstance(entry, Mapping) or entry.get("name") != name:
                continue
            policies.append(policy)
            gaps += [
                {"policy": policy, "class": g.get("class"), "metric": g.get("metric"),
                 "gap": g.get("gap"), "leaving": g.get("leaving"),
                 "arriving": g.get("arriving")}
                for g in entry.get("gaps") or []
                if isinstance(g, Mapping)
            ]  # fmt: skip
            if entry.get("message"):
                messages.append(f"{policy}: {entry['message']}")
    lines = _json(waterlines)
    if waterlines is not None and not isinstance(lines, Mapping):
        messages.append(f"the {WATERLINES_ANNOTATION} annotation cannot be read: {waterlines}")
        lines = None
    return {"waterlines": lines, "gaps": gaps, "policies": policies, "messages": messages}


# --- rendering -----------------------------------------------------------------------------------


def render(facts: Obj, output: str) -> str:
    """``text`` (``table``, simulate's default, is text here), ``json`` or ``yaml``."""
    if output == "json":
        return jsontext.pretty(facts)
    if output == "yaml":
        return yaml.safe_dump(dict(facts), sort_keys=True)
    return render_text(facts)


def render_text(facts: Obj) -> str:
    lines = _queue_text(facts) if facts["kind"] == "Queue" else _node_text(facts)
    return "".join(one_line(line).rstrip() + "\n" for line in lines)


def _queue_text(f: Obj) -> list[str]:
    sharing = f["sharing"]
    if sharing is None:
        return [
            f"Queue {f['name']} ({f['state']}): no SchedulerPolicy governs it, so it deserves "
            "nothing",
            *_rows([("weight", str(f["weight"])), *_holdings(f)], indent=2),
            *_conditions_text(f["conditions"]),
        ]
    unmanaged = resources_text(f["unmanaged"])
    total = (
        f"{resources_text(f['policyTotal'])} ({_count(f['policyNodes'], 'node')}, "
        f"{_count(f['policyQueues'], 'queue')})"
    )
    if unmanaged != "-":
        net = "taken out (Reserve)" if sharing["unmanaged"] == "Reserve" else "shared (Ignore)"
        total += f"; unmanaged pods hold {unmanaged}, {net}"
    options = "".join(
        f", {key} {sharing[key]}" for key in ("priorityType", "elasticOrder") if key in sharing
    )
    width = max((len(entry["deserved"]) for entry in f["deserved"].values()), default=0)
    lines = [
        f"Queue {f['name']} ({f['state']}): policy {f['policy']}, {sharing['policy']}{options}",
        *([f"  path            root / {' / '.join(f['path'])}"] if len(f["path"]) > 1 else []),
        *_rows(
            [
                ("policy total", total),
                ("Σ guarantee", resources_text(f["totalGuarantee"])),
                ("weight", str(f["weight"])),
                ("guarantee", resources_text(f["guarantee"])),
                ("capability", resources_text(f["capability"]) if f["capability"] else "unlimited"),
                ("realCapability", f"{resources_text(f['realCapability'])}  = " + (
                    "min(total - Σ guarantee + guarantee, capability)" if len(f["path"]) == 1
                    else "min(the parent's realCapability - Σ its children's guarantees "
                    "+ guarantee, capability)")),
            ],
            indent=2,
        ),
        "",
        "  deserved",
        *_rows(
            [
                (dimension, f"{entry['deserved'].ljust(width)}  {_why(f, dimension, entry)}")
                for dimension, entry in sorted(f["deserved"].items())
            ],
            indent=4,
        ),
    ]  # fmt: skip
    published = f["publishedDeserved"]
    computed = {d: e["deserved"] for d, e in f["deserved"].items()}
    if published is not None and dict(published) != computed:
        lines.append(
            f"  (the object's status.deserved is still {resources_text(published)}: these "
            "numbers are not written yet)"
        )
    lines += ["", *_rows(_holdings(f), indent=2)]
    if f["enqueue"] is not None:
        lines += ["", *_enqueue_text(f["policy"], f["enqueue"], f["state"])]
    lines += _held_text(f["held"], f["notBound"])
    if f["reclaim"] is not None:
        lines += ["", *_reclaim_text(f["reclaim"])]
    return lines + _conditions_text(f["conditions"])


def _held_text(held: Obj, not_bound: Obj) -> list[str]:
    lines: list[str] = []
    if held["count"]:
        rows = [
            (ordinal(pod["position"]) if pod["position"] else "-", f"{pod['pod']}  {pod['waits']}")
            for pod in held["pods"]
        ]
        lines += [
            "",
            f"  held by the admission gate: {held['count']}, {held['inLine']} in line, in "
            "admission order",
            *_rows(rows, indent=4),
            *([f"    and {held['more']} more"] if held["more"] else []),
        ]
    if not_bound["count"]:
        named = ", ".join(not_bound["pods"])
        more = not_bound["count"] - len(not_bound["pods"])
        lines += [
            "",
            f"  released, not bound after admission.bindTimeoutSeconds: {not_bound['count']} "
            f"({named}{f' and {more} more' if more > 0 else ''}); they no longer hold its room",
        ]
    return lines


def _reclaim_text(r: Obj) -> list[str]:
    header = f"  reclaim, under policy {r['policy']} ({r['mode']})"
    if r["mode"] == "Off":
        return [f"{header}: its pods are never evicted for others (spec.reclaim.mode Off)"]
    if not r["waiting"]:
        return [f"{header}: no held pod of the policy waits for room, nothing is reclaimed"]
    waiting = f"{_count(r['waiting'], 'held pod')} of the policy waiting for room"
    if not r["pods"]:
        return [f"{header}, {waiting}: none of its pods is a candidate"]
    rows = [(pod["pod"], f"node {pod['node']}  {pod['why']}") for pod in r["pods"]]
    more = [f"    and {r['more']} more"] if r["more"] else []
    return [f"{header}, {waiting}; its running pods:", *_rows(rows, indent=4), *more]


def _holdings(f: Obj) -> list[tuple[str, str]]:
    share = f"{f['share']}{' (overused)' if f['overused'] else ''}"
    return [
        ("request", resources_text(f["request"])),
        ("allocated", resources_text(f["allocated"])),
        ("inqueue", resources_text(f["inqueue"])),
        ("elastic", resources_text(f["elastic"])),
        ("share", f"{share}  = max allocated/deserved, pods left out"),
    ]


def _why(f: Obj, dimension: str, entry: Obj) -> str:
    """The bound that decided one dimension, with its number."""
    decided = entry["decidedBy"]
    request = f["request"].get(dimension, "0")
    if decided == "Request":
        return f"Request: all it asks for ({request})"
    if decided == "Capability":
        return (
            f"Capability: its realCapability "
            f"{f['realCapability'].get(dimension, '0')}, less than its request {request}"
        )
    if decided == "Guarantee":
        return (
            f"Guarantee: its guarantee {f['guarantee'].get(dimension, '0')}, more than it "
            "would get otherwise"
        )
    if decided == "Deserved":
        return f"Deserved: its spec.deserved {f['specDeserved'].get(dimension, '0')}"
    if decided != "Level":
        return str(decided or "-")
    sharing = f["sharing"]
    if "level" not in entry:
        order = sharing.get("elasticOrder", "Weight")
        return f"Level: its guarantee plus its part of the pool left by the guarantees ({order})"
    if entry["level"] is None:
        raised = " (weights raised to cover guarantees)" if "priorityType" in sharing else ""
        return (
            f"Level: weight {f['weight']} x the water level; its {entry['levelQueues']} queues "
            f"share no one level{raised}"
        )
    eq = "=" if entry["exact"] else "≈"
    others = entry["levelQueues"] - 1
    shared = f", shared with {_count(others, 'other queue')}" if others else ""
    return (
        f"Level: weight {f['weight']} x L {eq} {entry['weightTimesLevel']}, "
        f"with the water level L {eq} {entry['level']} per unit of weight{shared}"
    )


def _enqueue_text(policy: str, e: Obj, state: str) -> list[str]:
    factors = ",".join(f"{name}={factor}" for name, factor in sorted(e["factors"].items()))
    may = resources_text(e["nextPodGroupMayRequest"], zeros=True)
    if state != "Open":
        may = f"nothing: the queue is {state}"
    rows = [
        ("overcommit factors", factors or "-"),
        ("overcommittedTotal", resources_text(e["overcommittedTotal"])),
        ("used", resources_text(e["used"])),
        ("inqueue", resources_text(e["inqueue"])),
        ("headroom", f"{resources_text(e['headroom'], zeros=True)}  "
                     "= overcommittedTotal - used - inqueue"),
        ("capability room", f"{resources_text(e['capabilityRoom'], zeros=True)}  "
                            "= realCapability - allocated - inqueue + elastic"),
        ("one more PodGroup", f"may request {may}" if state == "Open" else may),
    ]  # fmt: skip
    condition = e["enqueueable"]
    if condition is not None:
        rows.append(
            ("Enqueueable", f"{condition['status']} ({condition['reason']}): "
                            f"{condition['message']}")
        )  # fmt: skip
    return [f"  enqueue, under policy {policy}", *_rows(rows, indent=4)]


def _conditions_text(conditions: list[Obj]) -> list[str]:
    if not conditions:
        return []
    rows = [(str(c["type"]), str(c["message"])) for c in conditions]
    return ["", "  conditions", *_rows(rows, indent=4)]


def _node_text(f: Obj) -> list[str]:
    policy = f["policy"]
    header = f"Node {f['name']}: " + (
        f"policy {policy}" if policy else "no single SchedulerPolicy selects it"
    )
    rows = [("allocatable", resources_text(f["allocatable"]))]
    if policy:
        factors = f["overcommitFactors"] or {}
        rows += [
            ("overcommit factors", ",".join(f"{k}={v}" for k, v in sorted(factors.items()))),
            ("overcommit-allocatable", resources_text(f["overcommitAllocatable"] or {})),
        ]
    proportional = f["proportional"]
    if proportional is not None:
        for resource, entry in sorted(proportional["resources"].items()):
            rows.append(
                (
                    f"kept for {resource}",
                    f"{entry['idle']} idle x {resources_text(entry['perUnit'])} each",
                )
            )
        rows += [
            ("proportional-reserved", resources_text(proportional["reserved"] or {})),
            ("proportional-available",
             f"{resources_text(proportional['available'] or {}, zeros=True)}  = idle - reserved"),
        ]  # fmt: skip
    pods = f["pods"]
    rows.append(
        ("pods bound", f"{pods['count']}, requesting {resources_text(pods['requests'])}"),
    )
    qos = f["qos"]
    if qos["waterlines"] is None:
        rows.append(("QoS", NO_WATERLINE))
    else:
        rows.append(("QoS waterlines", _pairs(qos["waterlines"])))
        gaps = [f"{gap_text(g)} ({g['policy']})" for g in qos["gaps"]]
        rows.append(("QoS gaps", ",".join(gaps) or "-"))
    rows += [("QoS note", message) for message in qos["messages"]]
    return [header, *_rows(rows, indent=2)]


# --- helpers -------------------------------------------------------------------------------------


def _missing(kind: str, name: str, problem: str | None) -> str:
    if problem is None:
        return f"{kind} {name} not found"
    return f"{kind} {name} cannot be read: {problem}"


def _internal(amounts: Mapping[str, str]) -> dict[str, int]:
    return {name: to_internal(name, value) for name, value in amounts.items()}


def _json(text: str | None) -> Any:
    """An annotation's JSON value: None when absent, the text itself when it is not JSON."""
    if text is None:
        return None
    try:
        return jsontext.parse(text)
    except ValueError:
        return text


def _count(number: Any, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _pairs(values: Obj) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(values.items())) or "-"


def _rows(rows: Iterable[tuple[str, str]], *, indent: int) -> list[str]:
    """``label  value`` lines, the values aligned."""
    listed = list(rows)
    width = max((len(label) for label, _ in listed), default=0)
    return [f"{' ' * indent}{label.ljust(width)}  {value}" for label, value in listed]
