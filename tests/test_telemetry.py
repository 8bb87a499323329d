"""What ``/metrics`` serves: the registry's series and the queues' last round, in the text format
Prometheus reads."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from builders import exposed, exposed_value
from sharekeeper import telemetry
from sharekeeper.engine.shares import ShareResult
from sharekeeper.engine.shares.snapshot import QueueShare


def result(**queues: tuple[dict[str, int], dict[str, int], float, bool]) -> ShareResult:
    """Queues by name: (deserved, allocated, share, overused), in internal units."""
    return ShareResult(
        {
            name: QueueShare(None, "Open", deserved, {}, {}, allocated, {}, {}, {}, share, used)
            for name, (deserved, allocated, share, used) in queues.items()
        },
        {},
    )


def test_each_queue_has_its_amounts_in_kubernetes_units_its_share_and_overuse() -> None:
    series = telemetry.QueueSeries()
    series.export(result(a=({"cpu": 4500, "memory": 2**30, "pods": 3}, {"cpu": 6000}, 1.33, True)))
    text = series.exposition()
    assert exposed_value(text, "sharekeeper_queue_deserved", queue="a", resource="cpu") == 4.5
    assert exposed_value(text, "sharekeeper_queue_deserved", queue="a", resource="memory") == 2**30
    assert exposed_value(text, "sharekeeper_queue_deserved", queue="a", resource="pods") == 3
    assert exposed_value(text, "sharekeeper_queue_allocated", queue="a", resource="cpu") == 6.0
    assert exposed_value(text, "sharekeeper_queue_allocated", queue="a", resource="memory") is None
    assert exposed_value(text, "sharekeeper_queue_share", queue="a") == 1.33
    assert exposed_value(text, "sharekeeper_queue_overused", queue="a") == 1
    assert text.count(b"# TYPE sharekeeper_queue_deserved gauge\n") == 1


def test_a_label_value_the_format_would_misread_is_escaped() -> None:
    """Queue names are validated by the API server; a name that was not still reads back as
    itself, and cannot add a series of its own."""
    odd = 'a"} 1\nsharekeeper_queue_share{queue="b\\'
    series = telemetry.QueueSeries()
    series.export(result(**{odd: ({"cpu": 1000}, {}, 0.0, False)}))
    samples = exposed(series.exposition())
    assert {sample.labels["queue"] for sample in samples} == {odd}
    assert len(samples) == 3


def test_without_queues_the_families_are_there_and_empty() -> None:
    series = telemetry.QueueSeries()
    assert exposed(series.exposition()) == []
    assert b"# TYPE sharekeeper_queue_share gauge" in series.exposition()


def test_the_server_answers_metrics_with_the_registrys_series_and_the_queues() -> None:
    telemetry.QUEUES.export(result(served=({"cpu": 2000}, {"cpu": 1000}, 0.5, False)))
    telemetry.PODS_RELEASED.inc(0)
    port = telemetry.serve("127.0.0.1", 0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read()
    assert exposed_value(text, "sharekeeper_queue_share", queue="served") == 0.5
    assert any(s.name == "sharekeeper_admission_released_pods_total" for s in exposed(text))
    with pytest.raises(urllib.error.HTTPError) as elsewhere:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
    assert elsewhere.value.code == 404
    elsewhere.value.close()
