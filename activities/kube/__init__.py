"""The Kubernetes gateway package: the only part of lockkeeper that imports ``kubernetes``.

- :mod:`activities.kube.gateway`: :class:`~activities.kube.gateway.KubeGateway`, generic verbs
  (get, list, create, patch, delete, watch, evict, exec in a pod) over the resource table.
- :mod:`activities.kube.resources`: the resource table; a new kind costs one line there.
- :mod:`activities.kube.errors`: the project's own API error types.
- :mod:`activities.kube.objects`: pure readers of API objects (plain dicts).

This ``__init__`` imports nothing, so ``activities.kube.objects`` and ``activities.kube.errors``
load without the client (host-only workers, unit tests).
"""
