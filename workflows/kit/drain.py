"""Cordon, drain and the blocked-drain decision gate (R2), for every procedure that drains a node.

A drain whose evictions a PodDisruptionBudget refuses keeps retrying with backoff. Once it has
been blocked for ``decide_after`` seconds, the node's decision gate ``drain/{node}`` opens with
four choices (:class:`DrainDecision`): ``wait`` (retry, ask again after another ``decide_after``),
``skip``, ``delete-pod`` (delete the blocking pods despite the budget) and ``abort``. A decision
timeout applies the declared default (wait, skip or abort, never delete-pod) and is recorded with
``by="timeout"``.

All of it is workflow state (:class:`DrainGateState`), so a worker that dies while a drain is
blocked replays to the same open gate, and the Events on the Node (only on transitions: first
block, gate opened, decision applied) are not emitted again. Decisions arrive as a Temporal
Update (validated with :func:`check_decision`: identity, open gate, allowed approvers, four-eyes
for delete-pod) on the procedure, which applies them itself or forwards them to the node run.

:func:`cordon_and_drain` is the whole step: cordon for an owner (the ``lockkeeper.io/cordoned-by``
record, so only our own cordon is undone later), drain until empty, then the procedure's
``hand_off`` (the MachineConfig rollout sets ``lastAppliedDrain``; the plain drain has none).

Sources: MCO ``pkg/daemon/drain.go`` (the daemon degrades after 1 h of failed drain);
kubectl ``pkg/drain`` (eviction, 429 from a budget); kured #78/#82 (a timeout and a policy).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import (
        CordonInput,
        CordonResult,
        DeleteBlockingPodsInput,
        DeleteBlockingPodsResult,
        DrainInput,
        DrainReport,
        DrainResult,
        RecordEventInput,
    )
    from workflows.kit import calls as acts
    from workflows.kit.models import (
        DecideInput,
        DrainDecision,
        DrainDecisionSignal,
        Gate,
        GateKind,
        GateRecord,
        GateState,
    )


#: What :func:`drain_until_done` ended with: drained, a skip/abort decision, or an outside stop
#: (skip/abort signal of the procedure) seen at a safe point.
DrainOutcome = Literal["drained", "skip", "abort", "stopped"]

CHOICES = [DrainDecision.WAIT, DrainDecision.SKIP, DrainDecision.DELETE_POD, DrainDecision.ABORT]


def drain_gate_id(node: str) -> str:
    """``drain/{node}``: the decision gate of one node's blocked drain."""
    return f"drain/{node}"


def check_decision(
    inp: DecideInput,
    gate: Gate | None,
    *,
    requested_by: str,
    four_eyes: bool,
    allowed_approvers: list[str],
) -> None:
    """Validator of the ``decide`` update. Raises ValueError (the operator's message) when:
    no identity; no decision gate open on ``inp.node``, or its ``timeout_at`` passed (call from
    a validator: reads ``workflow.now()``); the identity is not in
    ``allowed_approvers`` (when the list is not empty); ``delete-pod`` by the requester under
    the four-eyes rule."""
    if not inp.identity.strip():
        raise ValueError("an identity is required to decide a blocked drain")
    if inp.decision not in {str(c) for c in CHOICES}:
        raise ValueError(f"{inp.decision!r} is not a drain decision: choose {'|'.join(str(c) for c in CHOICES)}")
    if gate is None or gate.state != GateState.WAITING:
        state = f" (gate {gate.id} is {gate.state})" if gate is not None else ""
        raise ValueError(f"node {inp.node} has no drain decision waiting{state}")
    now = workflow.now()
    if gate.timeout_at is not None and now >= gate.timeout_at:
        # The node run has not applied its timeout yet (a worker was down): the declared
        # default applies, not a decision that came too late (issue 18).
        raise ValueError(
            f"gate {gate.id} timed out at {gate.timeout_at.isoformat()} (arrived at {now.isoformat()}); "
            "its declared default applies: refused, nothing was decided"
        )
    if allowed_approvers and inp.identity not in allowed_approvers:
        raise ValueError(f"{inp.identity} is not an allowed approver ({', '.join(allowed_approvers)})")
    if inp.decision == DrainDecision.DELETE_POD and four_eyes and inp.identity == requested_by:
        raise ValueError(
            f"four-eyes rule: {inp.identity} requested this procedure and may not approve delete-pod; "
            "another person must decide"
        )


@dataclass(eq=False)
class DrainGateState:
    """One node's blocked-drain state, kept in workflow state (replay restores it).

    ``blocked_since``: first refused pass of the current block; ``next_ask``: when the gate
    opens (``decide_after`` after the block began or after the last ``wait``); ``gate``: the
    current or last gate; ``records``: every opened/decided/timeout/cancelled record;
    ``pending``: a decision received but not yet applied; ``event_recorded``: the DrainBlocked
    Event of this block was emitted; ``ask_by``: set by the procedure (None by default), the
    gate opens at this instant at the latest, whatever ``decide_after`` says (the MachineConfig
    rollout's escalation before the machine-config-daemon's drain deadline), also after a
    ``wait`` decided on an earlier gate; the gate it opens clears it (a ``wait`` there: the next
    question comes ``decide_after`` later, never if None).
    """

    node: str
    decide_after: float | None
    timeout: float | None
    outcome: DrainDecision
    blocked_since: datetime | None = field(default=None, init=False)
    next_ask: datetime | None = field(default=None, init=False)
    gate: Gate | None = field(default=None, init=False)
    records: list[GateRecord] = field(default_factory=list, init=False)
    pending: DrainDecisionSignal | None = field(default=None, init=False)
    event_recorded: bool = field(default=False, init=False)
    last_report: DrainReport | None = field(default=None, init=False)
    ask_by: datetime | None = field(default=None, init=False)

    @property
    def open_gate(self) -> Gate | None:
        """The gate while it waits for a decision, else None."""
        return self.gate if self.gate is not None and self.gate.state == GateState.WAITING else None

    def _record(
        self, action: str, by: str, at: datetime, comment: str = "", decision: DrainDecision | None = None,
        connection_identity: str | None = None,
    ) -> None:
        self.records.append(
            GateRecord(
                gate_id=drain_gate_id(self.node), action=action, by=by, at=at, comment=comment, decision=decision,
                connection_identity=connection_identity,
            )
        )

    def on_blocked(self, now: datetime, report: DrainReport) -> None:
        """A drain pass was refused: keep the report; the first refusal starts the block."""
        self.last_report = report
        if self.blocked_since is None:
            self.blocked_since = now
            if self.decide_after is not None:
                self.next_ask = now + timedelta(seconds=self.decide_after)
        if self.ask_by is not None and self.open_gate is None and (self.next_ask is None or self.ask_by < self.next_ask):
            self.next_ask = max(now, self.ask_by)

    def should_open(self, now: datetime) -> bool:
        """True when no gate waits and the block has lasted ``decide_after`` (or since the last ``wait``)."""
        return self.open_gate is None and self.next_ask is not None and now >= self.next_ask

    def open(self, now: datetime) -> Gate:
        """Open the decision gate ``drain/{node}`` (recorded ``opened``) and return it."""
        self.gate = Gate(
            id=drain_gate_id(self.node),
            kind=GateKind.DRAIN,
            node=self.node,
            opened_at=now,
            timeout_at=now + timedelta(seconds=self.timeout) if self.timeout is not None else None,
            choices=list(CHOICES),
        )
        self.next_ask = None
        blocked = int((now - self.blocked_since).total_seconds()) if self.blocked_since else 0
        escalated = self.ask_by is not None and now >= self.ask_by
        if escalated:
            self.ask_by = None
        self._record("opened", "workflow", now, f"drain blocked for {blocked}s" + (
            "; escalated before the daemon's drain deadline (drain_escalate_after_seconds)" if escalated else ""))
        return self.gate

    def receive(self, sig: DrainDecisionSignal) -> bool:
        """Take a validated decision; False (ignored) when no gate waits any more."""
        if self.open_gate is None or self.pending is not None:
            return False
        self.pending = sig
        return True

    def due(self, now: datetime) -> tuple[DrainDecision, str, str] | None:
        """The decision to apply now, recorded: a received one, or the timeout's default."""
        gate = self.open_gate
        if gate is None:
            return None
        if self.pending is not None:
            sig, self.pending = self.pending, None
            at = sig.at or now
            gate.state, gate.decided_by, gate.decided_at = GateState.DECIDED, sig.identity, at
            gate.comment, gate.decision, gate.connection_identity = sig.comment, sig.decision, sig.connection_identity
            self._record("decided", sig.identity, at, sig.comment, sig.decision, sig.connection_identity)
            return sig.decision, sig.identity, sig.comment
        if gate.timeout_at is not None and now >= gate.timeout_at:
            gate.state, gate.decided_by, gate.decided_at = GateState.TIMED_OUT, "timeout", now
            gate.decision = self.outcome
            comment = f"no decision within {self.timeout}s; declared default {self.outcome}"
            gate.comment = comment
            self._record("timeout", "timeout", now, comment, self.outcome)
            return self.outcome, "timeout", comment
        return None

    def ask_again(self, now: datetime) -> None:
        """After ``wait`` or ``delete-pod``: the next question comes ``decide_after`` from now."""
        if self.decide_after is not None:
            self.next_ask = now + timedelta(seconds=self.decide_after)

    def cleared(self, now: datetime) -> bool:
        """The drain finished: a waiting gate is cancelled (recorded). True if one was."""
        self.blocked_since = None
        self.next_ask = None
        self.pending = None
        self.event_recorded = False
        gate = self.open_gate
        if gate is None:
            return False
        gate.state, gate.decided_by, gate.decided_at = GateState.CANCELLED, "workflow", now
        gate.comment = "the drain finished before a decision"
        self._record("cancelled", "workflow", now, gate.comment)
        return True

    def sleep_for(self, now: datetime, backoff: float) -> float:
        """The backoff, cut short so the gate opens / times out on time (seconds, >= 0)."""
        until = [backoff]
        if self.open_gate is None and self.next_ask is not None:
            until.append((self.next_ask - now).total_seconds())
        gate = self.open_gate
        if gate is not None and gate.timeout_at is not None:
            until.append((gate.timeout_at - now).total_seconds())
        return max(0.0, min(until))


@dataclass
class DrainLoop:
    """How :func:`drain_until_done` talks to its workflow.

    ``before_pass()``: called before each drain pass (status "draining"); ``blocked(report,
    reason)``: the pass was refused (status "blocked" with the report); ``changed()``: the gate
    opened or closed (status refresh); ``stopped()``: an outside skip/abort is pending.
    """

    node: str
    wait_seconds: float
    backoff_initial: float
    backoff_max: float
    timeouts: acts.Timeouts
    before_pass: Callable[[], Awaitable[None]]
    blocked: Callable[[DrainReport, str], Awaitable[None]]
    changed: Callable[[], Awaitable[None]]
    stopped: Callable[[], bool]


def blocked_reason(drain: DrainResult, report: DrainReport) -> str:
    """``drain blocked by ns/pod`` (a budget refused) or ``pods still terminating: ...``."""
    names = ", ".join(f"{p.namespace}/{p.name}" for p in report.blocked_pods) or ", ".join(drain.remaining)
    return f"drain blocked by {names}" if report.blocked_pods else f"pods still terminating: {names}"


def event_message(report: DrainReport, reason: str) -> str:
    """The DrainBlocked Event text: which pod, which budget and its counts, why no replacement."""
    parts = [reason]
    for bp in report.blocked_pods:
        for pdb in bp.pdbs:
            parts.append(
                f"PodDisruptionBudget {pdb.namespace}/{pdb.name}: disruptionsAllowed {pdb.disruptions_allowed}, "
                f"currentHealthy {pdb.current_healthy}, desiredHealthy {pdb.desired_healthy}"
            )
    for pr in report.pending_replacements:
        parts.append(f"replacement {pr.namespace}/{pr.name} Pending: {pr.message or 'no FailedScheduling event'}")
    return "; ".join(parts)


async def _event(node: str, reason: str, message: str, timeouts: acts.Timeouts, type: str = "Warning") -> None:
    await acts.call(
        acts.RECORD_NODE_EVENT,
        RecordEventInput(node=node, reason=reason, message=message[:1000], type=type),
        None,
        timeouts=timeouts,
    )


async def drain_until_done(loop: DrainLoop, st: DrainGateState) -> DrainOutcome:
    """Drain passes until the node is empty, backing off while blocked, with the decision gate.

    Returns ``drained``; ``skip`` / ``abort`` when that was decided (or the timeout's default);
    ``stopped`` when ``loop.stopped()`` held at a safe point (before a pass, or during the
    backoff). ``delete-pod`` deletes the blocking pods of the last report and drains again.
    Events on the Node: DrainBlocked (first refusal of a block), DrainDecisionRequired (gate
    opened), DrainDecision (a decision or timeout applied).
    """
    backoff = loop.backoff_initial
    while True:
        if loop.stopped():
            return "stopped"
        await loop.before_pass()
        drain: DrainResult = await acts.call(
            acts.DRAIN_NODE,
            DrainInput(node=loop.node, wait_seconds=loop.wait_seconds),
            DrainResult,
            seconds=loop.wait_seconds,
            heartbeat=True,
            timeouts=loop.timeouts,
        )
        if drain.done:
            if st.cleared(workflow.now()):
                await loop.changed()
            return "drained"
        report = drain.blocked or DrainReport()
        reason = blocked_reason(drain, report)
        st.on_blocked(workflow.now(), report)
        await loop.blocked(report, reason)
        if not st.event_recorded:
            st.event_recorded = True
            await _event(loop.node, "DrainBlocked", event_message(report, reason), loop.timeouts)
        if st.should_open(workflow.now()):
            st.open(workflow.now())
            await loop.changed()
            await _event(
                loop.node,
                "DrainDecisionRequired",
                f"drain blocked since {st.blocked_since.isoformat() if st.blocked_since else '?'}; "
                f"decide wait, skip, delete-pod or abort ({reason})",
                loop.timeouts,
            )
        # The timer is interruptible: skip/abort or a decision should not wait out a 60 s backoff.
        try:
            await workflow.wait_condition(
                lambda: loop.stopped() or st.pending is not None, timeout=st.sleep_for(workflow.now(), backoff)
            )
        except TimeoutError:
            pass
        backoff = min(backoff * 2, loop.backoff_max)
        due = st.due(workflow.now())
        if due is None:
            continue
        decision, by, comment = due
        await loop.changed()
        await _event(
            loop.node,
            "DrainDecision",
            f"{decision} decided by {by}" + (f": {comment}" if comment else ""),
            loop.timeouts,
            type="Normal" if decision == DrainDecision.WAIT else "Warning",
        )
        if decision in (DrainDecision.SKIP, DrainDecision.ABORT):
            return "skip" if decision == DrainDecision.SKIP else "abort"
        if decision == DrainDecision.DELETE_POD:
            pods = [f"{p.namespace}/{p.name}" for p in (st.last_report or DrainReport()).blocked_pods]
            if pods:
                await acts.call(
                    acts.DELETE_BLOCKING_PODS,
                    DeleteBlockingPodsInput(node=loop.node, pods=pods, decided_by=by, comment=comment),
                    DeleteBlockingPodsResult,
                    timeouts=loop.timeouts,
                )
            backoff = loop.backoff_initial
        st.ask_again(workflow.now())


def blocked_waiting_for(st: DrainGateState) -> str:
    """What a blocked drain waits for, for ``status``: a decision on the open gate, or the pods to
    become evictable (with the instant the gate opens when ``decide_after`` is set)."""
    gate = st.open_gate
    if gate is not None:
        return f"a decision on gate {gate.id}: wait, skip, delete-pod or abort"
    if st.next_ask is not None:
        return f"the blocking pods to become evictable (decision asked at {st.next_ask.isoformat()})"
    return "the blocking pods to become evictable (drain retried with backoff)"


@dataclass
class CordonDrainResult:
    """What :func:`cordon_and_drain` did: the drain's ``outcome``; ``cordoned_by_us``: the cordon
    activity found the node schedulable, or already cordoned by ``owner``; ``seconds``: from the
    cordon to the end of the hand-off (or to the stop)."""

    outcome: DrainOutcome
    cordoned_by_us: bool
    seconds: float


async def cordon_and_drain(
    loop: DrainLoop,
    st: DrainGateState,
    *,
    owner: str,
    before_cordon: Callable[[], Awaitable[None]] | None = None,
    on_cordoned: Callable[[bool], None] | None = None,
    hand_off: Callable[[], Awaitable[None]] | None = None,
    after_cordon: Callable[[bool], Awaitable[None]] | None = None,
) -> CordonDrainResult:
    """Cordon ``loop.node`` for ``owner``, drain it with :func:`drain_until_done`, then hand off.

    Hooks: ``before_cordon()`` (status "cordon"); ``on_cordoned(cordoned_by_us)`` right after the
    cordon, so status shows whose cordon it is while the drain runs; ``after_cordon(cordoned_by_us)``
    then, before the first drain pass, for a procedure that reports the cordon somewhere (the
    MachineConfig rollout's MachineConfigNode ``Cordoned``, as the controller writes it when it
    cordons); ``hand_off()`` once drained
    (the MachineConfig rollout answers the daemon with ``lastAppliedDrain``; a plain drain passes
    None). A skip/abort decision or an outside stop returns without the hand-off; the caller
    decides what to undo (uncordon only when ``cordoned_by_us``). Activity failures propagate.
    """
    started = workflow.now()
    if before_cordon is not None:
        await before_cordon()
    cordon: CordonResult = await acts.call(
        acts.CORDON_NODE, CordonInput(node=loop.node, owner=owner), CordonResult, timeouts=loop.timeouts
    )
    if on_cordoned is not None:
        on_cordoned(cordon.cordoned_by_us)
    if after_cordon is not None:
        await after_cordon(cordon.cordoned_by_us)
    outcome = await drain_until_done(loop, st)
    if outcome == "drained" and hand_off is not None:
        await hand_off()
    return CordonDrainResult(outcome, cordon.cordoned_by_us, (workflow.now() - started).total_seconds())
