"""``sharekeeper explain`` and ``simulate --explain``: every number of one queue or node, with
the bound behind each deserved; the text and ``-o json`` say the same, and the cluster's
variant (one list through the kubeconfig's client) computes what simulate computes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import yaml

from builders import node, pod, pod_group, policy, queue
from sharekeeper.cli import main
from sharekeeper.kube import kinds, listing
from sharekeeper.model.objects import MutableObj
from sharekeeper.simulate.explaining import (
    NO_WATERLINE,
    explain,
    parse_target,
    render_text,
    water_level,
)
from sharekeeper.simulate.reading import parse_objects
from sharekeeper.simulate.report import Context, build_report

NOW = 1_795_000_000.0


def facts(*objects: MutableObj, target: str) -> dict[str, Any]:
    inputs = parse_objects(objects)
    report = build_report(inputs, Context(now_seconds=NOW, seed=0))
    return explain(report, inputs, parse_target(target))


def three_queues(total_cpu: int = 30) -> list[MutableObj]:
    """``small`` asks for 4 cpu, ``capped`` may have 6, ``level`` (weight 2) asks for 100: of
    30 cpu, 4 + 6 go to the first two and 20 = 2 x L to ``level``, so L = 10."""
    return [
        policy("p"),
        node("n1", cpu=total_cpu, memory="64Gi"),
        queue("level", weight=2),
        queue("small", weight=1),
        queue("capped", weight=3, capability={"cpu": 6}),
        pod("l1", "level", cpu=100),
        pod("s1", "small", node="n1", cpu=4, memory="1Gi"),
        pod("c1", "capped", cpu=50),
    ]


# --- queues ----------------------------------------------------------------------------------


def test_each_queue_names_its_bound_and_the_level_is_weight_times_l() -> None:
    objects = three_queues()
    level = facts(*objects, target="level")
    assert level["deserved"]["cpu"] == {
        "deserved": "20",
        "decidedBy": "Level",
        "level": "10",
        "weightTimesLevel": "20",
        "exact": True,
        "levelQueues": 1,
    }
    assert level["weight"] == 2
    assert level["policy"] == "p"
    assert level["sharing"] == {"policy": "Proportion", "unmanaged": "Reserve"}
    assert level["policyTotal"] == {"cpu": "30", "memory": "64Gi"}
    assert level["request"] == {"cpu": "100", "pods": "1"}
    small = facts(*objects, target="queue/small")
    assert small["deserved"]["cpu"] == {"deserved": "4", "decidedBy": "Request"}
    capped = facts(*objects, target="queue/capped")
    assert capped["deserved"]["cpu"] == {"deserved": "6", "decidedBy": "Capability"}
    assert capped["capability"] == {"cpu": "6"}
    assert capped["realCapability"]["cpu"] == "6"

    text = render_text(level)
    assert text.splitlines()[0] == "Queue level (Open): policy p, Proportion"
    assert "Level: weight 2 x L = 20, with the water level L = 10 per unit of weight" in text
    assert "Request: all it asks for (4)" in render_text(small)
    assert "Capability: its realCapability 6, less than its request 50" in render_text(capped)


def test_a_level_two_queues_share_is_approximate_where_rounding_applies() -> None:
    """Two Level queues (weights 2 and 1) share 30 - 4 - 6 = 20 cpu: L = 6666.67m, so the
    queues deserve 13333m and 6667m (largest remainder), and both say L ≈ 6667m."""
    objects = [*three_queues(), queue("other", weight=1), pod("o1", "other", cpu=100)]
    level = facts(*objects, target="level")["deserved"]["cpu"]
    other = facts(*objects, target="other")["deserved"]["cpu"]
    assert (level["deserved"], other["deserved"]) == ("13333m", "6667m")
    assert level["level"] == other["level"] == "6667m"
    assert (level["weightTimesLevel"], other["weightTimesLevel"]) == ("13333m", "6667m")
    assert level["exact"] is False
    assert level["levelQueues"] == 2
    text = render_text(facts(*objects, target="level"))
    assert "x L ≈ 13333m, with the water level L ≈ 6667m per unit of weight" in text
    assert "shared with 1 other queue" in text


def test_water_level_is_within_a_unit_of_every_queue_or_none() -> None:
    assert water_level([(13333, 2), (6667, 1)]).value == pytest.approx(20000 / 3)
    exact = water_level([(20, 2), (10, 1)])
    assert (exact.value, exact.exact, exact.queues) == (10, True, 2)
    assert water_level([(10_000, 1), (30_000, 1)]).value is None  # raised weights, say
    assert water_level([]).queues == 0


def test_what_one_more_podgroup_may_request() -> None:
    """10 cpu at the default factor 1.2, 2 of them used: headroom 12 - 2 = 10. q (capability 5)
    runs those 2, so its capability leaves 3, and its pending PodGroup asking for 4 waits."""
    objects = [
        policy("p"),
        node("n1", cpu=10, memory="10Gi"),
        queue("q", capability={"cpu": 5}),
        queue("r"),
        pod("run", "q", node="n1", cpu=2),
        pod_group("job", "q", min_resources={"cpu": 4}),
    ]
    enqueue = facts(*objects, target="q")["enqueue"]
    assert enqueue["factors"] == {"cpu": 1.2, "memory": 1.2}
    assert enqueue["overcommittedTotal"] == {"cpu": "12", "memory": "12Gi"}
    assert enqueue["headroom"] == {"cpu": "10", "memory": "12Gi"}
    assert enqueue["capabilityRoom"] == {"cpu": "3", "memory": "10Gi"}
    # The lesser of the two in each dimension: memory is bound by realCapability (10Gi).
    assert enqueue["nextPodGroupMayRequest"] == {"cpu": "3", "memory": "10Gi"}
    assert enqueue["enqueueable"]["reason"] == "CapabilityExceeded"
    text = render_text(facts(*objects, target="q"))
    assert "one more PodGroup   may request cpu=3,memory=10Gi" in text
    assert "Enqueueable         False (CapabilityExceeded): PodGroup ns/job" in text
    closed = facts(*objects[:2], queue("q", state="Closed"), target="q")
    assert closed["enqueue"]["nextPodGroupMayRequest"] == {"cpu": "0", "memory": "0"}
    assert "one more PodGroup   nothing: the queue is Closed" in render_text(closed)


def test_the_policy_total_is_net_of_unmanaged_pods_under_reserve() -> None:
    objects = [
        policy("p"),
        node("n1", cpu=10, memory="10Gi"),
        queue("q", guarantee={"cpu": 2}),
        pod("run", "q", node="n1", cpu=2),
        pod("web", node="n1", cpu=1),  # names no queue, default scheduler: unmanaged
    ]
    q = facts(*objects, target="q")
    assert q["unmanaged"] == {"cpu": "1", "pods": "1"}
    assert q["policyTotal"] == {"cpu": "9", "memory": "10Gi"}
    assert q["totalGuarantee"] == {"cpu": "2"}
    assert q["guarantee"] == {"cpu": "2"}
    assert "unmanaged pods hold cpu=1,pods=1, taken out (Reserve)" in render_text(q)
    ignoring = policy("p", unmanaged="Ignore")
    q = facts(ignoring, *objects[1:], target="q")
    assert q["policyTotal"] == {"cpu": "10", "memory": "10Gi"}
    assert "unmanaged pods hold cpu=1,pods=1, shared (Ignore)" in render_text(q)


def test_true_conditions_are_listed_with_their_messages() -> None:
    objects = [
        policy("p"),
        node("n1", cpu=4),
        queue("q", guarantee={"cpu": 8}),
        pod("busy", "q", node="n1", cpu=4),
    ]
    q = facts(*objects, target="q")
    types = [condition["type"] for condition in q["conditions"]]
    assert types == ["GuaranteeUnsatisfiable"]
    assert "guarantees exceed the total in cpu" in render_text(q)
    assert q["deserved"]["cpu"] == {"deserved": "8", "decidedBy": "Guarantee"}


def test_a_queue_no_policy_selects() -> None:
    q = facts(node("n1", cpu=4), queue("lonely"), target="lonely")
    assert q["policy"] is None
    assert q["enqueue"] is None
    assert [c["type"] for c in q["conditions"]] == ["NoPolicy"]
    assert "no SchedulerPolicy governs it" in render_text(q)


def test_text_and_json_say_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(three_queues()))
    assert main(["simulate", "-f", str(path), "--explain", "queue/level", "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == facts(*three_queues(), target="level")
    assert main(["simulate", "-f", str(path), "--explain", "level"]) == 0
    assert capsys.readouterr().out == render_text(printed)


def test_unknown_names_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(three_queues()))
    assert main(["simulate", "-f", str(path), "--explain", "nope\x1b"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "sharekeeper simulate: queue nope\\x1b not found\n")
    assert main(["simulate", "-f", str(path), "--explain", "node/level"]) == 2
    assert capsys.readouterr().err == "sharekeeper simulate: node level not found\n"
    with pytest.raises(SystemExit) as exited:
        main(["simulate", "-f", str(path), "--explain", "pod/x"])
    assert exited.value.code == 2
    assert "expected NAME, queue/NAME or node/NAME" in capsys.readouterr().err


# --- nodes -----------------------------------------------------------------------------------


def gpu_cluster() -> list[MutableObj]:
    """8 GPUs, 74 cpu and 128G; a pod holds 2 GPUs, 8 cpu, 8G. The 6 idle GPUs keep 6 x 8 = 48
    cpu and 48G idle, which leaves 66 - 48 = 18 cpu and 120G - 48G = 72G to other pods."""
    proportional = policy("p")
    proportional["spec"]["proportional"] = {
        "enable": True,
        "resources": {"nvidia.com/gpu": {"cpu": "8", "memory": "8G"}},
    }
    proportional["spec"]["overcommit"] = {"factors": {"cpu": 1.5}}
    return [
        proportional,
        node("gpu-1", cpu=74, memory="128G", gpu=8),
        queue("train"),
        pod("t1", "train", node="gpu-1", cpu=8, memory="8G", gpu=2),
    ]


def test_a_node_with_a_proportional_reservation() -> None:
    gpu = facts(*gpu_cluster(), target="node/gpu-1")
    assert gpu["policy"] == "p"
    assert gpu["allocatable"] == {"cpu": "74", "memory": "128G", "nvidia.com/gpu": "8"}
    assert gpu["overcommitFactors"] == {"cpu": 1.5, "memory": 1.2, "nvidia.com/gpu": 1.2}
    assert gpu["overcommitAllocatable"]["cpu"] == "111"
    assert gpu["proportional"] == {
        "reserved": {"cpu": "48", "memory": "48G"},
        "available": {"cpu": "18", "memory": "72G"},
        "resources": {"nvidia.com/gpu": {"idle": "6", "perUnit": {"cpu": "8", "memory": "8G"}}},
    }
    assert gpu["pods"] == {
        "count": 1,
        "requests": {"cpu": "8", "memory": "8G", "nvidia.com/gpu": "2"},
    }
    assert gpu["qos"]["waterlines"] is None
    text = render_text(gpu)
    assert "kept for nvidia.com/gpu  6 idle x cpu=8,memory=8G each" in text
    assert "proportional-reserved    cpu=48,memory=48G" in text
    assert "pods bound               1, requesting cpu=8,memory=8G,nvidia.com/gpu=2" in text
    assert f"QoS                      {NO_WATERLINE}" in text


def test_a_node_over_its_waterline_in_the_qos_check(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "qos-check.yaml"
    assert main(["simulate", "-f", str(example), "--explain", "node/worker-1", "-o", "json"]) == 0
    qos = json.loads(capsys.readouterr().out)["qos"]
    assert qos["waterlines"] == {"evict.cpu_total_usage": "6"}
    assert qos["policies"] == ["cpu-guard"]
    assert [(g["class"], g["metric"]) for g in qos["gaps"]] == [("evict", "cpu_total_usage")]


def test_a_node_says_what_usage_is_leaving(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """batch-0 is terminating: its 900m are left out of the gap, which is closed."""
    example = Path(__file__).resolve().parent.parent / "examples" / "qos-check.yaml"
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    dying = next(d for d in docs if d["metadata"]["name"] == "batch-0" and d["kind"] == "Pod")
    dying["metadata"]["deletionTimestamp"] = "2026-11-18T11:07:00Z"  # --now plus 20 s
    path = tmp_path / "dying.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    args = ["simulate", "-f", str(path), "--now", "1795000000", "--explain", "node/worker-1"]
    assert main([*args, "-o", "json"]) == 0
    (gap,) = json.loads(capsys.readouterr().out)["qos"]["gaps"]
    assert (gap["gap"], gap["leaving"]) == ("-440m", "900m")
    assert main(args) == 0
    assert "evict.cpu_total_usage=-440m(900m leaving) (cpu-guard)" in capsys.readouterr().out


# --- the cluster: one list through the kubeconfig's client --------------------------------------


def served(objects: list[MutableObj], page_size: int = 2) -> httpx.Client:
    """A client whose API server serves ``objects`` (list items carry no kind, as the API
    server's do), ``page_size`` at a time; PodGroups are not served."""
    by_path: dict[str, list[MutableObj]] = {}
    for resource in kinds.STORED:
        items = [
            {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
            for obj in objects
            if obj["kind"] == resource.kind
        ]
        by_path[resource.path] = items

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path not in by_path or "podgroups" in request.url.path:
            return httpx.Response(404, json={"kind": "Status", "message": "not found"})
        items = by_path[request.url.path]
        start = int(request.url.params.get("continue") or 0)
        page = items[start : start + page_size]
        token = str(start + page_size) if start + page_size < len(items) else ""
        return httpx.Response(200, json={"metadata": {"continue": token}, "items": page})

    return httpx.Client(base_url="https://cluster.test", transport=httpx.MockTransport(answer))


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[MutableObj]], None]:
    def serve(objects: list[MutableObj]) -> None:
        monkeypatch.setattr(listing, "http_client", lambda: served(objects))

    return serve


def test_the_cluster_variant_computes_what_simulate_computes(
    cluster: Callable[[list[MutableObj]], None], capsys: pytest.CaptureFixture[str]
) -> None:
    objects = three_queues()
    cluster(objects)
    assert main(["explain", "queue", "level", "-o", "json"]) == 0
    from_cluster = json.loads(capsys.readouterr().out)
    assert from_cluster == facts(*objects, target="level")
    assert main(["explain", "queue", "level"]) == 0
    assert "L = 10 per unit of weight" in capsys.readouterr().out


def test_the_cluster_lists_every_page_with_kinds() -> None:
    listed = listing.list_objects(served(three_queues(), page_size=1))
    assert sorted((obj["kind"], obj["metadata"]["name"]) for obj in listed) == sorted(
        (obj["kind"], obj["metadata"]["name"]) for obj in three_queues()
    )
    assert {obj["apiVersion"] for obj in listed if obj["kind"] == "Queue"} == {
        "scheduling.sharekeeper.io/v1alpha1"
    }


def test_in_the_cluster_waterlines_are_read_as_published(
    cluster: Callable[[list[MutableObj]], None], capsys: pytest.CaptureFixture[str]
) -> None:
    hot, calm = node("hot", cpu=8), node("calm", cpu=8)
    hot["metadata"]["annotations"] = {
        "sharekeeper.io/qos-waterlines": '{"evict.cpu_total_usage":"6"}'
    }
    cluster([policy("p"), hot, calm, queue("q")])
    assert main(["explain", "node", "hot", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["qos"]["waterlines"] == {
        "evict.cpu_total_usage": "6"
    }
    assert main(["explain", "node", "calm"]) == 0
    assert NO_WATERLINE in capsys.readouterr().out


def test_in_the_cluster_an_unreadable_queue_is_named_not_fatal(
    cluster: Callable[[list[MutableObj]], None], capsys: pytest.CaptureFixture[str]
) -> None:
    broken = queue("broken")
    broken["spec"]["weight"] = 0
    cluster([*three_queues(), broken])
    assert main(["explain", "queue", "level", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["deserved"]["cpu"]["deserved"] == "20"
    assert main(["explain", "queue", "broken"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sharekeeper explain: queue broken cannot be read: ")
    assert err.count("\n") == 1
    assert main(["explain", "queue", "nope"]) == 2
    assert capsys.readouterr().err == "sharekeeper explain: queue nope not found\n"


def test_an_unreachable_cluster_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert main(["explain", "queue", "q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sharekeeper explain: cannot use the kubeconfig: ")
    assert err.count("\n") == 1
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    assert main(["explain", "node", "n1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sharekeeper explain: cannot reach the API server at http://127.0.0.1:9")
    assert err.count("\n") == 1


def test_a_refusal_names_the_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def forbidden(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            403, json={"kind": "Status", "message": 'nodes is forbidden: User "x"'}
        )

    client = httpx.Client(base_url="https://cluster.test", transport=httpx.MockTransport(forbidden))
    monkeypatch.setattr(listing, "http_client", lambda: client)
    assert main(["explain", "queue", "q"]) == 2
    assert capsys.readouterr().err == (
        'sharekeeper explain: GET /api/v1/nodes: HTTP 403: nodes is forbidden: User "x"\n'
    )


@pytest.mark.parametrize("target", ["research", "node/gpu-1"])
def test_the_examples_in_the_docs_are_what_explain_prints(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = Path(__file__).resolve().parent.parent
    files = [
        "-f",
        str(repo / "manifests" / "samples"),
        "-f",
        str(repo / "examples" / "demo-workload.yaml"),
    ]
    assert main(["simulate", *files, "--explain", target]) == 0
    assert capsys.readouterr().out in (repo / "docs" / "explain.md").read_text()
