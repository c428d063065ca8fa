"""R5: change the OpenShift SDN VXLAN port on a live 3.11 cluster (``lockkeeper start vxlan-port-change``).

:mod:`.workflow` (``VxlanPortChangeWorkflow``, stages A–H on the kit's run template), :mod:`.sdn`
(every node: image, pods, firewall, the fan-out), :mod:`.masters` (stage F), :mod:`.plan` (pure
decisions, the preconditions, the reverse input) and :mod:`.models`. ``SPEC`` is the procedure as
the worker registry and the CLI see it.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.spec import PRIORITY_BULK, ProcedureSpec
    from workflows.vxlan_port.models import PROCEDURE_VXLAN_PORT, VxlanPortChangeInput, VxlanPortChangeResult, VxlanStatus
from workflows.vxlan_port.workflow import VxlanPortChangeWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_VXLAN_PORT,
    priority=PRIORITY_BULK,
    workflow=VxlanPortChangeWorkflow,
    input_model=VxlanPortChangeInput,
    status_model=VxlanStatus,
    result_model=VxlanPortChangeResult,
    id_prefix="vxlan-port",
    node_procedure=True,
    activities=("activities.vxlan_port.activities:make_vxlan_activities",),
    start="lockkeeper.cli.start.vxlan_port:start_vxlan_port_change",
    panels="lockkeeper.cli.start.vxlan_port:PANELS",
    reverse="workflows.vxlan_port.plan:reverse_input",
)

__all__ = ["SPEC", "VxlanPortChangeWorkflow"]
