"""Alert gates: start nothing new while the cluster's own alerting says it is unhealthy (issue 37).

Operators trust their Prometheus alerts more than any check a procedure makes itself. kured blocks
reboots while chosen alerts are active (kubereboot/kured: ``--prometheus-url``,
``--alert-filter-regexp`` names alerts to ignore, ``--alert-firing-only``; a Prometheus it cannot
ask blocks too). :class:`AlertGate` is that gate for every procedure: before a node (a batch, a
phase) starts, :meth:`AlertGate.wait_clear` asks the ``check_alerts`` activity
(:mod:`activities.alerts`, Prometheus ``/api/v1/alerts``) and

- returns at once when no alert blocks (``clear``);
- while an alert blocks, waits: a durable timer of ``poll_seconds`` between checks, the wait in
  the status ``health`` board as ``alerts/<where>`` (its ``last`` names each blocking alert with
  its labels and since when), the same line through ``on_step`` (the procedure's ``kit_step``)
  and in the comment of the override gate; returns once a check finds none (``clear``);
- when Prometheus cannot be asked (or answers an error): fail closed (default) waits the same
  way and says so in the board and the status ``warnings``; fail open (``fail_open``) passes at
  once with a warning (``fail-open``);
- lets a person override ONE wait: alongside the wait, a gate ``alerts/<where>/<n>`` (``n`` the
  episode at that place, from 1) with the single choice ``proceed`` (``lockkeeper decide ID
  alerts/<where>/<n> proceed``, attributed and checked like every gate: identity, four-eyes,
  allowed approvers). Deciding it ends this wait (``overridden``); the next wait asks again.
  The gate never times out: a timeout is never somebody's decision to go on while alerts fire.
  Rejecting it does what a rejection does in the procedure (the rollout pauses); the wait goes
  on. The gate is cancelled when the alerts clear;
- ends at once on an abort or a revert (``control.stopping()``), a check in flight included
  (its activity is cancelled): ``stopped``; the caller's next safe point raises.

It sends nothing itself: :meth:`AlertGate.take_events` hands the procedure's notifier what
happened since its last call, one ``blocked`` event per episode (then ``changed`` when the
blocking set changes, and how it ended), so a notification goes out once per episode; a
``fail-open`` pass carries its ``streak``, so the kit (``ProcedureWorkflow.touch``) tells
``alerts-skipped`` once when the gate starts passing without the check. The override gate's ``opened`` record reaches the kit's webhook notifier like any gate's.

Deterministic workflow code: the activity is called by name with :mod:`activities.alerts.models`
only. History per check: one activity (three events) and one timer (two), plus their workflow
tasks; a procedure that waits hours polls accordingly less often (``poll_seconds``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.alerts.models import CHECK_ALERTS, AlertsAnswer
    from workflows.kit import calls as acts
    from workflows.kit.control import Control
    from workflows.kit.gates import Gates
    from workflows.kit.inputs import AlertGatePolicy, GatePolicy
    from workflows.kit.models import GateKind, GateState, HealthStatus

#: The one choice of an override gate.
PROCEED = "proceed"

#: How a wait ended: no blocking alert; a person decided ``proceed``; Prometheus could not be
#: asked and the policy fails open; an abort or revert stopped it.
AlertOutcome = Literal["clear", "overridden", "fail-open", "stopped"]

#: What :meth:`AlertGate.take_events` reports: an episode began (alerts block, or Prometheus
#: cannot be asked and the gate fails closed); the blocking alerts (or the error) changed; and how
#: it ended (``cleared`` / ``overridden`` / ``stopped``); ``fail-open``: passed without the check.
AlertEventKind = Literal["blocked", "changed", "cleared", "overridden", "fail-open", "stopped"]


class AlertGateEvent(BaseModel):
    """One thing that happened at an alert gate: ``kind`` (:data:`AlertEventKind`) at ``where``
    in its ``episode`` (1, 2, ... per place; 0 for fail-open), ``at`` (workflow time), ``text``
    (one line for people), ``alerts`` (the blocking alerts' lines), ``error`` (Prometheus could
    not be asked), ``gate_id`` (the override gate), ``by`` (who overrode); ``streak``: of a
    ``fail-open``, how many passes in a row went without the check, this one included (1: the
    first since Prometheus last answered: the one a notifier tells)."""

    kind: AlertEventKind
    where: str
    episode: int
    at: datetime
    text: str
    alerts: list[str] = Field(default_factory=list)
    error: str | None = None
    gate_id: str | None = None
    by: str | None = None
    streak: int = 0


class AlertGateAnswer(BaseModel):
    """How :meth:`AlertGate.wait_clear` ended: ``outcome`` (:data:`AlertOutcome`), ``passed``
    (clear, overridden or fail-open), ``polls`` (checks made), ``since`` / ``until`` (workflow
    time), ``last`` (the last check's answer; None when stopped before one came), ``episode``
    when it waited, ``gate_id`` when an override gate was opened, ``decided_by`` who overrode."""

    where: str
    outcome: AlertOutcome
    passed: bool
    polls: int
    since: datetime
    until: datetime
    last: AlertsAnswer | None = None
    episode: int | None = None
    gate_id: str | None = None
    decided_by: str | None = None


def _signature(answer: AlertsAnswer) -> tuple[str, ...]:
    """What makes two blocked answers the same for people: the error, or the alerts' lines."""
    if answer.error is not None:
        return ("error", answer.error)
    return tuple(a.line() for a in answer.blocking)


@dataclass(eq=False)
class AlertGate:
    """The alert gate of one procedure run (see the module doc).

    ``policy``: :class:`AlertGatePolicy`; ``gates``: the procedure's :class:`Gates` (the override
    gate is one of them); ``control``: its :class:`Control` (abort and revert end a wait);
    ``board``: the status ``health`` dict (``alerts/<where>`` entries); ``on_change``: the
    procedure's ``touch``; ``timeouts``: its activity timeouts (:class:`workflows.kit.calls.
    Timeouts`). Keywords: ``warnings``: the status ``warnings`` list (fail-open, fail-closed
    and override lines are appended); ``on_step(step, doing)``: told what the wait is (the
    procedure's ``kit_step``), each time the blocking line changes; ``stop()``: True ends a wait
    as an abort does (``stopped``), for a procedure whose revert is its own."""

    policy: AlertGatePolicy
    gates: Gates
    control: Control
    board: dict[str, HealthStatus]
    on_change: Callable[[], None]
    timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS
    _: KW_ONLY
    warnings: list[str] | None = None
    on_step: Callable[[str, str], None] | None = None
    #: A procedure's own reason to end a wait besides an abort or the kit's revert (the
    #: network migration's revert update); may be set after construction.
    stop: Callable[[], bool] | None = None
    #: Every event so far, oldest first (:meth:`take_events` returns the new ones).
    events: list[AlertGateEvent] = field(default_factory=list, init=False)
    _taken: int = field(default=0, init=False)
    _episodes: dict[str, int] = field(default_factory=dict, init=False)
    #: Passes in a row without the check (fail-open) since Prometheus last answered.
    skipped: int = field(default=0, init=False)

    # --- what happened ------------------------------------------------------------------------------

    def take_events(self) -> list[AlertGateEvent]:
        """The events since the last call (a procedure's notifier sends the ``blocked`` ones:
        one per episode)."""
        new = self.events[self._taken:]
        self._taken = len(self.events)
        return new

    def _emit(self, kind: AlertEventKind, where: str, episode: int, text: str, answer: AlertsAnswer | None = None,
              gate_id: str | None = None, by: str | None = None) -> None:
        self.events.append(AlertGateEvent(
            kind=kind, where=where, episode=episode, at=workflow.now(), text=text, gate_id=gate_id, by=by,
            streak=self.skipped if kind == "fail-open" else 0,
            alerts=[a.line() for a in answer.blocking] if answer is not None else [],
            error=answer.error if answer is not None else None,
        ))

    def _warn(self, text: str) -> None:
        workflow.logger.warning("%s", text)
        if self.warnings is not None:
            self.warnings.append(text)

    # --- asking -------------------------------------------------------------------------------------

    async def _ask(self, where: str) -> AlertsAnswer | None:
        """One ``check_alerts`` call, raced against an abort or revert: None when one came first
        (the activity is cancelled). Raises ActivityError only when the activity itself failed
        for good (it reports Prometheus' trouble in its answer instead)."""
        handle = workflow.start_activity(
            CHECK_ALERTS, self.policy.check_input(), result_type=AlertsAnswer,
            start_to_close_timeout=timedelta(seconds=self.policy.timeout_seconds) + self.timeouts.short_call,
            retry_policy=acts.DEFAULT_RETRY, summary=f"{CHECK_ALERTS} · {where}",
        )
        await workflow.wait_condition(lambda: handle.done() or self._stopping())
        if not handle.done():
            handle.cancel()
            try:
                await handle
            except (ActivityError, asyncio.CancelledError):
                pass
            return None
        return handle.result()

    def _stopping(self) -> bool:
        return self.control.stopping() or (self.stop is not None and self.stop())

    def _passes(self, answer: AlertsAnswer) -> bool:
        return answer.ok or (answer.error is not None and self.policy.fail_open)

    # --- the wait -----------------------------------------------------------------------------------

    async def wait_clear(self, where: str) -> AlertGateAnswer:
        """Wait until no alert blocks ``where`` (a name the procedure chooses, e.g.
        ``node/worker-3`` or ``batch-2``; it names the board entry ``alerts/<where>`` and the
        override gate ``alerts/<where>/<n>``). Returns how it ended (:class:`AlertGateAnswer`);
        never raises for alerts or an unreachable Prometheus. Raises ActivityError if the
        ``check_alerts`` activity fails for good (it is not registered with a non-retryable error)."""
        name = f"alerts/{where}"
        since = workflow.now()
        hs = HealthStatus(name=name, since=since)
        self.board[name] = hs
        answer = await self._ask(where)
        if answer is None:
            return self._end(hs, where, "stopped", None, since)
        hs.polls += 1
        if self._passes(answer):
            return self._end(hs, where, "clear" if answer.ok else "fail-open", answer, since)

        episode = self._episodes.get(where, 0) + 1
        self._episodes[where] = episode
        gate_id = f"{name}/{episode}" if self.policy.override else None
        self._emit("blocked", where, episode, f"{name}: {self._line(answer)}", answer, gate_id)
        ending: list[str] = []
        override = None
        if gate_id is not None:
            override = asyncio.ensure_future(self.gates.step(
                gate_id, self._what(where, answer), GatePolicy(), kind=GateKind.STEP, choices=[PROCEED],
                interrupt=lambda: ending[0] if ending else None,
            ))

        def overridden() -> bool:
            gate = self.gates.gates.get(gate_id) if gate_id is not None else None
            return gate is not None and gate.state in (GateState.APPROVED, GateState.DECIDED)

        shown: tuple[str, ...] = ()
        outcome: AlertOutcome
        while True:
            if _signature(answer) != shown:
                if shown:
                    self._emit("changed", where, episode, f"{name}: {self._line(answer)}", answer, gate_id)
                shown = _signature(answer)
                self._show(hs, where, gate_id, answer)
                if answer.error is not None:
                    self._warn(f"{name}: {answer.line()}; waiting (fail-closed)")
            self.on_change()
            try:
                await workflow.wait_condition(lambda: self._stopping() or overridden(),
                                              timeout=timedelta(seconds=self.policy.poll_seconds))
            except TimeoutError:
                pass
            if self._stopping():
                outcome = "stopped"
                break
            if overridden():
                outcome = "overridden"
                break
            got = await self._ask(where)
            if got is None:
                outcome = "stopped"
                break
            answer = got
            hs.polls += 1
            if self._passes(answer):
                outcome = "clear" if answer.ok else "fail-open"
                break
        ending.append({"clear": "alerts cleared", "fail-open": "Prometheus could not be asked: passed (fail-open)"}.get(
            outcome, f"alert wait {outcome}"))
        if override is not None:
            await override
        return self._end(hs, where, outcome, answer, since, episode=episode, gate_id=gate_id)

    # --- showing ------------------------------------------------------------------------------------

    def _line(self, answer: AlertsAnswer) -> str:
        if answer.error is not None:
            return f"{answer.line()} (fail-closed: waiting)"
        return answer.line()

    def _what(self, where: str, answer: AlertsAnswer) -> str:
        """The override gate's comment: what blocks, and what ``proceed`` does."""
        return f"alerts block {where}: {self._line(answer)}; decide {PROCEED} to start {where} anyway"

    def _show(self, hs: HealthStatus, where: str, gate_id: str | None, answer: AlertsAnswer) -> None:
        """Put the blocking line in the board, the procedure's step and the waiting gate's comment."""
        hs.last = self._line(answer)
        if self.on_step is not None:
            self.on_step(hs.name, f"waiting for alerts to clear: {hs.last}")
        gate = self.gates.gates.get(gate_id) if gate_id is not None else None
        if gate is not None and gate.state == GateState.WAITING:
            gate.comment = self._what(where, answer)

    def _end(self, hs: HealthStatus, where: str, outcome: AlertOutcome, answer: AlertsAnswer | None, since: datetime,
             *, episode: int | None = None, gate_id: str | None = None) -> AlertGateAnswer:
        gate = self.gates.gates.get(gate_id) if gate_id else None
        by = gate.decided_by if gate is not None and outcome == "overridden" else None
        if outcome == "fail-open":
            self.skipped += 1
        elif answer is not None and answer.error is None:
            self.skipped = 0
        if outcome == "stopped":
            hs.state, hs.last = "stopped", f"stopped ({'abort' if self.control.abort else 'revert'} requested)"
        elif outcome == "overridden":
            hs.state = "ok"
            hs.last = f"overridden by {by} ({gate_id}) while: {self._line(answer) if answer else '?'}"
            self._warn(f"alerts/{where}: {hs.last}")
        elif outcome == "fail-open":
            assert answer is not None
            hs.state, hs.last = "ok", f"{answer.line()}; passed without the alert check (fail-open)"
            self._warn(f"alerts/{where}: {hs.last}")
        else:
            assert answer is not None
            hs.state, hs.last = "ok", answer.line()
        if episode is not None:
            kind: AlertEventKind = {"clear": "cleared", "fail-open": "fail-open", "overridden": "overridden",
                                    "stopped": "stopped"}[outcome]  # type: ignore[assignment]
            self._emit(kind, where, episode, f"alerts/{where}: {hs.last}", answer, gate_id, by)
        elif outcome == "fail-open":
            self._emit("fail-open", where, 0, f"alerts/{where}: {hs.last}", answer)
        self.on_change()
        return AlertGateAnswer(
            where=where, outcome=outcome, passed=outcome in ("clear", "overridden", "fail-open"), polls=hs.polls,
            since=since, until=workflow.now(), last=answer, episode=episode, gate_id=gate_id, decided_by=by,
        )
