"""``sharekeeper simulate``: what the operator would publish, computed from files.

Belongs here: reading Kubernetes objects from YAML into the operator's own store, calling the
same pipeline as the operator (``pipeline``), and rendering the result (table, JSON, YAML), or
explaining one queue or node from it (``explaining``, also for ``sharekeeper explain``).
Does not belong: computation (``engine``), object parsing (``api``, ``model``). Never talks to
a cluster.
"""
