"""The running operator's loops: the debounced share round (``recompute``, with reclaim's
evictions and the admission gate's releases), the periodic QoS check (``qos``) and Volcano
Queue mirroring (``mirroring``).

The only code that sequences store snapshot -> pipeline -> publish -> ``kube.writing``.
"""
