"""The MachineConfig rollout (R1, R2): lockkeeper standing in for the machine-config-controller.

:mod:`.plan` (pure planning), :mod:`.node` (one node through the MCO handshake), :mod:`.workflow`
(pools through the kit's node window), :mod:`.network_repair` (R1's completion) and
:mod:`.models`. ``SPEC`` is the procedure as the worker registry and the CLI see it.
"""

from temporalio import workflow

# Models come from the host even when the workflow sandbox runs this package's __init__: a model
# class imported fresh inside the sandbox would differ from the one the passed-through modules use.
with workflow.unsafe.imports_passed_through():
    from workflows.kit.spec import PRIORITY_BULK, ProcedureSpec
    from workflows.machineconfig.models import (
        PROCEDURE_MACHINECONFIG_ROLLOUT, MachineConfigRolloutInput, MachineConfigRolloutResult, RolloutStatus,
    )
from workflows.machineconfig.node import NodeRolloutWorkflow
from workflows.machineconfig.workflow import MachineConfigRolloutWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_MACHINECONFIG_ROLLOUT,
    priority=PRIORITY_BULK,
    workflow=MachineConfigRolloutWorkflow,
    input_model=MachineConfigRolloutInput,
    status_model=RolloutStatus,
    result_model=MachineConfigRolloutResult,
    id_prefix="rollout",
    node_procedure=True,
    children=(NodeRolloutWorkflow,),
    activities=("activities.machineconfig.activities:make_machineconfig_activities",
                "activities.machineconfig.handshake:make_handshake_activities"),
    start="lockkeeper.cli.start.machineconfig:start_machineconfig_rollout",
    panels="lockkeeper.panels:ROLLOUT_PANELS",
)

__all__ = ["SPEC", "MachineConfigRolloutWorkflow", "NodeRolloutWorkflow"]
