"""Preflight: check every declared precondition before the procedure's first write.

DESIGN.md "The safety contract": a procedure declares, as data
(:data:`activities.preflight.models.Precondition`), everything it will need: the executables it
runs on the worker and on hosts, reboot access to each node, the ports it takes, the labels it
removes and who still references them, the names the operator gave, version skew, and checks of
the operator's own input. :meth:`Preflight.check` checks them all; a procedure then calls
:meth:`PreflightOutcome.raise_if_failed` before it writes anything, and shows
:meth:`PreflightOutcome.lines` in its dry run and at its plan gate.

Commands: ``input`` preconditions are judged here (the procedure already computed them); every
other kind goes to ONE ``check_preconditions`` activity call (none when there is nothing to
check). That activity runs the checks concurrently and never fails for a failing check, so the
call retries only for the activity's own trouble (:data:`workflows.kit.calls.PLANNING_RETRY`).
It runs on ``task_queue`` (None: the workflow's own, where its activities run), and so checks a
``worker-executable`` on the worker that serves that queue: a procedure that runs a program from
another queue's worker checks it with a second :class:`Preflight` on that queue.

The results land in ``board`` (``status.preconditions`` of
:class:`workflows.kit.models.ProcedureStatus`, replaced in place) and ``on_change`` (the
procedure's ``touch``) is called once they are there. Deterministic: no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.preflight.models import (
        CHECK_CONCURRENCY,
        CHECK_PRECONDITIONS,
        CHECK_TIMEOUT_SECONDS,
        COMMAND_TIMEOUT_SECONDS,
        CheckPreconditionsInput,
        CheckPreconditionsResult,
        InputCheck,
        Precondition,
        PreconditionResult,
        PreconditionState,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, Control
    from workflows.kit.host import note_debug_pods

#: The ApplicationError type a failed preflight raises (the CLI maps it to exit 2).
PRECONDITION_FAILED = "PreconditionFailed"


@dataclass
class PreflightOutcome:
    """Every check's result (``results``, in the declared order)."""

    results: list[PreconditionResult] = field(default_factory=list)

    @property
    def failed(self) -> list[PreconditionResult]:
        """The checks that failed."""
        return [r for r in self.results if r.state == PreconditionState.FAILED]

    @property
    def not_run(self) -> list[PreconditionResult]:
        """The checks that could not be made (each says why); they do not block."""
        return [r for r in self.results if r.state == PreconditionState.NOT_RUN]

    @property
    def ok(self) -> bool:
        """No check failed (``not-run`` ones are not ok, but do not block: see ``strict``)."""
        return not self.failed

    @property
    def problems(self) -> list[str]:
        """One line per failed check: ``SUBJECT: DETAIL (needed: WHY)``."""
        return [r.problem() for r in self.failed]

    def lines(self) -> list[str]:
        """One line per check, every state (a not-run one says why): for the dry run and the
        plan gate."""
        return [r.line() for r in self.results]

    def raise_if_failed(self, *, strict: bool = False) -> None:
        """Raise ``ApplicationError(type="PreconditionFailed", non_retryable=True)`` when a check
        failed (with ``strict``, also when one was not run): the message is the problem lines
        joined by newlines (``not run`` ones added as ``SUBJECT: not run: WHY``), the first
        detail every result as JSON (a list of :class:`PreconditionResult` dicts)."""
        lines = self.problems
        if strict:
            lines += [f"{r.precondition.subject()}: not run: {r.why_not_run}" for r in self.not_run]
        if lines:
            raise ApplicationError(
                "\n".join(lines), [r.model_dump(mode="json") for r in self.results],
                type=PRECONDITION_FAILED, non_retryable=True,
            )


class Preflight:
    """Checks preconditions for one procedure (module docstring). ``board``: the status's
    ``preconditions`` list (replaced in place); ``on_change``: called when results arrive;
    ``timeouts``: the procedure's activity timeouts (short-call slack, heartbeat timeout);
    ``task_queue``: where the activity runs (None: the workflow's queue); ``concurrency``,
    ``check_timeout_seconds``, ``command_timeout_seconds``: see
    :class:`activities.preflight.models.CheckPreconditionsInput`."""

    def __init__(
        self,
        board: list[PreconditionResult] | None = None,
        on_change: Callable[[], None] = lambda: None,
        timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS,
        *,
        task_queue: str | None = None,
        concurrency: int = CHECK_CONCURRENCY,
        check_timeout_seconds: float = CHECK_TIMEOUT_SECONDS,
        command_timeout_seconds: float = COMMAND_TIMEOUT_SECONDS,
        control: Control | None = None,
    ) -> None:
        self.board = board if board is not None else []
        #: The procedure's control: an abort while the checks run cancels them and raises
        #: :class:`workflows.kit.control.Aborted` (None: the checks run to their end).
        self.control = control
        self.on_change = on_change
        self.timeouts = timeouts
        self.task_queue = task_queue
        self.concurrency = concurrency
        self.check_timeout_seconds = check_timeout_seconds
        self.command_timeout_seconds = command_timeout_seconds

    async def check(self, preconditions: Sequence[Precondition]) -> PreflightOutcome:
        """Check ``preconditions`` (``input`` ones here, the rest in one activity call) and
        return every result in their order. Raises ActivityError when the activity itself
        cannot run (its retries exhausted), :class:`workflows.kit.control.Aborted` when the
        procedure is aborted while the checks run (they are cancelled); a failing check is a
        result, never an error."""
        now = workflow.now()
        local: dict[int, PreconditionResult] = {}
        remote: list[Precondition] = []
        for i, p in enumerate(preconditions):
            if isinstance(p, InputCheck):
                state = PreconditionState.OK if p.ok else PreconditionState.FAILED
                local[i] = PreconditionResult(precondition=p, state=state, detail=p.detail or ("ok" if p.ok else "refused"),
                                              checked_at=now)
            else:
                remote.append(p)
        checked: list[PreconditionResult] = []
        if remote:
            arg = CheckPreconditionsInput(
                preconditions=remote, concurrency=self.concurrency, check_timeout_seconds=self.check_timeout_seconds,
                command_timeout_seconds=self.command_timeout_seconds,
            )
            note_debug_pods([getattr(p, "access", None) for p in remote], self.task_queue)
            handle = workflow.start_activity(
                CHECK_PRECONDITIONS, arg, result_type=CheckPreconditionsResult,
                start_to_close_timeout=timedelta(seconds=arg.bound_seconds()) + self.timeouts.short_call,
                heartbeat_timeout=self.timeouts.heartbeat, retry_policy=acts.PLANNING_RETRY, task_queue=self.task_queue,
                summary=f"{CHECK_PRECONDITIONS} · {len(remote)} precondition(s)",
            )
            control = self.control
            await workflow.wait_condition(lambda: handle.done() or (control is not None and control.abort))
            if not handle.done() and control is not None:
                # Aborted while the checks run (a hung API, an unreachable host): nothing was
                # written yet, so the run ends at once instead of after the checks' own bounds.
                handle.cancel()
                raise Aborted(control.abort_reason or "aborted")
            answer: CheckPreconditionsResult = handle.result()
            checked = list(answer.results)
        it = iter(checked)
        results = [local[i] if i in local else next(it) for i in range(len(preconditions))]
        self.board[:] = results
        self.on_change()
        return PreflightOutcome(results=results)
