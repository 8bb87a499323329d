"""Rendering the simulate report as JSON, YAML or tables: the queues, and the node QoS plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import yaml

from sharekeeper.model import jsontext
from sharekeeper.model.documents import one_line
from sharekeeper.model.objects import Obj

TABLE_COLUMNS = (
    "QUEUE",
    "POLICY",
    "WEIGHT",
    "GUARANTEE",
    "DESERVED",
    "ALLOCATED",
    "REQUEST",
    "SHARE",
)
QOS_POLICY_COLUMNS = ("QOS-POLICY", "MATCHED", "TRIGGERED", "CONDITIONS")
QOS_NODE_COLUMNS = ("NODE", "RULES", "WATERLINES", "GAPS", "THROTTLED", "TAINTED", "MESSAGE")
QOS_ACTION_COLUMNS = ("#", "NODE", "ACTION", "POD", "METRIC", "RELEASED", "CPU-LIMIT")


def render(
    report: Obj,
    weights: Mapping[str, int],
    output: str,
    parents: Mapping[str, str | None] | None = None,
) -> str:
    """``parents``: each queue's ``spec.parent``, to print the queues as their tree."""
    if output == "json":
        return jsontext.pretty(report)
    if output == "yaml":
        return yaml.safe_dump(dict(report), sort_keys=True)
    qos = "nodeQosEnsurancePolicies" in report
    tables = []
    # A QoS-only input prints its plan alone; an input with neither still gets the header.
    if report.get("queues") or not qos:
        tables.append(queue_table(report.get("queues", {}), weights, parents or {}))
    if report.get("admission"):
        tables.append(admission_lines(report["admission"]))
    reclaims = {
        name: status["reclaim"]
        for name, status in sorted(report.get("schedulerPolicies", {}).items())
        if status.get("reclaim")
    }
    if reclaims:
        tables.append(reclaim_lines(reclaims))
    if qos:
        tables.append(qos_tables(report))
    return "\n".join(tables)


def admission_lines(admission: Obj) -> str:
    """The pods held by the admission gate: those this round lets through, then the others;
    then the released pods past their bind timeout."""
    lines = ["ADMISSION (pods held by the sharekeeper.io/admission gate)"]
    lines += [f"  released  {pod}" for pod in admission["released"]]
    lines += [f"  waits     {pod}: {why}" for pod, why in admission["waiting"].items()]
    lines += [f"  not bound {pod}: {why}" for pod, why in admission.get("notBound", {}).items()]
    return "\n".join(lines) + "\n"


def reclaim_lines(reclaims: Mapping[str, Obj]) -> str:
    """Each policy's reclaim plan (``status.reclaim``): who is evicted for whom."""
    lines = []
    for policy, plan in reclaims.items():
        lines.append(
            f"RECLAIM (policy {policy}, mode {plan['mode']}): {plan['waiting']} waiting, "
            f"{plan['evictions']} evictions"
        )
        for entry in plan["reclaims"]:
            lines.append(f"  {entry['reclaimer']} (queue {entry['queue']}) on {entry['node']}")
            lines += [
                f"    evicts {v['pod']} (queue {v['queue']}): {resources_text(v['frees'])}"
                for v in entry["victims"]
            ]
        lines += [f"  not served: {reason} {count}" for reason, count in plan["notServed"].items()]
    return "\n".join(lines) + "\n"


def queue_table(
    queues: Mapping[str, Obj],
    weights: Mapping[str, int],
    parents: Mapping[str, str | None],
) -> str:
    rows = []
    for name, depth in tree_order(sorted(queues), parents):
        status = queues[name]
        rows.append(
            (
                "  " * depth + name,
                status.get("policy", "-"),
                str(weights.get(name, 1)),
                resources_text(status["guarantee"]),
                resources_text(status["deserved"]),
                resources_text(status["allocated"]),
                resources_text(status["request"]),
                status["share"] + (" (overused)" if status["overused"] else ""),
            )
        )
    return _table(TABLE_COLUMNS, rows)


def tree_order(names: Sequence[str], parents: Mapping[str, str | None]) -> list[tuple[str, int]]:
    """The queues depth first, each under its parent, with its depth; a queue whose parent is
    missing stands at the top, and queues on a cycle of parents come last, unindented."""
    known = set(names)
    children: dict[str | None, list[str]] = {}
    for name in names:
        parent = parents.get(name)
        children.setdefault(parent if parent in known else None, []).append(name)
    ordered: list[tuple[str, int]] = []
    stack = [(name, 0) for name in reversed(children.get(None, []))]
    while stack:
        name, depth = stack.pop()
        ordered.append((name, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(name, [])))
    placed = {name for name, _ in ordered}
    ordered.extend((name, 0) for name in names if name not in placed)
    return ordered


def qos_tables(report: Obj) -> str:
    """The QoS check as three tables: the policies, the nodes that are not at rest (rules,
    waterlines and gaps in force, throttled pods, taint, why something could not be done),
    and the actions in the order they were taken."""
    policies: Mapping[str, Obj] = report.get("nodeQosEnsurancePolicies", {})
    nodes: Mapping[str, Obj] = report.get("nodes", {})
    policy_rows = [
        (
            name,
            str(status.get("matchedNodes", "-")),
            str(status.get("triggeredNodes", "-")),
            _conditions(status.get("conditions", [])),
        )
        for name, status in sorted(policies.items())
    ]
    node_rows = [
        _node_row(name, entries, nodes.get(name, {}))
        for name, entries in sorted(_entries_by_node(policies).items())
    ]
    action_rows = [
        (
            str(number),
            action["node"],
            action["kind"],
            action["pod"],
            action["metric"],
            action["released"],
            "-" if action["kind"] == "evict" else action.get("cpuLimit") or "none",
        )
        for number, action in enumerate(report.get("actions", []), start=1)
    ]
    sections = [_table(QOS_POLICY_COLUMNS, policy_rows)]
    sections.append(
        _table(QOS_NODE_COLUMNS, node_rows) if node_rows else "No node needs attention.\n"
    )
    sections.append(_table(QOS_ACTION_COLUMNS, action_rows) if action_rows else "No actions.\n")
    return "\n".join(sections)


def _entries_by_node(
    policies: Mapping[str, Obj],
) -> dict[str, list[tuple[str, Obj]]]:
    """Node name -> (policy, its status entry for the node), for the nodes some policy lists."""
    found: dict[str, list[tuple[str, Obj]]] = {}
    for policy, status in sorted(policies.items()):
        for entry in status.get("nodes", []):
            found.setdefault(str(entry["name"]), []).append((policy, entry))
    return found


def _node_row(name: str, entries: Sequence[tuple[str, Obj]], node: Obj) -> tuple[str, ...]:
    """One node across the policies selecting it: each policy's entry has that policy's rules
    and waterlines; gaps, throttled pods and the taint are the node's."""
    waterlines: dict[str, str] = {}
    for _, entry in entries:
        waterlines |= entry.get("waterlines") or {}
    gaps: Sequence[Obj] = next((entry["gaps"] for _, entry in entries if entry.get("gaps")), [])
    throttled = max(len(entry.get("throttled") or []) for _, entry in entries)
    messages = dict.fromkeys(entry["message"] for _, entry in entries if entry.get("message"))
    return (
        name,
        _joined(f"{policy}/{_rule(rule)}" for policy, entry in entries for rule in entry["rules"]),
        _pairs(waterlines),
        _joined(gap_text(gap) for gap in gaps),
        str(throttled),
        "yes" if node.get("taints") else "no",
        "; ".join(messages) or "-",
    )


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns padded to their widest cell; every cell on one printable line."""
    lines = [tuple(header), *(tuple(one_line(str(cell)) for cell in row) for row in rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        + "\n"
        for line in lines
    )


def resources_text(amounts: Obj, *, zeros: bool = False) -> str:
    """``cpu=4,memory=8Gi``; zero dimensions are left out (to keep a table readable) unless
    ``zeros``."""
    shown = [
        f"{name}={value}" for name, value in sorted(amounts.items()) if zeros or str(value) != "0"
    ]
    return ",".join(shown) or "-"


def _joined(cells: Iterable[str]) -> str:
    return ",".join(cells) or "-"


def _pairs(values: Mapping[str, str]) -> str:
    return _joined(f"{key}={value}" for key, value in sorted(values.items()))


def _rule(rule: Obj) -> str:
    """``cpu-evict=Triggered/Hot``, ``(preview)`` and ``(restored)`` when they apply."""
    text = f"{rule['name']}={rule.get('phase', '?')}/{rule.get('observation', '?')}"
    if rule.get("restored"):
        text += "(restored)"
    if rule.get("preview"):
        text += "(preview)"
    return text


def gap_text(gap: Obj) -> str:
    """``evict.cpu_total_usage=550m``, and ``(900m leaving)`` for usage on its way out or
    ``(300m arriving)`` for CPU restores gave back, which the usage sample does not show yet."""
    text = f"{gap.get('class')}.{gap.get('metric')}={gap.get('gap') or 'unknown'}"
    for change in ("leaving", "arriving"):
        if gap.get(change):
            text += f"({gap[change]} {change})"
    return text


def _conditions(conditions: Iterable[Obj]) -> str:
    """``Ready``, or the conditions that do not hold, as
    ``UsageAvailable=False(MetricsUnavailable)``."""
    listed = list(conditions)
    failing = [
        f"{c.get('type')}={c.get('status')}({c.get('reason')})"
        for c in listed
        if c.get("status") != "True" or c.get("type") == "Invalid"
    ]
    return ",".join(failing) or ("Ready" if listed else "-")
