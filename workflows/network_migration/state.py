"""The network migration's reads of ``read_migration_state`` (network configs, pools, nodes).

:func:`read_state` is the one read of the whole run: during the run with the default retry policy
(an API outage is waited out), and as the preflight (``planning``) through
:func:`workflows.kit.planning.planning_call`: the planning retry policy (an API that cannot be
used fails the run at once with its ``Api*`` type) raced against ``abort`` (an abort while it runs
or waits for its next attempt raises Aborted: nothing has been written yet). Workflow code only.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.network_migration.models import MigrationState, MigrationStateInput
    from workflows.kit import calls as acts
    from workflows.kit.control import Control
    from workflows.kit.planning import planning_call

READ_STATE = "read_migration_state"


async def read_state(control: Control, timeouts: acts.Timeouts, *, count_pods: bool = False, planning: bool = False) -> MigrationState:
    """One ``read_migration_state`` (``count_pods``: count the pods still on the old network).

    Raises, with ``planning``: a non-retryable ApplicationError of the API's ``Api*`` type
    ("preflight could not use the cluster's API: ...") when the API cannot be used,
    :class:`workflows.kit.control.Aborted` on an abort while it runs; ActivityError otherwise.
    """
    arg = MigrationStateInput(count_pods=count_pods)
    if not planning:
        return await acts.call(READ_STATE, arg, MigrationState, timeouts=timeouts)
    try:
        return await planning_call(control, READ_STATE, arg, MigrationState, seconds=0, timeouts=timeouts)
    except ActivityError as err:
        api = acts.planning_api_failure(err, "preflight")
        if api is not None:
            raise api from err
        raise
