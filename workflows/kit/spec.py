"""What a procedure is to the worker registry and the CLI: one :class:`ProcedureSpec` per type.

``workflows.PROCEDURES`` is the single list of specs; the worker registers every ``workflow`` and
``children`` class in it, and the CLI finds a run's spec by its workflow type name
(:func:`spec_for_workflow_type`) to validate the ``status`` query with ``status_model`` and pick the
procedure's own panel by ``name``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

TaskQueueKind = Literal["main", "host"]


#: Task priority keys by kind (Temporal: lower goes first; 1..5, default 3). See ``ProcedureSpec.priority``.
PRIORITY_URGENT = 1
PRIORITY_CONTROL = 2
PRIORITY_BULK = 3


@dataclass(frozen=True)
class ProcedureSpec:
    """One procedure type.

    - ``name``: the CLI and search-attribute name ("machineconfig-rollout", "drain", "etcd-backup",
      "etcd-restore").
    - ``workflow``: the workflow class; its workflow type name is the class name and never changes
      (stored histories and running workflows refer to it).
    - ``input_model`` / ``status_model`` / ``result_model``: pydantic models of the run's input, of
      what the ``status`` query returns, and of what the run returns.
    - ``id_prefix``: workflow ID prefix ("rollout", "drain", "etcd-backup", "etcd-restore").
    - ``node_procedure``: the workflow also exposes ``skip_node``, ``retry_node``, ``hold_node``,
      ``release_node`` and ``decide``.
    - ``children``: child workflow classes the worker must register with it.
    - ``task_queue``: "main" (workers with cluster credentials) or "host" (host-only workers run it).
    - ``activities``: the procedure's own activity factories as ``"module:function"`` names; the
      worker imports each and calls it with a zero-argument function that returns the cluster
      gateway (``function(gateway_factory) -> list of activities``). Names, not imports: the
      workflow layer never imports activity implementations (import-linter keeps it so). The
      activities every procedure shares (cluster, host commands and etcd, leases, notify,
      preconditions) are the worker's own.
    - ``start``: the ``lockkeeper start <name>`` command as ``"module:function"`` (a typer
      command; the CLI adds the common options and ``-f input.yaml`` / ``--set key=value``).
    - ``panels``: ``"module:NAME"`` of a ``(status_view, result_view)`` pair the CLI shows below
      the generic status and result; None: the generic views only.
    - ``reverse``: ``"module:function"`` taking (the ended run's input, its workflow ID[, its
      result, None for a failed or terminated run]) and returning the input of a run that
      reverses the whole change (``revert --full`` after the run ended), or None when that run
      left nothing to reverse; None: an ended run's records are restored by the kit's reverse run.
    - ``no_records_revert``: why the kit's reverse run must NOT restore this procedure's records
      after it ended (writing its fields back would not undo the change: a network type needs
      every node rebooted); None: it may. ``revert --full`` then refuses with this reason.
    - ``central``: the run stays on the base task queue even with per-cluster queues
      (``LOCKKEEPER_CLUSTER_QUEUES``, issue 38): it orchestrates other clusters' runs (a campaign)
      and touches no cluster itself; :func:`lockkeeper.starter.procedure_queue`.
    - ``priority``: the Temporal task priority key of its runs (1 highest .. 5 lowest, the
      server's default 3; issue 40). :data:`PRIORITY_URGENT` for what an operator waits on to
      save a cluster (etcd backup and restore, the blocked-drain decision, GlusterFS recovery),
      :data:`PRIORITY_CONTROL` for control-plane and network work, :data:`PRIORITY_BULK` for
      node-by-node rollouts. The starter sets it with the cluster as fairness key; children and
      activities inherit both (:func:`lockkeeper.starter.start_procedure`).

    Adding a procedure is one entry in :data:`workflows.registry.PROCEDURES`: the worker, the CLI
    and the panels read this spec.
    """

    name: str
    workflow: type
    input_model: type[BaseModel]
    status_model: type[BaseModel]
    result_model: type[BaseModel]
    id_prefix: str
    node_procedure: bool = False
    children: tuple[type, ...] = ()
    task_queue: TaskQueueKind = "main"
    activities: tuple[str, ...] = ()
    start: str | None = None
    panels: str | None = None
    reverse: str | None = None
    no_records_revert: str | None = None
    priority: int = 3
    central: bool = False

    @property
    def workflow_type(self) -> str:
        """The Temporal workflow type name (the class name)."""
        return self.workflow.__name__


def spec_for_workflow_type(specs: Iterable[ProcedureSpec], workflow_type: str) -> ProcedureSpec | None:
    """The spec whose workflow type is ``workflow_type``, or None (e.g. a child or lease workflow)."""
    return next((s for s in specs if s.workflow_type == workflow_type), None)


def spec_by_name(specs: Iterable[ProcedureSpec], name: str) -> ProcedureSpec:
    """The spec called ``name``; raises KeyError naming the known procedures when there is none."""
    specs = list(specs)
    for s in specs:
        if s.name == name:
            return s
    raise KeyError(f"unknown procedure {name!r}; known: {', '.join(s.name for s in specs)}")


def resolve(target: str) -> object:
    """The object named ``"module:attribute"`` (a spec's ``activities``, ``start``, ``panels``,
    ``reverse``). Raises ImportError / AttributeError naming the target when it does not exist."""
    import importlib

    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"{target!r} is not 'module:attribute'")
    return getattr(importlib.import_module(module), attr)
