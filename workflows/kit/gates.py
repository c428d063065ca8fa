"""Gates: where a procedure waits for a person (DESIGN.md "Gate").

A gate is opened with an ID, waits for ``approve`` or ``reject`` (validated, attributed updates
of the procedure), for its timeout, or for an abort. A timeout applies the outcome the procedure
declared (:class:`GateTimeoutOutcome` reject / approve / abort) and is recorded as a timeout
(``by="timeout"``, the outcome in the record), never as an approval. Who may decide is the
approver policy: an identity is required, the four-eyes rule forbids the requester to approve
their own procedure's gates, and a non-empty list names the allowed approvers. The policy is
enforced in the update validators, so a refused decision never reaches history; so is the
decision's deadline (:func:`workflows.kit.control.check_in_time`): an approve that reaches a
worker after the time its sender stopped waiting is refused, never applied late. A refusal is the
sender's error message and a warning in the worker's log (Temporal keeps no refused update in
history). A decision records the identity the sender asserted and, when its connection was
authenticated, the credential's identity (``connection_identity``).

What a rejection does is the procedure's rule: ``pause_on_reject`` (the rollout: pause, and
``resume`` opens the gate again) or not (the etcd restore: :meth:`Gates.wait` returns False and
the procedure stops). The same holds for a timeout with outcome reject.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.control import Aborted, Control, RevertRequested, check_in_time
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.models import (
        ApprovalRules,
        ApproveInput,
        DecideInput,
        DecideResult,
        Gate,
        GateDecisionResult,
        GateKind,
        GateRecord,
        GateState,
        GateTimeoutOutcome,
        RejectInput,
    )


@dataclass(frozen=True)
class GateAnswer:
    """How a gate ended: ``passed`` (approved, a choice made, or timed out with outcome approve);
    ``choice`` the choice made (``approve`` for a plain approval, the gate's first choice for an
    approval of a gate with choices, None when not passed); ``gate`` the gate itself."""

    gate: Gate
    passed: bool
    choice: str | None

    def why_not(self) -> str:
        """One line: ``gate ID rejected by NAME: comment`` / ``timed out`` / ``cancelled``."""
        g = self.gate
        by = g.decided_by or ("timeout" if g.state == GateState.TIMED_OUT else "workflow")
        return f"gate {g.id} {g.state} by {by}" + (f": {g.comment}" if g.comment and g.state == GateState.REJECTED else "")


class GateNotPassed(Exception):
    """:meth:`Gates.step` with ``required=True`` ended without passing; ``answer`` says how."""

    def __init__(self, answer: GateAnswer) -> None:
        super().__init__(answer.why_not())
        self.answer = answer


def check_approver(
    identity: str,
    *,
    approving: bool,
    requested_by: str,
    four_eyes: bool,
    allowed_approvers: list[str],
    procedure: str = "procedure",
) -> None:
    """Raise ValueError (the validator's message) when ``identity`` may not decide.

    ``approving``: the four-eyes rule applies to approvals only; anyone allowed may reject.
    ``procedure`` names the thing in the message ("rollout", "restore").
    """
    if not identity.strip():
        raise ValueError("an identity is required to decide a gate")
    if approving and four_eyes and identity == requested_by:
        raise ValueError(f"four-eyes rule: {identity} requested this {procedure} and may not approve its gates")
    if allowed_approvers and identity not in allowed_approvers:
        raise ValueError(f"{identity} is not an allowed approver ({', '.join(allowed_approvers)})")


def find_waiting_gate(gates: dict[str, Gate], gate_id: str | None) -> Gate:
    """The gate an approve/reject addresses; ``gate_id`` None means the only waiting gate.

    Raises ValueError (the validator's message) for an unknown gate, a gate that is not
    waiting, no waiting gate, or several waiting gates when none is named.
    """
    waiting = [g for g in gates.values() if g.state == GateState.WAITING]
    if gate_id is None:
        if not waiting:
            raise ValueError("no gate is waiting for a decision")
        if len(waiting) > 1:
            raise ValueError(f"several gates are waiting ({', '.join(g.id for g in waiting)}); name one")
        return waiting[0]
    gate = gates.get(gate_id)
    if gate is None:
        known = ", ".join(g.id for g in waiting) or "none"
        raise ValueError(f"unknown gate {gate_id!r}; waiting gates: {known}")
    if gate.state != GateState.WAITING:
        raise ValueError(f"gate {gate_id!r} is not waiting for a decision (state {gate.state})")
    return gate


@dataclass(eq=False)
class Gates:
    """The gates of one procedure run, their history, and the approver policy.

    ``history``: the list the procedure's status shows as ``gate_history`` (appended to in
    place). Keywords: ``noun``: the procedure in messages ("rollout", "restore");
    ``pause_on_reject``: a rejection (and a timeout with outcome reject) pauses ``control``;
    ``on_change``: called after a gate changes (None: ``control.on_change``).
    """

    control: Control
    rules: ApprovalRules
    history: list[GateRecord]
    _: KW_ONLY
    noun: str = "procedure"
    pause_on_reject: bool = True
    on_change: Callable[[], None] | None = None
    gates: dict[str, Gate] = field(default_factory=dict, init=False)
    passed: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.on_change = self.on_change or self.control.on_change

    # --- policy (validators) ----------------------------------------------------------------------

    def find_waiting(self, gate_id: str | None) -> Gate:
        """See :func:`find_waiting_gate`."""
        return find_waiting_gate(self.gates, gate_id)

    def check_decision(self, input: Any, *, approving: bool) -> Gate:
        """The whole validator of ``approve`` (``approving``) / ``reject``: the update arrived
        before its deadline and its identities agree (:func:`check_in_time`), the gate it names
        waits (a decided, timed-out or cancelled gate is refused, :func:`find_waiting_gate`;
        so is one past its ``timeout_at`` whose timer has not fired yet because no worker ran
        it), the identity may decide (:meth:`check_approver`). ``input``: an ApproveInput /
        RejectInput or any model with ``gate_id`` and ``identity``. Raises ValueError; a refusal
        is logged at warning (it never reaches history) and is the sender's error message."""
        update = "approve" if approving else "reject"
        check_in_time(input, update)
        try:
            gate = self.find_waiting(input.gate_id)
            now = workflow.now()
            if gate.timeout_at is not None and now >= gate.timeout_at:
                # The timer has not fired in this workflow task yet (a worker was down); the
                # declared timeout outcome applies, not a decision that came too late.
                raise ValueError(
                    f"gate {gate.id} timed out at {gate.timeout_at.isoformat()} (arrived at {now.isoformat()}); "
                    "its declared timeout outcome applies: refused, nothing was decided"
                )
            self.check_approver(input.identity, approving=approving)
        except ValueError as exc:
            workflow.logger.warning("%s by %s refused: %s", update, input.identity, exc)
            raise
        return gate

    def check_approver(self, identity: str, *, approving: bool) -> None:
        """See :func:`check_approver` with this procedure's rules."""
        check_approver(
            identity, approving=approving, requested_by=self.rules.requested_by, four_eyes=self.rules.four_eyes,
            allowed_approvers=self.rules.allowed_approvers, procedure=self.noun,
        )

    # --- state --------------------------------------------------------------------------------------

    def waiting(self) -> list[Gate]:
        return [g for g in self.gates.values() if g.state == GateState.WAITING]

    def record(
        self,
        gate_id: str,
        action: str,
        by: str,
        comment: str = "",
        outcome: GateTimeoutOutcome | None = None,
        connection_identity: str | None = None,
    ) -> None:
        """Append a :class:`GateRecord` stamped ``workflow.now()`` (workflow state only: no
        command, so stored histories replay unchanged)."""
        self.history.append(
            GateRecord(  # type: ignore[arg-type]
                gate_id=gate_id, action=action, by=by, at=workflow.now(), comment=comment, outcome=outcome,
                connection_identity=connection_identity,
            )
        )

    def decide(
        self, gate: Gate, state: GateState, identity: str, comment: str = "", connection_identity: str | None = None
    ) -> None:
        """Approve or reject ``gate`` as ``identity`` (recorded with the sender's
        ``connection_identity``, the credential's identity or None when unauthenticated); a
        rejection pauses the procedure when ``pause_on_reject``."""
        gate.state = state
        gate.decided_by = identity
        gate.connection_identity = connection_identity
        gate.decided_at = workflow.now()
        gate.comment = comment
        if state == GateState.APPROVED and gate.choices:
            gate.decision = gate.choices[0]
        action = "approved" if state == GateState.APPROVED else "rejected"
        self.record(gate.id, action, identity, comment, connection_identity=connection_identity)
        if gate.decision is not None:
            self.history[-1].decision = gate.decision
        if state == GateState.REJECTED and self.pause_on_reject:
            self.control.pause(f"gate {gate.id} rejected by {identity}" + (f": {comment}" if comment else ""))
        self.on_change()

    def approve_update(self, input: Any) -> GateDecisionResult:
        """The ``approve`` update of a workflow with these gates (``input`` an ApproveInput,
        validated by :meth:`check_decision`): the waiting gate approved, the answer to send back."""
        gate = self.find_waiting(input.gate_id)
        self.decide(gate, GateState.APPROVED, input.identity, input.comment, input.connection_identity)
        return GateDecisionResult(gate_id=gate.id, state=gate.state, message=f"gate {gate.id} approved by {input.identity}")

    def reject_update(self, input: Any, note: str = "") -> GateDecisionResult:
        """The ``reject`` update (``input`` a RejectInput): the waiting gate rejected; ``note``
        (what follows, the procedure's rule) ends the answer's message."""
        gate = self.find_waiting(input.gate_id)
        self.decide(gate, GateState.REJECTED, input.identity, input.comment, input.connection_identity)
        return GateDecisionResult(gate_id=gate.id, state=gate.state,
                                  message=f"gate {gate.id} rejected by {input.identity}" + (f"; {note}" if note else ""))

    def decide_update(self, input: DecideInput) -> DecideResult:
        """The ``decide`` update on a gate with choices (validated by :meth:`check_choice`)."""
        gate = self.find_waiting(input.gate_id or input.node)
        self.choose(gate, input.decision, input.identity, input.comment, input.connection_identity)
        return DecideResult(gate_id=gate.id, decision=input.decision,
                            message=f"{input.decision} decided on gate {gate.id} by {input.identity}")

    def check_choice(self, input: Any, choice: str) -> Gate:
        """Validator of ``decide`` on a gate with choices: :meth:`check_decision` (an approval:
        in time, the gate waits, the identity may approve), then ``choice`` is one of the gate's.
        Raises ValueError."""
        gate = self.check_decision(input, approving=True)
        if not gate.choices:
            raise ValueError(f"gate {gate.id} takes approve or reject, not a choice")
        if choice not in gate.choices:
            raise ValueError(f"gate {gate.id}: {choice!r} is not one of its choices ({', '.join(gate.choices)}) or reject")
        return gate

    def choose(self, gate: Gate, choice: str, identity: str, comment: str = "", connection_identity: str | None = None) -> None:
        """Decide ``gate`` with one of its ``choices`` (validated by :meth:`check_choice`):
        state decided, recorded with the choice; the gate passes."""
        gate.state, gate.decision = GateState.DECIDED, choice
        gate.decided_by, gate.decided_at, gate.comment = identity, workflow.now(), comment
        gate.connection_identity = connection_identity
        self.history.append(GateRecord(gate_id=gate.id, action="decided", by=identity, at=workflow.now(), comment=comment,
                                       decision=choice, connection_identity=connection_identity))
        self.passed.add(gate.id)
        self.on_change()

    def cancel(self, gate: Gate, by: str, comment: str) -> None:
        """Cancel a waiting gate (its node was skipped, the procedure aborted)."""
        gate.state = GateState.CANCELLED
        self.record(gate.id, "cancelled", by, comment)

    def open(
        self,
        gate_id: str,
        kind: GateKind = GateKind.STEP,
        *,
        timeout_seconds: float | None = None,
        pool: str | None = None,
        node: str | None = None,
        comment: str = "",
        opened_by: str = "workflow",
        record_comment: str = "",
        choices: Sequence[str] = (),
    ) -> Gate:
        """Open (or re-open) gate ``gate_id``: state waiting, ``timeout_at`` now + timeout,
        ``choices`` a person may make besides reject. Records "opened"; the caller then waits
        with :meth:`wait`."""
        now = workflow.now()
        gate = Gate(
            id=gate_id, kind=kind, pool=pool, node=node, opened_at=now, comment=comment, choices=list(choices),
            timeout_at=now + timedelta(seconds=timeout_seconds) if timeout_seconds is not None else None,
        )
        self.gates[gate_id] = gate
        self.record(gate_id, "opened", opened_by, record_comment)
        return gate

    async def wait(
        self,
        gate: Gate,
        *,
        timeout_outcome: GateTimeoutOutcome = GateTimeoutOutcome.REJECT,
        timeout_seconds: float | None = None,
        interrupt: Callable[[], bool] = lambda: False,
        while_waiting: Callable[[], Awaitable[None]] | None = None,
        abort_comment: str | None = None,
        interrupt_comment: Callable[[], str] | None = None,
    ) -> bool:
        """Wait for a decision on ``gate``, its timeout, or an abort; True when passed
        (approved, or timed out with outcome approve).

        ``interrupt``: wake up while the gate waits (the rollout's skip/retry requests) and run
        ``while_waiting`` before waiting again. A timeout is recorded with ``by="timeout"`` and
        ``timeout_outcome``, then applied: approve passes; abort requests an abort; reject pauses
        (``pause_on_reject``) or just returns False. An abort while waiting cancels the gate.
        """
        timeout = timeout_seconds
        while True:
            remaining = None if gate.timeout_at is None else (gate.timeout_at - workflow.now()).total_seconds()
            try:
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: gate.state != GateState.WAITING or self.control.stopping() or interrupt(), timeout=remaining
                )
            except TimeoutError:
                self.timed_out(gate, timeout, timeout_outcome)
                break
            if interrupt() and gate.state == GateState.WAITING and not self.control.stopping() and while_waiting is not None:
                await while_waiting()
                continue
            break
        if gate.state == GateState.WAITING:  # aborted (or interrupted) while waiting
            why = abort_comment or f"{self.noun} aborted"
            if not self.control.abort and self.control.revert:
                why = f"revert requested by {self.control.revert_by}"
            elif not self.control.abort and interrupt_comment is not None:
                why = interrupt_comment()
            self.cancel(gate, "workflow", why)
        if gate.state in (GateState.APPROVED, GateState.DECIDED):
            self.passed.add(gate.id)
        return gate.id in self.passed

    def timed_out(self, gate: Gate, timeout: float | None, outcome: GateTimeoutOutcome) -> None:
        """Apply the declared ``outcome`` of a timed-out gate and record it as a timeout."""
        gate.state, gate.decided_by, gate.decided_at = GateState.TIMED_OUT, "timeout", workflow.now()
        self.record(gate.id, "timeout", "timeout", f"no decision within {timeout}s", outcome=outcome)
        workflow.logger.warning("gate %s timed out; declared outcome %s", gate.id, outcome)
        if outcome == GateTimeoutOutcome.APPROVE:
            self.passed.add(gate.id)
        elif outcome == GateTimeoutOutcome.ABORT:
            self.control.request_abort(f"gate {gate.id} timed out after {timeout}s (declared outcome: abort)", "timeout")
        elif self.pause_on_reject:
            self.control.pause(f"gate {gate.id} timed out after {timeout}s (declared outcome: reject)")

    async def approval(
        self,
        gate_id: str,
        what: str,
        *,
        timeout_seconds: float | None,
        timeout_outcome: GateTimeoutOutcome = GateTimeoutOutcome.REJECT,
        auto_approve: bool = False,
        kind: GateKind = GateKind.STEP,
    ) -> Gate:
        """A step's approval gate (the etcd restore's shape): already approved → return it;
        otherwise open it (``what`` as comment), pass at once with ``auto_approve`` (recorded as
        approved by "auto-approve"), else wait. Returns the gate; the caller checks
        ``gate.id in gates.passed`` and the state (rejected, timed-out, cancelled)."""
        known = self.gates.get(gate_id)
        if known is not None and known.state == GateState.APPROVED:
            return known
        gate = self.open(gate_id, kind, timeout_seconds=timeout_seconds, comment=what, opened_by="lockkeeper", record_comment=what)
        if auto_approve:
            self.decide(gate, GateState.APPROVED, "auto-approve", "input auto_approve")
            self.passed.add(gate.id)
            return gate
        self.on_change()
        await self.wait(gate, timeout_outcome=timeout_outcome, timeout_seconds=timeout_seconds)
        self.on_change()
        return gate

    async def step(
        self,
        gate_id: str,
        what: str,
        policy: GatePolicy,
        *,
        kind: GateKind = GateKind.STEP,
        node: str | None = None,
        pool: str | None = None,
        choices: Sequence[str] = (),
        interrupt: Callable[[], str | None] = lambda: None,
        required: bool = False,
        again: bool = False,
    ) -> GateAnswer:
        """The one gate step every procedure uses: open ``gate_id`` with ``what`` (the text a
        person reads, also the opened record's comment), wait for approve / reject / a choice /
        the ``policy``'s timeout (its declared outcome applies) / an abort, and answer.

        - A gate that already passed in this run answers at once (a step retried after a pause
          does not ask twice) unless ``again``: each pass then asks afresh.
        - ``choices``: what a person may decide besides reject (``lockkeeper decide ID GATE
          CHOICE``); ``approve`` takes the first. Never a comment's first word.
        - ``interrupt()`` returning a reason (e.g. "revert requested") cancels a waiting gate
          with that reason.
        - ``required``: unless it passed, raise :class:`workflows.kit.control.Aborted` /
          :class:`~workflows.kit.control.RevertRequested` when that is why, else
          :class:`GateNotPassed`.

        What a rejection or a timeout then does to the whole procedure is the gates' rule
        (``pause_on_reject``) and the policy's outcome (abort requests an abort)."""
        known = self.gates.get(gate_id)
        if not again and known is not None and gate_id in self.passed:
            return GateAnswer(known, True, known.decision or "approve")
        gate = self.open(gate_id, kind, timeout_seconds=policy.timeout_seconds, pool=pool, node=node, comment=what,
                         opened_by="lockkeeper", record_comment=what, choices=choices)
        self.on_change()
        reason: list[str] = []

        def interrupted() -> bool:
            why = interrupt()
            if why:
                reason[:] = [why]
            return bool(why)

        await self.wait(gate, timeout_outcome=policy.timeout_outcome, timeout_seconds=policy.timeout_seconds,
                        interrupt=interrupted, abort_comment=f"{self.noun} aborted",
                        interrupt_comment=lambda: reason[0] if reason else "interrupted")
        passed = gate.id in self.passed
        if again:
            self.passed.discard(gate.id)
        self.on_change()
        answer = GateAnswer(gate, passed, (gate.decision or "approve") if passed else None)
        if required and not passed:
            if self.control.abort:
                raise Aborted(self.control.abort_reason)
            if self.control.revert:
                raise RevertRequested(self.control.revert_reason)
            raise GateNotPassed(answer)
        return answer


class GateUpdates:
    """The ``approve`` and ``reject`` updates (with their validators) of a workflow whose gates are
    ``self.gates``: every procedure (:class:`workflows.kit.procedure.ProcedureWorkflow`) and every
    node run with gates of its own (:class:`workflows.kit.noderun.GatedNodeRunWorkflow`), so a
    decision is taken the same way wherever its gate lives. ``kit_reject_note`` (what follows a
    rejection, in the answer) is the workflow's; none by default."""

    gates: Gates
    kit_reject_note: str = ""

    @workflow.update
    def approve(self, input: ApproveInput) -> GateDecisionResult:
        """Approve a waiting gate (``gate_id`` None = the only waiting gate)."""
        return self.gates.approve_update(input)

    @approve.validator
    def _validate_approve(self, input: ApproveInput) -> None:
        self.gates.check_decision(input, approving=True)

    @workflow.update
    def reject(self, input: RejectInput) -> GateDecisionResult:
        """Reject a waiting gate; what follows is the workflow's rule (``kit_reject_note``)."""
        return self.gates.reject_update(input, self.kit_reject_note)

    @reject.validator
    def _validate_reject(self, input: RejectInput) -> None:
        self.gates.check_decision(input, approving=False)
