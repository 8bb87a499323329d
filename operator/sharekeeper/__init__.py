"""Sharekeeper: queue shares, overcommit, GPU-proportional reservation and node QoS for Kubernetes.

The package is a functional core (``engine``) inside an imperative shell. Imports point one way:
cli > handlers > loops > publish | cluster > model > engine (checked by import-linter).
"""

__version__ = "0.1.0"
