"""Pod -> queue resolution and per-queue allocated/request/inqueue (volcano.md §2)."""

from __future__ import annotations

from builders import node, pod, pod_group, policy, queue, shares
from sharekeeper.engine.shares import Charges, PodTotals
from sharekeeper.engine.shares.accounting import queue_usage
from sharekeeper.engine.shares.snapshot import QueueName


def _objects() -> list[dict[str, object]]:
    annotated = pod("annotated", node="n", cpu=1)
    annotated["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "b"  # type: ignore[index]
    return [
        policy(),
        node("n", cpu=16),
        queue("default"),
        queue("a"),
        queue("b"),
        queue("c"),
        pod("labelled", "a", node="n", cpu=2),
        annotated,
        pod("grouped", group="job", cpu=3),
        pod("unnamed", scheduler="volcano", cpu=4),
        pod("done", "a", node="n", phase="Succeeded", cpu=8),
        pod_group("job", "c", phase="Inqueue", min_resources={"cpu": "5"}),
    ]


def test_pods_find_their_queue_by_label_annotation_group_then_default() -> None:
    queues = shares(*_objects()).queues
    assert queues["a"].allocated == {"cpu": 2000, "pods": 1}  # the Succeeded pod does not count
    assert queues["b"].allocated == {"cpu": 1000, "pods": 1}
    assert queues["c"].request == {"cpu": 3000, "pods": 1}
    assert queues["default"].request == {"cpu": 4000, "pods": 1}


def test_inqueue_is_what_an_admitted_group_has_not_yet_allocated() -> None:
    queues = shares(*_objects()).queues
    assert queues["c"].inqueue == {"cpu": 5000}


def test_scheduling_gated_pods_do_not_reserve() -> None:
    result = shares(
        policy(),
        node("n", cpu=8),
        queue("q"),
        pod_group("job", "q", phase="Inqueue", min_resources={"cpu": "4"}),
        pod("gated", group="job", gated=True, cpu=1),
        pod("running", group="job", node="n", cpu=1),
    )
    assert result.queues["q"].inqueue == {"cpu": 2000}  # 4 - 1 allocated - 1 gated


def test_a_queue_charged_from_two_namespaces_sums_them_and_leaves_the_totals_as_they_were() -> None:
    """A queue charged from one source holds that source's sums as they are: a second source
    must make a new sum, not add into them."""
    bound = Charges({"cpu": 1000, "pods": 1}, {"cpu": 1000, "pods": 1}, 1, 1)
    pending = Charges({}, {"memory": 5, "pods": 2}, 2)
    totals = PodTotals(named={"q": {"a": bound, "b": pending}})
    usage = queue_usage([QueueName("q")], totals, {}).usage[QueueName("q")]
    assert usage.allocated == {"cpu": 1000, "pods": 1}
    assert usage.request == {"cpu": 1000, "memory": 5, "pods": 3}
    assert bound == Charges({"cpu": 1000, "pods": 1}, {"cpu": 1000, "pods": 1}, 1, 1)
    assert pending == Charges({}, {"memory": 5, "pods": 2}, 2)


# --- Queue.spec.namespaces: which namespaces' pods a queue is charged for ------------------------


def namespace(name: str, **labels: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def admitting(name: str, selector: dict[str, object]) -> dict[str, object]:
    obj = queue(name)
    obj["spec"]["namespaces"] = selector  # type: ignore[index]
    return obj


def test_a_pod_of_a_namespace_the_queue_does_not_admit_is_charged_to_no_queue() -> None:
    """Found: any tenant could label a pod ``sharekeeper.io/queue: production`` and spend another
    team's queue."""
    result = shares(
        policy(),
        node("n", cpu=16),
        namespace("team-a", team="a"),
        namespace("team-b", team="b"),
        admitting("production", {"matchLabels": {"team": "a"}}),
        queue("default"),
        pod("mine", "production", node="n", namespace="team-a", cpu=2),
        pod("stolen", "production", node="n", namespace="team-b", cpu=3),
        pod("also-stolen", "production", namespace="team-b", cpu=1),
    )
    production = result.queues["production"]
    assert production.allocated == {"cpu": 2000, "pods": 1}
    assert production.request == {"cpu": 2000, "pods": 1}
    assert result.queues["default"].request == {}  # charged to no queue at all
    (refusal,) = [r for r in production.reasons if r.kind == "NamespaceNotAdmitted"]
    assert refusal.message.startswith("2 pods in namespace team-b name this queue")


def test_a_namespace_is_selected_by_its_name_label_even_when_unknown() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        admitting("q", {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ns"]}]}),
        pod("in", "q", node="n", namespace="ns", cpu=1),
        pod("out", "q", node="n", namespace="elsewhere", cpu=1),
    )  # fmt: skip
    assert result.queues["q"].allocated == {"cpu": 1000, "pods": 1}


def test_pods_that_name_no_queue_go_to_default_only_from_namespaces_it_admits() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        admitting("default", {"matchLabels": {"kubernetes.io/metadata.name": "batch"}}),
        pod("batch-pod", namespace="batch", scheduler="volcano", cpu=1),
        pod("system-pod", namespace="kube-system", scheduler="volcano", cpu=4),
    )
    default = result.queues["default"]
    assert default.request == {"cpu": 1000, "pods": 1}
    assert not [r for r in default.reasons if r.kind == "NamespaceNotAdmitted"]  # none asked


def test_a_podgroup_of_a_namespace_not_admitted_reserves_nothing_in_the_queue() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        admitting("c", {"matchLabels": {"kubernetes.io/metadata.name": "mine"}}),
        pod_group("job", "c", phase="Inqueue", min_resources={"cpu": "5"}, namespace="theirs"),
        pod("member", group="job", namespace="theirs", cpu=3),
    )
    assert (result.queues["c"].request, result.queues["c"].inqueue) == ({}, {})
    assert [r.kind for r in result.queues["c"].reasons] == ["NamespaceNotAdmitted"]


def test_without_namespaces_every_namespace_is_admitted() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        queue("q"),
        pod("a", "q", node="n", namespace="one", cpu=1),
        pod("b", "q", node="n", namespace="two", cpu=1),
    )
    assert result.queues["q"].allocated == {"cpu": 2000, "pods": 2}


# --- Which pods count: schedulerNames, unmanaged pods, one pod each ------------------------------


def test_each_pod_counts_one_pods_in_request_and_once_bound_in_allocated() -> None:
    result = shares(
        policy(),
        node("n", cpu=16, pods=110),
        queue("q"),
        pod("running", "q", node="n", cpu=1),
        pod("waiting", "q", cpu=1),
        pod("pending-too", "q", cpu=1),
    )
    q = result.queues["q"]
    assert (q.allocated["pods"], q.request["pods"]) == (1, 3)
    assert q.deserved["pods"] == 3  # asks for three pods of the 110, gets them
    assert q.decided_by["pods"] == "Request"


def test_the_share_leaves_the_count_of_pods_out() -> None:
    """Its one pod running, a queue would read as fully served while holding 1 of 8 cpu."""
    result = shares(
        policy(), node("n", cpu=16, pods=110), queue("q"), pod("p", "q", node="n", cpu=1)
    )
    q = result.queues["q"]
    assert (q.allocated["pods"], q.deserved["pods"]) == (1, 1)
    assert q.share == 1.0  # cpu: 1 of 1 deserved; the pod count would also say 1
    small = shares(
        policy(),
        node("n", cpu=16, pods=110),
        queue("q"),
        pod("running", "q", node="n", cpu=1),
        pod("waiting", "q", cpu=7),
    ).queues["q"]
    assert small.share == 0.125  # cpu 1 of 8; pods 1 of 2 would have said 0.5


def test_a_pod_of_another_scheduler_that_names_no_queue_is_unmanaged() -> None:
    """Found: one kube-system pod moved default's deserved from 40 to 44 cpu."""
    result = shares(
        policy(),
        node("n", cpu=16, pods=110),
        queue("default"),
        queue("busy"),
        pod("batch", scheduler="volcano", node="n", cpu=2),
        pod("coredns", namespace="kube-system", node="n", cpu=4),
        pod("pending-web", cpu=1),
        pod("work", "busy", cpu=100),
    )
    assert result.queues["default"].request == {"cpu": 2000, "pods": 1}
    policy_share = result.policies["default"]
    assert policy_share.unmanaged == {"cpu": 4000, "pods": 1}  # a pending pod occupies nothing
    assert policy_share.total == {"cpu": 12_000, "pods": 109}  # Reserve: 16 - 4
    assert result.queues["busy"].deserved["cpu"] == 10_000  # 12 - default's 2


def test_ignore_shares_the_whole_allocatable_as_volcano_does() -> None:
    result = shares(
        policy(unmanaged="Ignore"),
        node("n", cpu=16),
        queue("busy"),
        pod("coredns", namespace="kube-system", node="n", cpu=4),
        pod("work", "busy", cpu=100),
    )
    assert result.policies["default"].total == {"cpu": 16_000}
    assert result.policies["default"].unmanaged == {"cpu": 4000, "pods": 1}  # still reported
    assert result.queues["busy"].deserved["cpu"] == 16_000


def test_scheduler_names_decide_which_unnamed_pods_count_in_default() -> None:
    objects = [
        node("n", cpu=16),
        queue("default"),
        pod("plain", node="n", cpu=1),
        pod("custom", scheduler="my-batch", node="n", cpu=2),
        pod("volcano", scheduler="volcano", node="n", cpu=4),
    ]
    defaults = shares(policy(), *objects)
    assert defaults.queues["default"].allocated == {"cpu": 4000, "pods": 1}
    assert defaults.policies["default"].unmanaged == {"cpu": 3000, "pods": 2}
    listed = shares(policy(schedulerNames=["my-batch", "default-scheduler"]), *objects)
    assert listed.queues["default"].allocated == {"cpu": 3000, "pods": 2}
    assert listed.policies["default"].unmanaged == {"cpu": 4000, "pods": 1}


def test_a_pod_that_names_a_queue_counts_whatever_its_scheduler() -> None:
    result = shares(
        policy(),
        node("n", cpu=16),
        queue("q"),
        pod("labelled", "q", node="n", cpu=1),  # default-scheduler
        pod("grouped", group="job", node="n", scheduler="kube-batch", cpu=2),
        pod_group("job", "q", phase="Running"),
    )
    assert result.queues["q"].allocated == {"cpu": 3000, "pods": 2}
    assert result.policies["default"].unmanaged == {}


def test_unmanaged_pods_are_reserved_by_the_policy_of_their_node() -> None:
    result = shares(
        policy("gpu", node_labels={"pool": "gpu"}, queue_labels={"pool": "gpu"}),
        policy("cpu", node_labels={"pool": "cpu"}, queue_labels={"pool": "cpu"}),
        node("g", {"pool": "gpu"}, cpu=8),
        node("c", {"pool": "cpu"}, cpu=8),
        pod("agent", namespace="kube-system", node="g", cpu=1),
    )
    assert result.policies["gpu"].unmanaged == {"cpu": 1000, "pods": 1}
    assert result.policies["cpu"].unmanaged == {}
    assert result.policies["cpu"].total == {"cpu": 8000}
