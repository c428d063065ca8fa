"""The container-runtime migration of GlusterFS nodes (``lockkeeper start runtime-migration``, R4).

:mod:`.workflow` (``RuntimeMigrationWorkflow``: preflight, one child per node, post-check),
:mod:`.node` (``RuntimeMigrationNodeWorkflow``: the 22 steps of one node, its host commands, gates
and run-once steps on the kit's host steps), :mod:`.plan` (pure decisions), :mod:`.postcheck` (the package
post-check) and :mod:`.models`. ``SPEC`` is the procedure as the worker registry and the CLI see it.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.spec import PRIORITY_BULK, ProcedureSpec
    from workflows.runtime_migration.models import (
        PROCEDURE_RUNTIME_MIGRATION,
        RuntimeMigrationInput,
        RuntimeMigrationResult,
        RuntimeMigrationStatus,
    )
from workflows.runtime_migration.node import RuntimeMigrationNodeWorkflow
from workflows.runtime_migration.workflow import RuntimeMigrationWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_RUNTIME_MIGRATION,
    priority=PRIORITY_BULK,
    workflow=RuntimeMigrationWorkflow,
    input_model=RuntimeMigrationInput,
    status_model=RuntimeMigrationStatus,
    result_model=RuntimeMigrationResult,
    id_prefix="runtime-migration",
    node_procedure=True,
    children=(RuntimeMigrationNodeWorkflow,),
    activities=("activities.runtime_migration.activities:make_runtime_migration_activities",),
    start="lockkeeper.cli.start.runtime_migration:start_runtime_migration",
    panels="lockkeeper.cli.start.runtime_migration:PANELS",
)

__all__ = ["SPEC", "RuntimeMigrationNodeWorkflow", "RuntimeMigrationWorkflow"]
