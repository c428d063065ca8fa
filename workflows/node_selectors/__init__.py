"""The nodeSelector migration (R3e): scan the selectors on old node labels, plan with a capacity
check, patch each object (recorded, ``test``-guarded), wait for its rollout, check that every pod
runs, re-scan, then remove the old labels (recorded); ``lockkeeper revert ID`` puts labels then
selectors back from the records.

:mod:`.plan` (pure), :mod:`.workflow`, :mod:`.models`. ``SPEC`` for the registry and the CLI.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.spec import PRIORITY_BULK, ProcedureSpec
    from workflows.node_selectors.models import (
        PROCEDURE_NODE_SELECTOR_MIGRATION,
        NodeSelectorMigrationInput,
        NodeSelectorMigrationResult,
        NodeSelectorMigrationStatus,
    )
from workflows.node_selectors.workflow import NodeSelectorMigrationWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_NODE_SELECTOR_MIGRATION,
    priority=PRIORITY_BULK,
    workflow=NodeSelectorMigrationWorkflow,
    input_model=NodeSelectorMigrationInput,
    status_model=NodeSelectorMigrationStatus,
    result_model=NodeSelectorMigrationResult,
    id_prefix="node-selectors",
    activities=("activities.node_selectors.activities:make_node_selector_activities",),
    start="lockkeeper.cli.start.node_selectors:start_node_selector_migration",
)

__all__ = ["SPEC", "NodeSelectorMigrationWorkflow"]
