"""Sharekeeper: queue shares, overcommit, GPU-proportional reservation and node QoS for Kubernetes.

A functional core (``engine``) inside an imperative shell. The layers, each importing only
those below it (checked by import-linter):

- ``cli``: the command; ``runtime``: the running operator built and wired (under kopf);
- ``handlers``: the admission webhook and the probes;
- ``loops`` (the running operator's rounds) and ``simulate`` (the same from files);
- ``pipeline``: snapshot -> engines -> desired statuses, annotations and actions;
- ``publish`` (diffing), ``cluster`` (the store) and ``kube`` (the only room that talks to the
  API server: watches, lists, the one writer, the Lease, the webhook's certificate);
- ``api`` (our resources' models and CRDs), ``model`` (readers of everyone else's objects);
- ``engine``: pure computation; ``settings``: every setting and its default.
"""

__version__ = "0.1.0"
