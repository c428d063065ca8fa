"""Sending a decision (an operator Update): confirmed or never happens (issue 18).

:func:`update` stamps the input (:func:`stamp_decision`: ``sent_at``, ``deadline``,
``connection_identity``, ``request_id``), sends it with ``request_id`` as the Temporal update ID
and waits at most ``LOCKKEEPER_DECISION_TIMEOUT`` seconds. Whenever it stops waiting without an
answer (the wait ran out, Ctrl-C) it withdraws the request (:func:`withdraw`: the
``withdraw_decision`` signal, :mod:`workflows.kit.decisions`), so a worker that comes back later
refuses it and the history records who withdrew it and why. Then it says what is true:

- no answer in time: nothing was decided, exit 3 (naming the task queue and its pollers);
- Ctrl-C: "interrupted; nothing was decided: ..." exit 130, or, when a worker applied the
  decision before the withdrawal reached it, "interrupted, but the approve was already applied:
  ..."; if the withdrawal could not be sent, that the decision may still apply until its deadline.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from lockkeeper.cli.common import EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, CliError, Output, check_identity, connect, err

#: Seconds the CLI spends withdrawing a request it gave up on (signal, then a look at the update).
WITHDRAW_SECONDS = 4.0


async def update(settings: Any, wid: str, name: str, arg: Any, result_type: type, output: str, who: str) -> int:
    """Send Update ``name`` with ``arg`` to workflow ``wid`` and print its answer (the message on
    stderr for a table, the whole answer as JSON/YAML on stdout).

    A decision is confirmed or never happens (issue 18): when ``arg`` is a model with the
    :class:`workflows.kit.models.OperatorInput` fields, it is sent with ``sent_at`` = now,
    ``deadline`` = now + ``settings.decision_timeout`` (``LOCKKEEPER_DECISION_TIMEOUT``, default
    30 s) less a margin (:func:`decision_deadline`), and ``connection_identity`` = the client
    certificate's CN (None without one). The CLI waits for the answer at most
    ``decision_timeout`` seconds; then it withdraws the request (:func:`withdraw`) and a worker
    that picks the update up later refuses it (past its deadline, or withdrawn), so no answer
    means nothing was decided: raises :class:`CliError` exit 3 naming the task queue and whether
    any worker polls it. Ctrl-C (the task cancelled) withdraws too and raises :class:`CliError`
    exit 130 with what is true (see the module doc). An input
    without a deadline (a procedure's own update model) is waited for as long, and the message
    says that it may still be applied later.

    Errors: ``who`` differing from the certificate's CN → :class:`CliError` exit 2 before
    connecting; a missing workflow exit 3; a validator's refusal per :func:`map_exception`.
    """
    conn_identity = check_identity(settings, who)
    client = await connect(settings, identity=who)
    handle = client.get_workflow_handle(wid)
    desc = await handle.describe()  # NOT_FOUND → exit 3 with the ID in the message
    wait = float(getattr(settings, "decision_timeout", None) or DECISION_TIMEOUT)
    arg, deadline = stamp_decision(arg, wait, conn_identity)
    from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError

    rid = getattr(arg, "request_id", None)
    try:
        res = await asyncio.wait_for(handle.execute_update(name, arg, id=rid, result_type=result_type), wait)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        state, _ = await withdraw(handle, rid, name, who, f"no worker answered within {wait:.0f}s") if rid else ("", "")
        note = f", withdrawn (request {rid})" if state == "withdrawn" else ""
        raise CliError(await no_answer(client, desc.task_queue, name, wait, deadline, note), EXIT_NOT_FOUND) from None
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # Ctrl-C: withdraw before leaving (a second Ctrl-C exits at once)
        raise CliError(await interrupted(handle, rid, name, who, deadline), EXIT_INTERRUPTED) from None
    from lockkeeper import output as out

    if output == Output.TABLE:
        err(getattr(res, "message", str(res)))
    else:
        print(out.dump(res, output))
    return EXIT_OK


#: Default seconds a decision waits for a worker (``Settings.decision_timeout`` overrides it).
DECISION_TIMEOUT = 30.0
#: At most this many seconds of the wait are kept between the deadline the workflow checks and
#: the moment the CLI gives up: the time a worker needs to apply an update it accepted just before
#: its deadline and answer, plus clock skew between this machine and the Temporal server.
DECISION_MARGIN = 2.0


def decision_deadline(sent_at: Any, wait: float) -> Any:
    """The deadline sent with a decision: ``sent_at`` + ``wait`` less
    min(:data:`DECISION_MARGIN`, ``wait``/5) seconds, so an update the workflow accepts before
    it is answered before the CLI stops waiting (``wait`` seconds after ``sent_at``)."""
    from datetime import timedelta

    return sent_at + timedelta(seconds=wait - min(DECISION_MARGIN, wait / 5))


def stamp_decision(arg: Any, wait: float, connection_identity: str | None) -> tuple[Any, Any]:
    """``arg`` with ``sent_at`` (now, UTC), ``deadline`` (:func:`decision_deadline`) and
    ``connection_identity`` and a fresh ``request_id`` (also the Temporal update ID) set where its model declares them (pydantic models; anything else
    is sent unchanged). Returns (the input to send, its deadline or None when it has none)."""
    import uuid
    from datetime import UTC, datetime

    fields = getattr(type(arg), "model_fields", None)
    if not fields or "deadline" not in fields:
        return arg, None
    now = datetime.now(UTC)
    deadline = decision_deadline(now, wait)
    changes: dict[str, Any] = {"deadline": deadline}
    if "request_id" in fields:
        changes["request_id"] = f"lk-{uuid.uuid4()}"
    if "sent_at" in fields:
        changes["sent_at"] = now
    if "connection_identity" in fields:
        changes["connection_identity"] = connection_identity
    return arg.model_copy(update=changes), deadline


async def no_answer(client: Any, task_queue: str, name: str, wait: float, deadline: Any, withdrawn: str = "") -> str:
    """The one-line message for an update nobody answered within ``wait`` seconds: nothing was
    decided (or, for an input without ``deadline``, that it may still apply later), and
    whether a worker polls the workflow's ``task_queue``; ``withdrawn`` is inserted after the
    expiry (", withdrawn (request ID)" when :func:`withdraw` recorded it)."""
    from lockkeeper.starter import POLLER_FRESH_SECONDS, task_queue_pollers

    try:
        pollers = await asyncio.wait_for(task_queue_pollers(client, task_queue), 5)
        if pollers:
            why = f"workers polled task queue {task_queue!r} recently ({', '.join(pollers)}) but none answered"
        else:
            why = f"no worker polls task queue {task_queue!r} (none in the last {POLLER_FRESH_SECONDS:.0f}s): start `lockkeeper worker` on it"
    except Exception:  # noqa: BLE001 - only the hint is lost
        why = f"does a worker poll task queue {task_queue!r}?"
    if deadline is None:
        return (
            f"no worker answered {name} within {wait:.0f}s ({why}); this update carries no deadline, so a worker that "
            "picks it up later still applies it: check `lockkeeper status` before sending it again"
        )
    return (
        f"nothing was decided: no worker answered within {wait:.0f}s ({why}); the {name} expired at "
        f"{deadline.isoformat(timespec='seconds')}{withdrawn} and a worker that picks it up later refuses it"
    )


async def withdraw(handle: Any, rid: str, name: str, who: str, reason: str) -> tuple[str, str]:
    """Withdraw update ``rid`` (``name``) of workflow ``handle``: send the ``withdraw_decision``
    signal, then look at the update's outcome for up to about :data:`WITHDRAW_SECONDS`.

    Returns (state, detail): ``withdrawn`` (the signal is in history ahead of the queued update:
    a worker refuses it), ``applied`` (a worker answered before: detail is its message),
    ``refused`` (a validator refused it meanwhile: detail is why), ``ended`` (the workflow has
    ended: nothing can apply it), or ``unknown`` (the signal could not be sent: detail is why).
    Never raises except on cancellation."""
    from datetime import UTC, datetime

    from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
    from temporalio.service import RPCError, RPCStatusCode

    from workflows.kit.decisions import WITHDRAW_SIGNAL, WithdrawInput

    w = WithdrawInput(request_id=rid, update=name, identity=who, reason=reason, sent_at=datetime.now(UTC))
    try:
        await handle.signal(WITHDRAW_SIGNAL, w, rpc_timeout=timedelta(seconds=WITHDRAW_SECONDS))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return "ended", str(exc)
        return "unknown", str(exc)
    except Exception as exc:  # noqa: BLE001 - reported to the operator, not lost
        return "unknown", f"{type(exc).__name__}: {exc}"
    try:
        res = await asyncio.wait_for(
            handle.get_update_handle(rid).result(rpc_timeout=timedelta(seconds=WITHDRAW_SECONDS / 2)), WITHDRAW_SECONDS)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        return "refused", str(getattr(cause, "message", None) or cause or exc)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError, RPCError):
        return "withdrawn", ""  # not accepted; the withdrawal comes first in the history
    return "applied", str(getattr(res, "message", None) or res)


async def interrupted(handle: Any, rid: str | None, name: str, who: str, deadline: Any) -> str:
    """The one line for Ctrl-C while ``name`` waited for its answer (after :func:`withdraw`)."""
    if rid is None:
        return (f"interrupted; the {name} carries no deadline, so a worker that picks it up later still applies it: "
                f"check `lockkeeper status {handle.id}`")
    state, detail = await withdraw(handle, rid, name, who, "interrupted at the CLI (Ctrl-C)")
    if state == "withdrawn":
        return f"interrupted; nothing was decided: the {name} (request {rid}) is withdrawn and a worker refuses it"
    if state == "refused":
        return f"interrupted; nothing was decided: {detail}"
    if state == "ended":
        return f"interrupted; nothing was decided: {handle.id} has ended"
    if state == "applied":
        return f"interrupted, but the {name} was already applied: {detail}"
    until = f" before {deadline.isoformat(timespec='seconds')}" if deadline is not None else ""
    return (f"interrupted; the {name} (request {rid}) could not be withdrawn ({detail}): a worker that picks it up{until} "
            f"still applies it; check `lockkeeper status {handle.id}`")
