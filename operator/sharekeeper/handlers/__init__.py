"""The servers the operator answers on: the admission webhook (served by kopf) that gates new
pods, and the liveness and readiness probes.

Thin: a request is answered from what the store and the loops already know. The wiring of the
whole operator is ``runtime``, not here.
"""
