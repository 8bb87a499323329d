"""Pod and Volcano PodGroup objects -> engine snapshots.

A pod's request is Kubernetes' effective request: the larger of (a) its containers plus its
sidecars (init containers with ``restartPolicy: Always``) and (b) each regular init container
plus the sidecars started before it; then plus ``spec.overhead``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.node_constraints import (
    ANY_NODE,
    NAME_FIELD,
    NO_NODE,
    Comparison,
    NodeConstraints,
    NodeRequirement,
    NodeSelectorTerm,
    Toleration,
)
from sharekeeper.engine.resources import add, at_least
from sharekeeper.engine.selectors import Requirement
from sharekeeper.engine.shares import PodGroupSnapshot, PodSnapshot
from sharekeeper.engine.shares.snapshot import DEFAULT_SCHEDULER, PodGroupPhase
from sharekeeper.model import qos
from sharekeeper.model.objects import (
    MutableObj,
    Obj,
    ObjectError,
    as_list,
    as_mapping,
    at,
    fail,
    int_at,
    is_mapping,
    mapping_at,
    name_of,
    of_kind,
    resource_list,
    resources_at,
    rfc3339_seconds,
    section,
    timestamp_at,
)
from sharekeeper.model.records import PodRecord, WaitingPodRecord

QUEUE_LABEL = "sharekeeper.io/queue"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
ADMISSION_GATE = "sharekeeper.io/admission"
"""The scheduling gate the webhook puts on new pods of namespaces that opt in; the operator
removes it when the pod's queue may take the pod."""
ADMITTED_ANNOTATION = "sharekeeper.io/admitted"
"""Set (to the time) in the patch that removes the gate: the pod was admitted by us."""
_PHASES: tuple[PodGroupPhase, ...] = get_args(PodGroupPhase)


def pod_record(obj: Obj, *, key: PodKey | None = None) -> PodRecord:
    """Everything the operator keeps of a pod. Raises ``ObjectError`` when its share view (the
    requests) cannot be read; a bound pod whose QoS fields cannot be read (a malformed
    ``sharekeeper.io/cpu-throttle`` annotation, say) keeps its share view (it still counts in
    its queue) and carries the problem instead of a QoS view. ``key``: the pod's key as its
    store has it, for the record, its QoS view and the store to hold the same object."""
    try:
        share, since = _pod_snapshot(obj)
    except ObjectError as error:
        raise of_kind("Pod", error) from None
    if key is None:
        key = PodKey(share.namespace, share.name)
    if not share.allocated:
        released = share.admission == "admitted" and share.pending
        unscheduled = scheduler_message(obj) if released else None
        uid = str(at(obj, "metadata.uid") or "") if share.pending else ""
        if share.pending and (share.admission == "held" or since is not None):
            return WaitingPodRecord(
                share, key, unscheduled=unscheduled, uid=uid,
                constraints=node_constraints(obj), unschedulable_since=since,
            )  # fmt: skip
        return PodRecord(share, key, unscheduled=unscheduled, uid=uid)
    try:
        limits = qos.container_cpu_limits(obj)
        return PodRecord(share, key, qos.pod_view(obj, limits, key=key), limits)
    except ObjectError as error:
        return PodRecord(share, key, problem=str(of_kind("Pod", error)))


def pod_snapshot(obj: Obj) -> PodSnapshot:
    return _pod_snapshot(obj)[0]


def _pod_snapshot(obj: Obj) -> tuple[PodSnapshot, float | None]:
    """The pod's share view, and since when it is Unschedulable (None: it is not, or it is
    held by the admission gate, or bound or finished)."""
    # Each section once: this runs for every pod listed and every pod event.
    meta, spec = section(obj, "metadata"), section(obj, "spec")
    labels = as_mapping(obj, "metadata.labels", meta.get("labels"))
    annotations = as_mapping(obj, "metadata.annotations", meta.get("annotations"))
    gates = spec.get("schedulingGates")
    held = has_admission_gate(gates)
    node_name = spec.get("nodeName") or None
    terminal = section(obj, "status").get("phase") in ("Succeeded", "Failed")
    released = not held and ADMITTED_ANNOTATION in annotations
    since = None if held or node_name or terminal else unschedulable_since(obj)
    waits = held or since is not None
    return PodSnapshot(
        namespace=str(meta.get("namespace") or "default"),
        name=name_of(obj),
        request=effective_request(obj, spec),
        node_name=node_name,
        terminal=terminal,
        scheduling_gated=bool(gates),
        queue_label=labels.get(QUEUE_LABEL),
        queue_annotation=annotations.get(VOLCANO_QUEUE_ANNOTATION),
        group_name=annotations.get(GROUP_ANNOTATION),
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER),
        admission="held" if held else "admitted" if released else "none",
        # Only a pod that waits (held, or Unschedulable) is ordered: the others keep the shared
        # defaults (no memory per pod). The effective priority: a system class named outside
        # kube-system counts as 0.
        priority=_admission_priority(obj) if waits else 0,
        created_seconds=timestamp_at(obj, "metadata.creationTimestamp") if waits else 0.0,
        # Only a released pod not bound yet may outstay bindTimeoutSeconds.
        admitted_seconds=admitted_at(annotations) if released and not node_name else 0.0,
    ), since


def pod_scheduled(obj: Obj) -> Mapping[str, Any] | None:
    """The pod's ``PodScheduled`` condition, if it has one."""
    conditions = at(obj, "status.conditions")
    for entry in conditions if isinstance(conditions, list) else ():
        if is_mapping(entry) and entry.get("type") == "PodScheduled":
            return entry
    return None


def unschedulable_since(obj: Obj) -> float | None:
    """Since when the scheduler has found no node for the pod: its ``PodScheduled`` condition is
    False for ``Unschedulable`` since its ``lastTransitionTime`` (the pod's creation when that
    is missing or unreadable); None when it is not. Read for unbound pods only."""
    entry = pod_scheduled(obj)
    if entry is None or entry.get("status") != "False" or entry.get("reason") != "Unschedulable":
        return None
    try:
        since = timestamp_at(entry, "lastTransitionTime")
    except ObjectError:
        since = 0.0
    return since or timestamp_at(obj, "metadata.creationTimestamp")


def node_constraints(obj: Obj) -> NodeConstraints:
    """The pod's node selector, required node affinity and tolerations (read only for a pod
    that waits). The API server validates them; one that cannot be read anyway is taken for
    constraints no node meets (such a pod is planned nowhere), never for none."""
    try:
        selector = mapping_at(obj, "spec.nodeSelector")
        terms_at = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        required = at(obj, terms_at)
        terms = None if required is None else _terms(obj, required)
        listed = as_list(obj, "spec.tolerations", at(obj, "spec.tolerations"))
        tolerations = tuple(_toleration(obj, entry) for entry in listed)
    except (ObjectError, KeyError, TypeError, ValueError):
        return NO_NODE
    if not selector and terms is None and not tolerations:
        return ANY_NODE
    pairs = tuple(sorted((str(key), str(value)) for key, value in selector.items()))
    return NodeConstraints(pairs, terms, tolerations)


def _terms(obj: Obj, required: Any) -> tuple[NodeSelectorTerm, ...]:
    if not is_mapping(required):
        raise fail(obj, "spec.affinity.nodeAffinity", "must be a mapping", required)
    terms = []
    for term in as_list(obj, "nodeSelectorTerms", required.get("nodeSelectorTerms")):
        if not is_mapping(term):
            raise ValueError("a node selector term must be a mapping")
        expressions = tuple(
            _requirement(entry, comparisons=True)
            for entry in as_list(obj, "matchExpressions", term.get("matchExpressions"))
        )
        fields = tuple(
            _field(_requirement(entry, comparisons=False))
            for entry in as_list(obj, "matchFields", term.get("matchFields"))
        )
        terms.append(NodeSelectorTerm(expressions, fields))
    return tuple(terms)


def _requirement(entry: Any, *, comparisons: bool) -> NodeRequirement:
    if not is_mapping(entry):
        raise ValueError("a node selector requirement must be a mapping")
    key, operator = str(entry["key"]), entry["operator"]
    values = [str(value) for value in entry.get("values") or ()]
    if operator in ("In", "NotIn", "Exists", "DoesNotExist"):
        return Requirement(key, operator, frozenset(values))
    if comparisons and operator in ("Gt", "Lt") and len(values) == 1:
        return Comparison(key, operator, int(values[0]))
    raise ValueError(f"node selector operator {operator!r}")


def _field(requirement: NodeRequirement) -> Requirement:
    if not isinstance(requirement, Requirement) or requirement.key != NAME_FIELD:
        raise ValueError(f"node selector field {requirement.key!r}")
    return requirement


def _toleration(obj: Obj, entry: Any) -> Toleration:
    if not is_mapping(entry):
        raise fail(obj, "spec.tolerations", "must hold mappings", entry)
    given = entry.get("operator")
    if given not in (None, "", "Equal", "Exists"):
        raise ValueError(f"toleration operator {given!r}")
    operator: Literal["Equal", "Exists"] = "Exists" if given == "Exists" else "Equal"
    return Toleration(
        str(entry.get("key") or ""), operator, str(entry.get("value") or ""),
        str(entry.get("effect") or ""),
    )  # fmt: skip


def admitted_at(annotations: Obj) -> float:
    """The release time in ``sharekeeper.io/admitted`` (Unix seconds); 0 (unknown, so never
    timed out) when it is not an RFC 3339 time: the pod stays readable whatever it says."""
    value = annotations.get(ADMITTED_ANNOTATION)
    try:
        return rfc3339_seconds(value)
    except ValueError:
        return 0.0


def scheduler_message(obj: Obj) -> str | None:
    """What the scheduler said of a pod it could not place: the message of its PodScheduled
    condition when False; None otherwise."""
    entry = pod_scheduled(obj)
    message = entry.get("message") if entry is not None else None
    if entry is None or entry.get("status") != "False" or not isinstance(message, str):
        return None
    return message or None


def _admission_priority(obj: Obj) -> int:
    """The priority a held pod is ordered by in its queue: ``qos.effective_priority`` of its
    ``spec.priority``, so a tenant that names system-cluster-critical does not go before every
    other team's pods of a queue they share."""
    namespace = str(at(obj, "metadata.namespace") or "default")
    priority = int_at(obj, "spec.priority", 0, low=-(2**31), high=2**31 - 1)
    return qos.effective_priority(namespace, priority)


def gates_with_admission(obj: Obj) -> list[Any] | None:
    """The pod's scheduling gates with ours added, for a new pod that names a queue (by label,
    Volcano annotation or PodGroup); None to leave the pod alone: it names none, it is gated
    already, it is bound at creation (gates are refused there), or its fields are not what the
    API server would have let through.

    "Names a queue" (a non-empty value of one of the three) is what the ValidatingAdmissionPolicy
    ``sharekeeper-admission-at-creation`` checks too (``manifests/admission-policies.yaml``): in
    a namespace that opted in, it refuses the pods this leaves alone for naming none or being
    bound, and those that name one and came through without the gate."""
    labels = at(obj, "metadata.labels") or {}
    annotations = at(obj, "metadata.annotations") or {}
    gates = at(obj, "spec.schedulingGates") or []
    if not (is_mapping(labels) and is_mapping(annotations)):
        return None
    if not isinstance(gates, list) or has_admission_gate(gates) or at(obj, "spec.nodeName"):
        return None
    names_queue = labels.get(QUEUE_LABEL) or annotations.get(VOLCANO_QUEUE_ANNOTATION)
    if not (names_queue or annotations.get(GROUP_ANNOTATION)):
        return None
    return [*gates, {"name": ADMISSION_GATE}]


def release_patch(stamp: str) -> MutableObj:
    """The strategic merge patch that lets a held pod go: our gate removed (others stay), and
    the time recorded. Sent to a pod without the gate, it only sets the annotation."""
    return {
        "metadata": {"annotations": {ADMITTED_ANNOTATION: stamp}},
        "spec": {"schedulingGates": [{"$patch": "delete", "name": ADMISSION_GATE}]},
    }


def has_admission_gate(gates: object) -> bool:
    """Whether ``spec.schedulingGates`` (as found, untrusted) holds our gate."""
    return isinstance(gates, list) and any(
        is_mapping(gate) and gate.get("name") == ADMISSION_GATE for gate in gates
    )


def effective_request(obj: Obj, spec: Obj) -> dict[str, int]:
    """What the pod ``obj`` (its ``spec`` section) requests, as the scheduler counts it: its
    containers and sidecars, or more while an init container runs, plus its overhead."""
    containers = sum_requests(obj, spec.get("containers"), "spec.containers")
    if not spec.get("initContainers") and spec.get("overhead") is None:
        return containers  # most pods: nothing to add, and 150,000 of them are read at once
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    inits = _containers(obj, spec.get("initContainers"), "spec.initContainers")
    for index, init in enumerate(inits):
        request = _requests(obj, init, f"spec.initContainers[{index}]")
        if init.get("restartPolicy") == "Always":
            sidecars = add(sidecars, request)
        else:
            init_peak = at_least(init_peak, add(sidecars, request))
    overhead = as_mapping(obj, "spec.overhead", spec.get("overhead"))
    return add(
        at_least(add(containers, sidecars), init_peak),
        resource_list(obj, overhead, "spec.overhead"),
    )


def sum_requests(obj: Obj, entries: object, path: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for index, container in enumerate(_containers(obj, entries, path)):
        total = add(total, _requests(obj, container, f"{path}[{index}]"))
    return total


def _containers(obj: Obj, entries: object, path: str) -> list[Obj]:
    """The container entries found at ``path`` in ``obj``, each checked to be a mapping."""
    entries = entries or []
    if not isinstance(entries, list):
        raise fail(obj, path, "must be a list", entries)
    for index, entry in enumerate(entries):
        if not is_mapping(entry):
            raise fail(obj, f"{path}[{index}]", "must be a mapping", entry)
    return entries


def _requests(obj: Obj, container: Obj, path: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    if not is_mapping(resources):
        raise fail(obj, f"{path}.resources", "must be a mapping", resources)
    return resource_list(obj, resources.get("requests") or {}, f"{path}.resources.requests")


def pod_group_snapshot(obj: Obj) -> PodGroupSnapshot:
    """A Volcano PodGroup; ``ObjectError`` when it cannot be read."""
    try:
        return _pod_group(obj)
    except ObjectError as error:
        raise of_kind("PodGroup", error) from None


def _pod_group(obj: Obj) -> PodGroupSnapshot:
    phase = at(obj, "status.phase") or "Pending"
    if phase not in _PHASES:
        raise fail(obj, "status.phase", f"must be one of {', '.join(_PHASES)}", phase)
    has_minimum = at(obj, "spec.minResources") is not None
    return PodGroupSnapshot(
        namespace=str(at(obj, "metadata.namespace") or "default"),
        name=name_of(obj),
        queue=at(obj, "spec.queue") or None,
        phase=phase,
        min_member=int_at(obj, "spec.minMember", 0, low=0, high=2**31 - 1),
        min_resources=resources_at(obj, "spec.minResources") if has_minimum else None,
        created_seconds=timestamp_at(obj, "metadata.creationTimestamp"),
    )


def claim_key(pod: PodSnapshot) -> tuple[str, ...]:
    """What a pod's charges go to, as one flat key: ``("named", queue)``, ``("grouped",
    namespace, podgroup)`` or ``("unnamed", schedulerName)`` (``engine.shares.accounting``'s
    ``pod_claim``, with the scheduler that decides whether the default queue is charged)."""
    named = pod.queue_label or pod.queue_annotation
    if named:
        return ("named", named)
    if pod.group_name:
        return ("grouped", pod.namespace, pod.group_name)
    return ("unnamed", pod.scheduler_name)
