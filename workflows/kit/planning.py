"""Planning activities that fail fast and stop on abort, for every procedure's planning phase.

A procedure plans from read-only activities (the rollout's preflight). Two promises of the
operator surface hold there as everywhere else (issue 18, "Failures are visible and stoppable"):

- an API that cannot be used fails the procedure with the API's error instead of retrying
  forever: the activity reports ``Api*`` failure types and :data:`workflows.kit.calls.PLANNING_RETRY`
  bounds the transient ones (:func:`workflows.kit.calls.planning_api_failure` words the failure);
- ``abort`` works while planning: :func:`planning_call` races the activity against the abort
  and cancels it (while it runs or waits for its next attempt), raising
  :class:`workflows.kit.control.Aborted` so the procedure ends aborted having written nothing.

Workflow code only (deterministic). The cancellation is a new command, so it happens only in runs
with :data:`PATCH_ABORT_IN_PLANNING`; runs recorded before wait for the activity as they did.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, Control

#: workflow.patched ID: an abort requested while a planning activity runs cancels it and ends the
#: procedure; runs recorded before waited for the activity to finish.
PATCH_ABORT_IN_PLANNING = "abort-in-planning"


async def planning_call(
    control: Control,
    name: str,
    arg: Any,
    result_type: type | None,
    *,
    seconds: float,
    timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS,
) -> Any:
    """Run read-only planning activity ``name`` (:func:`workflows.kit.calls.start_planning`:
    fails fast on API errors, start-to-close ``seconds`` plus the short-call slack) while
    listening for ``control.abort``; return its result.

    Raises :class:`workflows.kit.control.Aborted` (with the abort's reason) when an abort was
    requested before the activity finished (runs with :data:`PATCH_ABORT_IN_PLANNING`), and
    ActivityError when the activity fails.
    """
    handle = acts.start_planning(name, arg, result_type, seconds=seconds, timeouts=timeouts)
    stop = asyncio.ensure_future(workflow.wait_condition(lambda: control.abort))
    try:
        await workflow.wait([handle, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if not handle.done() and workflow.patched(PATCH_ABORT_IN_PLANNING):
        handle.cancel()
        with contextlib.suppress(ActivityError, asyncio.CancelledError):
            await handle
        raise Aborted(control.abort_reason)
    return await handle
