"""GlusterFS brick check and recovery (R3a, ``lockkeeper start gluster-recovery``) and the
``gluster_healthy`` gate (:mod:`.health`) other procedures use.

:mod:`.plan` (the pure assessment), :mod:`.workflow` (``GlusterRecoveryWorkflow``),
:mod:`.health`, :mod:`.calls` (activity names and options), :mod:`.models`. ``SPEC`` is the
procedure as the worker registry and the CLI see it.
"""

from temporalio import workflow

# Models come from the host even when the workflow sandbox runs this package's __init__ (see
# workflows.drain): a model class imported fresh inside the sandbox would differ.
with workflow.unsafe.imports_passed_through():
    from workflows.gluster.models import (
        PROCEDURE_GLUSTER_RECOVERY,
        GlusterRecoveryInput,
        GlusterRecoveryResult,
        GlusterRecoveryStatus,
    )
    from workflows.kit.spec import PRIORITY_URGENT, ProcedureSpec
from workflows.gluster.workflow import GlusterRecoveryWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_GLUSTER_RECOVERY,
    priority=PRIORITY_URGENT,
    workflow=GlusterRecoveryWorkflow,
    input_model=GlusterRecoveryInput,
    status_model=GlusterRecoveryStatus,
    result_model=GlusterRecoveryResult,
    id_prefix="gluster-recovery",
    activities=("activities.gluster.activities:make_gluster_activities",),
    start="lockkeeper.cli.start.gluster:start_gluster_recovery",
)

__all__ = ["SPEC", "GlusterRecoveryWorkflow"]
