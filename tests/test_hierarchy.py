"""Queue trees through simulate's path: proportion over a tree, hierarchical Capacity on
Volcano's own hierarchical cases, and the conditions a tree can raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import reference
from builders import node, pod, pod_group, policy, queue, shares
from sharekeeper.cli import main
from sharekeeper.engine.admission import admission_facts
from sharekeeper.engine.shares import deserved_shares
from sharekeeper.model.objects import MutableObj
from sharekeeper.pipeline.shares import Publication, publication
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, snapshot_of


def published(*objects: MutableObj) -> Publication:
    inputs = parse_objects(objects)
    snapshot = snapshot_of(inputs, Context(0.0, 0))
    return publication(snapshot, inputs.node_policies, held=inputs.store.pods.held())


def condition(result: Publication, name: str, kind: str) -> MutableObj:
    return next(c for c in result.queues[name]["conditions"] if c["type"] == kind)


# --- proportion over a tree ---------------------------------------------------------------------


def org_team_project(kind: str = "Proportion") -> list[MutableObj]:
    """96 cpu; org (w2) and lab (w1) under the root; org's teams a (w1) and b (w1); a's
    projects x (w1) and y (w3). Everyone asks for far more than there is."""
    return [
        policy("p", kind),
        node("n", cpu=96),
        queue("org", weight=2),
        queue("lab"),
        queue("a", parent="org"),
        queue("b", parent="org"),
        queue("x", parent="a"),
        queue("y", weight=3, parent="a"),
        pod("lab-work", "lab", cpu=1000),
        pod("b-work", "b", cpu=1000),
        pod("x-work", "x", cpu=1000),
        pod("y-work", "y", cpu=1000),
    ]


def test_each_level_water_fills_its_parents_share() -> None:
    result = shares(*org_team_project())
    cpu = {name: q.deserved["cpu"] // 1000 for name, q in result.queues.items()}
    assert cpu == {"org": 64, "lab": 32, "a": 32, "b": 32, "x": 8, "y": 24}
    assert result.queues["x"].parent == "a"
    assert not result.queues["a"].leaf
    # An inner queue's request is its subtree's.
    assert result.queues["org"].request["cpu"] == 3_000_000


def test_capacity_and_proportion_read_the_tree_the_others_say_they_do_not() -> None:
    flat = shares(*org_team_project("GuaranteeQuota"))
    (reason,) = [r for r in flat.policies["p"].reasons if r.kind == "TreeUnsupported"]
    assert "spec.parent is not read" in reason.message
    # As one level: six queues by weight 2:1:1:1:1:3 of 96, those without pods at 0.
    assert flat.queues["y"].deserved["cpu"] == 48_000


def test_a_missing_parent_or_a_cycle_leaves_the_subtree_without_numbers() -> None:
    result = published(
        policy("p"),
        node("n", cpu=8),
        queue("team", parent="orgg"),
        queue("project", parent="team"),
        queue("a", parent="b"),
        queue("b", parent="a"),
        queue("fine"),
        pod("work", "fine", cpu=4),
    )
    for name, message in (
        ("team", "parent orgg does not exist"),
        ("project", "under queue team, which is left out: parent orgg does not exist"),
        ("a", "on a cycle of parents: a -> b -> a"),
    ):
        invalid = condition(result, name, "InvalidParent")
        assert (invalid["status"], invalid["message"]) == ("True", message)
        ready = condition(result, name, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "InvalidParent")
        assert result.queues[name]["deserved"] == {}
    assert result.queues["fine"]["deserved"]["cpu"] == "4"
    assert condition(result, "fine", "InvalidParent")["status"] == "False"


def test_a_parent_under_another_policy_is_refused() -> None:
    result = published(
        policy("gpu", queue_labels={"pool": "gpu"}),
        policy("cpu", queue_labels={"pool": "cpu"}),
        node("n", cpu=8),
        queue("org", labels={"pool": "gpu"}),
        queue("team", parent="org", labels={"pool": "cpu"}),
    )
    invalid = condition(result, "team", "InvalidParent")
    assert invalid["message"] == "parent org is governed by SchedulerPolicy gpu, not cpu"


def test_pods_of_an_inner_queue_count_and_are_reported() -> None:
    result = published(
        policy("p"),
        node("n", cpu=8),
        queue("org"),
        queue("team", parent="org"),
        pod("stray", "org", node="n", cpu=1),
        pod_group("job", "org", phase="Pending", min_resources={"cpu": "1"}),
    )
    inner = condition(result, "org", "PodsInInnerQueue")
    assert inner["status"] == "True"
    assert inner["message"].startswith("1 pod names this queue, which has queues below it")
    assert result.queues["org"]["allocated"]["cpu"] == "1"
    enqueue = condition(result, "org", "Enqueueable")
    assert (enqueue["status"], enqueue["reason"]) == ("False", "QueueNotLeaf")


@pytest.mark.parametrize("below", [["team"], ["team", "project"]], ids=["child", "grandchild"])
def test_a_job_must_fit_every_ancestors_capability(below: list[str]) -> None:
    # Two levels down, the grandparent's capability binds through the parent's view.
    path = [
        queue(name, parent=parent) for parent, name in zip(["org", *below[:-1]], below, strict=True)
    ]
    result = published(
        policy("p"),
        node("n", cpu=100),
        queue("org", capability={"cpu": "10"}),
        *path,
        queue("other", parent="org"),
        pod("busy", "other", node="n", cpu=8),
        pod_group("job", below[-1], phase="Pending", min_resources={"cpu": "4"}),
    )
    enqueue = condition(result, below[-1], "Enqueueable")
    assert (enqueue["status"], enqueue["reason"]) == ("False", "CapabilityExceeded")
    assert "queue org's capability: cpu 4 requested, 2 available" in enqueue["message"]


def test_only_queues_with_a_pending_podgroup_get_a_verdict() -> None:
    # The verdict still reads every queue above: a grandparent left out of the views would
    # let the job through.
    inputs = parse_objects(
        [
            policy("p"),
            node("n", cpu=100),
            queue("org", capability={"cpu": "10"}),
            queue("team", parent="org"),
            queue("project", parent="team"),
            queue("idle", parent="org"),
            pod("busy", "idle", node="n", cpu=8),
            pod_group("job", "project", phase="Pending", min_resources={"cpu": "4"}),
            pod_group("done", "idle", phase="Running", min_resources={"cpu": "1"}),
        ]
    )
    snapshot = snapshot_of(inputs, Context(0.0, 0))
    facts = admission_facts(snapshot, inputs.node_policies, deserved_shares(snapshot))
    assert set(facts.queues) == {"project"}
    assert (facts.queues["project"].limiting, facts.queues["project"].admitted) == ("org", False)


# --- Volcano's hierarchical capacity cases ------------------------------------------------------

CASES = {case["id"]: case for case in reference.volcano_cases()}


def volcano_case(case_id: str, *, gated: bool = False) -> Publication:
    """A hierarchical case as objects: Volcano's root queue is our implicit root; the Go
    tests' queue names with "_" (no Kubernetes name) get "-". ``gated``: the pods Volcano
    places are held by the admission gate, which admits up to realCapability
    (``admission.borrow``): Volcano's allocate check, made by the gate."""
    case = CASES[case_id]
    scale = {"cpu": "m"}
    objects: list[MutableObj] = [policy("volcano", "Capacity")]
    if gated:
        objects[0]["spec"]["admission"] = {"borrow": True}

    def quantities(amounts: dict[str, int] | None) -> dict[str, str] | None:
        if not amounts:
            return None
        return {name: f"{value}{scale.get(name, '')}" for name, value in amounts.items()}

    for entry in case["nodes"]:
        objects.append(node(entry["name"]))
        objects[-1]["status"]["allocatable"] = quantities(entry["allocatable"])
    for entry in case["queues"]:
        if entry["name"] == "root":
            continue
        objects.append(
            queue(
                entry["name"].replace("_", "-"),
                capability=quantities(entry.get("capability")),
                deserved=quantities(entry.get("deserved")),
                guarantee=quantities(entry.get("guarantee")),
                parent=(entry.get("parent") or "root").replace("_", "-"),
            )
        )
    for entry in case["podgroups"]:
        objects.append(
            pod_group(
                entry["name"],
                entry["queue"].replace("_", "-"),
                phase=entry["phase"],
                min_member=entry["minMember"],
                min_resources=quantities(entry.get("minResources")),
                namespace=entry["namespace"],
            )
        )
    for entry in case["pods"]:
        objects.append(
            pod(
                entry["name"],
                node=entry.get("node") or None,
                namespace=entry["namespace"],
                group=entry["podgroup"],
                held=gated and not entry.get("node"),
            )
        )
        requests = quantities(entry["request"]) or {}
        objects[-1]["spec"]["containers"][0]["resources"]["requests"] = requests
    return published(*objects)


def test_case1_a_job_in_an_inner_queue_is_refused() -> None:
    result = volcano_case("capacity/OnSessionOpenWithHierarchy/case1")
    enqueue = condition(result, "q1", "Enqueueable")
    assert (enqueue["status"], enqueue["reason"]) == ("False", "QueueNotLeaf")  # no binds


def test_case3_the_sibling_above_its_deserved_is_the_one_to_reclaim_from() -> None:
    result = volcano_case("capacity/OnSessionOpenWithHierarchy/case3")
    queues = result.queues
    assert queues["q31"]["overused"]  # 4 cpu held, 2 deserved: p7 is evicted
    assert not queues["q32"]["overused"]
    assert queues["q32"]["deserved"]["cpu"] == "2"
    assert queues["q3"]["allocated"]["cpu"] == "4"  # q31's pods, rolled up
    assert not queues["q3"]["overused"]  # q3 deserves 4: the reclaim stays inside q3


def test_case5_a_capability_missing_cpu_inherits_the_parents() -> None:
    result = volcano_case("capacity/OnSessionOpenWithHierarchy/case5")
    q51 = result.shares.queues["q51"]
    assert q51.real_capability["memory"] == 2 * 1024**3
    assert "cpu" not in result.queues["q51"]["realCapability"]  # unbounded, as the root
    # p11 (1 cpu) fits q51 and q5 on every dimension it asks for: it is bound.


def test_case7_guarantees_above_the_parent_do_not_fail() -> None:
    result = volcano_case("capacity/OnSessionOpenWithHierarchy/case7")
    assert result.queues["q71"]["realCapability"]["cpu"] == "4"  # max(6 - 8, 0) + 4
    assert result.queues["q72"]["deserved"]["cpu"] == "4"


@pytest.mark.parametrize(
    "case_id",
    ["capacity/OnSessionOpenWithHierarchy/case9", "capacity/OnSessionOpenWithHierarchy/case11"],
)
def test_cases_9_and_11_the_jobs_fit(case_id: str) -> None:
    result = volcano_case(case_id)
    for name, status in result.queues.items():
        enqueue = next((c for c in status["conditions"] if c["type"] == "Enqueueable"), None)
        assert enqueue is None or enqueue["status"] == "True", name
        assert condition(result, name, "InvalidParent")["status"] == "False"


# --- how a tree is shown ------------------------------------------------------------------------

TREE_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tree.yaml"


def test_the_table_prints_the_tree_indented(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", str(TREE_EXAMPLE)]) == 0
    names = [line.split(" tree")[0].rstrip() for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == ["lab", "org", "  team-a", "    speech", "    vision", "  team-b"]


def test_the_example_tree_shares_level_by_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", str(TREE_EXAMPLE), "-o", "json"]) == 0
    queues = json.loads(capsys.readouterr().out)["queues"]
    cpu = {name: status["deserved"]["cpu"] for name, status in queues.items()}
    # 96 by 2:1, org's 64 by 1:1 (team-a's guarantee of 8 is below its half), team-a's 32 to
    # vision's request of 4 and speech the rest.
    assert cpu == {
        "lab": "32", "org": "64", "team-a": "32", "team-b": "32", "vision": "4", "speech": "28"
    }  # fmt: skip
    assert queues["speech"]["decidedBy"]["cpu"] == "Level"


def test_explain_prints_the_path_from_the_root(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", str(TREE_EXAMPLE), "--explain", "speech"]) == 0
    out = capsys.readouterr().out
    assert "  path            root / org / team-a / speech\n" in out
    assert "L ≈ 9333m per unit of weight" in out  # team-a's level: only vision beside it


def allocation(case_id: str, pod_name: str) -> tuple[str, str] | None:
    """Where the allocate check (the admission gate under ``admission.borrow``) stops the
    case's pod ``pod_name``, held: (the refusing queue, the first short dimension; none for an
    inner queue), None when it may be placed."""
    gates = volcano_case(case_id, gated=True).gates
    if ("ns1", pod_name) in gates.released:
        return None
    waiting = gates.waiting[("ns1", pod_name)]
    assert waiting.reason in ("QuotaExceeded", "QueueNotLeaf"), waiting
    short = waiting.shortfalls
    return waiting.limiting or waiting.queue, short[0].resource if short else ""


@pytest.mark.parametrize(
    ("case_id", "pod_name"),
    [
        ("capacity/OnSessionOpenWithHierarchy/case5", "p11"),  # q51: cpu 1
        ("capacity/OnSessionOpenWithHierarchy/case9", "p13"),  # q91: cpu 2, memory 2Gi, gpu 1
        ("capacity/OnSessionOpenWithHierarchy/case11", "p14"),  # queue11: cpu 1, 1Gi, gpu 4
        ("capacity/OnSessionOpenWithHierarchy/case11", "p15"),  # queue12: the same
    ],
)
def test_the_pods_volcano_binds_pass_the_allocate_check_at_every_level(
    case_id: str, pod_name: str
) -> None:
    assert allocation(case_id, pod_name) is None


def test_case1_a_pod_of_an_inner_queue_is_not_placed() -> None:
    assert allocation("capacity/OnSessionOpenWithHierarchy/case1", "p2") == ("q1", "")


def test_case3_the_parent_is_full_until_a_sibling_gives_back() -> None:
    """q32's pod fits q32 but not q3, which q31 fills: Volcano reclaims p7 from q31."""
    assert allocation("capacity/OnSessionOpenWithHierarchy/case3", "p8") == ("q3", "cpu")
