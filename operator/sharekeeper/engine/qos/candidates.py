"""Which pods on a node a policy may act on (``spec.candidates``), with safe hard exclusions.

Crane E1 acted on every pod of the node (crane.md §5); we never touch, whatever the policy
says: pods in ``kube-system``, mirror/static pods, DaemonSet pods (they would come straight
back), pods at or above system-cluster-critical priority, and pods already terminating (their
release is already on its way; counting it again is crane.md §12.4). Within that, a pod is a
candidate when its priority is at most ``maxPriority`` and both selectors match.

None of this takes a pod's word for it: ``priority`` is the effective one (a system priority
counts only in ``SYSTEM_NAMESPACES``; elsewhere anyone may name the class, so it reads as 0)
and ``daemonset`` is set only for a DaemonSet that exists (``model.qos``, ``cluster.store``).

Label selectors are matched by the shared ``sharekeeper.engine.selectors``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sharekeeper.engine.qos.inputs import (
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NAMESPACES,
    Candidates,
    QosNode,
    QosPod,
)
from sharekeeper.engine.selectors import NAMESPACE_NAME_LABEL


def protected(pod: QosPod) -> bool:
    """Pods no policy may act on."""
    return (
        pod.key.namespace in SYSTEM_NAMESPACES
        or pod.mirror_or_static
        or pod.daemonset
        or pod.terminating
        or pod.priority >= SYSTEM_CLUSTER_CRITICAL
    )


def allowed(rules: Candidates, pod: QosPod, node: QosNode) -> bool:
    # The API server labels every namespace with its own name; match on it even when the
    # caller knows nothing else about the namespace.
    namespace_labels = {
        NAMESPACE_NAME_LABEL: pod.key.namespace,
        **node.namespace_labels.get(pod.key.namespace, {}),
    }
    return (
        not protected(pod)
        and pod.priority <= rules.max_priority
        and rules.namespace_selector.matches(namespace_labels)
        and rules.pod_selector.matches(pod.labels)
    )


def candidate_pods(rules: Iterable[Candidates], node: QosNode) -> tuple[QosPod, ...]:
    """Pods allowed by any of ``rules`` (the policies behind one waterline), in key order."""
    rule_list = tuple(rules)
    pods = (p for p in node.pods if any(allowed(r, p, node) for r in rule_list))
    return tuple(sorted(pods, key=lambda p: p.key))
