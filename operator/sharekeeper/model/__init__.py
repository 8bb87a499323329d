"""Fast trimmed readers of the Kubernetes objects that are not ours (Pods, Nodes, Volcano
PodGroups, metrics.k8s.io usage) into the records the engines read; quantities, conditions,
node annotations, and ``ObjectError``, the one error type for an object that cannot be read.

Belongs here: reading what the API server (or a file) hands us for those kinds, cheaply enough
for 150,000 pods (plain dict access, no pydantic: an import-linter contract), and rendering
node annotations. Our own custom resources are read by the models in ``api``.
Does not belong: API calls, kopf, anything stateful. Imports only ``engine``.
"""
