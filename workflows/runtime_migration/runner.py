"""The building blocks of one node's migration: host commands that record what they did, gates
that ask a person, and the run-once steps (reboot, external commands) whose lost outcome asks
instead of running again (procedures-spec §1.3, §1.8).

:class:`NodeSteps` lives in the node workflow's state, so a replay after a worker crash rebuilds it
exactly; the Temporal history is what makes a finished step never run again. Run-once steps run in
activities with ``maximum_attempts=1``. The reboot is the kit's (:func:`workflows.kit.host.reboot`:
confirmed by a new boot ID, else its gate ``reboot/<node>/<n>`` with the choices ``wait`` /
``rerun`` / ``mark-done``); a lost external command opens the unknown-outcome gate
``<node>/unknown/<step>`` with the choices ``mark-done`` / ``rerun`` (reject = abort), never a
comment's first word.

Gate ids are ``<node>/<kind>/<step>`` with kind ``destructive``, ``unknown``, ``health``,
``human`` or ``failed`` (the spec's gate kinds; the kit's :class:`GateKind` has no such values,
so the kind travels in the id and the comment).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult, HostAccess, RunCommandInput
    from activities.runtime_migration.models import ExternalCommandInput
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, RevertRequested
    from workflows.kit.gates import Gates
    from workflows.kit.host import HostSteps, RebootFailed, reboot
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.models import GateKind, HealthStatus, failure_message
    from workflows.runtime_migration.models import LastCommand, NodeMigrationStatus, Timing

RUN_EXTERNAL_COMMAND = "run_external_command"
ONCE = RetryPolicy(maximum_attempts=1)
#: Idempotent host commands: retried while the host is unreachable, but not forever.
REPEATABLE = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=30),
                         maximum_attempts=20)

Choice = Literal["rerun", "mark-done", "abort"]


class StepStopped(Exception):
    """The node's migration stops here: ``step`` and why (a rejected gate, a failed check, an
    abort). The node is left as it is and reported (e.g. deleted and not yet registered)."""

    def __init__(self, step: str, reason: str, *, aborted: bool = False) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason
        self.aborted = aborted


class NodeSteps:
    """Commands and gates of one node. ``status``: the node's row (kept current); ``push``: send
    the row to the parent; ``gates``: this node's gates (decisions arrive from the parent)."""

    def __init__(self, node: str, access: HostAccess, timing: Timing, status: NodeMigrationStatus, gates: Gates,
                 push: Callable[[], None], gate_timeout: float | None) -> None:
        self.node = node
        self.access = access
        self.timing = timing
        self.st = status
        self.gates = gates
        self.push = push
        self.gate_timeout = gate_timeout
        #: The kit's host steps (the reboot and its boot IDs).
        self.host = HostSteps(gates, on_change=push, timeouts=acts.Timeouts(timing.activity, 10.0), heartbeat_seconds=timing.heartbeat,
                              gate_timeout_seconds=gate_timeout)

    # --- status ---------------------------------------------------------------------------------

    def set(self, step: str, waiting_for: str | None = None, phase: str = "running",
            deadline: datetime | None = None) -> None:
        """Move the row to ``step`` (``since`` restarts when the step or phase changes), waiting
        for ``waiting_for`` until ``deadline`` (None: no bound of its own)."""
        if (self.st.step, self.st.phase) != (step, phase):
            self.st.since = workflow.now()
        self.st.step, self.st.phase, self.st.waiting_for = step, phase, waiting_for  # type: ignore[assignment]
        self.st.deadline = deadline
        self.push()

    def _until(self, seconds: float | None) -> datetime | None:
        return workflow.now() + timedelta(seconds=seconds) if seconds else None

    def done(self, step: str) -> None:
        if step not in self.st.done_steps:
            self.st.done_steps.append(step)
        self.push()

    def _remember(self, step: str, where: str, result: CommandResult) -> None:
        self.st.last_command = LastCommand.of(step, where, result, workflow.now())
        self.push()

    # --- host commands --------------------------------------------------------------------------

    async def cmd(self, step: str, argv: list[str], *, once: bool = False, timeout: float | None = None) -> CommandResult:
        """Run ``argv`` on the node over SSH and record it as the row's last command. ``once``:
        ``maximum_attempts=1`` (the caller handles a lost outcome). Raises ActivityError when the
        host stays unreachable."""
        t = timeout or self.timing.host_command_timeout
        cmd = RunCommandInput(access=self.access, argv=list(argv), timeout_seconds=t)
        self.st.last_command = LastCommand(step=step, argv=list(argv), where=self.access.describe(), at=workflow.now(),
                                           tail="(running)")
        own, self.st.deadline = self.st.deadline, self.st.deadline or self._until(cmd.bound_seconds())
        self.push()
        result: CommandResult = await workflow.execute_activity(
            acts.RUN_NODE_COMMAND, cmd,
            result_type=CommandResult, start_to_close_timeout=timedelta(seconds=cmd.bound_seconds() + 30),
            heartbeat_timeout=timedelta(seconds=self.timing.heartbeat), retry_policy=ONCE if once else REPEATABLE,
        )
        self.st.deadline = own
        self._remember(step, self.access.describe(), result)
        return result

    # --- gates ----------------------------------------------------------------------------------

    async def gate(self, kind: str, step: str, what: str, choices: tuple[str, ...] = ()) -> bool:
        """Open gate ``<node>/<kind>/<step>`` showing ``what`` (with ``choices`` besides reject:
        approve takes the first) and wait; True when approved or a choice was made. A rejection,
        a timeout or an abort returns False. Each call is a new question (kit ``Gates.step``)."""
        gate_id = f"{self.node}/{kind}/{step}"
        self.set(step, f"approval of gate {gate_id}: {what}", phase="waiting", deadline=self._until(self.gate_timeout))
        answer = await self.gates.step(gate_id, f"[{kind}] {what}", GatePolicy(timeout_seconds=self.gate_timeout),
                                       kind=GateKind.NODE if kind != "destructive" else GateKind.STEP, node=self.node,
                                       choices=choices, again=True)
        self.set(step)
        return answer.passed

    async def require(self, kind: str, step: str, what: str) -> None:
        """:meth:`gate`, raising :class:`StepStopped` unless approved."""
        if not await self.gate(kind, step, what):
            raise StepStopped(step, f"gate {self.node}/{kind}/{step} not approved", aborted=self.gates.control.abort)

    async def unknown(self, step: str, what: str) -> Choice:
        """An unknown-outcome gate ``<node>/unknown/<step>`` with the explicit choices
        ``mark-done`` (what approve takes; say in the comment what you checked) and ``rerun``
        (the ``resolve_unknown`` update, or the parent's ``decide``); reject = abort."""
        text = f"{what}. Outcome unknown: check by hand, then mark-done (say what you checked), rerun, or reject (= abort)"
        if not await self.gate("unknown", step, text, choices=("mark-done", "rerun")):
            return "abort"
        return "rerun" if self.gates.gates[f"{self.node}/unknown/{step}"].decision == "rerun" else "mark-done"

    # --- run-once steps -------------------------------------------------------------------------

    async def external(self, step: str, argv: list[str], timeout: float, env: dict[str, str]) -> CommandResult | None:
        """Run an external command on the worker at most once per decision. Exit 0 → the result.
        A command that ran and failed → gate ``failed`` showing the output tail (approve = run
        again after fixing the cause, reject = stop). A lost outcome → the unknown-outcome gate;
        ``mark-done`` returns None. Raises :class:`StepStopped`."""
        while True:
            self.set(step, f"{' '.join(argv)} (on the worker, runs once)", deadline=self._until(timeout))
            self.st.last_command = LastCommand(step=step, argv=list(argv), where="worker", at=workflow.now(), tail="(running)")
            self.push()
            try:
                result: CommandResult = await workflow.execute_activity(
                    RUN_EXTERNAL_COMMAND, ExternalCommandInput(argv=list(argv), timeout_seconds=timeout, env=env),
                    result_type=CommandResult, start_to_close_timeout=timedelta(seconds=timeout + 60),
                    heartbeat_timeout=timedelta(seconds=self.timing.heartbeat), retry_policy=ONCE,
                )
            except ActivityError as err:
                self.st.last_command.tail = f"outcome unknown: {failure_message(err)}"
                self.push()
                choice = await self.unknown(step, f"{' '.join(argv)} lost its worker ({failure_message(err)}); it may have run")
                if choice == "mark-done":
                    return None
                if choice == "abort":
                    raise StepStopped(step, "aborted at the unknown-outcome gate", aborted=True) from err
                continue
            self._remember(step, "worker", result)
            if result.ok:
                return result
            tail = self.st.last_command.tail if self.st.last_command else ""
            if not await self.gate("failed", step, f"{' '.join(argv)} exited {result.exit_code}: {tail[-400:]}; "
                                   f"approve runs it again (fix the cause first), reject stops"):
                raise StepStopped(step, f"{argv[0]} exited {result.exit_code}: {tail[-200:]}")

    async def reboot(self, old_boot_id: str, argv: list[str], board: dict[str, HealthStatus]) -> str:
        """Reboot once through the kit (:func:`workflows.kit.host.reboot`, boot ID read on the
        host): confirmed by a boot ID other than ``old_boot_id`` within ``reboot_timeout``;
        otherwise its gate ``reboot/<node>/<n>`` offers ``wait`` / ``rerun`` / ``mark-done``.
        Returns the new boot_id ("" when marked done by a person). Raises :class:`StepStopped`
        (aborted when the gate was rejected or the run aborted)."""
        self.host.boots.setdefault(self.node, old_boot_id)
        self.set("reboot", f"{' '.join(argv)} (runs once), then a new boot_id")
        try:
            done = await reboot(self.host, self.node, self.access, list(argv), via="host", timeout_seconds=self.timing.reboot_timeout,
                                poll_seconds=self.timing.reboot_poll, board=board,
                                on_wait=lambda _, deadline: self.set("reboot", "a new boot_id (the host answering again)", deadline=deadline))
        except RebootFailed as err:
            rejected = any(r.gate_id.startswith(f"reboot/{self.node}/") and r.action == "rejected" for r in self.gates.history)
            raise StepStopped("reboot", err.reason, aborted=rejected or self.gates.control.abort) from err
        except (Aborted, RevertRequested) as err:
            raise StepStopped("reboot", "aborted", aborted=True) from err
        return done.after or ""

    async def wait_ok(self, step: str, what: str, check: Callable[[], Awaitable[Check]], timeout: float,
                      board: dict[str, HealthStatus], *, initial: float | None = None) -> None:
        """Health wait for ``check`` up to ``timeout`` s; on timeout gate ``health`` (approve =
        wait again, reject = stop). Raises :class:`StepStopped`."""
        while True:
            deadline = workflow.now() + timedelta(seconds=timeout)
            self.set(step, what, deadline=deadline)
            hs = await wait_until(check, name=f"{self.node}/{step}",
                                  backoff=Backoff(initial or self.timing.poll, self.timing.poll_max),
                                  deadline=deadline, board=board,
                                  stop=lambda: self.gates.control.abort, on_poll=lambda _: self.push())
            if hs.state == "ok":
                return
            if hs.state == "stopped":
                raise StepStopped(step, "aborted", aborted=True)
            await self.require("health", step, f"{what}: not reached within {timeout:.0f}s ({hs.last}); approve waits again, reject stops")
