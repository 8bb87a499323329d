"""Static checks of the CRD files: what `kubectl explain` and `kubectl get` will show."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

CRDS = sorted((Path(__file__).resolve().parent.parent / "crds").glob("*.yaml"))


def undescribed(schema: dict[str, Any], path: str) -> Iterator[str]:
    """Paths of schema nodes that a person would want described but are not."""
    if path.endswith(".metadata"):
        return  # described by Kubernetes itself
    if "description" not in schema:
        yield path
    for name, child in schema.get("properties", {}).items():
        yield from undescribed(child, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from undescribed(schema["additionalProperties"], f"{path}[*]")
    if "items" in schema:
        yield from undescribed(schema["items"], f"{path}[]")


@pytest.mark.parametrize("path", CRDS, ids=lambda p: Path(p).stem)
def test_every_field_has_a_description(path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert list(undescribed(schema, crd["spec"]["names"]["kind"])) == []


def unbounded(schema: dict[str, Any], path: str) -> Iterator[str]:
    """Paths of schema nodes whose size or range has no bound: what a tenant could make absurd,
    and what makes CEL rules over them too costly for the API server."""
    kind = schema.get("type")
    ranged = {"minimum", "maximum"} <= schema.keys()
    int64 = schema.get("format") == "int64"  # the API server refuses integers beyond it itself
    if kind in ("integer", "number") and not (ranged or int64):
        yield path
    if (kind == "string" or schema.get("x-kubernetes-int-or-string")) and not (
        "enum" in schema or "maxLength" in schema
    ):
        yield path
    if kind == "array" and "maxItems" not in schema:
        yield path
    if isinstance(schema.get("additionalProperties"), dict):
        if "maxProperties" not in schema:
            yield path
        yield from unbounded(schema["additionalProperties"], f"{path}[*]")
    for name, child in schema.get("properties", {}).items():
        yield from unbounded(child, f"{path}.{name}")
    if "items" in schema:
        yield from unbounded(schema["items"], f"{path}[]")


@pytest.mark.parametrize("path", CRDS, ids=lambda p: Path(p).stem)
def test_every_value_of_a_spec_is_bounded(path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert list(unbounded(spec, "spec")) == []


@pytest.mark.parametrize("path", CRDS, ids=lambda p: Path(p).stem)
def test_cluster_scoped_with_status_and_category(path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    assert crd["metadata"]["name"] == path.stem
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["categories"] == ["sharekeeper"]
    for version in crd["spec"]["versions"]:
        assert version["subresources"] == {"status": {}}
