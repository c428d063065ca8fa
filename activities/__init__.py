"""lockkeeper's side effects, cut along the same seam as ``workflows/``: generic parts below,
one package per procedure beside them.

- :mod:`activities.kube`: the Kubernetes gateway (the only importer of ``kubernetes``), its
  resource table, error types and pure object readers.
- :mod:`activities.host`: host commands (local, SSH, debug-pod executors) and ``run_node_command``.
- :mod:`activities.cluster`: generic node, drain, workload and record activities.
- :mod:`activities.machineconfig`, :mod:`activities.etcd`: procedure activities.
- :mod:`activities.context`: heartbeat, cancellation and failure helpers.

Workflows import only the ``models`` modules (plain pydantic models); nothing here is imported
up front, so ``import activities.cluster.models`` loads no client.
"""
