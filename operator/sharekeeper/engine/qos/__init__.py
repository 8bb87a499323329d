"""Node QoS ensurance: waterlines, precise throttle and eviction, restore (crane.md, fixed).

Belongs here: the pure decisions of one periodic check of one node. Entry points:

- ``check_node(policies, node, state, now) -> NodeCheckResult``: hysteresis, waterlines,
  gaps, plans and the taint decision; ``result.state`` is the state to persist, once
  ``with_releases`` has added the actions the caller saw accepted (``releasing``: what the
  usage sample does not show yet is not acted on twice).
- ``stays_at_rest(policies, node)``: whether a node nothing is remembered of would be left at
  rest by a check (every rule observes calm), so that the check may skip it.
- ``unreachable_rules(policy, nodes, REGISTRY)``: rules no selected node can cross (a value
  at or above every node's capacity, usually a unit mistake), for the status to warn about.
- ``node_actions(result, node) -> Flow``: a sans-I/O generator; it yields ``QosAction`` values,
  the caller sends back ``Outcome.ACCEPTED`` / ``Outcome.REFUSED``, and ``StopIteration.value``
  is the ``PlanReport``. ``accept_all(flow)`` drives it the way ``simulate`` does.

Does not belong: Kubernetes dicts and quantity strings (``model/qos.py``), API calls, clocks
(``now`` is an argument). Must not import other ``engine`` policy packages, kopf, lightkube or
pydantic. ``hysteresis`` owns every state transition; a new metric is one ``MetricSpec``.
"""

from sharekeeper.engine.qos.check import (
    NodeCheckResult,
    NodeQosState,
    RuleKey,
    RuleStatus,
    check_node,
    node_actions,
    stays_at_rest,
)
from sharekeeper.engine.qos.hysteresis import Event, Observation, Phase, RuleState, SchedulingState
from sharekeeper.engine.qos.inputs import (
    Action,
    Candidates,
    CpuThrottle,
    Eviction,
    Objective,
    QosNode,
    QosPod,
    QosPolicy,
    Strategy,
    ThrottleState,
)
from sharekeeper.engine.qos.metrics import REGISTRY, ActionClass, MetricSpec
from sharekeeper.engine.qos.planning import (
    Flow,
    MetricPlan,
    Mode,
    Outcome,
    PlanReport,
    QosAction,
    Skip,
    SkipReason,
    accept_all,
)
from sharekeeper.engine.qos.releasing import Release, Unsampled, with_releases
from sharekeeper.engine.qos.waterlines import Gap, UnreachableRule, Waterline, unreachable_rules
from sharekeeper.engine.selectors import LabelSelector, Requirement

__all__ = [
    "REGISTRY",
    "Action",
    "ActionClass",
    "Candidates",
    "CpuThrottle",
    "Event",
    "Eviction",
    "Flow",
    "Gap",
    "LabelSelector",
    "MetricPlan",
    "MetricSpec",
    "Mode",
    "NodeCheckResult",
    "NodeQosState",
    "Objective",
    "Observation",
    "Outcome",
    "Phase",
    "PlanReport",
    "QosAction",
    "QosNode",
    "QosPod",
    "QosPolicy",
    "Release",
    "Requirement",
    "RuleKey",
    "RuleState",
    "RuleStatus",
    "SchedulingState",
    "Skip",
    "SkipReason",
    "Strategy",
    "ThrottleState",
    "UnreachableRule",
    "Unsampled",
    "Waterline",
    "accept_all",
    "check_node",
    "node_actions",
    "stays_at_rest",
    "unreachable_rules",
    "with_releases",
]
