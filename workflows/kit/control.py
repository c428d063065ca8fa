"""Control: a procedure's pause / resume / abort state, shared by its gates, batches and steps.

DESIGN.md "Procedure": pause starts nothing new (work in flight finishes), resume continues, abort
starts nothing more and stops what runs at its next safe point. The state lives here so the gates
(a rejected or timed-out gate pauses or aborts) and the procedure's own loop read the same flags.
``on_change`` is called after every change (the procedure's ``touch``: updated_at, the status
search attribute, the gates gauge); ``on_abort(identity)`` lets the procedure pass the abort on
(the rollout signals its node runs).

Deterministic: no I/O; call from workflow code only (it logs with ``workflow.logger``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.decisions import withdrawn
    from workflows.kit.models import FINAL_PHASES, ProcedurePhase


def _field(input: Any, name: str) -> Any:
    """``input.name`` or ``input[name]`` (a model or the dict a CLI sent), else None."""
    if isinstance(input, Mapping):
        return input.get(name)
    return getattr(input, name, None)


def _when(value: Any) -> datetime | None:
    """A datetime from a model field or a dict's ISO-8601 string (None when absent/unreadable)."""
    if value is not None and not isinstance(value, datetime):
        try:
            value = datetime.fromisoformat(str(value))
        except ValueError:
            return None
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)  # a naive time is taken as UTC (models.py: times are UTC)
    return value


def check_in_time(input: Any, update: str) -> None:
    """Validator check every operator update makes first (issue 18 "Decisions are confirmed or
    never happen"): refuse an update whose ``deadline`` is before ``workflow.now()``, and one
    whose ``connection_identity`` (the sender's credential) differs from its ``identity``, and
    one its sender withdrew (``request_id`` named by a ``withdraw_decision`` signal, see
    :mod:`workflows.kit.decisions`: the CLI gave up waiting for it).

    ``input``: any model or dict with the :class:`workflows.kit.models.OperatorInput` fields
    (duck-typed: missing fields are not checked, so stored histories and older clients work).
    ``update``: the update's name for the message.

    Raises ValueError (the update's rejection: the sender's CLI prints it, exit 2). A refused
    update never reaches the workflow history (Temporal records only accepted updates), so the
    refusal is also logged here with ``workflow.logger`` at warning: it shows in the worker's
    log with the workflow ID. Call from validators only (validators do not run on replay).
    """
    gone = withdrawn(_field(input, "request_id"))
    if gone is not None:
        when = gone.sent_at.isoformat(timespec="seconds") if gone.sent_at else "an unknown time"
        msg = (f"{update} by {_field(input, 'identity') or '?'}: withdrawn by {gone.identity or 'its sender'} at {when} "
               f"({gone.reason or 'no reason given'}): refused, nothing was decided")
        workflow.logger.warning("%s", msg)
        raise ValueError(msg)
    deadline = _when(_field(input, "deadline"))
    now = workflow.now()
    if deadline is not None and deadline < now:
        sent = _when(_field(input, "sent_at"))
        who = _field(input, "identity") or "?"
        msg = (
            f"{update} by {who}: decision sent at {sent.isoformat() if sent else 'an unknown time'}, "
            f"deadline {deadline.isoformat()}, arrived at {now.isoformat()}: refused, nothing was decided"
        )
        workflow.logger.warning("%s", msg)
        raise ValueError(msg)
    conn, identity = _field(input, "connection_identity"), _field(input, "identity")
    if conn is not None and identity is not None and conn != identity:
        msg = f"{update}: identity {identity!r} differs from the connection's identity {conn!r}: refused, nothing was decided"
        workflow.logger.warning("%s", msg)
        raise ValueError(msg)


class Aborted(Exception):
    """Raised by :meth:`Control.safe_point` when an abort was requested: the procedure stops
    at this step boundary (``reason`` says who and why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RevertRequested(Exception):
    """Raised by :meth:`Control.safe_point` when a revert was requested (and no abort): the
    procedure stops at this step boundary and restores what its records hold."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(eq=False)
class Control:
    """Pause/abort flags and reasons plus the procedure's base phase.

    Keywords only: ``on_change`` (called after every flag change), ``on_abort(identity)``,
    ``base_phase``: the phase the procedure itself sets (planning, running, completing, done,
    aborted, failed, rejected); :meth:`phase` overlays paused and waiting-approval on running;
    ``noun``: the procedure in messages.
    """

    _: KW_ONLY
    on_change: Callable[[], None] = lambda: None
    on_abort: Callable[[str], None] = lambda identity: None
    base_phase: str = ProcedurePhase.RUNNING
    noun: str = "procedure"
    paused: bool = field(default=False, init=False)
    paused_reason: str | None = field(default=None, init=False)
    abort: bool = field(default=False, init=False)
    abort_reason: str = field(default="", init=False)
    abort_by: str | None = field(default=None, init=False)
    #: A ``revert`` was requested (by whom, why): every wait stops and the procedure restores.
    revert: bool = field(default=False, init=False)
    revert_reason: str = field(default="", init=False)
    revert_by: str | None = field(default=None, init=False)
    #: What the procedure did that a revert inside the run can no longer undo (None: not yet).
    point_of_no_return: str | None = field(default=None, init=False)

    # --- state ---------------------------------------------------------------------------------

    def finished(self) -> bool:
        """True once the base phase is final (done, aborted, failed, rejected)."""
        return str(self.base_phase) in FINAL_PHASES

    def phase(self, *, gates_waiting: bool) -> str:
        """The phase to show: the base phase unless running; then paused, waiting-approval
        (a gate waits) or running."""
        if self.base_phase != ProcedurePhase.RUNNING:
            return self.base_phase
        if self.paused:
            return ProcedurePhase.PAUSED
        if gates_waiting:
            return ProcedurePhase.WAITING_APPROVAL
        return ProcedurePhase.RUNNING

    # --- changes -------------------------------------------------------------------------------

    def pause(self, reason: str, by: str | None = None) -> None:
        """Pause with ``reason`` (kept for ``status``); logged once when newly paused."""
        if not self.paused:
            workflow.logger.warning("%s paused: %s", self.noun, reason)
        self.paused = True
        self.paused_reason = reason
        self.on_change()

    def resume(self, by: str) -> None:
        """Clear the pause (``by`` is logged)."""
        self.paused = False
        self.paused_reason = None
        workflow.logger.info("%s resumed by %s", self.noun, by)
        self.on_change()

    def unpause_quietly(self) -> None:
        """Clear the pause without a log line or a change callback (a retry request resumes the
        rollout as a side effect; the caller touches afterwards)."""
        self.paused = False
        self.paused_reason = None

    def request_abort(self, reason: str, identity: str) -> None:
        """Abort: clears a pause, records ``reason``, calls ``on_abort(identity)`` then ``on_change``."""
        self.abort = True
        self.abort_by = identity
        self.paused_reason = None
        self.paused = False
        self.abort_reason = reason
        workflow.logger.warning("abort requested by %s: %s", identity, reason)
        self.on_abort(identity)
        self.on_change()

    def request_revert(self, reason: str, identity: str) -> None:
        """Revert: clears a pause, records ``reason``; every wait and safe point stops
        (:meth:`stopping`), then the procedure restores from its records."""
        self.revert = True
        self.revert_by = identity
        self.revert_reason = reason
        self.paused, self.paused_reason = False, None
        workflow.logger.warning("revert requested by %s: %s", identity, reason)
        self.on_abort(identity)
        self.on_change()

    def stopping(self) -> bool:
        """An abort or a revert is pending: waits end, no new step starts."""
        return self.abort or self.revert

    def passed_point_of_no_return(self, what: str) -> None:
        """Declare that the procedure did ``what``, which a revert inside the run cannot undo
        (e.g. "the fan-out switched nodes to the new port"): from now on an abort ends with
        the list of what stays changed instead of restoring, and ``revert`` needs ``--full``."""
        if self.point_of_no_return is None:
            self.point_of_no_return = what
            self.on_change()

    def back_before_point_of_no_return(self, how: str) -> None:
        """The procedure undid what took it past the point of no return (``how``: e.g. "every
        node switched back to 4789"): an abort restores from the records again and ``revert``
        works inside the run, until the procedure passes the point again."""
        if self.point_of_no_return is not None:
            workflow.logger.warning("back before the point of no return (%s): %s", self.point_of_no_return, how)
            self.point_of_no_return = None
            self.on_change()

    # --- validators (raise ValueError: the update's rejection message) ----------------------------

    def check_pause(self) -> None:
        if self.finished():
            raise ValueError(f"{self.noun} already {self.base_phase}")
        if self.paused:
            raise ValueError(f"{self.noun} already paused: {self.paused_reason}")

    def check_resume(self) -> None:
        if self.finished():
            raise ValueError(f"{self.noun} already {self.base_phase}")
        if not self.paused:
            raise ValueError(f"{self.noun} is not paused")

    def check_abort(self) -> None:
        if self.finished():
            raise ValueError(f"{self.noun} already {self.base_phase}")
        if self.abort:
            raise ValueError("abort already requested")

    # --- waiting -------------------------------------------------------------------------------

    async def safe_point(self) -> None:
        """A step boundary: raise :class:`Aborted` on abort; while paused, wait for resume or
        abort. Adds no command when neither is set (nothing is awaited then), so a procedure can
        add safe points without changing the histories of runs that never paused."""
        if self.abort:
            raise Aborted(self.abort_reason)
        if self.revert:
            raise RevertRequested(self.revert_reason)
        if self.paused:
            await workflow.wait_condition(lambda: not self.paused or self.stopping())
            if self.abort:
                raise Aborted(self.abort_reason)
            if self.revert:
                raise RevertRequested(self.revert_reason)
