"""The kopf index of NodeQosEnsurancePolicies, trimmed to what ``model.qos`` reads."""

from __future__ import annotations

from typing import Any

import kopf

from sharekeeper.handlers.indexes import attach
from sharekeeper.model.records import OwnRecord

POLICIES = ("ensurance.sharekeeper.io", "v1alpha1", "nodeqosensurancepolicies")


@kopf.index(*POLICIES)
async def qos_policy_index(
    name: str, body: kopf.Body, **_: Any
) -> dict[str, OwnRecord[dict[str, Any]]]:
    meta = body["metadata"]
    trimmed = {"metadata": {"name": name}, "spec": dict(body.get("spec") or {})}
    status = dict(body.get("status") or {})
    return {name: OwnRecord(name, meta["uid"], meta.get("generation", 0), trimmed, status)}


@kopf.on.event(*POLICIES)
async def qos_policy_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    attach(memo, kwargs)
