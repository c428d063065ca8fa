"""Read ``projectConfig.defaultNodeSelector`` from each master's ``master-config.yaml`` (R3e scan,
procedures-spec §5.3 step 1: "``grep``/YAML read over host commands").

``cat`` runs through the generic ``run_node_command`` activity on the master's host access (SSH,
debug pod or local), the same executor as the control-plane steps. Read-only, so retried like
any read.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult, RunCommandInput
    from workflows.kit import calls as acts
    from workflows.node_selectors.models import NodeSelectorMigrationInput
    from activities.preflight.models import MasterConfigError, default_node_selector



async def read_master_selectors(input: NodeSelectorMigrationInput, timeouts: acts.Timeouts) -> tuple[dict[str, str], dict[str, str]]:
    """``(selectors, errors)``: master → ``defaultNodeSelector`` (``""`` when unset) for every
    master whose file was read and parsed, and master → why it could not be (exit code and
    stderr, or the YAML problem). Activity failures after the retries propagate."""
    selectors: dict[str, str] = {}
    errors: dict[str, str] = {}
    for m in input.masters:
        cmd = RunCommandInput(access=m.access, argv=["cat", input.master_config_path], timeout_seconds=30)
        res: CommandResult = await workflow.execute_activity(
            acts.RUN_NODE_COMMAND, cmd,
            result_type=CommandResult, start_to_close_timeout=timedelta(seconds=cmd.bound_seconds()) + timeouts.short_call,
            heartbeat_timeout=timeouts.heartbeat, retry_policy=RetryPolicy(maximum_attempts=3),
        )
        if not res.ok:
            errors[m.name] = f"cat {input.master_config_path} exited {res.exit_code}: {(res.stderr or res.stdout).strip()[-300:]}"
            continue
        try:
            selectors[m.name] = default_node_selector(res.stdout)
        except MasterConfigError as exc:
            errors[m.name] = f"{input.master_config_path}: {exc}"
    return selectors, errors
