"""Planning activities that fail fast and stop on abort, for every procedure's planning phase.

A procedure plans from read-only activities (the rollout's preflight, the drain's node read, the
node upgrade's node list, the nodeSelector scan, the runtime and network migrations' preflight
reads, the VXLAN preflight, the first GlusterFS read). Two promises of the operator surface hold
there as everywhere else (issue 18, "Failures are visible and stoppable"):

- an API that cannot be used fails the procedure with the API's error instead of retrying
  forever: the activity reports ``Api*`` failure types and :data:`workflows.kit.calls.PLANNING_RETRY`
  bounds the transient ones (:func:`workflows.kit.calls.planning_api_failure` words the failure);
- ``abort`` works while planning: :func:`planning_call` races the activity against the abort
  and cancels it (while it runs or waits for its next attempt), raising
  :class:`workflows.kit.control.Aborted` so the procedure ends aborted having written nothing;
  :func:`abortable` does the same for a read the procedure starts itself (its own options);
  :func:`planning_read` is :func:`planning_call` with the API failure worded as the procedure's.

Workflow code only (deterministic): the cancellation is a command only when an abort came while
the read ran.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, Control


T = TypeVar("T")


async def abortable(control: Control, work: Awaitable[T]) -> T:
    """Await ``work`` (an activity handle, or a coroutine that runs read-only activities and
    writes nothing) while listening for ``control.abort``; return its result.

    Raises :class:`workflows.kit.control.Aborted` (with the abort's reason) when an abort was
    requested before ``work`` finished: ``work`` is
    cancelled first (an activity in flight gets a cancel request; one waiting for its next attempt
    is not retried). Otherwise whatever ``work`` raises (ActivityError when an activity failed).
    Adds no command while no abort comes.
    """
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(workflow.wait_condition(lambda: control.abort))
    try:
        await workflow.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(ActivityError, asyncio.CancelledError):
            await task
        raise Aborted(control.abort_reason)
    return await task


async def planning_call(
    control: Control,
    name: str,
    arg: Any,
    result_type: type | None,
    *,
    seconds: float,
    timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS,
    retry: RetryPolicy | None = None,
    start_to_close: timedelta | None = None,
    heartbeat: timedelta | None = None,
) -> Any:
    """Run read-only planning activity ``name`` while listening for ``control.abort``; return
    its result.

    By default the activity runs as :func:`workflows.kit.calls.start_planning` starts it
    (:data:`workflows.kit.calls.PLANNING_RETRY`: fails fast on API errors; start-to-close
    ``seconds`` plus the short-call slack; no heartbeat). A procedure with its own read options
    passes ``retry`` (its planning retry policy), ``start_to_close`` (instead of ``seconds`` plus
    the slack) and ``heartbeat`` (the activity's heartbeat timeout; None: it does not heartbeat).

    Raises :class:`workflows.kit.control.Aborted` (with the abort's reason) when an abort was
    requested before the activity finished, and
    ActivityError when the activity fails.
    """
    if retry is None and start_to_close is None and heartbeat is None:
        handle = acts.start_planning(name, arg, result_type, seconds=seconds, timeouts=timeouts)
    else:
        handle = workflow.start_activity(
            name,
            arg,
            result_type=result_type,
            start_to_close_timeout=start_to_close or timedelta(seconds=seconds) + timeouts.short_call,
            heartbeat_timeout=heartbeat,
            retry_policy=retry or acts.PLANNING_RETRY,
            summary=acts.summary_of(name, arg),
        )
    return await abortable(control, handle)


async def planning_read(control: Control, name: str, arg: Any, result_type: type | None, *, what: str = "preflight",
                        **options: Any) -> Any:
    """:func:`planning_call` (``options``: its keywords, ``seconds`` 0 unless given) whose API
    failure is the procedure's: a read the procedure plans from, before it changed anything.

    Raises a non-retryable ApplicationError of the API's ``Api*`` type, "<what> could not use
    the cluster's API: ..." (:func:`workflows.kit.calls.planning_api_failure`), when the API
    cannot be used; :class:`workflows.kit.control.Aborted` on an abort while it runs; the
    ActivityError of any other failure."""
    try:
        return await planning_call(control, name, arg, result_type, **{"seconds": 0, **options})
    except ActivityError as err:
        api = acts.planning_api_failure(err, what)
        if api is not None:
            raise api from err
        raise


def planning_abort_message(control: Control, stop: Aborted) -> str:
    """The result message of a procedure aborted while planning: who aborted and why, and that
    nothing was changed, e.g. ``"aborted by alice while planning: wrong cluster; nothing was
    changed"`` (the reason is left out when it only repeats ``aborted by <who>``)."""
    by = control.abort_by or "unknown"
    reason = stop.reason or control.abort_reason
    head = f"aborted by {by} while planning"
    return f"{head}: {reason}; nothing was changed" if reason and reason != f"aborted by {by}" else f"{head}; nothing was changed"
