"""The one table of the kinds we read and write: group, version, plural, scope, field selector.

The watches (``watching``), ``explain``'s list (``listing``), the usage reader (``usage``), the
writer (``writing``) and the Events' references all take their kinds from here. Our own three
kinds are derived from the API models (``__resource__``), which the CRD generator reads too: a
group or plural is spelled once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharekeeper.api.base import VERSION
from sharekeeper.api.policy import SchedulerPolicy
from sharekeeper.api.qos import NodeQosEnsurancePolicy
from sharekeeper.api.queue import Queue


@dataclass(frozen=True, slots=True)
class Resource:
    """A kind as the API server serves it."""

    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool
    field_selector: str | None = None
    optional: bool = False
    """May not be served (a CRD installed later): watches poll discovery until it is."""
    warn_when_not_served: bool = False
    """Not being served is a fault (our own CRDs), not a choice (Volcano not installed)."""
    label: str | None = None
    """What the metrics and logs call it; the plural unless two kinds share one."""

    @property
    def name(self) -> str:
        return self.label or self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_path(self) -> str:
        """The discovery document of the resource's group version."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def path(self) -> str:
        """The collection: "/api/v1/pods", "/apis/scheduling.volcano.sh/v1beta1/podgroups"."""
        return f"{self.group_path}/{self.plural}"

    def collection(self, namespace: str = "") -> str:
        """The objects of one namespace ("/api/v1/namespaces/team/pods"), or of the cluster."""
        if self.namespaced and namespace:
            return f"{self.group_path}/namespaces/{namespace}/{self.plural}"
        return self.path

    def object_path(self, name: str, namespace: str = "") -> str:
        """One object: "/api/v1/nodes/worker-1", "/api/v1/namespaces/team/pods/train-0"."""
        return f"{self.collection(namespace)}/{name}"


def _ours(model: type[Queue | SchedulerPolicy | NodeQosEnsurancePolicy]) -> Resource:
    # Our CRDs can be deleted and installed again under a running operator: their objects leave
    # the store with them, and they are watched again once served (a missing CRD is a warning).
    served = model.__resource__
    return Resource(
        served.kind, served.group, VERSION, served.plural, namespaced=False,
        optional=True, warn_when_not_served=True,
    )  # fmt: skip


NODES = Resource("Node", "", "v1", "nodes", namespaced=False)
# Finished pods hold no resources: the API server leaves them out (and a pod that finishes
# arrives as a deletion).
PODS = Resource(
    "Pod", "", "v1", "pods", namespaced=True,
    field_selector="status.phase!=Succeeded,status.phase!=Failed",
)  # fmt: skip
PODGROUPS = Resource(
    "PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", namespaced=True, optional=True
)
NAMESPACES = Resource("Namespace", "", "v1", "namespaces", namespaced=False)
# Only their namespace, name and UID are kept: a pod is exempt from QoS actions as a
# DaemonSet's only if the DaemonSet its controller reference names exists.
DAEMONSETS = Resource("DaemonSet", "apps", "v1", "daemonsets", namespaced=True)
QUEUES = _ours(Queue)
POLICIES = _ours(SchedulerPolicy)
QOS_POLICIES = _ours(NodeQosEnsurancePolicy)
# Volcano's Queues, mirrored as ours while a SchedulerPolicy has queueSource Volcano, and only
# listed and watched then. The label tells them from our queues.
VOLCANO_QUEUES = Resource(
    "Queue", "scheduling.volcano.sh", "v1beta1", "queues", namespaced=False, optional=True,
    label="queues.scheduling.volcano.sh",
)  # fmt: skip

# Written, never read: the operator's Events (``events``).
EVENTS = Resource("Event", "", "v1", "events", namespaced=True)

# Node and pod usage for the QoS checks (``usage``), from metrics-server: listed at each check,
# never watched or stored.
NODE_METRICS = Resource(
    "NodeMetrics", "metrics.k8s.io", "v1beta1", "nodes", namespaced=False,
    label="nodes.metrics.k8s.io",
)  # fmt: skip
POD_METRICS = Resource(
    "PodMetrics", "metrics.k8s.io", "v1beta1", "pods", namespaced=True,
    label="pods.metrics.k8s.io",
)  # fmt: skip

STORED = (NODES, PODS, PODGROUPS, NAMESPACES, DAEMONSETS, QUEUES, POLICIES, QOS_POLICIES)
"""What the operator always watches into its store, and what ``explain`` lists once."""

BY_KIND = {resource.kind: resource for resource in STORED}
"""Our kinds and the cluster's by kind name (Volcano's Queue is not here: ours is)."""


def reference(kind: str, name: str, *, namespace: str = "", uid: str = "") -> dict[str, str]:
    """What an Event is about: apiVersion, kind, name, and namespace and uid when known."""
    target = {"apiVersion": BY_KIND[kind].api_version, "kind": kind, "name": name}
    if namespace:
        target["namespace"] = namespace
    if uid:
        target["uid"] = uid
    return target
