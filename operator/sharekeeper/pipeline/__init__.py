"""The one sequence from a snapshot to what gets published: engines in, desired statuses, node
annotations and QoS plans out, as Kubernetes-shaped values.

``loops/`` (the running operator) and ``simulate/`` call the same functions here, so what
simulate prints is what the operator writes, by construction: ``shares.publication`` for queue
shares, overcommit, proportional reservation, the admission gate and reclaim (``reclaiming``
builds reclaim's inputs; ``statuses`` renders Queue and SchedulerPolicy status and why a held
pod waits), ``qos.cluster_check`` and its renderers for node QoS; ``mirroring`` decides which
Queues mirror Volcano's.
Does not belong: reading objects (``api``, ``model``), diffing (``publish``), writing
(``kube``), the event loop (``loops``). Imports ``publish.diffing``, ``api``, ``model``,
``engine``.
"""
