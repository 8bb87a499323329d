"""A pod's request as the scheduler counts it: containers and sidecars, or more while an init
container runs, plus the overhead."""

from __future__ import annotations

from typing import Any

import pytest

from sharekeeper.model.objects import ObjectError
from sharekeeper.model.pods import effective_request

GI = 2**30


def container(cpu: str, memory: str = "1Gi", **more: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **more}


def request(**spec: Any) -> dict[str, int]:
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    return effective_request(pod, spec)


def test_the_containers_are_summed() -> None:
    assert request(containers=[container("1"), container("500m")]) == {
        "cpu": 1500,
        "memory": 2 * GI,
    }


def test_a_sidecar_runs_beside_the_containers_and_an_init_container_before_them() -> None:
    sidecar = container("250m", "1Gi", restartPolicy="Always")
    # The init container's memory peak (sidecar + 4Gi) is above the containers' (sidecar + 1Gi);
    # its cpu (sidecar + 100m) is below theirs (sidecar + 1).
    spec = {
        "initContainers": [sidecar, container("100m", "4Gi")],
        "containers": [container("1")],
    }
    assert request(**spec) == {"cpu": 1250, "memory": 5 * GI}


def test_an_init_container_before_the_sidecar_runs_without_it() -> None:
    spec = {
        "initContainers": [container("2"), container("250m", restartPolicy="Always")],
        "containers": [container("1")],
    }
    assert request(**spec) == {"cpu": 2000, "memory": 2 * GI}


def test_the_overhead_comes_on_top() -> None:
    spec = {"containers": [container("1")], "overhead": {"cpu": "100m", "memory": "64Mi"}}
    assert request(**spec) == {"cpu": 1100, "memory": GI + 64 * 2**20}


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"initContainers": "c"}, r"spec\.initContainers"),
        ({"initContainers": [{"resources": "none"}]}, r"spec\.initContainers\[0\]\.resources"),
        ({"overhead": ""}, r"spec\.overhead"),
        ({"overhead": {"cpu": "lots"}}, r"spec\.overhead\.cpu"),
    ],
)
def test_what_cannot_be_read_is_refused_with_its_path(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(ObjectError, match=path):
        request(containers=[container("1")], **spec)
