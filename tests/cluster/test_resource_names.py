"""The store hands a round the pod totals in the resource names the cluster has only: what some
node offers and some Queue's spec names. A tenant's pods asking for thousands of made-up
resources (issue "Tenant-proof", attack 4) cost a round nothing per made-up name."""

from __future__ import annotations

from typing import Any

from builders import node, pod, pod_group, queue
from sharekeeper.cluster.ledger import PodLedger
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.engine.shares import Charges, PodSnapshot, PodTotals

MADE_UP = {f"example.com/x{i:03}": 1 for i in range(300)}


def loaded(*objects: dict[str, Any]) -> ClusterStore:
    store = ClusterStore()
    store.load(objects)
    return store


def restricted(totals: PodTotals, names: set[str]) -> PodTotals:
    """What ``totals(names)`` must be: the unbounded totals with every other name dropped."""
    keep = names | {"pods"}

    def only(amounts: Any) -> dict[str, int]:
        return {name: amount for name, amount in amounts.items() if name in keep}

    def charges(c: Charges) -> Charges:
        return Charges(only(c.allocated), only(c.request), c.pods, c.allocated_pods,
                       only(c.held), c.admitted_pods)  # fmt: skip

    return PodTotals(
        named={q: {ns: charges(c) for ns, c in by.items()} for q, by in totals.named.items()},
        grouped={key: charges(c) for key, c in totals.grouped.items()},
        unnamed={s: {ns: charges(c) for ns, c in by.items()} for s, by in totals.unnamed.items()},
        unnamed_bound={
            s: {n: only(a) for n, a in by.items()} for s, by in totals.unnamed_bound.items()
        },
        groups={
            key: type(g)(only(g.allocated), g.allocated_pods, only(g.gated), g.pods)
            for key, g in totals.groups.items()
        },
        node_used={n: only(a) for n, a in totals.node_used.items()},
        node_pods=dict(totals.node_pods),
    )


def test_the_round_reads_only_what_nodes_offer_and_queue_specs_name() -> None:
    store = loaded(
        node("n", cpu=8, memory="16Gi", pods=110),
        queue("q", capability={"example.com/licence": 2}),
        pod("bound", "q", node="n", cpu=1, **MADE_UP, **{"example.com/licence": 1}),
        pod("held", "q", held=True, cpu=1, memory="1Gi", **MADE_UP),
        pod("loose", node="n", cpu="500m", **MADE_UP),
        pod("member", group="g", node="n", cpu=1, **MADE_UP),
        pod_group("g", "q", min_resources={"cpu": 1, **MADE_UP}),
    )
    names = store.resource_names()
    assert names == {"cpu", "memory", "pods", "example.com/licence"}
    bounded = store.totals(names)
    assert bounded == restricted(store.totals(), set(names))
    charges = bounded.named["q"]["ns"]
    assert charges.request == {"cpu": 2000, "example.com/licence": 1000, "memory": 2**30, "pods": 2}
    assert charges.held == {"cpu": 1000, "memory": 2**30, "pods": 1}
    assert set(bounded.node_used["n"]) == {"cpu", "example.com/licence"}


def test_a_bucket_larger_than_the_names_is_walked_by_the_names_in_order() -> None:
    """The copy of a bucket holding thousands of names costs the names a round reads."""
    ledger = PodLedger()
    ledger.add(PodSnapshot("ns", "p", request={**MADE_UP, "memory": 1, "cpu": 2}, queue_label="q"))
    small = ledger.totals({"memory", "cpu"}).named["q"]["ns"]
    assert list(small.request.items()) == [("cpu", 2), ("memory", 1), ("pods", 1)]  # sorted
    assert ledger.totals().named["q"]["ns"].request == {**MADE_UP, "memory": 1, "cpu": 2, "pods": 1}
