"""Typed views of Kubernetes objects and converters into engine inputs.

Belongs here: parsing and validating what the API server (or a file) hands us, quantity
conversion, and turning engine results back into Kubernetes-shaped dicts.
Does not belong: API calls, kopf, anything stateful. Imports only ``engine``.
"""
