"""A status the API server keeps refusing is told, once (issue "Tenant-proof", attack 4: every
status write failed, observedGeneration froze, every queue still said Ready=True, /healthz
answered 200 and the log took 343 KB of tracebacks in a minute).

The API server itself refuses the operator's status writes here (``faults.RefusingWebhook``,
a validating webhook answering 500 for the operator's user only), on the local control plane.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusters import TARGET, Cluster
from faults import RefusingWebhook
from objects import node, policy, queue, status
from operating import SERVICE_ACCOUNT, Operator, eventually

pytestmark = pytest.mark.skipif(
    TARGET != "local", reason="reads the operator's log and refuses writes through a webhook"
)

FAILING_WRITES = 3
"""``loops.health.FAILING_WRITES``: failed writes in a row before an object is told failing."""


def events_of(cluster: Cluster, kind: str, name: str, reason: str) -> tuple[int, int, str]:
    """The Events about this object (by uid) with ``reason``: how many Event objects, their
    total count, and the message of the first."""
    uid = cluster.get(kind, name)["metadata"]["uid"]
    found = cluster.get(
        "events", "-n", "default",
        "--field-selector", f"involvedObject.uid={uid},reason={reason}",
    )["items"]  # fmt: skip
    first = found[0]["message"] if found else ""
    return len(found), sum(event.get("count") or 1 for event in found), first


def log_lines(operator: Operator, text: str) -> list[str]:
    return [line for line in operator.log.read_text().splitlines() if text in line]


@pytest.mark.timeout(180)
def test_a_refused_status_is_told_once_and_written_once_the_refusal_ends(
    cluster_with: Cluster, operator: Operator, tmp_path: Path
) -> None:
    cluster_with.apply(node("n1"), policy("all"), queue("a"), queue("b"))
    eventually(lambda: status(cluster_with, "queue", "a").get("observedGeneration") == 1)
    with RefusingWebhook(cluster_with, tmp_path / "webhook", user=SERVICE_ACCOUNT, fraction=1.0):
        time.sleep(2)  # the API server loads the webhook configuration
        cluster_with.kubectl("patch", "queue", "a", "--type=merge", "-p", '{"spec":{"weight":3}}')

        def told() -> str:
            count, total, message = events_of(cluster_with, "queue", "a", "StatusNotWritten")
            assert (count, total) == (1, 1), (count, total)
            return message

        message = eventually(told, timeout=90)
        assert f"could not be written {FAILING_WRITES} times in a row" in message, message
        assert "HTTP 500: " in message, message
        assert "refused by the e2e fault webhook: queues/status a" in message, message
        assert operator.metric("sharekeeper_status_not_written", kind="Queue") == 1
        written = status(cluster_with, "queue", "a")
        assert written["observedGeneration"] == 1  # what the refusal keeps it at
        # More rounds refused: still one Event, counted once, and one log line.
        errors = operator.metric("sharekeeper_writes_total", kind="Queue", outcome="error")
        eventually(
            lambda: (
                operator.metric("sharekeeper_writes_total", kind="Queue", outcome="error")
                >= errors + 2
            ),
            timeout=60,
        )
        assert events_of(cluster_with, "queue", "a", "StatusNotWritten")[:2] == (1, 1)
        assert len(log_lines(operator, "Queue a: status not written")) == 1
    # The refusal ends: the next round writes the status, and says so once.
    generation = lambda: status(cluster_with, "queue", "a").get("observedGeneration")  # noqa: E731
    eventually(lambda: generation() == 2, timeout=30)
    eventually(lambda: operator.metric("sharekeeper_status_not_written", kind="Queue") == 0)
    assert len(log_lines(operator, "Queue a: status written again")) == 1
    assert "Traceback" not in operator.log.read_text(), operator.tail()
    assert operator.health()["recomputeRounds"] > 0  # 200: the failure did not last 5 minutes
