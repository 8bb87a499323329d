"""From desired state to the fewest writes: diff what should be against what is there.

Pure: the desired statuses and annotations come from ``pipeline``; what is written is what
differs from the object as the store holds it. Publishers never decide and never call the API:
the loops send what comes out through ``kube.writing``.
"""
