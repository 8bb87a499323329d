"""The simulate report: one JSON-shaped dict, built by contributors, one per engine.

A contributor takes the inputs and the simulation context and returns a partial report;
partial reports are merged key by key (``schedulerPolicies.<name>`` may get its share status
from one engine and its ``overcommit`` from another). Adding an engine's section is one call:
``CONTRIBUTORS.append(my_section)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from sharekeeper.engine.shares import ShareSnapshot, deserved_shares
from sharekeeper.model.objects import ModelError
from sharekeeper.model.policies import policy_status
from sharekeeper.model.queues import queue_status
from sharekeeper.simulate.reading import Inputs


@dataclass(frozen=True, slots=True)
class Context:
    now_seconds: float
    seed: int


Contributor = Callable[[Inputs, Context], Mapping[str, Any]]


def share_snapshot(inputs: Inputs, context: Context) -> ShareSnapshot:
    return ShareSnapshot(
        policies=inputs.policies,
        queues=inputs.queues,
        nodes=inputs.nodes,
        pods=inputs.pods,
        pod_groups=inputs.pod_groups,
        now_seconds=context.now_seconds,
        seed=context.seed,
    )


def share_section(inputs: Inputs, context: Context) -> Mapping[str, Any]:
    result = deserved_shares(share_snapshot(inputs, context))
    unknown = [reason.message for reason in result.reasons if reason.kind == "UnknownQueue"]
    if unknown:
        raise ModelError("; ".join(f"{message}, which does not exist" for message in unknown))
    return {
        "queues": {name: queue_status(share) for name, share in sorted(result.queues.items())},
        "schedulerPolicies": {
            name: policy_status(share) for name, share in sorted(result.policies.items())
        },
    }


CONTRIBUTORS: list[Contributor] = [share_section]


def build_report(
    inputs: Inputs, context: Context, contributors: list[Contributor] = CONTRIBUTORS
) -> dict[str, Any]:
    report: dict[str, Any] = {"queues": {}, "schedulerPolicies": {}}
    for contributor in contributors:
        _merge(report, contributor(inputs, context))
    return report


def _merge(into: MutableMapping[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), MutableMapping):
            _merge(into[key], value)
        else:
            into[key] = value
