"""The field readers every object goes through: plain dicts (JSON, YAML) take a fast path, and any
other mapping (kopf's bodies, read-only views) must read the same."""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from builders import pod
from sharekeeper.model.objects import (
    ObjectError,
    at,
    mapping_at,
    resources_at,
    rfc3339_seconds,
    section,
)
from sharekeeper.model.pods import pod_record


def frozen(value: Any) -> Any:
    """``value`` with every dict made a read-only mapping that is not a dict."""
    if isinstance(value, dict):
        return MappingProxyType({key: frozen(inner) for key, inner in value.items()})
    if isinstance(value, list):
        return [frozen(inner) for inner in value]
    return value


def test_a_path_is_read_through_dicts_and_other_mappings_alike() -> None:
    obj = {"spec": {"nodeName": "n1", "containers": [{"name": "main"}]}}
    for form in (obj, frozen(obj)):
        assert at(form, "spec.nodeName") == "n1"
        assert at(form, "spec.missing") is None
        assert at(form, "spec.containers.name") is None  # a list is not stepped into
        assert at(form, "spec.nodeName.more") is None  # nor is a string
        assert isinstance(mapping_at(form, "spec"), Mapping)


def test_a_value_that_is_not_a_mapping_where_one_must_be_is_refused_with_its_path() -> None:
    with pytest.raises(ObjectError, match=r"spec\.overhead.*must be a mapping"):
        resources_at({"kind": "Pod", "spec": {"overhead": ["1"]}}, "spec.overhead")
    with pytest.raises(ObjectError, match=r"spec\.overhead\.cpu"):
        resources_at({"kind": "Pod", "spec": {"overhead": {"cpu": "lots"}}}, "spec.overhead")


def test_a_pod_read_from_another_mapping_is_the_same_record() -> None:
    bound = pod("a", "q", node="n1", cpu="500m", memory="1Gi")
    held = pod("b", "q", held=True, created="2026-01-01T00:00:00Z", cpu="2")
    for obj in (bound, held):
        assert pod_record(frozen(obj)) == pod_record(obj)
    assert pod_record(frozen(bound)).share.request == {"cpu": 500, "memory": 2**30}


def test_a_section_reads_as_a_path_does_whatever_stands_there() -> None:
    for spec in ({"nodeName": "n1"}, MappingProxyType({"nodeName": "n1"}), None, "text", [1]):
        obj = {"spec": spec}
        assert section(obj, "spec").get("nodeName") == at(obj, "spec.nodeName")


def test_a_time_without_a_zone_is_utc_whatever_the_machine_s_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert rfc3339_seconds("2026-01-01T00:00:00") == 1_767_225_600.0
        assert rfc3339_seconds("2026-01-01T00:00:00Z") == 1_767_225_600.0
        assert rfc3339_seconds("2026-01-01T01:00:00+01:00") == 1_767_225_600.0
        with pytest.raises(ValueError, match="yesterday"):
            rfc3339_seconds("yesterday")
    finally:
        monkeypatch.undo()
        time.tzset()
