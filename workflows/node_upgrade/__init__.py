"""The node upgrade (R3d nodes): nodes by label in openshift-ansible ``serial`` batches with a
canary first, each node cordoned, drained, upgraded by a pluggable action, seen Ready at the
target kubelet version and uncordoned; the GlusterFS gate after a batch with a GlusterFS host.

:mod:`.plan` (pure: selection, serial arithmetic, canary, stop rule), :mod:`.node` (one node),
:mod:`.workflow` (the batches), :mod:`.models`. ``SPEC`` is the procedure for the registry and CLI.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.spec import PRIORITY_BULK, ProcedureSpec
    from workflows.node_upgrade.models import PROCEDURE_NODE_UPGRADE, NodeUpgradeInput, NodeUpgradeResult, NodeUpgradeStatus
from workflows.node_upgrade.node import NodeUpgradeNodeWorkflow
from workflows.node_upgrade.workflow import NodeUpgradeWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_NODE_UPGRADE,
    priority=PRIORITY_BULK,
    workflow=NodeUpgradeWorkflow,
    input_model=NodeUpgradeInput,
    status_model=NodeUpgradeStatus,
    result_model=NodeUpgradeResult,
    id_prefix="node-upgrade",
    node_procedure=True,
    children=(NodeUpgradeNodeWorkflow,),
    activities=("activities.node_upgrade.activities:make_node_upgrade_activities",),
    start="lockkeeper.cli.start.node_upgrade:start_node_upgrade",
)

__all__ = ["SPEC", "NodeUpgradeNodeWorkflow", "NodeUpgradeWorkflow"]
