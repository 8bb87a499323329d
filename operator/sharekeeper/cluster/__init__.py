"""The in-memory cluster fed by the watches: small records per node and pod, and aggregates.

The only mutable state of the operator: the store (``store``, one sink per kind), the pod
ledger's running totals (``ledger``) and the frozen snapshots the loops read (``snapshots``).
Does not belong: talking to the API server (``kube``), computing results (``engine``).
"""
