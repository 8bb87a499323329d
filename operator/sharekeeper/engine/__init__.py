"""Pure computation: plain typed values in, plain typed values out.

Belongs here: the share policies, overcommit, proportional reservation, QoS planning.
Does not belong: anything that reads a clock, a random source, the network or a file, and any
import of kopf, lightkube, pydantic or yaml. Amounts are integers in internal units (see
``sharekeeper.model.quantities``); the engine never parses Kubernetes quantity strings.
"""
