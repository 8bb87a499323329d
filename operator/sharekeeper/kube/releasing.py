"""``sharekeeper release``: every pod of a namespace let through the admission gate by hand,
with the patch the operator sends (the gate removed, the time recorded). For when the
operator is down for long, or a namespace leaves admission with pods still held."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from urllib.parse import quote

import httpx2 as httpx

from sharekeeper.kube.kinds import PODS
from sharekeeper.kube.listing import UNREACHABLE, http_client, list_items, refusal, unreachable
from sharekeeper.model.objects import rfc3339
from sharekeeper.model.pods import has_admission_gate, release_patch

STRATEGIC = "application/strategic-merge-patch+json"


@dataclass
class Released:
    pods: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """``name: why`` for each pod the API server refused to patch."""


def release_namespace(namespace: str, client: httpx.Client | None = None) -> Released:
    own = client is None
    http = http_client() if client is None else client
    # The explain command's paged list, narrowed to the namespace.
    pods = replace(PODS, field_selector=f"metadata.namespace={namespace}")
    body = json.dumps(release_patch(rfc3339(time.time())))
    headers = {"Content-Type": STRATEGIC}
    result = Released()
    try:
        held = [
            str(pod.get("metadata", {}).get("name"))
            for pod in list_items(http, pods)
            if has_admission_gate((pod.get("spec") or {}).get("schedulingGates"))
        ]
        for name in held:
            path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
            try:
                response = http.patch(path, content=body, headers=headers)
            except UNREACHABLE as error:
                raise unreachable(http, error) from None
            if response.status_code == 200:
                result.pods.append(name)
            elif response.status_code != 404:  # gone meanwhile: nothing to release
                result.failed.append(f"{name}: {refusal(response)}")
        return result
    finally:
        if own:
            http.close()
