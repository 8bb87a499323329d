"""DaemonSets are watched (for their UIDs only) by the operator, listed by ``explain`` and read
by ``simulate``, so all three give a pod that claims a DaemonSet the same answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sharekeeper.cli import main
from sharekeeper.cluster.store import ClusterStore
from sharekeeper.kube import kinds

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qos-check.yaml"
UID = "5b2f7c1e-0a4d-4c3b-8e6f-1d2c3b4a5f60"


def test_every_kind_the_operator_watches_and_explain_lists_has_its_store() -> None:
    stores = ClusterStore().by_kind
    assert {resource.kind for resource in kinds.STORED} == set(stores)
    assert kinds.DAEMONSETS in kinds.STORED
    assert (kinds.DAEMONSETS.api_version, kinds.DAEMONSETS.path) == (
        "apps/v1",
        "/apis/apps/v1/daemonsets",
    )


def _with_agent(owner_version: str, *, daemonset: bool) -> list[dict[str, Any]]:
    """The QoS example, plus the busiest pod of all (3 cores, BestEffort) whose controller
    reference names DaemonSet batch/agent; with that DaemonSet in the input or not."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    agent = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "agent-x",
            "namespace": "batch",
            "ownerReferences": [{
                "apiVersion": owner_version, "kind": "DaemonSet", "name": "agent", "uid": UID,
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": {"nodeName": "worker-1", "priority": 0,
                 "containers": [{"name": "main", "image": "example/agent:1", "resources": {}}]},
        "status": {"phase": "Running", "qosClass": "BestEffort",
                   "startTime": "2026-11-21T10:00:00Z"},
    }  # fmt: skip
    usage = {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "PodMetrics",
        "metadata": {"name": "agent-x", "namespace": "batch"},
        "timestamp": "2026-11-21T12:00:00Z",
        "window": "10s",
        "containers": [{"name": "main", "usage": {"cpu": "3", "memory": "100Mi"}}],
    }
    docs += [agent, usage]
    if daemonset:
        docs.append({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "batch", "uid": UID},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}},
        })  # fmt: skip
    return docs


@pytest.mark.parametrize(
    ("owner_version", "daemonset", "evicted"),
    [
        ("apps/v1", True, "batch/batch-0"),  # a DaemonSet's pod: never acted on
        ("apps/v1", False, "batch/agent-x"),  # its DaemonSet is not there
        ("apps/v1beta2", True, "batch/agent-x"),  # a version the garbage collector ignores
    ],
)
def test_simulate_exempts_a_pod_only_for_a_daemonset_of_the_input(
    owner_version: str,
    daemonset: bool,
    evicted: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(_with_agent(owner_version, daemonset=daemonset)))
    assert main(["simulate", "-f", str(path), "-o", "json", "--now", "1795000000"]) == 0
    actions = json.loads(capsys.readouterr().out)["actions"]
    assert [action["pod"] for action in actions] == [evicted]


def test_simulate_refuses_a_daemonset_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _with_agent("apps/v1", daemonset=True)
    del docs[-1]["metadata"]["uid"]
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 2
    assert "DaemonSet batch/agent: metadata.uid: is required" in capsys.readouterr().err
