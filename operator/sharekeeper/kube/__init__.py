"""Everything that talks to the API server: the one room with lightkube and HTTP in it.

Reading: the watches that feed the store (``watching``), the one-off list of ``explain``
(``listing``), usage from metrics.k8s.io (``usage``). Writing: ``writing.KubeWriter``, the one
writer (status and annotation patches, Queue mirrors, evictions, resizes, the taint, gate
releases, Events), under one transient-error policy (``transient``). Also the Lease
(``leadership``) and the webhook's certificate (``webhook_tls``). ``kinds`` is the one table of
what we read and write. Nothing here decides: callers say what to write.
"""
