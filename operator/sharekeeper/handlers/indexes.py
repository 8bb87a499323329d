"""kopf indexes of our own custom resources (few objects), and the handlers that wake the
recompute loop.

Nodes, Pods, PodGroups and Namespaces are not kopf's: our own watches feed them into the
cluster store (``handlers.operator``), because kopf's per-object workers and index barrier do
not scale to 100,000+ objects. An index holds one small frozen value per object.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import kopf

from sharekeeper.cluster.snapshots import OwnIndexes
from sharekeeper.model.objects import ModelError
from sharekeeper.model.policies import policy_spec
from sharekeeper.model.queues import queue_snapshot
from sharekeeper.model.records import OwnRecord, PolicyRecord, QueueRecord

logger = logging.getLogger(__name__)

QUEUES = ("scheduling.sharekeeper.io", "v1alpha1", "queues")
POLICIES = ("scheduling.sharekeeper.io", "v1alpha1", "schedulerpolicies")


@kopf.index(*QUEUES)
async def queue_index(name: str, body: kopf.Body, **_: Any) -> dict[str, QueueRecord]:
    return {name: _record(body, queue_snapshot)}


@kopf.index(*POLICIES)
async def policy_index(name: str, body: kopf.Body, **_: Any) -> dict[str, PolicyRecord]:
    return {name: _record(body, policy_spec)}


def _record(body: kopf.Body, read: Any) -> OwnRecord[Any]:
    status = copy.deepcopy(dict(body.get("status") or {}))
    meta = body["metadata"]
    try:
        spec, error = read(body), None
    except ModelError as problem:
        spec, error = None, str(problem)
        logger.warning("%s", problem)
    return OwnRecord(meta["name"], meta["uid"], meta.get("generation", 0), spec, status, error)


def attach(memo: kopf.Memo, kwargs: dict[str, Any]) -> None:
    """Hand the indexes to the loops; kopf calls handlers only once every index is complete."""
    memo["recompute"].attach(
        OwnIndexes(queues=kwargs["queue_index"], policies=kwargs["policy_index"])
    )
    memo["qos"].attach(kwargs["qos_policy_index"])


def _wake(memo: kopf.Memo, kwargs: dict[str, Any]) -> None:
    attach(memo, kwargs)
    memo["recompute"].wake()


@kopf.on.event(*QUEUES)
async def queue_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)


@kopf.on.event(*POLICIES)
async def policy_changed(memo: kopf.Memo, **kwargs: Any) -> None:
    _wake(memo, kwargs)
