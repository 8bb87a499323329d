"""What the store keeps for mirroring: Volcano Queues (with the problems of those not mirrored),
the origin of each of our Queues, whom it tells of which change, and whether any policy wants
Volcano Queues at all."""

from __future__ import annotations

from typing import Any

from builders import policy
from sharekeeper.api.mirroring import QueueOrigin
from sharekeeper.cluster.store import ClusterStore, Listeners


def volcano(name: str, uid: str | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid or f"uid-{name}"}, "spec": spec}


def our_queue(name: str, version: str, mirror_of: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"q-{name}", "resourceVersion": version}
    if mirror_of is not None:
        metadata["labels"] = {"sharekeeper.io/source": "volcano"}
        metadata["ownerReferences"] = [
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": name,
             "uid": mirror_of}
        ]  # fmt: skip
    return {"metadata": metadata, "spec": {"weight": 1}}


class Calls:
    def __init__(self) -> None:
        self.changes = 0
        self.mirror = 0
        self.origins: list[tuple[str, QueueOrigin | None, QueueOrigin | None]] = []

    def listeners(self) -> Listeners:
        return Listeners(
            change=self.change,
            mirror=self.mirrored,
            origin=lambda name, old, new: self.origins.append((name, old, new)),
        )

    def change(self) -> None:
        self.changes += 1

    def mirrored(self) -> None:
        self.mirror += 1


def test_volcano_queues_wake_the_share_round_only_when_names_or_uids_change() -> None:
    calls = Calls()
    store = ClusterStore(calls.listeners())
    volcano_queues = store.volcano_queues
    volcano_queues.list_started()
    volcano_queues.listed([volcano("a", weight=1)])
    volcano_queues.list_finished()
    assert (calls.changes, calls.mirror) == (1, 2)  # the queue, then the complete list
    volcano_queues.event("MODIFIED", volcano("a", weight=2))
    assert (calls.changes, calls.mirror) == (1, 3)
    volcano_queues.event("MODIFIED", volcano("a", uid="uid-new", weight=2))
    assert (calls.changes, calls.mirror) == (2, 4)
    assert volcano_queues.uids() == {"a": "uid-new"}
    # An empty list still tells mirroring (nothing changed, but now it knows what is missing).
    volcano_queues.list_started()
    volcano_queues.list_finished()
    assert (calls.changes, calls.mirror) == (3, 6)


def test_a_volcano_queue_that_is_not_mirrored_is_kept_with_its_problem() -> None:
    store = ClusterStore()
    store.volcano_queues.event("ADDED", volcano("bad", weight=0))
    assert store.volcano_queues.records["bad"].spec is None
    assert "spec.weight" in store.volcano_queues.problems["bad"]
    assert store.volcano_queues.uids() == {"bad": "uid-bad"}


def test_our_queues_keep_their_origin_and_tell_every_change() -> None:
    calls = Calls()
    store = ClusterStore(calls.listeners())
    queues = store.queues
    queues.list_started()
    queues.listed([our_queue("made", "1"), our_queue("m", "2", mirror_of="uid-m")])
    queues.list_finished()
    assert queues.origins["made"].mirror_of is None
    assert queues.origins["m"].mirror_of == "uid-m"
    assert [name for name, old, _ in calls.origins if old is None] == ["made", "m"]
    queues.event("MODIFIED", our_queue("m", "3", mirror_of="uid-m"))
    name, old, new = calls.origins[-1]
    assert name == "m"
    assert new is not None
    assert new.same_but_version(old)
    queues.event("DELETED", our_queue("m", "4", mirror_of="uid-m"))
    assert calls.origins[-1][0] == "m"
    assert calls.origins[-1][2] is None
    assert "m" not in queues.origins
    # A relist without "made": its origin goes too.
    queues.list_started()
    queues.list_finished()
    assert queues.origins == {}
    assert calls.origins[-1][0] == "made"


def test_an_unreadable_queue_still_has_an_origin() -> None:
    """Mirroring must see it: a Queue people made is never overwritten, readable or not."""
    store = ClusterStore()
    store.queues.event("ADDED", {**our_queue("odd", "1"), "spec": {"weight": 0}})
    assert store.queues.records["odd"].spec is None  # Invalid, and still a Queue people made
    assert store.queues.origins["odd"].mirror_of is None


def test_volcano_queues_are_wanted_while_a_readable_policy_names_them() -> None:
    told: list[str] = []
    store = ClusterStore(Listeners(policies=lambda: told.append("policies")))
    assert not store.mirroring_wanted()
    plain = policy("plain")
    volcano_source = policy("volcano")
    volcano_source["spec"]["queueSource"] = "Volcano"
    store.policies.event("ADDED", plain)
    assert not store.mirroring_wanted()
    store.policies.event("ADDED", volcano_source)
    assert store.mirroring_wanted()
    unreadable = policy("volcano")
    unreadable["spec"]["queueSource"] = "Kueue"
    store.policies.event("MODIFIED", unreadable)
    assert not store.mirroring_wanted()
    assert told == ["policies"] * 3
