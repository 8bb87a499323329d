"""``sharekeeper simulate``: what the operator would publish, computed from files.

Belongs here: reading Kubernetes objects from YAML, calling the engines through the same entry
points as the operator, and rendering the result (table, JSON, YAML).
Does not belong: computation (``engine``) or object parsing (``model``). Never talks to a
cluster. Imports ``model`` and ``engine`` only.
"""
