"""Other admission controllers run beside ours on the same local cluster (``bench_kueue.py``).

``workload`` is the shared, seeded workload and the pure arithmetic of its figures (no cluster,
unit-tested in ``tests/test_peer_workload.py``); ``kueue`` builds, caches and runs Kueue.
"""
