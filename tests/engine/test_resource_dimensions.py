"""A queue's dimensions come from the cluster, not from its tenants' pods.

Found (issue "Tenant-proof", attack 4): sixteen held pods of one tenant, each asking for 500
made-up extended resources, gave every queue (not only the tenant's) 7,003 resource names and a
1.56 MB status that the API server refused to store. A policy's dimensions are now what its
nodes offer and what its queues' specs name; a request for anything else becomes no column
anywhere, and a held pod that asks for it waits with ``ResourceNotOffered``.

Every case runs simulate's path (objects -> store -> snapshot -> engines -> statuses)."""

from __future__ import annotations

from typing import Any

from builders import (
    exposed,
    node,
    pod,
    pod_group,
    policy,
    queue,
    share_policy,
    share_queue,
    totals_of,
)
from sharekeeper.engine.gates import not_offered
from sharekeeper.engine.shares import (
    PodSnapshot,
    ShareNode,
    ShareSnapshot,
    deserved_shares,
)
from sharekeeper.engine.shares.accounting import NO_USAGE, QueueUsage, bounded_usages
from sharekeeper.engine.shares.snapshot import NodeName, PolicyName, QueueName
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.pipeline.statuses import waiting_text
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of
from sharekeeper.telemetry import QueueSeries

MADE_UP = {f"example.com/made-up-{i:03}": 1 for i in range(500)}
"""What the tenant's pods asked for: 500 extended resources no node has."""
REAL = {"cpu", "memory", "pods"}
AMOUNTS = ("deserved", "guarantee", "realCapability", "allocated", "request", "inqueue",
           "elastic", "decidedBy")  # fmt: skip


def publish(*objects: dict[str, Any]) -> Publication:
    inputs = parse_objects(objects)
    return publication(
        snapshot_of(inputs, Context(0.0, 0)), inputs.node_policies, held=inputs.store.pods.held()
    )


def names_in(status: dict[str, Any], fields: tuple[str, ...] = AMOUNTS) -> set[str]:
    return {name for field in fields for name in status.get(field) or {}}


def policy_names(status: dict[str, Any]) -> set[str]:
    overcommit = status.get("overcommit") or {}
    return names_in(status, ("total", "totalGuarantee", "unmanaged")) | names_in(
        overcommit, ("factors", "overcommittedTotal", "used", "inqueue", "headroom")
    )


def cluster(*pods: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """One policy, one 8-cpu node, the tenant's queue and two other teams' queues."""
    return (
        policy("p"), node("n", cpu=8, memory="64Gi", pods=110),
        queue("tenant"), queue("team-a"), queue("team-b", weight=2),
        pod("a0", "team-a", namespace="team-a", node="n", cpu=2, memory="4Gi"),
        pod("b0", "team-b", namespace="team-b", cpu=1, memory="1Gi"),
        *pods,
    )  # fmt: skip


def attack(count: int = 16) -> list[dict[str, Any]]:
    return [
        pod(f"t{i}", "tenant", namespace="tenant", held=True, created=f"2026-01-01T00:00:{i:02}Z",
            cpu="100m", memory="128Mi", **MADE_UP)
        for i in range(count)
    ]  # fmt: skip


def test_made_up_resources_of_held_pods_add_no_dimension_to_any_queue_or_policy() -> None:
    result = publish(*cluster(*attack()))
    for name, status in result.queues.items():
        assert names_in(status) <= REAL, name
    assert policy_names(result.policies["p"]) <= REAL
    # The tenant's pods still count in the dimensions the cluster has.
    tenant = result.queues["tenant"]
    assert tenant["request"] == {"cpu": "1600m", "memory": "2Gi", "pods": "16"}
    assert tenant["gated"] == 16


def test_every_status_is_what_it_would_be_without_the_made_up_requests() -> None:
    """Bound, pending and held pods, and pods of no queue: the names no node offers change
    nothing any queue or policy publishes, nor any node annotation."""
    extra = [
        pod("bound", "team-a", namespace="team-a", node="n", cpu=1, **MADE_UP),
        pod("pending", "team-b", namespace="team-b", cpu=1, **MADE_UP),
        pod("loose", namespace="tenant", node="n", cpu="500m", **MADE_UP),  # unmanaged
        pod("gang-0", namespace="tenant", group="g", cpu=1, **MADE_UP),
    ]
    group = pod_group("g", "tenant", phase="Inqueue", namespace="tenant",
                      min_resources={"cpu": 2, **MADE_UP})  # fmt: skip
    attacked = publish(*cluster(*attack(), *extra), group)

    def plain(obj: dict[str, Any]) -> dict[str, Any]:
        requests = obj["spec"]["containers"][0]["resources"]["requests"]
        for name in MADE_UP:
            requests.pop(name, None)
        return obj

    clean_group = pod_group("g", "tenant", phase="Inqueue", namespace="tenant",
                            min_resources={"cpu": 2})  # fmt: skip
    clean = publish(*cluster(*map(plain, attack()), *map(plain, extra)), clean_group)
    assert attacked.queues == clean.queues
    assert attacked.policies == clean.policies
    assert attacked.nodes == clean.nodes


def test_a_held_pod_asking_for_what_no_node_offers_waits_with_its_own_reason() -> None:
    result = publish(*cluster(*attack(2)))
    waiting = result.gates.waiting[("tenant", "t0")]
    assert waiting.reason == "ResourceNotOffered"
    assert waiting.policy == "p"
    assert waiting.resources == tuple(sorted(MADE_UP))
    text = waiting_text(waiting)
    assert text == (
        "it requests example.com/made-up-000, example.com/made-up-001, example.com/made-up-002, "
        "example.com/made-up-003, example.com/made-up-004 and 495 more resources, which no node "
        "of policy p offers"
    )
    assert result.gates.released == ()


def test_one_made_up_resource_is_named_whole() -> None:
    one = pod("t", "tenant", namespace="tenant", held=True, cpu=1, **{"example.com/foo": 1})
    waiting = publish(*cluster(one)).gates.waiting[("tenant", "t")]
    assert waiting_text(waiting) == "it requests example.com/foo, which no node of policy p offers"


def test_a_pod_that_no_node_could_run_holds_up_no_other_pod_of_its_queue() -> None:
    """It waits for ever; the pods behind it (younger, same priority) go as room allows."""
    younger = pod("t-late", "tenant", namespace="tenant", held=True, cpu=1,
                  created="2026-01-01T00:10:00Z")  # fmt: skip
    result = publish(*cluster(*attack(3), younger))
    assert result.gates.released == (("tenant", "t-late"),)
    assert {w.reason for w in result.gates.waiting.values()} == {"ResourceNotOffered"}


def test_a_resource_some_node_offers_is_a_dimension_even_at_zero() -> None:
    """A node that lists a resource (a device plugin whose devices are all unhealthy says 0)
    offers it: a pod asking for it waits for room, not for ever."""
    gpu_node = node("g", cpu=8, memory="64Gi", pods=110, gpu=0)
    wants = pod("w", "tenant", namespace="tenant", held=True, cpu=1, gpu=1)
    result = publish(*cluster(wants), gpu_node)
    assert result.gates.waiting[("tenant", "w")].reason == "QuotaExceeded"
    assert "nvidia.com/gpu" in result.queues["tenant"]["request"]
    assert "nvidia.com/gpu" in result.queues["team-a"]["deserved"]


def test_a_resource_a_queue_spec_names_is_a_dimension_but_no_node_runs_it() -> None:
    """The platform team's specs may name a resource no node has (a licence counted as a
    quota): it stays a dimension of the policy, and a held pod asking for it still waits for
    a node that offers it."""
    licensed = queue("tenant", capability={"example.com/licence": 3})
    asks = [
        pod("bound", "tenant", namespace="tenant", node="n", cpu=1, **{"example.com/licence": 1}),
        pod("held", "tenant", namespace="tenant", held=True, cpu=1, **{"example.com/licence": 1}),
    ]
    objects = [o for o in cluster(*asks) if o["metadata"]["name"] != "tenant"]
    result = publish(*objects, licensed)
    tenant = result.queues["tenant"]
    assert tenant["allocated"]["example.com/licence"] == "1"
    assert tenant["request"]["example.com/licence"] == "2"
    assert "example.com/licence" in result.queues["team-a"]["deserved"]  # a policy dimension
    waiting = result.gates.waiting[("tenant", "held")]
    assert (waiting.reason, waiting.resources) == ("ResourceNotOffered", ("example.com/licence",))


def test_a_queue_no_policy_governs_keeps_what_any_node_offers_and_its_spec_names() -> None:
    orphan = queue("orphan", labels={"team": "none"}, guarantee={"example.com/seat": 1})
    selective = policy("p", queue_labels={"team": "yes"})
    pods = [
        pod("o1", "orphan", node="n", cpu=1, **MADE_UP, **{"example.com/seat": 1}),
        pod("o2", "orphan", cpu=1, memory="1Gi", **MADE_UP),
    ]
    result = publish(selective, node("n", cpu=8, memory="64Gi", pods=110), orphan, *pods)
    status = result.queues["orphan"]
    assert status["conditions"][0]["reason"] == "NoPolicy"
    assert status["allocated"] == {"cpu": "1", "example.com/seat": "1", "pods": "1"}
    assert status["request"] == {"cpu": "2", "example.com/seat": "1", "memory": "1Gi", "pods": "2"}


def test_in_a_queue_tree_the_rolled_up_amounts_are_bounded_too() -> None:
    tree = [
        policy("p"), node("n", cpu=8, memory="64Gi", pods=110),
        queue("org"), queue("team", parent="org"),
        pod("x", "team", node="n", cpu=1, **MADE_UP),
        pod("y", "team", held=True, cpu=1, **MADE_UP),
    ]  # fmt: skip
    result = publish(*tree)
    assert names_in(result.queues["org"]) <= REAL
    assert result.queues["org"]["request"] == {"cpu": "2", "pods": "2"}
    assert result.gates.waiting[("ns", "y")].reason == "ResourceNotOffered"


def test_the_queue_metrics_carry_only_the_real_resources() -> None:
    """A metric label value that comes from a tenant object is bounded the same way: the
    series per queue are its dimensions, whatever the pods ask for."""
    result = publish(*cluster(*attack()))
    series = QueueSeries()
    series.export(result.shares)
    samples = exposed(series.exposition())
    assert {sample.labels["resource"] for sample in samples if "resource" in sample.labels} <= REAL
    assert len(samples) <= 3 * (2 + 2 * len(REAL))


def test_not_offered_ignores_pods_and_zero_requests() -> None:
    request = {
        "cpu": 1000,
        "pods": 1,
        "example.com/zero": 0,
        "example.com/b": 1,
        "example.com/a": 2,
    }
    assert not_offered(request, {"cpu"}) == ("example.com/a", "example.com/b")
    assert not_offered(request, {"cpu", "example.com/a", "example.com/b"}) == ()


def test_a_gang_waits_whole_while_one_of_its_pods_asks_for_what_no_node_offers() -> None:
    gang = [
        pod(f"g{i}", "tenant", namespace="tenant", group="g", held=True, cpu=1,
            **({"example.com/foo": 1} if i == 2 else {}))
        for i in range(3)
    ]  # fmt: skip
    group = pod_group("g", "tenant", min_member=3, namespace="tenant")
    result = publish(*cluster(*gang), group)
    assert result.gates.released == ()
    waits = {key[1]: w for key, w in result.gates.waiting.items() if key[0] == "tenant"}
    assert {w.reason for w in waits.values()} == {"ResourceNotOffered"}
    assert waiting_text(waits["g2"]) == (
        "it requests example.com/foo, which no node of policy p offers"
    )
    assert waiting_text(waits["g0"]) == (
        "pod tenant/g2 of its PodGroup requests example.com/foo, which no node of policy p "
        "offers; it goes whole"
    )


def test_a_resource_only_another_policys_nodes_offer_is_no_dimension_of_this_one() -> None:
    """Each policy keeps to its own nodes: a GPU in one pool adds no GPU column to the other."""
    objects = (
        policy("cpu-pool", node_labels={"pool": "cpu"}, queue_labels={"pool": "cpu"}),
        policy("gpu-pool", node_labels={"pool": "gpu"}, queue_labels={"pool": "gpu"}),
        node("c", {"pool": "cpu"}, cpu=8, memory="64Gi", pods=110),
        node("g", {"pool": "gpu"}, cpu=8, memory="64Gi", pods=110, gpu=4),
        queue("plain", labels={"pool": "cpu"}), queue("trainer", labels={"pool": "gpu"}),
        pod("wrong-pool", "plain", node="c", cpu=1, gpu=1),
        pod("held", "plain", held=True, cpu=1, gpu=1),
        pod("right-pool", "trainer", held=True, cpu=1, gpu=1),
    )  # fmt: skip
    result = publish(*objects)
    assert names_in(result.queues["plain"]) == REAL
    assert policy_names(result.policies["cpu-pool"]) <= REAL
    assert "nvidia.com/gpu" in result.queues["trainer"]["deserved"]
    waiting = result.gates.waiting[("ns", "held")]
    assert (waiting.reason, waiting.policy) == ("ResourceNotOffered", "cpu-pool")
    assert result.gates.released == (("ns", "right-pool"),)


def test_the_engine_bounds_totals_that_were_not_bounded_before_it() -> None:
    """The store hands a round only the names some node offers or some queue names; the
    engine does not rely on it (a snapshot built by hand, with every name of every pod)."""
    pods = [
        PodSnapshot("t", f"p{i}", request={"cpu": 100, **MADE_UP}, node_name="n" if i else None,
                    queue_label="tenant", scheduling_gated=not i)
        for i in range(3)
    ]  # fmt: skip
    snapshot = ShareSnapshot(
        policies=(share_policy("p"),),
        queues=(share_queue("tenant"), share_queue("other")),
        nodes=(ShareNode(NodeName("n"), allocatable={"cpu": 8000, "pods": 110}),),
        totals=totals_of(pods),
    )
    result = deserved_shares(snapshot)
    for share in result.queues.values():
        for amounts in (share.deserved, share.real_capability, share.allocated, share.request):
            assert set(amounts) <= {"cpu", "pods"}
    assert result.queues[QueueName("tenant")].request == {"cpu": 300, "pods": 3}
    summary = result.policies[PolicyName("p")]
    assert (summary.offered, summary.dimensions) == ({"cpu", "pods"}, {"cpu", "pods"})


def test_usage_within_the_names_is_handed_on_as_it_is_and_beyond_them_bounded() -> None:
    plain = QueueUsage({"cpu": 1, "pods": 1}, {"cpu": 1, "pods": 1})
    odd = QueueUsage({}, {"cpu": 2}, held={"cpu": 2, "example.com/made-up": 1, "pods": 1})
    names = frozenset({"cpu", "pods"})
    entries = [plain, NO_USAGE]
    assert bounded_usages(entries, names) is entries
    bounded = bounded_usages([plain, odd], names)
    assert bounded[0] is plain
    assert bounded[1] == QueueUsage({}, {"cpu": 2}, {}, {}, {"cpu": 2, "pods": 1})
