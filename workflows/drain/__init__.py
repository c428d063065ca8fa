"""The standalone drain (``lockkeeper start drain``): one node out for maintenance.

:mod:`.workflow` (``NodeDrainWorkflow`` on the kit: drain with the blocked-drain decision, the
reboot command as a host step, the Ready wait as a health wait) and :mod:`.models` (its own
input, status and result). ``SPEC`` is the procedure as the worker registry and the CLI see it.
"""

from temporalio import workflow

# Models come from the host even when the workflow sandbox runs this package's __init__: a model
# class imported fresh inside the sandbox would differ from the one the passed-through modules use.
with workflow.unsafe.imports_passed_through():
    from workflows.drain.models import PROCEDURE_DRAIN, DrainStatus, NodeDrainInput, NodeDrainResult
    from workflows.kit.spec import PRIORITY_URGENT, ProcedureSpec
from workflows.drain.workflow import NodeDrainWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_DRAIN,
    priority=PRIORITY_URGENT,
    workflow=NodeDrainWorkflow,
    input_model=NodeDrainInput,
    status_model=DrainStatus,
    result_model=NodeDrainResult,
    id_prefix="drain",
    node_procedure=True,
    start="lockkeeper.cli.start.drain:start_drain",
    panels="lockkeeper.panels:DRAIN_PANELS",
)

__all__ = ["SPEC", "NodeDrainWorkflow"]
