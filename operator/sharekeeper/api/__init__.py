"""Our three custom resources as pydantic v2 models: the one place where a field, its default,
its bounds and its description are written down.

Belongs here: the models of ``Queue``, ``SchedulerPolicy`` and ``NodeQosEnsurancePolicy`` (spec
and status), reading an object through them into engine input (``read``; every error is a
``model.objects.ObjectError`` naming kind/name, the field path and the value; a
NodeQosEnsurancePolicy's status too: the per-node state the QoS check persists and reads back),
``mirroring`` (Volcano's Queue as we read it, and the mirror made of it), and the
CustomResourceDefinitions generated from the models (``crds``; ``sharekeeper crds`` /
``make crds`` writes ``crds/``). ``crds`` reads the models and no model reads ``crds``: what a
model needs to be served (``RootModel``, ``Resource``, ``Column``) is in ``base`` (an
import-linter contract).
Does not belong: Pods, Nodes and PodGroups (``model``'s fast trimmed readers), rendering
status (``pipeline.statuses``, ``pipeline.qos``), API calls.
Imports ``model`` and ``engine`` only.
"""
