"""The field readers every object goes through: plain dicts (JSON, YAML) take a fast path, and any
other mapping (kopf's bodies, read-only views) must read the same."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from builders import pod
from sharekeeper.model.objects import ObjectError, at, mapping_at, resources_at
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
