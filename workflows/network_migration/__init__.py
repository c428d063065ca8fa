"""The SDN→OVN-Kubernetes network migration (issue 15, R1 prevented):
``lockkeeper start network-migration``.

:mod:`.workflow` (``NetworkMigrationWorkflow``), :mod:`.guard` (the ``pools-settled`` predicate
on the kit guard :mod:`workflows.kit.guard`, which any procedure can require), :mod:`.plan`
(pure), :mod:`.models`. ``SPEC`` is the procedure as the worker registry and the CLI see it.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.spec import PRIORITY_CONTROL, ProcedureSpec
    from workflows.network_migration.models import (
        PROCEDURE_NETWORK_MIGRATION,
        NetworkMigrationInput,
        NetworkMigrationResult,
        NetworkMigrationStatus,
    )
from workflows.network_migration.workflow import NetworkMigrationWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_NETWORK_MIGRATION,
    priority=PRIORITY_CONTROL,
    workflow=NetworkMigrationWorkflow,
    input_model=NetworkMigrationInput,
    status_model=NetworkMigrationStatus,
    result_model=NetworkMigrationResult,
    id_prefix="network-migration",
    activities=("activities.network_migration.activities:make_network_migration_activities",),
    start="lockkeeper.cli.start.network_migration:start_network_migration",
    panels="lockkeeper.panels_network:PANELS",
    reverse="workflows.network_migration.plan:reverse_input",
    no_records_revert=("a network type is not put back by writing its fields: every node must be rebooted onto the old "
                       "type; run the documented rollback the aborted outcome lists in next_commands (lockkeeper status ID)"),
)

__all__ = ["SPEC", "NetworkMigrationWorkflow"]
