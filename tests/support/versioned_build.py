"""A second build of lockkeeper's workflow code, for tests/worker/test_versioning.py.

``python -m tests.support.versioned_build`` runs :func:`workers.worker.run_worker` (settings from the
environment, as ``python -m workers.worker``) with one workflow replaced:
:class:`MachineConfigRolloutWorkflowBuild2` under the same workflow type name,
``MachineConfigRolloutWorkflow``. It differs from build 1 in a way no ``workflow.patched`` covers
(a timer before everything else: a build-1 history replayed on it fails with a nondeterminism
error) and in a way a test can see: its result's message starts with :data:`MARK`. A rollout on
build 2 says so in its result; a rollout that started on build 1 and finished there does not.

The module imports only workflow code at load time: the workflow sandbox re-imports it for every
run of the class.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult
from workflows.machineconfig.workflow import MachineConfigRolloutWorkflow

#: The start of every build-2 rollout's result message.
MARK = "[build 2]"


@workflow.defn(name="MachineConfigRolloutWorkflow")
class MachineConfigRolloutWorkflowBuild2(MachineConfigRolloutWorkflow):
    """Build 2's rollout: a 10 ms timer first (a history-changing edit), then the same rollout,
    then its result with :data:`MARK` in front of the message."""

    @workflow.run
    async def run(self, input: MachineConfigRolloutInput) -> MachineConfigRolloutResult:
        await workflow.sleep(timedelta(milliseconds=10))
        result = await super().run(input)
        return result.model_copy(update={"message": f"{MARK} {result.message}"})


def main() -> int:
    """Run a worker of this build until SIGTERM; exit codes as ``python -m workers.worker``."""
    import asyncio
    import sys

    # By its module name, not as __main__: the sandbox re-imports a workflow class's module.
    from tests.support.versioned_build import MachineConfigRolloutWorkflowBuild2 as Build2
    from workers.logging import configure_logging
    from workers.registry import all_workflows
    from workers.settings import SettingsError, load_settings
    from workers.versioning import VersioningRefused
    from workers.worker import run_worker

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    workflows = [Build2 if w is MachineConfigRolloutWorkflow else w for w in all_workflows()]
    assert Build2 in workflows
    try:
        asyncio.run(run_worker(settings, workflows=workflows))
    except VersioningRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    import os
    import sys

    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
