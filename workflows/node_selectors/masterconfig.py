"""Read ``projectConfig.defaultNodeSelector`` from each master's ``master-config.yaml`` (R3e scan,
procedures-spec §5.3 step 1: "``grep``/YAML read over host commands").

``cat`` runs through the kit's :meth:`workflows.kit.host.HostSteps.command` on the master's host
access (SSH, debug pod or local), the same executor as the control-plane steps. Read-only, so
retried like any read (three attempts).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult
    from workflows.kit.host import HostSteps
    from workflows.node_selectors.models import NodeSelectorMigrationInput
    from activities.preflight.models import MasterConfigError, default_node_selector



async def read_master_selectors(input: NodeSelectorMigrationInput, host: HostSteps) -> tuple[dict[str, str], dict[str, str]]:
    """``(selectors, errors)``: master → ``defaultNodeSelector`` (``""`` when unset) for every
    master whose file was read and parsed, and master → why it could not be (exit code and
    stderr, or the YAML problem). Activity failures after the retries propagate."""
    selectors: dict[str, str] = {}
    errors: dict[str, str] = {}
    for m in input.masters:
        res: CommandResult = await host.command(["cat", input.master_config_path], m.access, timeout_seconds=30,
                                                retry=RetryPolicy(maximum_attempts=3))
        if not res.ok:
            errors[m.name] = f"cat {input.master_config_path} exited {res.exit_code}: {(res.stderr or res.stdout).strip()[-300:]}"
            continue
        try:
            selectors[m.name] = default_node_selector(res.stdout)
        except MasterConfigError as exc:
            errors[m.name] = f"{input.master_config_path}: {exc}"
    return selectors, errors
