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
    - ``node_procedure``: the workflow also exposes ``skip_node``, ``retry_node`` and ``decide``.
    - ``children``: child workflow classes the worker must register with it.
    - ``task_queue``: "main" (workers with cluster credentials) or "host" (host-only workers run it).
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
