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


@pytest.mark.parametrize("path", CRDS, ids=lambda p: Path(p).stem)
def test_cluster_scoped_with_status_and_category(path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    assert crd["metadata"]["name"] == path.stem
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["categories"] == ["sharekeeper"]
    for version in crd["spec"]["versions"]:
        assert version["subresources"] == {"status": {}}
