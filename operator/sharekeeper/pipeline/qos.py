"""One node QoS check of the whole cluster, from what the store holds to engine results and back.

``cluster_check`` reads policies, nodes and pods (as read on arrival), namespace labels and
metrics.k8s.io usage, restores each node's persisted state from the policies' status, and runs
the engine's ``check_node`` on every node some policy selects. Driving the resulting action
flows is the caller's job: ``simulate`` accepts every action, the operator executes them and
reports the outcome.
The rendering functions turn results and outcomes into what gets written: policy status (its
per-node entries, throttle records and actions included), the ``qos-waterlines`` node
annotation, the taint. Nothing here logs:
what could not be read is returned (``ClusterCheck.usage_missing``, ``unreadable_usage``) for
the caller to say once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sharekeeper.api.qos import (
    NodeQosEnsurancePolicy,
    node_entries,
    qos_policy,
    read_policy,
    state_from_status,
    throttle_key,
    throttles_from_status,
)
from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.qos import (
    REGISTRY,
    ActionClass,
    Gap,
    NodeCheckResult,
    PlanReport,
    QosAction,
    QosNode,
    QosPod,
    QosPolicy,
    Release,
    Skip,
    SkipReason,
    ThrottleState,
    UnreachableRule,
    check_node,
    stays_at_rest,
    unreachable_rules,
    with_releases,
)
from sharekeeper.engine.qos.planning import Stop
from sharekeeper.model.conditions import condition
from sharekeeper.model.nodes import compact_json
from sharekeeper.model.objects import MutableObj, Obj, ObjectError, rfc3339
from sharekeeper.model.qos import (
    metric_quantity,
    node_metrics_by_name,
    pod_metrics_by_key,
    waterlines_annotation,
    with_node_usage,
    with_usage,
)
from sharekeeper.model.quantities import CPU, MEMORY, to_quantity


@dataclass(frozen=True, slots=True)
class NodeCheck:
    node: QosNode
    result: NodeCheckResult
    policies: tuple[str, ...]
    """The policies that select the node, sorted."""


@dataclass(frozen=True, slots=True)
class RestingNode:
    """A node the check left at rest without checking it in full (``stays_at_rest``): nothing
    to report, act on or remember."""

    name: str
    policies: tuple[str, ...]
    """The policies that select it, sorted."""


@dataclass(frozen=True, slots=True)
class ClusterCheck:
    policies: Mapping[str, QosPolicy]
    nodes: tuple[NodeCheck, ...]
    """The nodes checked in full."""
    now: int
    """When the check ran (seconds since the epoch)."""
    resting: tuple[RestingNode, ...] = ()
    invalid: Mapping[str, str] = field(default_factory=dict)
    """Policies that could not be read, with the reason; they take part in nothing."""
    usage_missing: str | None = None
    """Why usage could not be read at all (metrics.k8s.io unavailable), if so."""
    unreadable_usage: Mapping[str, str] = field(default_factory=dict)
    """Nodes whose NodeMetrics or PodMetrics could not be read (their usage is missing for
    this check), with the problem."""
    unreachable: Mapping[str, tuple[UnreachableRule, ...]] = field(default_factory=dict)
    """Per policy, the rules no selected node can cross (a value at or above every selected
    node's capacity)."""


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What became of one node's planned actions."""

    done: tuple[QosAction, ...] = ()
    refused: tuple[tuple[QosAction, str], ...] = ()
    """Actions the API refused (a vanished pod, an error), with the reason."""
    blocked: tuple[tuple[QosAction, str], ...] = ()
    """Evictions a PodDisruptionBudget refused, with the API server's message."""
    preview: tuple[QosAction, ...] = ()
    waiting: tuple[str, ...] = ()
    """Why some waterline was not acted on, or is still crossed after every candidate."""

    @classmethod
    def from_reports(
        cls,
        report: PlanReport,
        preview: PlanReport | None = None,
        refused: tuple[tuple[QosAction, str], ...] | None = None,
        blocked: tuple[tuple[QosAction, str], ...] | None = None,
    ) -> Outcomes:
        """``refused`` and ``blocked`` with the API's reasons, as the caller saw them; by
        default the report's, with a generic reason."""
        open_gaps = tuple(
            _open_gap(action_class, metric, amount, report.skipped, report.stopped)
            for action_class, metric, amount in report.remaining
            # A restore's headroom left over is not a problem: the pods are back.
            if amount > 0 and action_class is not ActionClass.THROTTLE_UP
        )
        return cls(
            done=report.accepted,
            refused=refused
            if refused is not None
            else tuple((a, "refused") for a in report.refused if a not in report.blocked),
            blocked=blocked
            if blocked is not None
            else tuple((a, "blocked by a PodDisruptionBudget") for a in report.blocked),
            preview=preview.accepted if preview else (),
            waiting=(*report.waiting, *open_gaps),
        )


_SKIP_WORDS = {
    SkipReason.NO_USAGE: "no usage data",
    SkipReason.NOTHING_USED: "using none of it",
    SkipReason.AT_FLOOR: "CPU limit floor (request or minCPURatio) not below its usage",
}
_NAMED = 3
"""Pods named per reason in a message; the rest are counted."""


def _open_gap(
    action_class: ActionClass,
    metric: str,
    amount: int,
    skipped: Sequence[Skip],
    stopped: Sequence[Stop] = (),
) -> str:
    """Why a precise plan left usage above its waterline: where a refused eviction stopped it,
    and the pods it passed over."""
    text = f"{action_class.value} {metric}: {metric_quantity(metric, amount)} still to release"
    stop = next((s for s in stopped if (s.action_class, s.metric) == (action_class, metric)), None)
    if stop is not None:
        text += (
            f"; evictions stop at {stop.pod}, whose eviction was refused: no pod ranked after "
            "it is evicted in its place"
        )
    mine = [s for s in skipped if (s.action_class, s.metric) == (action_class, metric)]
    if not mine:
        return text if stop is not None else f"{text}: no candidate left to act on"
    by_reason: dict[SkipReason, list[Skip]] = {}
    for skip in mine:
        by_reason.setdefault(skip.reason, []).append(skip)
    parts = []
    for reason, skips in by_reason.items():
        names = [_skipped_pod(s) for s in skips[:_NAMED]]
        if len(skips) > _NAMED:
            names.append(f"{len(skips) - _NAMED} more")
        parts.append(f"{_SKIP_WORDS[reason]}: {', '.join(names)}")
    return f"{text}; passed over, acting on them frees nothing ({'; '.join(parts)})"


def _skipped_pod(skip: Skip) -> str:
    if skip.floor_milli is None:
        return str(skip.pod)
    return f"{skip.pod} (floor {to_quantity(CPU, skip.floor_milli)})"


def cluster_check(
    policies: Sequence[Obj],
    nodes: Sequence[QosNode],
    pods_on: Callable[[str], Sequence[QosPod]],
    namespace_labels: Mapping[str, Mapping[str, str]],
    *,
    node_metrics: Iterable[Obj] | None,
    pod_metrics: Iterable[Obj] | None,
    now: int,
    usage_problem: str | None = None,
) -> ClusterCheck:
    """``policies``: NodeQosEnsurancePolicy objects (spec and status; one that cannot be read
    is reported in ``invalid`` and takes part in nothing). ``nodes`` and the pods on a node
    (``pods_on``, asked only for the nodes checked in full) as read on arrival, without usage
    (``model.qos`` ``node_view``/``pod_view``);
    ``node_metrics``/``pod_metrics`` None: the metrics API is unavailable (usage missing),
    ``usage_problem`` saying why if the caller knows. Only the nodes some policy selects are
    looked at."""
    read: dict[str, NodeQosEnsurancePolicy] = {}
    invalid: dict[str, str] = {}
    for obj in policies:
        name = str(obj.get("metadata", {}).get("name"))
        try:
            read[name] = read_policy(obj)
        except ObjectError as error:
            invalid[name] = str(error)
    parsed = {name: qos_policy(policy) for name, policy in read.items()}
    usage = node_metrics_by_name(node_metrics or ())
    pod_usage = pod_metrics_by_key(pod_metrics or ())
    # A node no status remembers anything of, whose rules all observe calm, stays at rest:
    # most nodes of most checks, left out of the full check (``stays_at_rest``).
    remembered = node_entries(read.values())
    checks = []
    resting = []
    unreadable: dict[str, str] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        selecting = tuple(
            n for n, p in sorted(parsed.items()) if p.node_selector.matches(node.labels)
        )
        if not selecting:
            continue
        entries = remembered.get(node.name, ())
        selected = [parsed[name] for name in selecting]
        # Metrics that cannot be read are missing metrics, for this node only.
        measured, snapshot = None, None
        try:
            measured = with_node_usage(node, usage.get(node.name))
        except ObjectError as error:
            unreadable[node.name] = str(error)
        if measured is not None and not entries and stays_at_rest(selected, measured):
            resting.append(RestingNode(node.name, selecting))
            continue
        on_node = _with_throttles(pods_on(node.name), throttles_from_status(entries))
        if measured is not None:
            try:
                snapshot = with_usage(measured, on_node, None, pod_usage, namespace_labels)
            except ObjectError as error:
                unreadable[node.name] = str(error)
        if snapshot is None:
            snapshot = with_usage(node, on_node, None, None, namespace_labels)
        result = check_node(selected, snapshot, state_from_status(entries), now)
        checks.append(NodeCheck(snapshot, result, selecting))
    return ClusterCheck(
        policies=parsed,
        nodes=tuple(checks),
        now=now,
        resting=tuple(resting),
        invalid=invalid,
        usage_missing=None
        if node_metrics is not None
        else usage_problem or "metrics.k8s.io is not available",
        unreadable_usage=unreadable,
        unreachable={
            name: found
            for name, policy in sorted(parsed.items())
            if (found := unreachable_rules(policy, nodes, REGISTRY))
        },
    )


def unreachable_message(rule: UnreachableRule) -> str:
    """What is wrong with an unreachable rule, and for CPU in cores the likely fix."""
    spec = REGISTRY.get(rule.metric)
    resource = spec.resource if spec is not None else CPU
    value = metric_quantity(rule.metric, rule.value)
    message = (
        f"rule {rule.rule}: {rule.metric} {value} is at or above the {resource} capacity of "
        f"every selected node (largest {to_quantity(resource, rule.largest_capacity)}), so it "
        "never triggers"
    )
    if rule.metric == "cpu_total_usage":
        # Crane wrote this metric in millicores; here it is in cores.
        meant = rule.value // 1000
        message += (
            f"; values are cores: for Crane's millicores write "
            f'"{to_quantity(CPU, meant)}" or "{meant}m"'
        )
    return message


def _with_throttles(
    pods: Sequence[QosPod], throttles: Mapping[str, ThrottleState]
) -> Sequence[QosPod]:
    """The pods with our record of throttling them; whatever a pod says of itself is not read."""
    if not throttles:
        return pods
    return [
        replace(pod, throttle=throttles.get(throttle_key(pod.uid, str(pod.key)))) for pod in pods
    ]


def _throttled_after(node: QosNode, outcomes: Outcomes) -> list[MutableObj]:
    """The throttled pods of ``node`` once this check's accepted actions took effect: what
    the next check (and a restarted operator) restores from."""
    throttling = [(a.pod, a.throttle.throttle) for a in outcomes.done if a.throttle is not None]
    if not throttling and all(pod.throttle is None for pod in node.pods):
        return []  # most nodes of most checks: nothing is or gets throttled
    states = {pod.key: pod.throttle for pod in node.pods}
    states.update(throttling)
    uids = {pod.key: pod.uid for pod in node.pods}
    return [
        throttled_entry(key, uids.get(key, ""), state)
        for key, state in sorted(states.items())
        if state is not None
    ]


def _releasing_after(node_check: NodeCheck, outcomes: Outcomes, now: int) -> list[MutableObj]:
    """The node's actions whose effect its sample may not show yet, this check's accepted ones
    included: what the next check (and a restarted operator) leaves out of its gaps."""
    releases = node_check.result.state.releases
    if not releases and not outcomes.done:
        return []  # most nodes of most checks
    return [
        releasing_entry(r) for r in with_releases(node_check.node, releases, outcomes.done, now)
    ]


def policy_statuses(
    check: ClusterCheck,
    outcomes: Mapping[str, Outcomes],
    current: Mapping[str, Obj],
    *,
    now: str,
) -> dict[str, MutableObj]:
    """Each policy's status. ``current`` (policy name -> its status) keeps ``lastActions`` of
    nodes that did not act in this check, so a calm check rewrites nothing."""
    statuses: dict[str, MutableObj] = {}
    for name in sorted(check.policies):
        previous = {e.get("name"): e for e in current.get(name, {}).get("nodes", [])}
        matched = sum(1 for node in check.resting if name in node.policies)
        # Only the entries not at rest are kept, with their nulls dropped: at thousands of
        # nodes most are at rest, and none of those is listed.
        entries: list[MutableObj] = []
        for node_check in check.nodes:
            if name not in node_check.policies:
                continue
            matched += 1
            entry: MutableObj = dict(node_status_entry(node_check.result, name))
            done = outcomes.get(node_check.node.name, Outcomes())
            actions = _action_entries(done, now)
            old = previous.get(node_check.node.name, {})
            if actions:
                entry["lastActions"] = actions
                blocked = _blocked_entries(node_check.node, done, name, now)
                if blocked:
                    entry["blockedEvictions"] = blocked
            else:
                for kept in ("lastActions", "blockedEvictions"):
                    if kept in old:
                        entry[kept] = old[kept]
            throttled = _throttled_after(node_check.node, done)
            if throttled:
                entry["throttled"] = throttled
            releasing = _releasing_after(node_check, done, check.now)
            if releasing:
                entry["releasing"] = releasing
            message = "; ".join((*node_check.result.notes, *done.waiting))
            if message:
                entry["message"] = message
            if not _at_rest(entry):
                entries.append(without_nulls(entry))
        # A node at rest has no rule Triggered: counting the others counts them all.
        triggered = sum(1 for e in entries if any(r["phase"] == "Triggered" for r in e["rules"]))
        listed = _most_urgent(entries)
        ready = check.usage_missing is None
        checked = "nodes checked"
        if len(listed) < len(entries):
            checked += f"; only the {len(listed)} most urgent of the nodes not at rest are listed"
        unreachable = [unreachable_message(r) for r in check.unreachable.get(name, ())]
        statuses[name] = {
            "matchedNodes": matched,
            "triggeredNodes": triggered,
            "nodes": listed,
            "conditions": [
                condition(
                    "Ready", ready, "Checked" if ready else "MetricsUnavailable",
                    checked if ready else f"usage unknown: {check.usage_missing}",
                ),
                condition(
                    "UsageAvailable", ready, "MetricsRead" if ready else "MetricsUnavailable",
                    "usage read from metrics.k8s.io" if ready
                    else f"nothing is acted on: {check.usage_missing}",
                ),
                condition(
                    "WaterlinesReachable", not unreachable,
                    "AboveCapacity" if unreachable else "WithinCapacity",
                    "; ".join(unreachable) if unreachable
                    else "no rule value is at or above the capacity of every selected node",
                ),
            ],
        }  # fmt: skip
    for name, problem in sorted(check.invalid.items()):
        statuses[name] = {
            "conditions": [
                condition("Ready", False, "Invalid", problem),
                condition("Invalid", True, "Invalid", problem),
            ]
        }
    return statuses


MAX_LISTED_NODES = 1000
"""A policy's status lists at most this many nodes: an object must stay well under the API
server's limit (1.5 MiB by default; 5,000 entries measured 2.6 MB and every write failed)."""


def _at_rest(entry: MutableObj) -> bool:
    """Nothing to report and nothing to remember: every rule calm, observed calm (usage known),
    no hot check counted, no taint, no recent action, no message. Such a node's state reads
    back as the zero state (``state_from_status``), so it needs no entry."""
    scheduling = entry.get("scheduling") or {}
    return (
        not scheduling.get("disabled")
        and "lastActions" not in entry
        and "blockedEvictions" not in entry
        and "throttled" not in entry
        and "releasing" not in entry
        and "message" not in entry
        and all(
            rule["phase"] == "Calm"
            and rule.get("observation") == "Calm"
            and not rule["hotStreak"]
            and not rule.get("triggered")
            and not rule.get("restored")
            for rule in entry["rules"]
        )
    )


def _most_urgent(kept: list[MutableObj]) -> list[MutableObj]:
    """At most ``MAX_LISTED_NODES`` of the entries not at rest, the most urgent when there are
    more, in name order."""
    if len(kept) > MAX_LISTED_NODES:
        kept.sort(key=_urgency)
        kept = sorted(kept[:MAX_LISTED_NODES], key=lambda entry: str(entry["name"]))
    return kept


def _urgency(entry: MutableObj) -> tuple[int, int, int, int, str]:
    rules = entry["rules"]
    return (
        # A node holding throttle records is never left out: they are the only way back; nor
        # one holding releases: without them its next check would evict for the same usage.
        -int("throttled" in entry or "releasing" in entry),
        -sum(1 for rule in rules if rule["phase"] == "Triggered"),
        -int((entry.get("scheduling") or {}).get("disabled", False)),
        -max((rule["hotStreak"] for rule in rules), default=0),
        str(entry["name"]),
    )


MAX_BLOCKED = 100
"""Blocked evictions listed per node and policy (as ``lastActions``)."""
MAX_BLOCKED_MESSAGE = 512
"""The API server's message kept per blocked eviction (it names the tenant's budget)."""


def _blocked_entries(node: QosNode, outcomes: Outcomes, policy: str, now: str) -> list[MutableObj]:
    """``blockedEvictions`` of ``policy``: the pods whose eviction a PodDisruptionBudget
    refused in this check, for the waterlines the policy takes part in."""
    uids = {pod.key: pod.uid for pod in node.pods}
    entries: list[MutableObj] = []
    for action, message in outcomes.blocked:
        if action.policies and policy not in action.policies:
            continue
        entry: MutableObj = {"pod": str(action.pod), "metric": action.metric}
        if uids.get(action.pod):
            entry["uid"] = uids[action.pod]
        entry["message"] = message[:MAX_BLOCKED_MESSAGE]
        entry["time"] = now
        entries.append(entry)
    return entries[:MAX_BLOCKED]


def _action_entries(outcomes: Outcomes, now: str) -> list[MutableObj]:
    entries = [
        *({**action_dict(a), "outcome": "Done"} for a in outcomes.done),
        *({**action_dict(a), "outcome": f"Blocked: {why}"} for a, why in outcomes.blocked),
        *({**action_dict(a), "outcome": f"Refused: {why}"} for a, why in outcomes.refused),
        *({**action_dict(a), "outcome": "Preview"} for a in outcomes.preview),
    ]
    for entry in entries:
        entry.pop("node", None)
        entry["time"] = now
    return entries[:100]


def node_outputs(check: ClusterCheck) -> dict[str, MutableObj]:
    """Per checked node: the ``qos-waterlines`` annotation value (None: the node is calm, no
    waterline in force, so no annotation) and whether to taint it."""
    outputs: dict[str, MutableObj] = {
        node.name: {"waterlines": None, "tainted": False} for node in check.resting
    }
    for c in check.nodes:
        outputs[c.node.name] = {
            "waterlines": compact_json(waterlines_annotation(c.result.waterlines))
            if c.result.waterlines
            else None,
            "tainted": c.result.scheduling_disabled,
        }
    return dict(sorted(outputs.items()))


def actions_in_order(outcomes: Mapping[str, Outcomes]) -> list[MutableObj]:
    """The executed (accepted) actions, node by node in name order, as simulate prints them."""
    return [action_dict(a) for node in sorted(outcomes) for a in outcomes[node].done]


def without_nulls(value: Any) -> Any:
    """Drop null fields: a merge patch cannot store one, so it would be rewritten every check."""
    if isinstance(value, dict):  # what this module builds (an ABC check costs 4x as much)
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


# --- the parts of NodeQosEnsurancePolicy status -------------------------------------------------


def throttled_entry(key: PodKey, uid: str, state: ThrottleState) -> dict[str, object]:
    """A ``ThrottledPod`` status entry."""
    original = state.original_limit_milli
    entry: dict[str, object] = {
        "pod": str(key),
        "limit": to_quantity(CPU, state.current_limit_milli),
    }
    if uid:
        entry["uid"] = uid
    if original is not None:
        entry["originalLimit"] = to_quantity(CPU, original)
    return entry


def releasing_entry(release: Release) -> dict[str, object]:
    """A ``ReleasingPod`` status entry."""
    entry: dict[str, object] = {"action": release.kind, "pod": str(release.pod)}
    if release.uid:
        entry["uid"] = release.uid
    entry["cpu"] = to_quantity(CPU, release.cpu_milli)
    entry["memory"] = to_quantity(MEMORY, release.memory_bytes)
    entry["at"] = rfc3339(release.at)
    if release.deadline is not None:
        entry["deadline"] = rfc3339(release.deadline)
    if release.gone_at is not None:
        entry["goneAt"] = rfc3339(release.gone_at)
    return entry


def _gap_dict(gap: Gap) -> dict[str, object]:
    spec = REGISTRY.get(gap.metric)
    resource = spec.resource if spec else "cpu"
    out: dict[str, object] = {
        "class": gap.action_class.value,
        "metric": gap.metric,
        "gap": None if gap.amount is None else _signed_quantity(resource, gap.amount),
    }
    if gap.leaving:
        out["leaving"] = to_quantity(resource, gap.leaving)
    if gap.arriving:
        out["arriving"] = to_quantity(resource, gap.arriving)
    return out


def _signed_quantity(resource: str, amount: int) -> str:
    return ("-" if amount < 0 else "") + to_quantity(resource, abs(amount))


def node_status_entry(result: NodeCheckResult, policy: str) -> dict[str, object]:
    """``NodeStatus`` of ``policy`` for the checked node: what must survive a restart (rules'
    phase and streaks, the taint state) plus what to report."""
    scheduling = result.state.scheduling
    rules = [r for r in result.rules if r.key.policy == policy]
    return {
        "name": result.node,
        "rules": [
            {
                "name": r.key.rule,
                "metric": r.metric,
                "phase": r.state.phase.value,
                "hotStreak": r.state.hot_streak,
                "calmStreak": r.state.calm_streak,
                "observation": r.observation.value,
                "triggered": r.triggered_now,
                "restored": r.state.restored,
                "preview": r.preview,
            }
            for r in rules
        ],
        "scheduling": {
            "disabled": scheduling.disabled,
            "coolDownSeconds": scheduling.cool_down_seconds,
            "calmSince": None if scheduling.calm_since is None else rfc3339(scheduling.calm_since),
        },
        "waterlines": waterlines_annotation(
            w for w in result.waterlines if any(c.policy == policy for c in w.contributions)
        ),
        "gaps": [_gap_dict(g) for g in result.gaps],
        "previewWaterlines": waterlines_annotation(
            w for w in result.preview_waterlines if any(c.policy == policy for c in w.contributions)
        ),
    }


def action_dict(action: QosAction) -> dict[str, object]:
    """A ``simulate`` / status action: ``{"kind", "pod", "node", "metric", "released"}``, plus
    ``cpuLimit`` for throttle and restore (null: the pod is back to no CPU limit)."""
    out: dict[str, object] = {
        "kind": action.kind,
        "pod": str(action.pod),
        "node": action.node,
        "metric": action.metric,
        "released": to_quantity(action.resource, action.released),
    }
    if action.kind != "evict":
        limit = action.cpu_limit_milli
        out["cpuLimit"] = None if limit is None else to_quantity("cpu", limit)
    return out
