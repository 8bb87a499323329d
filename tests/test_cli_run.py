"""``sharekeeper run``'s listening addresses: where the probes and metrics listen by default,
the controller-runtime forms, and the older port-only flags."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sharekeeper import runtime
from sharekeeper.cli import build_parser, main
from sharekeeper.settings import Settings, settable, table


def vars_of(settings: Settings) -> dict[str, Any]:
    return {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)}


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *args])


def addresses(*args: str) -> tuple[Any, Any]:
    parsed = parse(*args)
    return parsed.probe_address, parsed.metrics_address


def test_outside_a_pod_the_probes_and_metrics_listen_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert addresses() == (("127.0.0.1", 8080), ("127.0.0.1", 9090))
    assert addresses("--liveness-port=8081", "--metrics-port=0") == (("127.0.0.1", 8081), None)


def test_in_a_pod_they_listen_on_every_interface_for_the_kubelet_and_prometheus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert addresses() == (("0.0.0.0", 8080), ("0.0.0.0", 9090))
    assert addresses("--liveness-port=0", "--metrics-port=9191") == (None, ("0.0.0.0", 9191))


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (":8081", ("0.0.0.0", 8081)),
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("10.0.0.7:8081", ("10.0.0.7", 8081)),
        ("[::]:8081", ("::", 8081)),
        ("[::1]:8081", ("::1", 8081)),
        ("0", None),
        (":0", None),
    ],
)
def test_bind_addresses_take_controller_runtime_forms(
    flag: str, expected: tuple[str, int] | None
) -> None:
    assert addresses(f"--health-probe-bind-address={flag}", f"--metrics-bind-address={flag}") == (
        expected,
        expected,
    )


@pytest.mark.parametrize("flag", ["8080", "localhost", "127.0.0.1:http", ":65536", ""])
def test_a_malformed_bind_address_is_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(f"--metrics-bind-address={flag}")
    assert exit_.value.code == 2
    assert "expected [HOST]:PORT or 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags",
    [
        ("--health-probe-bind-address=:8080", "--liveness-port=8080"),
        ("--metrics-bind-address=:9090", "--metrics-port=9090"),
    ],
)
def test_an_address_and_a_port_for_one_server_are_refused(
    flags: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(*flags)
    assert "not allowed with argument" in capsys.readouterr().err


def test_run_hands_the_addresses_to_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}

    def run(settings: Settings) -> int:
        started.update(vars_of(settings))
        return 0

    monkeypatch.setattr(runtime, "run", run)
    assert main(["run", "--health-probe-bind-address=127.0.0.1:18080", "--metrics-port=0"]) == 0
    assert started["probe_address"] == ("127.0.0.1", 18080)
    assert started["metrics_address"] is None
    assert started["lease"] is None  # no leader election unless asked


def test_leader_election_flags_become_lease_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}
    monkeypatch.setattr(runtime, "run", lambda settings: started.update(vars_of(settings)) or 0)
    monkeypatch.setenv("POD_NAMESPACE", "platform")
    timings = [
        "--leader-elect-lease-duration=30",
        "--leader-elect-renew-deadline=20",
        "--leader-elect-retry-period=4",
    ]
    assert main(["run", "--leader-elect", *timings]) == 0
    lease = started["lease"]
    assert (lease.namespace, lease.name) == ("platform", "sharekeeper")
    assert (lease.lease_seconds, lease.renew_deadline_seconds, lease.retry_seconds) == (30, 20, 4)
    other: dict[str, Any] = {}
    monkeypatch.setattr(runtime, "run", lambda settings: other.update(vars_of(settings)) or 0)
    main(["run", "--leader-elect"])
    assert other["lease"].identity != lease.identity  # every process is its own candidate


def test_leader_election_timings_that_leave_no_time_to_stop_are_refused() -> None:
    with pytest.raises(SystemExit, match="renew deadline < lease duration"):
        main(["run", "--leader-elect", "--leader-elect-renew-deadline=20"])


def test_the_discovery_interval_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: dict[str, Any] = {}
    monkeypatch.setattr(runtime, "run", lambda settings: started.update(vars_of(settings)) or 0)
    monkeypatch.setenv("SHAREKEEPER_DISCOVERY_INTERVAL", "2.5")
    assert main(["run"]) == 0
    assert started["watches"].discovery_interval_seconds == 2.5
    monkeypatch.setenv("SHAREKEEPER_DISCOVERY_INTERVAL", "soon")
    with pytest.raises(SystemExit, match="SHAREKEEPER_DISCOVERY_INTERVAL is not a number"):
        main(["run"])


def test_the_settings_table_in_the_docs_is_the_settings() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "operator.md").read_text()
    assert table() in docs
    documented = {row.split("`")[1] for row in table().splitlines()[2:]}
    assert documented == settable(), "every setting has a row"
