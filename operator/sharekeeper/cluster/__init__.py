"""The in-memory cluster model fed by watches: small tuples per node and pod, and aggregates.

The only mutable state of the operator. Handlers write into it; loops read frozen snapshots.
Does not belong: computing results (that is ``engine``) or writing to the API (``publish``).
"""
