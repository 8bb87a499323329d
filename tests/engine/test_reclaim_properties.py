"""Reclaim never loops, stops, and every plan keeps its promises: random small clusters run
for 50 rounds of plan-and-apply.

A round: the queues' allocated and the nodes' used are summed from the running pods; the pods
of overused queues are the candidates; the plan is applied as the operator and the cluster
would: each victim is gone and re-created as a waiting pod of its queue (a Job's controller
does that), each served reclaimer runs on its node. Every waiting pod has waited long enough
by the next round. Some waiting pods may use only some nodes (their own node selector, affinity
and taints, as ``Waiting.nodes``), and are first placed, and planned, only there. Along the
way:

- every plan keeps its promises, checked on the state it was made on, reclaimer by reclaimer:
  the reclaimer fits its node (one it may use) once its victims are gone, its queue and every
  queue above stay within deserved in what it requests, each victim's queue stays at or above
  its deserved in what it frees of that and at or above its guarantee, no victim can be
  spared, no protected or non-reclaimable pod goes, gangs go whole or above minMember, at most
  ``max_evictions``;
- no reversal: once a pod of V is evicted for a pod of A, no pod of A is ever evicted for a
  pod of V (per dimension, when pods request different dimensions);
- evictions stop: each (a whole PodGroup counting once) lowers Σ over queues and dimensions of
  (allocated - deserved)⁺, counted in the smallest request step, by at least one, and nothing
  raises it, so their number is bounded by its start value.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharekeeper.engine.reclaim import (
    Gang,
    NodeState,
    NotServedReason,
    QueueState,
    ReclaimInputs,
    ReclaimMemo,
    ReclaimPlan,
    ReclaimSettings,
    Running,
    Waiting,
    plan_reclaim,
    planning,
    running_by_queue,
)
from sharekeeper.engine.reclaim.screening import ScreenMemo, screen

GI = 2**30
STEP = {"cpu": 500, "memory": GI // 2, "nvidia.com/gpu": 1000}
"""Every request is a multiple of these: the unit evictions are counted in."""
ROUNDS = 50
AFTER = 60.0
NOW = 1_000_000.0
"""The rounds' time: a pod has waited ``NOW`` - its ``since``."""


@dataclass(slots=True)
class Pod:
    name: str
    queue: str
    request: dict[str, int]
    priority: int
    created: float
    protected: bool
    group: str | None
    node: str | None = None
    waited: float = 0.0
    order: int = 0
    allowed: frozenset[str] | None = None
    """The nodes its own constraints let it use (None: any); a replacement keeps its pod's."""


@dataclass(slots=True)
class Cluster:
    queues: dict[str, QueueState]
    """Leaves and parents; ``allocated`` is recomputed every round."""
    nodes: dict[str, NodeState]
    pods: dict[str, Pod]
    min_member: dict[str, int]
    max_evictions: int
    made: int = 0
    history: list[tuple[str, str, str]] = field(default_factory=list)
    """(reclaimer's queue, victim's queue, dimension) per eviction, in order."""

    def paths(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for name in self.queues:
            path = [name]
            while self.queues[path[-1]].parent is not None:
                path.append(str(self.queues[path[-1]].parent))
            found[name] = path
        return found

    def allocated(self) -> dict[str, dict[str, int]]:
        sums: dict[str, dict[str, int]] = {name: {} for name in self.queues}
        paths = self.paths()
        for pod in self.pods.values():
            if pod.node is None:
                continue
            for name in paths[pod.queue]:
                for dim, amount in pod.request.items():
                    sums[name][dim] = sums[name].get(dim, 0) + amount
        return sums

    def used(self) -> dict[str, dict[str, int]]:
        sums: dict[str, dict[str, int]] = {name: {"pods": 0} for name in self.nodes}
        for pod in self.pods.values():
            if pod.node is not None:
                into = sums[pod.node]
                for dim, amount in {**pod.request, "pods": 1}.items():
                    into[dim] = into.get(dim, 0) + amount
        return sums

    def inputs(self) -> ReclaimInputs:
        allocated = self.allocated()
        queues = {n: replace(q, allocated=allocated[n]) for n, q in self.queues.items()}
        overused = {
            n
            for n, q in queues.items()
            if any(a > q.deserved.get(d, 0) for d, a in q.allocated.items())
        }
        used = self.used()
        running = [
            Running("ns", p.name, f"uid-{p.name}", p.queue, p.node, p.request, p.priority,
                    p.created, p.protected, p.group)
            for p in self.pods.values()
            if p.node is not None and p.queue in overused
        ]  # fmt: skip
        members: dict[str, int] = {}
        for pod in self.pods.values():
            if pod.node is not None and pod.group is not None:
                members[pod.group] = members.get(pod.group, 0) + 1
        return ReclaimInputs(
            queues=tuple(queues.values()),
            nodes=tuple(replace(n, used=used[name]) for name, n in self.nodes.items()),
            running=running_by_queue(running),
            gangs=tuple(Gang("ns", g, members.get(g, 0), m) for g, m in self.min_member.items()),
            waiting=tuple(
                Waiting("ns", p.name, p.queue, p.request, NOW - p.waited, p.allowed, p.group)
                for p in sorted(self.pods.values(), key=lambda p: (p.order, p.name))
                if p.node is None
            ),
            excluded=frozenset(),
            settings=ReclaimSettings(AFTER, self.max_evictions),
            now=NOW,
            rows=None,
        )

    def overuse(self) -> int:
        """Σ over leaves and dimensions of (allocated - deserved)⁺, in ``STEP`` units."""
        allocated = self.allocated()
        leaves = set(self.queues) - {q.parent for q in self.queues.values()}
        return sum(
            max(amount - self.queues[name].deserved.get(dim, 0), 0) // STEP[dim]
            for name in leaves
            for dim, amount in allocated[name].items()
        )


def check_and_apply(cluster: Cluster, inputs: ReclaimInputs, plan: ReclaimPlan) -> None:
    """Check each reclaim on the state the ones before it left, then apply it."""
    assert plan.evictions == sum(len(r.victims) for r in plan.reclaims)
    assert plan.evictions <= inputs.settings.max_evictions
    # A PodGroup's waiting pods are served together or not at all.
    served = {r.reclaimer for r in plan.reclaims}
    waiting_gangs: dict[str, set[tuple[str, str]]] = {}
    for waiting in inputs.waiting:
        if waiting.group is not None:
            waiting_gangs.setdefault(waiting.group, set()).add(waiting.key)
    for members in waiting_gangs.values():
        assert members <= served or not members & served
    paths = cluster.paths()
    candidates = {pod.key: pod for pods in inputs.running.values() for pod in pods}
    gangs = {g.name: g for g in inputs.gangs}
    singles: dict[str, int] = {}
    for reclaim in plan.reclaims:
        pod = cluster.pods[reclaim.reclaimer[1]]
        assert pod.node is None
        assert pod.allowed is None or reclaim.node in pod.allowed
        needed = [d for d, a in pod.request.items() if a > 0]
        allocated, used = cluster.allocated(), cluster.used()
        node = cluster.nodes[reclaim.node]
        # The reclaimer's whole path stays within deserved.
        for name in paths[pod.queue]:
            deserved = cluster.queues[name].deserved
            assert all(allocated[name].get(d, 0) + pod.request[d] <= deserved.get(d, 0)
                       for d in needed)  # fmt: skip
        victims = [candidates[v.pod] for v in reclaim.victims]
        room = {d: node.allocatable.get(d, 0) - used[reclaim.node].get(d, 0) for d in needed}
        room["pods"] = node.allocatable["pods"] - used[reclaim.node]["pods"]
        want = {**{d: pod.request[d] for d in needed}, "pods": 1}
        # What matters: the requested dimensions the node lacks (all if only a pod slot).
        matter = [d for d in needed if room[d] < pod.request[d]] or needed
        for victim, record in zip(victims, reclaim.victims, strict=True):
            assert not victim.protected
            if record.gang is None:  # a whole PodGroup's other pods may free nothing useful
                assert victim.node == reclaim.node
                assert any(victim.request.get(d, 0) > 0 for d in matter)
        for v in reclaim.victims:
            if v.gang is None and candidates[v.pod].group is not None:
                group = str(candidates[v.pod].group)
                singles[group] = singles.get(group, 0) + 1
                assert gangs[group].running - singles[group] >= gangs[group].min_member
        whole = {v.gang for v in reclaim.victims if v.gang}
        for group in whole:
            members = {p.name for p in cluster.pods.values() if p.group == group and p.node}
            assert members <= {v.pod[1] for v in reclaim.victims}
        # Victims' queues (below the first queue shared with the reclaimer) keep their share.
        taken: dict[str, dict[str, int]] = {}
        for victim in victims:
            for name in paths[victim.queue]:
                if name in paths[pod.queue]:
                    break
                assert cluster.queues[name].reclaimable
                for d, a in victim.request.items():
                    taken.setdefault(name, {})[d] = taken.setdefault(name, {}).get(d, 0) + a
        for name, amounts in taken.items():
            q = cluster.queues[name]
            for d in matter:
                if amounts.get(d, 0):
                    assert allocated[name].get(d, 0) - amounts[d] >= q.deserved.get(d, 0)
            for d, floor in q.guarantee.items():
                if amounts.get(d, 0):
                    assert allocated[name].get(d, 0) - amounts[d] >= floor
        # It fits once they are gone, and would not without any one of them (singles).
        assert fits(room, want, reclaim.node, victims)
        if not whole:
            for victim in victims:
                assert not fits(room, want, reclaim.node, [v for v in victims if v is not victim])
        # Apply: the victims come back as waiting pods of their queues; the reclaimer runs.
        for victim, record in zip(victims, reclaim.victims, strict=True):
            for d in matter:
                if victim.request.get(d, 0):
                    cluster.history.append((pod.queue, victim.queue, d))
            old = cluster.pods.pop(victim.name)
            cluster.made += 1
            name = f"{old.queue}-r{cluster.made}"
            cluster.pods[name] = replace(old, name=name, node=None, waited=0.0,
                                         order=10_000 + cluster.made, group=None)  # fmt: skip
            assert record.queue == victim.queue
        pod.node = reclaim.node


def fits(room: Mapping[str, int], want: Mapping[str, int], node: str, gone: list[Running]) -> bool:
    """Whether ``want`` fits in ``room`` on ``node`` once the ``gone`` pods left."""
    here = [g for g in gone if g.node == node]
    freed = {d: sum({**g.request, "pods": 1}.get(d, 0) for g in here) for d in want}
    return all(room[d] + freed[d] >= amount for d, amount in want.items())


def run(cluster: Cluster) -> tuple[int, int]:
    """Rounds until nothing changes (or ``ROUNDS``): the evictions, counting a whole PodGroup
    once (each lowers the overuse by one step at least), and the rounds that evicted."""
    total = evicting = 0
    for _ in range(ROUNDS):
        inputs = cluster.inputs()
        plan = plan_reclaim(inputs)
        check_and_apply(cluster, inputs, plan)
        total += sum(
            sum(1 for v in r.victims if v.gang is None) + len({v.gang for v in r.victims if v.gang})
            for r in plan.reclaims
        )
        evicting += plan.evictions > 0
        for pod in cluster.pods.values():
            if pod.node is None:
                pod.waited += AFTER
        assert_no_reversal(cluster.history)
        impatient = any(n.reason is NotServedReason.NOT_WAITED_LONG_ENOUGH for n in plan.not_served)
        if not plan.reclaims and not impatient:
            # Nothing changed and nobody waits for time: every later round plans nothing.
            assert plan_reclaim(cluster.inputs()).reclaims == ()
            break
    return total, evicting


def assert_no_reversal(history: list[tuple[str, str, str]]) -> None:
    seen: set[tuple[str, str, str]] = set()
    for reclaimer, victim, dim in history:
        assert (victim, reclaimer, dim) not in seen, f"{victim} took {dim} back from {reclaimer}"
        seen.add((reclaimer, victim, dim))


# --- random clusters -------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn, dimensions: tuple[str, ...]) -> Cluster:
    node_count = draw(st.integers(1, 4))
    nodes: dict[str, NodeState] = {}
    for i in range(node_count):
        allocatable = {
            "cpu": draw(st.sampled_from([3000, 4000, 8000])),
            "memory": draw(st.sampled_from([6, 8, 16])) * GI,
            "pods": draw(st.sampled_from([3, 8, 110])),
        }
        if "nvidia.com/gpu" in dimensions:
            allocatable["nvidia.com/gpu"] = draw(st.sampled_from([0, 2000, 4000, 4000]))
        nodes[f"n{i}"] = NodeState(f"n{i}", "p", allocatable, {}, {}, frozenset())
    total = {d: sum(n.allocatable.get(d, 0) for n in nodes.values()) for d in dimensions}
    leaves = [f"q{i}" for i in range(draw(st.integers(2, 4)))]
    weights = [draw(st.integers(1, 4)) for _ in leaves]
    scale = draw(st.sampled_from([0.7, 0.9, 1.0]))
    parent = draw(st.sampled_from([None, "t"]))
    under = set(leaves[: draw(st.integers(1, len(leaves)))]) if parent else set()
    queues: dict[str, QueueState] = {}
    for name, weight in zip(leaves, weights, strict=True):
        deserved = {d: int(total[d] * scale * weight / sum(weights)) // STEP[d] * STEP[d]
                    for d in dimensions}  # fmt: skip
        guarantee = (
            {d: amount // 2 // STEP[d] * STEP[d] for d, amount in deserved.items()}
            if draw(st.integers(0, 2)) == 0
            else {}
        )
        queues[name] = QueueState(
            name, "p", "t" if name in under else None, deserved, {}, guarantee,
            draw(st.integers(0, 7)) > 0,
        )  # fmt: skip
    if under:
        summed = {d: sum(queues[q].deserved[d] for q in under) for d in dimensions}
        shrink = draw(st.sampled_from([1.0, 0.75]))
        queues["t"] = QueueState(
            "t", "p", None, {d: int(a * shrink) // STEP[d] * STEP[d] for d, a in summed.items()},
            {}, {}, draw(st.sampled_from([True, True, False])),
        )  # fmt: skip
    pods: dict[str, Pod] = {}
    min_member: dict[str, int] = {}
    created = 0
    for name in leaves:
        count = draw(st.integers(2, 8))
        group = f"{name}-job" if count >= 2 and draw(st.booleans()) else None
        if group is not None:
            min_member[group] = draw(st.integers(1, count))
        for i in range(count):
            request = {}
            wanted = (
                draw(st.sets(st.sampled_from(dimensions), min_size=1))
                if len(dimensions) > 2
                else set(dimensions)
            )
            for d in sorted(wanted):
                request[d] = STEP[d] * draw(st.integers(1, 3))
            created += 1
            # Its node selector, affinity and taints, as the nodes it may use: often any.
            allowed = draw(st.one_of(st.none(), st.none(), st.frozensets(st.sampled_from(
                sorted(nodes)), max_size=node_count)))  # fmt: skip
            pods[f"{name}-{i}"] = Pod(
                f"{name}-{i}", name, request, draw(st.integers(0, 2)), float(created),
                draw(st.integers(0, 15)) == 0, group, order=created, allowed=allowed,
            )  # fmt: skip
    # Start as a scheduler that knows no shares would: first fit, the queues in a random order
    # (the first ones take more than their share, the last ones wait).
    order = [
        key for name in draw(st.permutations(leaves)) for key in pods if pods[key].queue == name
    ]
    used = {n: {"pods": 0} for n in nodes}
    for key in order:
        pod = pods[key]
        for name, n in nodes.items():
            if pod.allowed is not None and name not in pod.allowed:
                continue
            need = {**pod.request, "pods": 1}
            if all(n.allocatable.get(d, 0) - used[name].get(d, 0) >= a for d, a in need.items()):
                pod.node = name
                pod.waited = AFTER
                for d, a in need.items():
                    used[name][d] = used[name].get(d, 0) + a
                break
        else:
            pod.waited = draw(st.sampled_from([0.0, AFTER, AFTER]))
    return Cluster(queues, nodes, pods, min_member, draw(st.integers(1, 6)))


@given(clusters(("cpu", "memory")))
def test_reclaim_stops_and_never_reverses(cluster: Cluster) -> None:
    """Every pod requests cpu and memory: no queue ever reclaims from one that reclaimed from
    it, in any dimension."""
    start = cluster.overuse()
    units, _ = run(cluster)
    assert units <= start
    pairs = {(a, v) for a, v, _ in cluster.history}
    assert not any((v, a) in pairs for a, v in pairs)


@given(clusters(("cpu", "memory", "nvidia.com/gpu")))
def test_reclaim_stops_and_never_reverses_in_a_dimension(cluster: Cluster) -> None:
    """Pods request random dimensions (GPU-only pods, cpu-only pods...): a queue may take GPUs
    from one that took cpu from it, never back what it gave."""
    start = cluster.overuse()
    units, _ = run(cluster)
    assert units <= start


def test_the_simulation_does_reclaim() -> None:
    """The properties are not vacuous: a cluster where one queue took everything gives back."""
    nodes = {
        f"n{i}": NodeState(f"n{i}", "p", {"cpu": 4000, "memory": 8 * GI, "pods": 110}, {}, {},
                           frozenset())
        for i in range(2)
    }  # fmt: skip
    share: Mapping[str, int] = {"cpu": 4000, "memory": 4 * GI}
    queues = {q: QueueState(q, "p", None, dict(share), {}, {}, True) for q in ("a", "b")}
    pods = {
        f"a-{i}": Pod(f"a-{i}", "a", {"cpu": 1000, "memory": GI}, 0, float(i), False, None,
                      node=f"n{i % 2}", waited=AFTER)
        for i in range(8)
    }  # fmt: skip
    pods |= {
        f"b-{i}": Pod(f"b-{i}", "b", {"cpu": 1000, "memory": GI}, 0, float(10 + i), False, None,
                      waited=AFTER, order=i)
        for i in range(4)
    }  # fmt: skip
    cluster = Cluster(queues, nodes, pods, {}, 2)
    total, evicting = run(cluster)
    assert (total, evicting) == (4, 2)
    running = [p.queue for p in cluster.pods.values() if p.node]
    assert sorted(running) == ["a"] * 4 + ["b"] * 4


@given(clusters(("cpu", "memory", "nvidia.com/gpu")), st.randoms(use_true_random=False))
def test_the_plan_depends_neither_on_input_order_nor_on_how_nodes_are_screened(
    cluster: Cluster, rng: random.Random
) -> None:
    """Shuffled inputs (the waiting pods aside: theirs is the admission order) give the same
    plan; so does screening every node (as when too many pods may give to list their nodes)
    instead of the nodes of the pods that may give."""
    inputs = cluster.inputs()
    expected = plan_reclaim(inputs)
    flat = [pod for pods in inputs.running.values() for pod in pods]
    shuffled = replace(
        inputs,
        queues=tuple(rng.sample(inputs.queues, len(inputs.queues))),
        nodes=tuple(rng.sample(inputs.nodes, len(inputs.nodes))),
        running=running_by_queue(rng.sample(flat, len(flat))),
        gangs=tuple(rng.sample(inputs.gangs, len(inputs.gangs))),
    )
    assert plan_reclaim(shuffled) == expected
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planning, "GIVERS_LISTED", -1)
        assert plan_reclaim(inputs) == expected


@given(clusters(("cpu", "memory", "nvidia.com/gpu")))
def test_a_pod_refused_by_its_share_at_the_start_waits_with_that_answer(cluster: Cluster) -> None:
    """Round after round, a waiting pod whose queue path refuses it on the round's inputs (its
    queue, or one above, would pass its deserved in a dimension it requests) is not served,
    whatever the round evicts before its turn, and waits AboveShare naming the nearest such
    queue with the shortfalls of the inputs; the answers counted without being made are the
    answers made."""
    for _ in range(ROUNDS):
        inputs = cluster.inputs()
        plan = plan_reclaim(inputs)
        counted = plan.waits.counts()
        answers = {answer.reclaimer: answer for answer in plan.not_served}
        assert counted == Counter(answer.reason for answer in answers.values())
        queues = {queue.name: queue for queue in inputs.queues}
        paths = cluster.paths()
        for pod in inputs.waiting:
            if pod.group is not None or inputs.now - pod.since < AFTER:
                continue
            refusing = [
                name
                for name in paths[pod.queue]
                if any(
                    queues[name].allocated.get(d, 0) + amount > queues[name].deserved.get(d, 0)
                    for d, amount in pod.request.items()
                    if amount > 0
                )
            ]
            if not refusing:
                continue
            answer = answers[pod.key]
            assert (answer.reason, answer.limiting) == (NotServedReason.ABOVE_SHARE, refusing[0])
            limiting = queues[refusing[0]]
            for short in answer.shortfalls:
                dimension = short.resource
                available = limiting.deserved.get(dimension, 0)
                available -= limiting.allocated.get(dimension, 0)
                assert (short.requested, short.available) == (pod.request[dimension], available)
        check_and_apply(cluster, inputs, plan)
        for pod in cluster.pods.values():
            if pod.node is None:
                pod.waited += AFTER


@given(st.lists(st.integers(0, 6).map(lambda i: i / 4), max_size=3 * planning.NODES_SORTED_FIRST))
def test_screened_nodes_are_ranked_as_by_a_stable_sort(missing: list[float]) -> None:
    """The nodes screened in numpy are ranked a few first, then the rest: as one stable sort
    of what each lacks (many nodes lack the same) would rank them."""
    values = np.array(missing, dtype=np.float64)
    assert list(planning._ascending(values)) == np.argsort(values, kind="stable").tolist()


@st.composite
def crowded_rounds(draw: st.DrawFn) -> ReclaimInputs:
    """One round where many reclaimers ask the same of the same nodes: a few nodes full of small
    pods of queues above their share (some under one parent, some members of PodGroups that
    span queues), and waiting pods of two queues below theirs (one maybe under the same
    parent: a pod's branch then depends on whose reclaimer weighs it), asking the same or
    less (to fit room a reclaim left), some of them a waiting PodGroup that may not be served
    whole."""
    nodes = [
        NodeState(f"n{i}", "p", {"cpu": 8000, "pods": 110}, {}, {}, frozenset())
        for i in range(draw(st.integers(2, 6)))
    ]
    # Each node holds pods of two queues of several, so that evicting from one queue leaves
    # the evaluations of the nodes without its pods standing.
    givers = [f"v{i}" for i in range(draw(st.integers(1, 8)))]
    under = set(givers[: draw(st.integers(0, len(givers)))])
    running: list[Running] = []
    used: dict[str, dict[str, int]] = {n.name: {"cpu": 0, "pods": 0} for n in nodes}
    for at, node in enumerate(nodes):
        while used[node.name]["cpu"] < 8000:
            cpu = min(
                draw(st.sampled_from([1000, 1000, 2000, 3000])), 8000 - used[node.name]["cpu"]
            )
            queue = givers[(at + draw(st.integers(0, 1))) % len(givers)]
            group = draw(st.sampled_from(["g0", "g1"])) if draw(st.integers(0, 5)) == 0 else None
            running.append(
                Running("ns", f"r{len(running)}", "", queue, node.name, {"cpu": cpu},
                        draw(st.integers(0, 1)), float(draw(st.integers(0, 3))), False, group)
            )  # fmt: skip
            used[node.name]["cpu"] += cpu
            used[node.name]["pods"] += 1
    allocated = {q: sum(r.request["cpu"] for r in running if r.queue == q) for q in givers}
    queues = [
        QueueState(q, "p", "t" if q in under else None,
                   {"cpu": allocated[q] * draw(st.sampled_from([0, 1, 2])) // 4},
                   {"cpu": allocated[q]}, {}, draw(st.integers(0, 5)) > 0)
        for q in givers
    ]  # fmt: skip
    room = 8000 * len(nodes)
    inner = bool(under) and draw(st.booleans())
    if under:
        inside = sum(allocated[q] for q in under)
        # Above its share, or (with a waiting pod's queue under it) with room for them.
        deserved = inside + room if inner else inside * draw(st.sampled_from([1, 2, 3])) // 4
        queues.append(QueueState("t", "p", None, {"cpu": deserved}, {"cpu": inside}, {}, True))
    queues += [
        QueueState("a", "p", "t" if inner else None, {"cpu": room}, {}, {}, True),
        QueueState("b", "p", None, {"cpu": room}, {}, {}, True),
    ]
    waiting = [
        Waiting("ns", f"w{i}", draw(st.sampled_from(["a", "b"])),
                {"cpu": draw(st.sampled_from([1000, 2000, 2000, 2000, 3000]))}, 0.0, None,
                "gang" if draw(st.integers(0, 4)) == 0 else None)
        for i in range(draw(st.integers(2, 14)))
    ]  # fmt: skip
    members = Counter(r.group for r in running if r.group)
    return ReclaimInputs(
        queues=tuple(queues),
        nodes=tuple(replace(n, used=used[n.name]) for n in nodes),
        running=running_by_queue(running),
        gangs=tuple(
            Gang("ns", g, count, draw(st.integers(1, count))) for g, count in members.items()
        ),
        waiting=tuple(waiting),
        excluded=frozenset(),
        settings=ReclaimSettings(AFTER, 100),
        now=NOW,
        rows=None,
    )


def planned_afresh(inputs: ReclaimInputs) -> ReclaimPlan:
    """The plan with every node evaluated afresh for every reclaimer (none kept from an
    earlier reclaimer of the same ask)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            planning._Planner,
            "_evaluate",
            lambda planner, reclaimer, node: planning._Planner._evaluate_afresh(
                planner, reclaimer, node
            )[0],
        )
        return plan_reclaim(inputs)


@pytest.mark.parametrize("listed", [planning.GIVERS_LISTED, -1], ids=["listed", "screened"])
@given(crowded_rounds())
def test_an_evaluation_kept_for_the_next_reclaimer_changes_no_plan(
    listed: int, inputs: ReclaimInputs
) -> None:
    """Each plan is the plan made evaluating every node afresh for every reclaimer: an
    evaluation kept for a later reclaimer of the same ask stands only while it would be made
    again the same."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planning, "GIVERS_LISTED", listed)
        patch.setattr(planning, "NODES_COMPARED", 2)
        assert plan_reclaim(inputs) == planned_afresh(inputs)


@given(st.integers(0, 2**32))
def test_a_screen_memo_changes_no_screen(seed: int) -> None:
    """Screen after screen with one ``ScreenMemo``: the waiting pods, in a new order each time,
    are mostly the very objects of the screens before, some new (one now and then requesting a
    resource none did before), now and then many new (the memo starts again), the queues
    changing (a queue gone, one new): each screen equals the screen made without the memo.
    (A seed, not ``st.randoms``: hypothesis records each of its thousands of draws.)"""
    rng = random.Random(seed)
    dimensions = ["cpu", "memory"]
    names = [f"q{i}" for i in range(4)]
    memo = ScreenMemo()
    pool: list[Waiting] = []
    for step in range(20):
        if rng.random() < 0.2:
            dimensions.append(f"example.com/r{step}")
        if rng.random() < 0.3:
            names = [*names[1:], f"q{step + 4}"]
        queues = [
            QueueState(name, "p", None, dict.fromkeys(dimensions, 4), {"cpu": rng.randrange(6)},
                       {}, True)
            for name in names
        ]  # fmt: skip
        made = rng.choice([1, 2, 30])
        pool += [
            Waiting("ns", f"w{step}-{i}", rng.choice([*names, "gone"]),
                    {d: rng.randrange(4) for d in rng.sample(dimensions, 2)},
                    float(rng.randrange(10)), None, None)
            for i in range(made)
        ]  # fmt: skip
        waiting = rng.sample(pool, min(len(pool), 12))
        latest = float(rng.randrange(10))
        assert screen(waiting, queues, None, latest, memo) == screen(waiting, queues, None, latest)


def kept(inputs: ReclaimInputs, last: ReclaimInputs | None) -> ReclaimInputs:
    """``inputs`` with what equals ``last``'s as ``last``'s very objects (a node's state, a
    queue's candidates), as the operator's gathering hands them on."""
    if last is None:
        return inputs
    nodes = {node.name: node for node in last.nodes}
    return replace(
        inputs,
        nodes=tuple(nodes[n.name] if nodes.get(n.name) == n else n for n in inputs.nodes),
        running={
            queue: last.running[queue] if last.running.get(queue) == pods else pods
            for queue, pods in inputs.running.items()
        },
    )


@pytest.mark.parametrize("listed", [planning.GIVERS_LISTED, -1], ids=["listed", "screened"])
@given(clusters(("cpu", "memory", "nvidia.com/gpu")), st.randoms(use_true_random=False))
def test_a_memo_from_the_round_before_changes_no_plan(
    listed: int, cluster: Cluster, rng: random.Random
) -> None:
    """Round after round with one ``ReclaimMemo``, its unchanged nodes and candidates handed on
    as the same objects, now and then a node that starts or stops offering a resource or
    keeping something idle: each plan is the plan made without the memo; also when every
    reclaimer screens every node (``GIVERS_LISTED``), which reads the nodes holding candidates
    from the memo."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planning, "GIVERS_LISTED", listed)
        memo_rounds(cluster, rng)


def memo_rounds(cluster: Cluster, rng: random.Random) -> None:
    memo = ReclaimMemo()
    last: ReclaimInputs | None = None
    for _ in range(ROUNDS // 5):
        for name, node in list(cluster.nodes.items()):
            if rng.random() < 0.2:
                extra = {} if "example.com/fpga" in node.allocatable else {"example.com/fpga": 2}
                allocatable = {d: a for d, a in node.allocatable.items() if d != "example.com/fpga"}
                cluster.nodes[name] = replace(node, allocatable={**allocatable, **extra})
            elif rng.random() < 0.2:
                idle = {} if node.reserved else {"cpu": STEP["cpu"]}
                cluster.nodes[name] = replace(
                    node, reserved=idle, reserved_for=frozenset(idle and {"nvidia.com/gpu"})
                )
        inputs = kept(cluster.inputs(), last)
        plan = plan_reclaim(inputs, memo)
        assert plan == plan_reclaim(inputs)
        check_and_apply(cluster, inputs, plan)
        for pod in cluster.pods.values():
            if pod.node is None:
                pod.waited += AFTER
        last = inputs
