"""lockkeeper's workflows: deterministic orchestration only (see DESIGN.md, "workflows decide").

``WORKFLOWS`` is the list the worker registers. Models live in :mod:`workflows.models`.
"""

from workflows.lease import LeaseWorkflow
from workflows.machineconfig_rollout import MachineConfigRolloutWorkflow
from workflows.models import PROCEDURE_MACHINECONFIG_ROLLOUT
from workflows.node_rollout import NodeRolloutWorkflow

WORKFLOWS = [MachineConfigRolloutWorkflow, NodeRolloutWorkflow, LeaseWorkflow]

__all__ = [
    "WORKFLOWS",
    "PROCEDURE_MACHINECONFIG_ROLLOUT",
    "LeaseWorkflow",
    "MachineConfigRolloutWorkflow",
    "NodeRolloutWorkflow",
]
