"""Named steps of one run shown in a row of its own: where the run is, its last host command,
its gates and health waits, each step done once (a retry resumes after the last done one).

A node run whose steps change a host (the runtime migration's child, procedures-spec §6.3)
keeps a row that a person reads to know where the node was left. :class:`StepRow` moves that
row: :meth:`~StepRow.at` (the step, what it waits for, until when), :meth:`~StepRow.done` /
:meth:`~StepRow.todo` (the steps a previous attempt finished are not repeated), and runs the
step's mechanisms on the kit's components, recording each in the row:

- :meth:`~StepRow.cmd`: a command on the host (:meth:`workflows.kit.host.HostSteps.command`,
  retried while the host is unreachable) judged by its caller on its output;
- :meth:`~StepRow.gate` / :meth:`~StepRow.require`: a gate ``<prefix>/<kind>/<step>`` through
  :meth:`workflows.kit.gates.Gates.step` (each call asks afresh);
- :meth:`~StepRow.wait_ok`: :func:`workflows.kit.health.wait_until` whose timeout asks a
  person (gate ``<prefix>/health/<step>``: approve waits again, reject stops);
- :meth:`~StepRow.external`: a command on the worker run at most once per decision, whose
  failure (gate ``<prefix>/failed/<step>``) or lost outcome (gate ``<prefix>/unknown/<step>``,
  choices ``mark-done`` and ``rerun``) asks a person;
- :meth:`~StepRow.reboot`: :func:`workflows.kit.host.reboot` of the host, confirmed by a new
  boot ID read on the host.

A step that cannot go on raises :class:`StepStopped` (the run reports where it stopped). The
row is any model with the fields of :class:`StepRowFields`; ``push`` reports it (e.g. the kit's
child report to the parent).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult, HostAccess
    from workflows.kit.control import Aborted, RevertRequested
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostStep, HostStepFailed, HostSteps, RebootFailed, reboot
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.models import GateKind, HealthStatus

#: Where the external steps run: the worker itself (the kit's host steps, local backend).
WORKER = HostAccess()
#: Idempotent host commands: retried while the host is unreachable, but not forever.
REPEATABLE = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=30),
                         maximum_attempts=20)


class StepStopped(Exception):
    """The run stops here: ``step`` and why (a rejected gate, a failed check, an abort:
    ``aborted``). What the step left is as it is, and the row says so."""

    def __init__(self, step: str, reason: str, *, aborted: bool = False) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason
        self.aborted = aborted


class LastCommand(BaseModel):
    """The last host or external command of a row: argv, where, exit code (None: no exit status,
    e.g. the connection dropped), output tail (the last 600 characters), when."""

    step: str
    argv: list[str]
    where: str = ""
    exit_code: int | None = None
    tail: str = ""
    at: datetime | None = None

    @classmethod
    def of(cls, step: str, where: str, result: CommandResult, at: datetime) -> LastCommand:
        text = (result.stdout + ("\n" + result.stderr if result.stderr else "")).strip()
        return cls(step=step, argv=list(result.argv), where=where, exit_code=result.exit_code, tail=text[-600:], at=at)


class StepRowFields(Protocol):
    """What :class:`StepRow` reads and writes in the row (times are workflow times, UTC)."""

    step: str | None
    phase: Any
    waiting_for: str | None
    since: datetime | None
    deadline: datetime | None
    done_steps: list[str]
    last_command: LastCommand | None


class StepRow:
    """Moves ``row`` through its steps (see the module doc). ``prefix``: the gates' ID prefix and
    the node they are shown for; ``access``: the host of :meth:`cmd`; ``command_timeout_seconds``:
    a command's default bound; ``backoff``: the health waits' polls; ``gate_timeout_seconds``:
    every gate's timeout (None: none)."""

    def __init__(self, row: StepRowFields, *, prefix: str, gates: Gates, host: HostSteps, access: HostAccess, push: Callable[[], None],
                 gate_timeout_seconds: float | None, command_timeout_seconds: float, backoff: Backoff) -> None:
        self.row, self.prefix, self.gates, self.host, self.access, self.push = row, prefix, gates, host, access, push
        self.gate_timeout_seconds, self.command_timeout_seconds, self.backoff = gate_timeout_seconds, command_timeout_seconds, backoff

    # --- the row -----------------------------------------------------------------------------------

    def at(self, step: str, waiting_for: str | None = None, phase: str = "running", deadline: datetime | None = None) -> None:
        """Move the row to ``step`` (``since`` restarts when the step or phase changes), waiting
        for ``waiting_for`` until ``deadline`` (None: no bound of its own)."""
        st = self.row
        if (st.step, st.phase) != (step, phase):
            st.since = workflow.now()
        st.step, st.phase, st.waiting_for, st.deadline = step, phase, waiting_for, deadline
        self.push()

    def done(self, step: str) -> None:
        """``step`` finished: a later attempt does not run it again."""
        if step not in self.row.done_steps:
            self.row.done_steps.append(step)
        self.push()

    def todo(self, step: str) -> bool:
        """False for a step a previous attempt finished (a retry resumes after it)."""
        return step not in self.row.done_steps

    def safe(self) -> None:
        """A safe point: raises :class:`StepStopped` (aborted) when an abort was asked for."""
        control = self.gates.control
        if control.abort:
            raise StepStopped(self.row.step or "start", control.abort_reason or "aborted", aborted=True)

    def ran(self, step: str, argv: list[str], where: str, result: CommandResult | None) -> None:
        """Record ``argv`` as the row's last command (``result`` None: it is running)."""
        self.row.last_command = (LastCommand.of(step, where, result, workflow.now()) if result is not None else
                                 LastCommand(step=step, argv=list(argv), where=where, at=workflow.now(), tail="(running)"))
        self.push()

    # --- the mechanisms ----------------------------------------------------------------------------

    async def cmd(self, step: str, argv: list[str], *, timeout: float | None = None) -> CommandResult:
        """Run ``argv`` on the host (:meth:`HostSteps.command`, retried while the host is
        unreachable) and record it as the row's last command; the caller judges the exit code
        and output. ``timeout`` seconds (None: ``command_timeout_seconds``). Raises
        ActivityError when the host stays unreachable."""
        t = timeout or self.command_timeout_seconds
        st, where = self.row, self.access.describe()
        own, st.deadline = st.deadline, st.deadline or workflow.now() + timedelta(seconds=t + 30)
        self.ran(step, argv, where, None)
        result = await self.host.command(argv, self.access, timeout_seconds=t, retry=REPEATABLE)
        st.deadline = own
        self.ran(step, argv, where, result)
        return result

    async def gate(self, kind: str, step: str, what: str, choices: Sequence[str] = (), *, gate_kind: GateKind = GateKind.NODE) -> bool:
        """Gate ``<prefix>/<kind>/<step>`` showing ``[kind] what`` (with ``choices`` besides
        reject) through :meth:`Gates.step`; True when approved or a choice was made, False on a
        rejection, a timeout or an abort. Each call is a new question."""
        gate_id, timeout = f"{self.prefix}/{kind}/{step}", self.gate_timeout_seconds
        self.at(step, f"approval of gate {gate_id}: {what}", phase="waiting",
                deadline=workflow.now() + timedelta(seconds=timeout) if timeout else None)
        answer = await self.gates.step(gate_id, f"[{kind}] {what}", GatePolicy(timeout_seconds=timeout), kind=gate_kind,
                                       node=self.prefix, choices=choices, again=True)
        self.at(step)
        return answer.passed

    async def require(self, kind: str, step: str, what: str, *, gate_kind: GateKind = GateKind.NODE) -> None:
        """:meth:`gate`, raising :class:`StepStopped` unless approved."""
        if not await self.gate(kind, step, what, gate_kind=gate_kind):
            raise StepStopped(step, f"gate {self.prefix}/{kind}/{step} not approved", aborted=self.gates.control.abort)

    async def wait_ok(self, step: str, what: str, check: Callable[[], Awaitable[Check]], timeout: float,
                      board: dict[str, HealthStatus]) -> None:
        """Wait for ``check`` up to ``timeout`` seconds (:func:`wait_until`, shown in ``board``
        as ``<prefix>/<step>``); on timeout gate ``<prefix>/health/<step>`` (approve = wait
        again, reject = stop). Raises :class:`StepStopped` (aborted on an abort)."""
        control = self.gates.control
        while True:
            deadline = workflow.now() + timedelta(seconds=timeout)
            self.at(step, what, deadline=deadline)
            hs = await wait_until(check, name=f"{self.prefix}/{step}", backoff=self.backoff, deadline=deadline, board=board,
                                  stop=lambda: control.abort, on_poll=lambda _: self.push())
            if hs.state == "ok":
                return
            if hs.state == "stopped":
                raise StepStopped(step, "aborted", aborted=True)
            await self.require("health", step, f"{what}: not reached within {timeout:.0f}s ({hs.last}); approve waits again, reject stops")

    async def external(self, step: str, argv: list[str], *, timeout_seconds: float, env: dict[str, str]) -> None:
        """Run ``argv`` on the worker at most once per decision (:meth:`HostSteps.run`, local
        backend). A command that ran and failed: gate ``<prefix>/failed/<step>`` with the output
        tail (approve = run again after fixing the cause, reject = stop). A lost outcome: the
        unknown-outcome gate ``<prefix>/unknown/<step>`` with the explicit choices ``mark-done``
        (what approve takes) and ``rerun``; reject = abort. Raises :class:`StepStopped`."""
        self.safe()  # an abort stops the run before a command that cannot be called back
        host_step = HostStep(name=f"{self.prefix}/{step}", argv=argv, timeout_seconds=timeout_seconds, env=env)
        while True:
            self.at(step, f"{' '.join(argv)} (on the worker, runs once)", deadline=workflow.now() + timedelta(seconds=timeout_seconds))
            self.ran(step, argv, "worker", None)
            try:
                self.ran(step, argv, "worker", await self.host.run(host_step, WORKER, unknown_opens_gate=False))
                return
            except HostStepFailed as err:
                if err.status.state == "unknown":
                    self.row.last_command.tail = f"outcome unknown: {err.status.detail}"  # type: ignore[union-attr]
                    self.push()
                    text = (f"{' '.join(argv)}: {err.status.detail}. Outcome unknown: check by hand, "
                            "then mark-done (say what you checked), rerun, or reject (= abort)")
                    if not await self.gate("unknown", step, text, choices=("mark-done", "rerun")):
                        raise StepStopped(step, "aborted at the unknown-outcome gate", aborted=True) from err
                    if self.gates.gates[f"{self.prefix}/unknown/{step}"].decision != "rerun":
                        return
                    continue
                if err.result is not None:
                    self.ran(step, argv, "worker", err.result)
                # ran and failed (an exit code), or its activity failed for good (no result)
                tail = self.row.last_command.tail if err.result else err.status.detail  # type: ignore[union-attr]
                how = f"exited {err.result.exit_code}" if err.result else "failed"
                if not await self.gate("failed", step, f"{' '.join(argv)} {how}: {tail[-400:]}; "
                                       f"approve runs it again (fix the cause first), reject stops"):
                    raise StepStopped(step, f"{argv[0]} {how}: {tail[-200:]}") from err

    async def reboot(self, step: str, argv: list[str], *, before: str, timeout_seconds: float, poll_seconds: float,
                     board: dict[str, HealthStatus]) -> str:
        """Reboot the host (node ``prefix``) once with ``argv`` through :func:`workflows.kit.host.reboot`
        (boot ID read on the host): confirmed by a boot ID other than ``before`` within
        ``timeout_seconds`` (polled every ``poll_seconds``, shown in ``board``), else its gate
        ``reboot/<prefix>/<n>`` offers ``wait`` / ``rerun`` / ``mark-done``. Returns the new boot ID
        ("" when a person marked it done). Raises :class:`StepStopped` (aborted on an abort, a
        revert or a rejected reboot gate)."""
        node = self.prefix
        self.host.boots.setdefault(node, before)
        self.at(step, f"{' '.join(argv)} (runs once), then a new boot_id")
        try:
            done = await reboot(self.host, node, self.access, list(argv), via="host", timeout_seconds=timeout_seconds,
                                poll_seconds=poll_seconds, board=board,
                                on_wait=lambda _, deadline: self.at(step, "a new boot_id (the host answering again)", deadline=deadline))
        except RebootFailed as err:
            rejected = any(r.gate_id.startswith(f"reboot/{node}/") and r.action == "rejected" for r in self.gates.history)
            raise StepStopped(step, err.reason, aborted=rejected or self.gates.control.abort) from err
        except (Aborted, RevertRequested) as err:
            raise StepStopped(step, "aborted", aborted=True) from err
        return done.after or ""
