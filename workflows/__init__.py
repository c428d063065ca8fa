"""lockkeeper's workflows: deterministic orchestration only (see DESIGN.md, "workflows decide").

``WORKFLOWS`` is the list the worker registers. Models live in :mod:`workflows.models`.
"""

from workflows.etcd_backup import EtcdBackupWorkflow
from workflows.etcd_restore import EtcdQuorumRestoreWorkflow
from workflows.lease import LeaseWorkflow
from workflows.machineconfig_rollout import MachineConfigRolloutWorkflow
from workflows.models import PROCEDURE_MACHINECONFIG_ROLLOUT
from workflows.node_drain import NodeDrainWorkflow
from workflows.node_rollout import NodeRolloutWorkflow

WORKFLOWS = [MachineConfigRolloutWorkflow, NodeRolloutWorkflow, LeaseWorkflow]
WORKFLOWS.append(NodeDrainWorkflow)
#: etcd backup (barrier) and quorum restore (R3); their activities need no kubeconfig.
WORKFLOWS += [EtcdBackupWorkflow, EtcdQuorumRestoreWorkflow]

__all__ = [
    "WORKFLOWS",
    "EtcdBackupWorkflow",
    "EtcdQuorumRestoreWorkflow",
    "PROCEDURE_MACHINECONFIG_ROLLOUT",
    "LeaseWorkflow",
    "MachineConfigRolloutWorkflow",
    "NodeRolloutWorkflow",
    "NodeDrainWorkflow",
]
