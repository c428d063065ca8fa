"""Preconditions as data, checked before a procedure's first write (DESIGN.md "The safety contract").

- :mod:`.models`: the :data:`~activities.preflight.models.Precondition` kinds and their results
  (pure pydantic; workflows and the CLI import this module alone);
- :mod:`.ports`: the well-known port table and the ``ss`` output parser (pure);
- :mod:`.references`: who references a node label (pure scanners of workloads, namespaces and
  ``master-config.yaml``);
- :mod:`.versions`: Kubernetes/OpenShift version parsing and the kubelet skew rule (pure);
- :mod:`.activities`: the ``check_preconditions`` activity.

Imports nothing, so workflows can import :mod:`activities.preflight.models` alone.
"""
