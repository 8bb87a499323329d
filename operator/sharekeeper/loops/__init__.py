"""The debounced recompute loop and the periodic QoS check.

The only code that sequences snapshot -> engine -> publish.
"""
