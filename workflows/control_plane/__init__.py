"""The control-plane upgrade (R3d masters): preflight (etcd backup barrier, GlusterFS gate, every
master API ready, etcd health), then master by master, strictly one at a time: the action, this
master's own ``/healthz/ready``, its mirror pods, the GlusterFS gate; an API that does not come
back opens a gate with the ``master-logs`` tail and the next master never starts.

:mod:`.models`, :mod:`.steps` (one master's steps), :mod:`.workflow`. ``SPEC`` for the registry.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.control_plane.models import (
        PROCEDURE_CONTROL_PLANE_UPGRADE,
        ControlPlaneResult,
        ControlPlaneStatus,
        ControlPlaneUpgradeInput,
    )
    from workflows.kit.spec import PRIORITY_CONTROL, ProcedureSpec
from workflows.control_plane.workflow import ControlPlaneUpgradeWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_CONTROL_PLANE_UPGRADE,
    priority=PRIORITY_CONTROL,
    workflow=ControlPlaneUpgradeWorkflow,
    input_model=ControlPlaneUpgradeInput,
    status_model=ControlPlaneStatus,
    result_model=ControlPlaneResult,
    id_prefix="control-plane",
    activities=("activities.control_plane.activities:make_control_plane_activities",),
    start="lockkeeper.cli.start.control_plane:start_control_plane_upgrade",
)

__all__ = ["SPEC", "ControlPlaneUpgradeWorkflow"]
