"""Several policies: each governs what its selectors match; what two select stays with the older,
and the newer one reports it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from builders import node, pod, policy, queue, share_policy, share_queue, shares, totals_of
from sharekeeper.api.policy import policy_spec
from sharekeeper.engine.admission import NodePolicy
from sharekeeper.engine.overcommit import OvercommitSpec
from sharekeeper.engine.selectors import MATCH_ALL, LabelSelector
from sharekeeper.engine.shares import (
    PodSnapshot,
    PolicySnapshot,
    ShareNode,
    ShareSnapshot,
)
from sharekeeper.engine.shares.governance import governance, withheld_message
from sharekeeper.engine.shares.snapshot import NodeName, Reason
from sharekeeper.model.nodes import POLICY
from sharekeeper.model.objects import MutableObj
from sharekeeper.pipeline.shares import Publication, publication


def created(obj: MutableObj, timestamp: str) -> MutableObj:
    """``obj`` with ``metadata.creationTimestamp``, as the API server sets it."""
    return {**obj, "metadata": {**obj["metadata"], "creationTimestamp": timestamp}}


def test_policies_split_queues_and_nodes_by_selector() -> None:
    result = shares(
        policy("cpu", queue_labels={"pool": "cpu"}, node_labels={"pool": "cpu"}),
        policy("gpu", "Capacity", queue_labels={"pool": "gpu"}, node_labels={"pool": "gpu"}),
        node("c1", {"pool": "cpu"}, cpu=8),
        node("g1", {"pool": "gpu"}, cpu=4, gpu=1),
        queue("web", labels={"pool": "cpu"}),
        queue("ml", labels={"pool": "gpu"}, deserved={"cpu": "2"}),
        pod("w", "web", cpu=20),
    )
    assert result.queues["web"].policy == "cpu"
    assert result.queues["web"].deserved["cpu"] == 8000
    assert result.queues["ml"].policy == "gpu"
    assert result.policies["gpu"].total == {"cpu": 4000, "nvidia.com/gpu": 1000}


def test_the_older_policy_keeps_what_both_select_and_the_newer_says_so() -> None:
    # The newer policy's name sorts first: age decides, not the name.
    result = shares(
        created(policy("a-new"), "2026-01-02T00:00:00Z"),
        created(policy("z-old"), "2026-01-01T00:00:00Z"),
        node("n", cpu=4),
        queue("q"),
        pod("p", "q", cpu=1),
    )
    share = result.queues["q"]
    assert share.policy == "z-old"
    assert share.deserved["cpu"] == 1000  # its request: the older policy's numbers
    assert share.reasons == ()
    old, new = result.policies["z-old"], result.policies["a-new"]
    assert (old.queues, old.nodes, old.reasons) == (1, 1, ())
    assert (new.queues, new.nodes) == (0, 0)
    assert new.reasons == (
        Reason(
            "Overlapping",
            "queue q is kept by older policy z-old; node n is kept by older policy z-old",
        ),
    )


def test_policies_of_the_same_age_are_ordered_by_name() -> None:
    result = shares(policy("one"), policy("two"), node("n", cpu=4), queue("q"))
    assert result.queues["q"].policy == "one"
    assert result.policies["one"].reasons == ()
    assert [reason.kind for reason in result.policies["two"].reasons] == ["Overlapping"]


def test_the_newer_policy_governs_what_only_it_selects() -> None:
    old = policy("old", queue_labels={"team": "a"}, node_labels={"pool": "a"})
    result = shares(
        created(old, "2026-01-01T00:00:00Z"),
        created(policy("new"), "2026-01-02T00:00:00Z"),
        node("na", {"pool": "a"}, cpu=4),
        node("nb", {"pool": "b"}, cpu=8),
        queue("qa", labels={"team": "a"}),
        queue("qb", labels={"team": "b"}),
        pod("p", "qb", cpu=20),
    )
    assert (result.queues["qa"].policy, result.queues["qb"].policy) == ("old", "new")
    assert result.queues["qb"].deserved["cpu"] == 8000  # nb only
    assert result.policies["new"].reasons == (
        Reason(
            "Overlapping",
            "queue qa is kept by older policy old; node na is kept by older policy old",
        ),
    )


def test_a_third_policy_is_told_which_older_policy_keeps_each_object() -> None:
    old = share_policy("old", queue_selector=LabelSelector({"pool": "a"}))
    middle = share_policy("middle", created_seconds=1)
    new = share_policy("new", created_seconds=2)
    found = governance([new, old, middle], {"qa": {"pool": "a"}, "qb": {}}, "queue")
    assert found.owner == {"qa": "old", "qb": "middle"}
    assert found.withheld == {"middle": {"qa": "old"}, "new": {"qa": "old", "qb": "middle"}}


def test_ten_thousand_overlapping_queues_are_named_in_part_and_counted() -> None:
    old = share_policy("old")
    new = share_policy("new", created_seconds=1)
    queues = governance([new, old], {f"q{i:05}": {} for i in range(10_000)}, "queue")
    nodes = governance([new, old], {f"n{i:04}": {} for i in range(5_000)}, "node")
    assert set(queues.owner.values()) == set(nodes.owner.values()) == {"old"}
    assert set(queues.withheld) == set(nodes.withheld) == {"new"}
    message = withheld_message(queues.withheld["new"], nodes.withheld["new"])
    first = "; ".join(f"queue q{i:05} is kept by older policy old" for i in range(5))
    assert message == f"{first}; and 14995 more (10000 queues and 5000 nodes in all)"


def test_the_creation_time_is_read_from_the_metadata() -> None:
    stamped = policy_spec(created(policy("p"), "2026-01-01T00:00:01Z"))
    assert stamped.shares.created_seconds == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC).timestamp()
    assert policy_spec(policy("p")).shares.created_seconds == 0.0


def test_a_queue_matched_by_no_policy_says_so() -> None:
    result = shares(policy("p", queue_labels={"x": "y"}), node("n", cpu=4), queue("q"))
    assert [reason.kind for reason in result.queues["q"].reasons] == ["NoPolicy"]


# --- a newer policy changes nothing the older one publishes -------------------------------------

POOLS = st.sampled_from(["a", "b", None])
SELECTORS = st.sampled_from([MATCH_ALL, LabelSelector({"pool": "a"}), LabelSelector({"pool": "b"})])
AMOUNTS = st.dictionaries(st.sampled_from(["cpu", "memory"]), st.integers(0, 16_000), max_size=2)


def _labels(pool: str | None) -> dict[str, str]:
    return {} if pool is None else {"pool": pool}


@st.composite
def clusters(draw: st.DrawFn) -> ShareSnapshot:
    queues = tuple(
        share_queue(
            f"q{i}",
            labels=_labels(draw(POOLS)),
            weight=draw(st.integers(1, 5)),
            guarantee=draw(AMOUNTS),
        )
        for i in range(draw(st.integers(1, 5)))
    )
    nodes = tuple(
        ShareNode(NodeName(f"n{i}"), labels=_labels(draw(POOLS)), allocatable=draw(AMOUNTS))
        for i in range(draw(st.integers(1, 4)))
    )
    pods = tuple(
        PodSnapshot(
            "ns",
            f"p{i}",
            request=draw(AMOUNTS),
            node_name=draw(st.sampled_from([None, *(node.name for node in nodes)])),
            queue_label=draw(st.sampled_from([queue.name for queue in queues])),
        )
        for i in range(draw(st.integers(0, 8)))
    )
    return ShareSnapshot(queues=queues, nodes=nodes, totals=totals_of(pods))


@st.composite
def older_and_newer(draw: st.DrawFn) -> tuple[PolicySnapshot, PolicySnapshot]:
    """Newer by name at the same age, or by creation time with a name that sorts first."""
    created_seconds, newer_name = draw(st.sampled_from([(0.0, "b-newer"), (5.0, "a-newer")]))
    old = share_policy("a-old", queue_selector=draw(SELECTORS), node_selector=draw(SELECTORS))
    new = share_policy(
        newer_name,
        queue_selector=draw(SELECTORS),
        node_selector=draw(SELECTORS),
        created_seconds=created_seconds,
    )
    return old, new


@given(clusters(), older_and_newer())
def test_the_older_policy_publishes_the_same_with_or_without_a_newer_one(
    cluster: ShareSnapshot, policies: tuple[PolicySnapshot, PolicySnapshot]
) -> None:
    old, new = policies
    settings = {
        old.name: NodePolicy(OvercommitSpec(factor=Fraction(3, 2))),
        new.name: NodePolicy(OvercommitSpec(factor=Fraction(2))),
    }
    alone = publication(replace(cluster, policies=(old,)), settings)
    both = publication(replace(cluster, policies=(new, old)), settings)
    assert _published_by(both, old.name) == _published_by(alone, old.name)
    overlapping = {c["type"]: c for c in both.policies[new.name]["conditions"]}["Overlapping"]
    selects_the_same = any(
        new.queue_selector.matches(q.labels) and old.queue_selector.matches(q.labels)
        for q in cluster.queues
    ) or any(
        new.node_selector.matches(n.labels) and old.node_selector.matches(n.labels)
        for n in cluster.nodes
    )
    assert overlapping["status"] == ("True" if selects_the_same else "False")


def _published_by(published: Publication, policy: str) -> str:
    """The policy's status, its queues' statuses and its nodes' annotations, as JSON text."""
    return json.dumps(
        {
            "policy": published.policies[policy],
            "queues": {n: s for n, s in published.queues.items() if s.get("policy") == policy},
            "nodes": {n: a for n, a in published.nodes.items() if a.get(POLICY) == policy},
        },
        sort_keys=True,
    )
