"""lockkeeper's workflows: deterministic orchestration only (see DESIGN.md, "workflows decide").

``workflows.PROCEDURES`` and ``workflows.WORKFLOWS`` are :mod:`workflows.registry`'s.

This package's ``__init__`` imports nothing itself: the workflow sandbox runs the ``__init__`` of
every package above a workflow's module for each new sandboxed run, and importing every procedure
from here made each one re-run all of them (about 100 ms of worker CPU per rollout start and per
continue-as-new, in the run's first workflow task). The names below are resolved on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the module that defines it (resolved lazily, PEP 562).
_EXPORTS: dict[str, str] = {
    "PROCEDURES": "workflows.registry",
    "WORKFLOWS": "workflows.registry",
    "ProcedureSpec": "workflows.kit.spec",
    "LeaseWorkflow": "workflows.kit.lease",
    "NodeDrainWorkflow": "workflows.drain",
    "EtcdBackupWorkflow": "workflows.etcd",
    "EtcdQuorumRestoreWorkflow": "workflows.etcd",
    "MachineConfigRolloutWorkflow": "workflows.machineconfig",
    "NodeRolloutWorkflow": "workflows.machineconfig",
    "PROCEDURE_MACHINECONFIG_ROLLOUT": "workflows.machineconfig.models",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from workflows.drain import NodeDrainWorkflow
    from workflows.etcd import EtcdBackupWorkflow, EtcdQuorumRestoreWorkflow
    from workflows.kit.lease import LeaseWorkflow
    from workflows.kit.spec import ProcedureSpec
    from workflows.machineconfig import MachineConfigRolloutWorkflow, NodeRolloutWorkflow
    from workflows.machineconfig.models import PROCEDURE_MACHINECONFIG_ROLLOUT
    from workflows.registry import PROCEDURES, WORKFLOWS


def __getattr__(name: str) -> Any:
    """``workflows.<name>`` for the names of :data:`_EXPORTS`; AttributeError for any other."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
