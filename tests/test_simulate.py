"""``sharekeeper simulate``: reads files the way kubectl prints them, prints what the operator
would publish, and refuses bad input with a message naming the object and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders import node, pod, policy, queue
from sharekeeper.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cluster.yaml"


def _write(tmp_path: Path, *objects: dict[str, object], as_list: bool = False) -> Path:
    path = tmp_path / "objects.yaml"
    if as_list:
        path.write_text(
            yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        )
    else:
        path.write_text(yaml.safe_dump_all(objects))
    return path


def test_the_command_prints_its_whole_report_before_the_process_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The installed command ends the process without freeing what it read object by object
    (``cli.console``): what it printed must be there whole, with its exit code."""
    assert main(["simulate", "-f", str(EXAMPLE), "-o", "json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    command = [sys.executable, "-m", "sharekeeper.cli", "simulate", "-f", str(EXAMPLE)]
    done = subprocess.run([*command, "-o", "json"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == expected
    missing = subprocess.run(
        [*command[:-1], str(EXAMPLE.with_name("missing.yaml"))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert missing.returncode == 2
    assert missing.stderr.startswith("sharekeeper simulate: ")


def test_example_table_has_a_row_per_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", str(EXAMPLE), "-o", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "QUEUE",
        "POLICY",
        "WEIGHT",
        "GUARANTEE",
        "DESERVED",
        "ALLOCATED",
        "REQUEST",
        "SHARE",
    ]
    assert [line.split()[0] for line in lines[1:]] == ["batch", "default", "research", "training"]
    batch = lines[1].split()
    assert batch[4] == "cpu=8750m,memory=28Gi,pods=2"  # 24 cpu water-filled by weight 1:1:3:2
    assert batch[-1] == "0.8"


@pytest.mark.parametrize("as_list", [False, True], ids=["multi-document", "kind-List"])
def test_json_has_queue_and_policy_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_list: bool
) -> None:
    path = _write(
        tmp_path,
        policy("p"),
        node("n1", cpu=4, memory="8Gi"),
        queue("a", weight=1),
        queue("b", weight=3),
        pod("pa", "a", cpu=4),
        pod("pb", "b", node="n1", cpu=1, memory="1Gi"),
        as_list=as_list,
    )
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"queues", "schedulerPolicies", "nodes"}
    assert report["queues"]["a"]["deserved"]["cpu"] == "3"
    assert report["queues"]["b"]["deserved"] == {"cpu": "1", "memory": "1Gi"}
    assert report["queues"]["b"]["share"] == "1"
    assert report["schedulerPolicies"]["p"]["total"] == {"cpu": "4", "memory": "8Gi"}
    assert report["schedulerPolicies"]["p"]["queues"] == 2
    overcommit = report["schedulerPolicies"]["p"]["overcommit"]
    assert overcommit["used"] == {"cpu": "1", "memory": "1Gi"}
    assert overcommit["headroom"] == {"cpu": "3800m", "memory": "9234179686"}  # x1.2 - used
    annotations = report["nodes"]["n1"]["annotations"]
    assert annotations["sharekeeper.io/policy"] == "p"
    assert annotations["sharekeeper.io/overcommit-factors"] == '{"cpu":1.2,"memory":1.2}'


def test_fractional_shares_never_exceed_the_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        policy("p"),
        node("n1", cpu=4),
        *(queue(name) for name in "abc"),
        *(pod(f"p{name}", name, cpu=4) for name in "abc"),
    )
    assert main(["simulate", "-f", str(path), "-o", "yaml"]) == 0
    report = yaml.safe_load(capsys.readouterr().out)
    cpus = sorted(report["queues"][name]["deserved"]["cpu"] for name in "abc")
    assert cpus == ["1333m", "1333m", "1334m"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
            "Service s: kind: must be one of DaemonSet, Namespace, Node, NodeMetrics",
        ),
        (
            node("n2", cpu="lots"),
            "Node n2: status.allocatable.cpu: 'lots' is not a Kubernetes quantity",
        ),
        (
            queue("q", weight=0),
            "Queue q: spec.weight: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            policy("p2", "Fair"),
            "SchedulerPolicy p2: spec.sharing.policy: Input should be 'Proportion', 'Capacity'",
        ),
    ],
    ids=["unknown-kind", "malformed-quantity", "weight-0", "unknown-policy"],
)
def test_bad_input_names_object_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, object], message: str
) -> None:
    path = _write(tmp_path, policy("p"), node("n1", cpu=4), queue("a"), bad)
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


def test_a_pod_naming_a_missing_queue_is_a_warning_as_in_the_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a typo'd queue name made simulate refuse the whole input; the operator ignores
    the pod (with an Event). One rule for both: charged to no queue, said on stderr."""
    path = _write(
        tmp_path, policy("p"), node("n1", cpu=4), queue("a"), pod("orphan", "missing", cpu=1)
    )
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["queues"]["a"]["request"] == {}
    assert captured.err == (
        "sharekeeper simulate: warning: 1 pod names queue 'missing', which does not exist: "
        "charged to no queue\n"
    )


def test_placements_are_printed_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The predicate's answer grows with pending pods x nodes: opt-in."""
    gpu = node("gpu-1", cpu=16, memory="64Gi", gpu=2)
    reserving = policy("p")
    reserving["spec"]["proportional"] = {
        "enable": True,
        "resources": {"nvidia.com/gpu": {"cpu": "8", "memory": "8Gi"}},
    }
    path = _write(
        tmp_path, reserving, gpu, node("cpu-1", cpu=4), queue("a"), pod("web", "a", cpu=9)
    )
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 0
    assert "placements" not in json.loads(capsys.readouterr().out)
    assert main(["simulate", "-f", str(path), "-o", "json", "--placements"]) == 0
    placements = json.loads(capsys.readouterr().out)["placements"]
    # 16 idle cpu, 16 kept for the two idle GPUs: 9 does not fit; cpu-1 has too little anyway
    # but refuses nobody for a reservation (it has no GPU).
    assert placements["ns/web"]["nodes"] == ["cpu-1"]
    assert list(placements["ns/web"]["refused"]) == ["gpu-1"]
