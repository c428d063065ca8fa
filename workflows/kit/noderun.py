"""Per-node runs: one child workflow per node, reporting every step to its parent procedure.

DESIGN.md "Node run": a child per node keeps the parent's history small and lets each node be
retried, skipped or inspected on its own. This module holds what every node run needs whatever
it does to the node:

- :class:`NodeRun`, the component: progress to the parent (the kit's ``child_report`` signal, sent without
  awaiting each one), the skip/abort requests honoured at safe points (:class:`Stopped`),
  deadline warnings, the node's cordon-and-drain with the blocked-drain decision gate
  (:mod:`workflows.kit.drain`), the rollback shell and the stamping of the result.
- :class:`NodeRunWorkflow`, the base class of node-run workflows: the ``skip``, ``abort`` and
  ``drain_decision`` signals that the parent's node window (:mod:`workflows.kit.batches`) sends,
  and the ``progress`` query. Inherited handlers keep those names the same for every procedure.
  :class:`GatedNodeRunWorkflow` adds ``approve`` / ``reject`` / ``decide`` for a run with gates
  of its own.

A node run never raises for a node that ended badly: it returns a result whose ``outcome`` says so
(``degraded``, ``skipped``, ``aborted``); only an activity failure that retries cannot fix fails it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import DrainReport, UncordonInput, UncordonResult
    from workflows.kit import calls as acts
    from workflows.kit.drain import DrainGateState, DrainLoop, blocked_waiting_for, cordon_and_drain
    from workflows.kit.lease import Leases, answer_contender
    from workflows.kit.gates import GateUpdates, Gates
    from workflows.kit.host import sweep_debug_pods
    from workflows.kit.models import (
        DecideInput,
        DecideResult,
        DrainDecisionSignal,
        GateRecord,
        LeaseInfo,
        NodePhase,
        NodeProgress,
    )
    from workflows.kit.report import CHILD_REPORT_SIGNAL, ChildReport
    from workflows.kit.scopes import LeaseScope



#: Phases the parent learns from the child's completion (its result), never from a signal.
_RESULT_PHASES = frozenset({NodePhase.DONE, NodePhase.SKIPPED, NodePhase.ABORTED, NodePhase.DEGRADED, NodePhase.FAILED})

#: Step names the kit itself reports (a procedure adds its own; ``NodeProgress.step`` is a string).
STEP_CORDON = "cordon"
STEP_DRAIN = "drain"
STEP_HAND_OFF_DRAIN = "hand-off-drain"
STEP_ROLLBACK = "rollback"
STEP_FINISHED = "finished"

StopKind = Literal["skip", "abort"]
R = TypeVar("R", bound="NodeRunResult")


class NodeRunResult(BaseModel):
    """What a node run returns (a procedure's node result extends it with its own fields).

    ``outcome`` done / degraded / skipped / aborted / failed; ``safe_point`` the step where it
    stopped; ``cordoned_by_us`` the node is still cordoned by this run's owner; ``decisions`` the
    records of its blocked-drain gate; ``abort_requested`` that gate ended with ``abort``, so the
    parent aborts the whole procedure; ``past_no_return`` the step with which the run passed the
    node's point of no return (None: it did not), so a skip of the stopped node leaves it as it
    is instead of rolling it back (:class:`workflows.kit.batches.NodeBatches`).
    """

    node: str
    outcome: Literal["done", "degraded", "skipped", "aborted", "failed"]
    reason: str | None = None
    safe_point: str | None = None
    attempt: int = 1
    cordoned_by_us: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    decisions: list[GateRecord] = Field(default_factory=list)
    abort_requested: bool = False
    past_no_return: str | None = None


def progress_details(p: NodeProgress) -> str:
    """A node run's current details (markdown, as the Temporal UI shows them): node, attempt,
    phase and step, what it waits for since when and until when, the latest warning."""
    lines = [f"**node {p.node}** (attempt {p.attempt}) — {p.phase}" + (f", step **{p.step}**" if p.step else "")]
    if p.waiting_for:
        since = p.since.isoformat(timespec="seconds") if p.since else "?"
        until = f", until {p.deadline.isoformat(timespec='seconds')}" if p.deadline else ""
        lines += ["", f"Waiting for {p.waiting_for} since {since}{until}"]
    if p.reason:
        lines += ["", p.reason]
    if p.warning:
        lines += ["", f"**Warning:** {p.warning}"]
    return "\n".join(lines)


class Stopped(Exception):
    """A skip/abort request (or a skip/abort drain decision) reached a safe point."""


class DrainTimedOut(Exception):
    """The drain did not finish within ``give_up_after`` seconds (the caller chose to go on, as
    openshift-ansible does with ``openshift_upgrade_nodes_drain_timeout`` > 0)."""


class NodeRun:
    """State and steps of one node run (lives in workflow state, so replay restores it).

    ``node``, ``attempt`` (1, 2, ... for retry_node), ``parent_id`` (the procedure's workflow ID,
    the target of its reports), ``owner`` (the cordoned-by value: the same for every attempt,
    so a retry recognises an earlier attempt's cordon as ours), ``warn_fraction`` (0..1 of a
    deadline after which :meth:`warn_deadline` warns), ``timeouts`` (activity timeouts), ``drain``
    (the node's blocked-drain state; its gate and records travel in every progress report) and
    ``deadline_consequence`` (what happens at a deadline, for the warning text).

    ``report_steps``: None (the default) signals every step change to the parent; a set of step
    names makes the run signal only those steps, a phase other than running (a blocked drain and
    its decision gate), a new warning or decision record, and the return to running; the final
    phase then reaches the parent with the child's result. The full step stays in the ``progress``
    query of the node run. Temporal counts every signal in both histories and caps signals per
    workflow, so a 2,000-node pool cannot afford ten signals per node (issue 16).
    """

    def __init__(
        self,
        *,
        node: str,
        attempt: int,
        parent_id: str,
        owner: str,
        warn_fraction: float,
        timeouts: acts.Timeouts,
        drain: DrainGateState,
        deadline_consequence: str = "the daemon degrades node {node}",
        report_steps: frozenset[str] | None = None,
    ) -> None:
        self.node = node
        self.attempt = attempt
        self.parent_id = parent_id
        self.owner = owner
        self.warn_fraction = warn_fraction
        self.timeouts = timeouts
        self.drain = drain
        self.deadline_consequence = deadline_consequence
        self.stop: StopKind | None = None
        self.stop_by: str | None = None
        self.progress = NodeProgress(node=node, attempt=attempt, phase=NodePhase.PENDING)
        self.cordoned_by_us = False
        #: The step with which this run passed the node's point of no return (None: not yet): the
        #: node step that changes the node beyond what the window's rollback undoes sets it; it
        #: goes to the parent in every report and in the result.
        self.past_no_return: str | None = None
        #: The node's decision gate ended with ``abort``: the parent aborts the whole procedure.
        self.abort_requested = False
        self.started_at: datetime = workflow.now()
        self._warned: set[str] = set()
        self._signals: list[asyncio.Future[None]] = []
        self.report_steps = report_steps
        #: The last progress the parent was sent (milestone mode compares with it).
        self._sent: NodeProgress | None = None
        #: Number of reports sent to the parent (benchmarks print signals per node).
        self.signals_sent = 0

    # --- requests from the parent ---------------------------------------------------------------

    def request_stop(self, kind: StopKind, identity: str) -> None:
        """``skip`` (only when nothing was requested yet) or ``abort`` (always wins)."""
        if kind == "abort" or self.stop is None:
            self.stop, self.stop_by = kind, identity

    def receive_decision(self, decision: DrainDecisionSignal) -> None:
        """A validated decision on this node's blocked drain (ignored when no gate waits)."""
        if not self.drain.receive(decision):
            workflow.logger.info("node %s: decision %s ignored, no gate waiting", self.node, decision.decision)

    # --- progress -------------------------------------------------------------------------------

    async def report(
        self,
        phase: NodePhase,
        step: str | None,
        waiting_for: str | None = None,
        *,
        deadline: datetime | None = None,
        warning: str | None = None,
        reason: str | None = None,
        drain_report: DrainReport | None = None,
    ) -> None:
        """Record a step change and signal it to the parent (``since`` = now when phase or step moved).

        An unchanged report sends nothing. The signal is fire and forget: its command goes out with the next activity's command in the same workflow
        task instead of costing a server round trip before every step (the reaction latency to
        the daemon and the procedure's overhead depend on it). Tasks run in creation order, so the
        parent still sees the steps in order; :meth:`settle` waits for all of them.
        """
        p = self.progress
        step_s = str(step) if step else None
        moved = (p.phase, p.step) != (phase, step_s)
        progress = NodeProgress(
            node=self.node,
            attempt=self.attempt,
            phase=phase,
            step=step_s,
            waiting_for=waiting_for,
            since=workflow.now() if moved or p.since is None else p.since,
            deadline=deadline,
            warning=warning or p.warning,
            reason=reason,
            drain_report=drain_report,
            cordoned_by_us=self.cordoned_by_us,
            blocked_since=self.drain.blocked_since if phase == NodePhase.BLOCKED else None,
            decision_gate=self.drain.gate.model_copy() if self.drain.gate is not None else None,
            decisions=list(self.drain.records),
            past_no_return=self.past_no_return,
        )
        if progress == p:
            return
        self.progress = progress
        # The node run's own live view in the Temporal UI (no history event: served by a query).
        workflow.set_current_details(progress_details(progress))
        if self.report_steps is not None and not self.wants_parent(progress):
            return
        self._sent = progress
        self.signals_sent += 1
        parent = workflow.get_external_workflow_handle(self.parent_id)
        # Not awaited, so two reports may overtake each other: the number orders them.
        numbered = progress.model_copy(update={"seq": self.signals_sent})
        self._signals.append(asyncio.ensure_future(self._send(parent, numbered)))

    def wants_parent(self, progress: NodeProgress) -> bool:
        """Milestone mode: whether ``progress`` is worth a signal to the parent. Yes for a step
        in ``report_steps``, a non-running phase the result does not carry (blocked), a change of
        warning, decision gate or decision records, and the first running report after a
        non-running one (the parent must not show a drain as blocked once it moved on)."""
        last = self._sent
        if progress.phase in _RESULT_PHASES:
            return False
        if progress.phase != NodePhase.RUNNING:
            return last != progress
        if last is not None and last.phase != NodePhase.RUNNING:
            return True
        if progress.step in (self.report_steps or ()):
            return last is None or last.step != progress.step
        if progress.warning and (last is None or last.warning != progress.warning):
            return True
        if last is not None and (last.decision_gate != progress.decision_gate or last.decisions != progress.decisions):
            return True
        return bool(progress.decisions) and last is None

    async def _send(self, parent: workflow.ExternalWorkflowHandle, progress: NodeProgress) -> None:
        try:
            await parent.signal(CHILD_REPORT_SIGNAL, ChildReport(workflow_id=workflow.info().workflow_id, seq=progress.seq or 0,
                                                                 node=progress))
        except Exception as err:  # noqa: BLE001 - progress is advisory; a gone parent must not fail the node
            workflow.logger.warning("progress signal to %s failed: %s", self.parent_id, err)

    async def settle(self) -> None:
        """Delete what this node run's debug-pod commands left (a worker killed mid-command
        leaves its pod; :func:`workflows.kit.host.sweep_debug_pods`, nothing for a run without
        debug pods; a pod it cannot delete is logged with its ``oc delete`` command), then wait
        until every progress signal went out (call before the node run returns)."""
        sweep = await sweep_debug_pods(self.timeouts)
        for line in [*sweep.problems, *(i.line() for i in sweep.left)]:
            workflow.logger.warning("node %s: %s", self.node, line)
        if self._signals:
            await asyncio.gather(*self._signals)

    def warn_deadline(self, what: str, started: datetime, total_seconds: float) -> str | None:
        """A warning once ``warn_fraction`` of a ``total_seconds`` deadline started at ``started``
        has elapsed (logged once per ``what``), else None."""
        elapsed = (workflow.now() - started).total_seconds()
        if elapsed < self.warn_fraction * total_seconds:
            return None
        deadline = started + timedelta(seconds=total_seconds)
        consequence = self.deadline_consequence.format(node=self.node)
        text = f"{what} pending for {int(elapsed)}s; {consequence} at {deadline.isoformat()} ({int(total_seconds)}s deadline)"
        if what not in self._warned:
            self._warned.add(what)
            workflow.logger.warning(text)
        return text

    # --- safe points ----------------------------------------------------------------------------

    def check_stop(self) -> None:
        """A safe point: raise :class:`Stopped` when skip/abort was requested."""
        if self.stop is not None:
            raise Stopped()

    async def until_stopped(self, handle: Any, *, settle: bool = False) -> Any:
        """Await an activity ``handle`` (from :func:`workflows.kit.calls.start`) unless a
        skip/abort arrives first: then cancel it and raise :class:`Stopped`. ``settle`` (a handle
        started with ``wait_cancelled``): raise only once the activity has ended, so a roll-back
        after it sees everything the activity wrote before the cancel reached it."""
        await workflow.wait_condition(lambda: handle.done() or self.stop is not None)
        if not handle.done():
            handle.cancel()
            if settle:
                await self.report(NodePhase.RUNNING, STEP_ROLLBACK, f"{self.stop} requested: waiting for the running call to stop")
                try:
                    await handle
                except ActivityError:
                    pass  # cancelled or failed: either way the roll-back reads what it left
            raise Stopped()
        return await handle

    # --- node steps -----------------------------------------------------------------------------

    async def uncordon(self) -> UncordonResult:
        """Uncordon the node only if ``owner`` cordoned it (the activity checks cordoned-by)."""
        return await acts.call(
            acts.UNCORDON_NODE, UncordonInput(node=self.node, owner=self.owner), UncordonResult, timeouts=self.timeouts
        )

    async def cordon_and_drain(
        self,
        *,
        wait_seconds: float,
        backoff_initial: float,
        backoff_max: float,
        deadline_seconds: float,
        hand_off: Callable[[], Awaitable[None]] | None = None,
        stoppable: bool = True,
        give_up_after: float | None = None,
        after_cordon: Callable[[bool], Awaitable[None]] | None = None,
    ) -> float:
        """Cordon for ``owner``, drain until empty (backing off while blocked, the decision gate
        after ``decide_after``, a warning at ``warn_fraction`` of ``deadline_seconds``), then
        report ``hand-off-drain`` and run ``hand_off()``. Returns the seconds from cordon to hand-off.
        ``after_cordon(cordoned_by_us)``: awaited right after the cordon (:func:`workflows.kit.drain.
        cordon_and_drain`). ``stoppable=False``: skip/abort signals do not stop the drain (a drain the daemon asked for
        after the first hand-off); a skip/abort decision on its gate still does.

        Raises :class:`Stopped` at a safe point when skip/abort was requested or decided (a
        decided abort also sets :attr:`abort_requested`); :class:`DrainTimedOut` once
        ``give_up_after`` seconds passed since the call with the node not empty (checked at the
        drain's safe points: before a pass, during the backoff). Status shows every pass.
        """
        asked = workflow.now()
        deadline = asked + timedelta(seconds=deadline_seconds)
        give_up_at = asked + timedelta(seconds=give_up_after) if give_up_after is not None else None

        def gave_up() -> bool:
            return give_up_at is not None and workflow.now() >= give_up_at

        async def before_cordon() -> None:
            await self.report(NodePhase.RUNNING, STEP_CORDON, deadline=deadline)

        def on_cordoned(ours: bool) -> None:
            self.cordoned_by_us = self.cordoned_by_us or ours

        async def before_pass() -> None:
            warning = self.warn_deadline("drain hand-off", asked, deadline_seconds)
            if self.progress.phase != NodePhase.BLOCKED:
                await self.report(NodePhase.RUNNING, STEP_DRAIN, "evicted pods to be gone", deadline=deadline, warning=warning)

        async def blocked(report: DrainReport, reason: str) -> None:
            warning = self.warn_deadline("drain hand-off", asked, deadline_seconds)
            await self.report(
                NodePhase.BLOCKED, STEP_DRAIN, blocked_waiting_for(self.drain),
                deadline=deadline, warning=warning, reason=reason, drain_report=report,
            )

        async def changed() -> None:
            p = self.progress
            await self.report(
                p.phase, p.step, blocked_waiting_for(self.drain), deadline=p.deadline, reason=p.reason, drain_report=p.drain_report
            )

        async def after_drain() -> None:
            await self.report(NodePhase.RUNNING, STEP_HAND_OFF_DRAIN, deadline=deadline)
            if hand_off is not None:
                await hand_off()

        loop = DrainLoop(
            node=self.node,
            wait_seconds=wait_seconds,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            timeouts=self.timeouts,
            before_pass=before_pass,
            blocked=blocked,
            changed=changed,
            stopped=(lambda: self.stop is not None or gave_up()) if stoppable else gave_up,
        )
        done = await cordon_and_drain(
            loop, self.drain, owner=self.owner, before_cordon=before_cordon, on_cordoned=on_cordoned, hand_off=after_drain,
            after_cordon=after_cordon,
        )
        if done.outcome == "stopped" and (self.stop is None or not stoppable) and gave_up():
            raise DrainTimedOut()
        if done.outcome != "drained":
            if done.outcome in ("skip", "abort") and self.stop is None:
                gate = self.drain.gate
                self.stop, self.stop_by = done.outcome, (gate.decided_by if gate else None)
                self.abort_requested = done.outcome == "abort"
            raise Stopped()
        return done.seconds

    # --- endings --------------------------------------------------------------------------------

    def result(self, model: type[R], outcome: str, **kw: Any) -> R:
        """The run's result ``model`` stamped with node, attempt, outcome, cordon, times, the
        decision records, ``abort_requested`` and ``past_no_return``; ``kw`` adds the procedure's
        own fields."""
        return model(
            node=self.node,
            attempt=self.attempt,
            outcome=outcome,
            cordoned_by_us=self.cordoned_by_us,
            started_at=self.started_at,
            finished_at=workflow.now(),
            decisions=list(self.drain.records),
            abort_requested=self.abort_requested,
            past_no_return=self.past_no_return,
            **kw,
        )

    async def roll_back(self, model: type[R], safe_point: str, undo: Callable[[], Awaitable[None]], before: str) -> R:
        """Undo a run stopped at a safe point: report ``rollback``, run the procedure's ``undo()``,
        uncordon only if we cordoned, report ``skipped``/``aborted`` and return the result.
        ``before`` names the point it stopped before (e.g. "the drain hand-off")."""
        kind = self.stop or "abort"
        await self.report(NodePhase.RUNNING, STEP_ROLLBACK, f"rolling back ({kind} requested)")
        await undo()
        unc = await self.uncordon()
        if unc.uncordoned:
            self.cordoned_by_us = False
        phase = NodePhase.SKIPPED if kind == "skip" else NodePhase.ABORTED
        reason = f"{kind} requested by {self.stop_by or 'unknown'}; rolled back before {before}"
        await self.report(phase, STEP_FINISHED, reason=reason)
        return self.result(model, "skipped" if kind == "skip" else "aborted", reason=reason, safe_point=safe_point)


class NodeRunWorkflow:
    """Base class of node-run workflows: the handlers a parent's node window talks to.

    Subclasses set ``self.node_run`` (a :class:`NodeRun`) in their ``@workflow.init`` ``__init__``.
    Signals ``skip`` / ``abort`` (identity as the argument) are honoured at the run's safe points;
    ``drain_decision`` carries a decision the parent's ``decide`` update validated; the
    ``progress`` query returns the last :class:`NodeProgress`; ``lease_denied`` is a lease's
    answer when the run takes its node's lease itself (``run_leases``).

    A run started with its node scope's lease ID is that lease (``lease_info`` set; see
    :mod:`workflows.kit.lease`): it answers ``contend`` with ``lease_denied`` and the ``holder``
    query with ``lease_info``, as a :class:`workflows.kit.lease.LeaseWorkflow` would.
    """

    node_run: NodeRun
    #: The leases the run holds for its procedure (:meth:`workflows.kit.lease.Leases.hold_while_running`), if any.
    run_leases: Leases | None = None
    #: Set when this run is its node's lease (its workflow ID is the scope's lease ID).
    lease_info: LeaseInfo | None = None

    def be_lease(self, scope: str, *, holder: str, procedure: str) -> None:
        """This run is the lease of node ``scope`` (its workflow ID is the scope's lease ID), held
        by ``holder`` (the procedure's workflow ID) for ``procedure`` since the run started: it
        answers ``contend`` and ``holder`` from now on (nothing is taken)."""
        self.lease_info = LeaseInfo(cluster=LeaseScope.parse(scope).cluster, scope=scope, holder=holder, procedure=procedure,
                                    acquired_at=workflow.info().start_time)

    async def settled(self, result: R) -> R:
        """Return ``result`` once the run's reports went out and, when the run is a lease
        (:meth:`be_lease`), a contender's answer too (every handler finished)."""
        await self.node_run.settle()
        if self.lease_info is not None:
            await workflow.wait_condition(workflow.all_handlers_finished)
        return result

    @workflow.signal
    async def contend(self, requester_workflow_id: str) -> None:
        """Somebody wants the node's lease this run is: answer them with ``lease_denied`` naming
        the holder (ignored, logged, when the run is no lease)."""
        if self.lease_info is None:
            workflow.logger.warning("contend from %s: this node run holds no lease", requester_workflow_id)
            return
        await answer_contender(requester_workflow_id, self.lease_info)

    @workflow.query
    def holder(self) -> LeaseInfo:
        """Who holds the lease this run is: the procedure, since when. Raises ValueError (a
        failed query) when the run is no lease."""
        if self.lease_info is None:
            raise ValueError(f"node run of {self.node_run.node} holds no lease")
        return self.lease_info

    @workflow.signal
    def lease_denied(self, info: LeaseInfo) -> None:
        """A lease's answer to our ``contend`` (the run asked who holds its node's lease)."""
        if self.run_leases is not None:
            self.run_leases.denied(info)

    @workflow.signal
    def skip(self, identity: str = "", comment: str = "") -> None:
        """Skip this node at the next safe point (the procedure decides what that undoes);
        ``comment`` the operator's, when the parent passes it."""
        self.on_stop("skip", identity, comment)

    @workflow.signal
    def abort(self, identity: str = "") -> None:
        """Abort at the next safe point."""
        self.on_stop("abort", identity, "")

    def on_stop(self, kind: StopKind, identity: str, comment: str) -> None:
        """Hook: a skip/abort request from the parent. Default: the node run's safe points
        honour it (:meth:`NodeRun.request_stop`)."""
        self.node_run.request_stop(kind, identity)

    @workflow.signal
    def drain_decision(self, decision: DrainDecisionSignal) -> None:
        """A decision on this node's blocked drain, validated by the procedure's ``decide``
        update; applied at the end of the current backoff (ignored when no gate waits)."""
        self.node_run.receive_decision(decision)

    @workflow.query
    def progress(self) -> NodeProgress:
        """The node's current phase/step/waiting_for/since/deadline."""
        return self.node_run.progress


class GatedNodeRunWorkflow(GateUpdates, NodeRunWorkflow):
    """A node run with gates of its own (``self.gates``, a :class:`workflows.kit.gates.Gates`):
    the ``approve`` and ``reject`` updates of every procedure (:class:`workflows.kit.gates.GateUpdates`)
    and a ``decide`` on its gates' choices, with the same inputs, validators and results. Its parent shows the waiting
    gates with ``Gate.workflow_id`` set to this run (:mod:`workflows.kit.report`), and the CLI
    answers a gate there (``lockkeeper.cli.operate.gate_owner``), so a decision is recorded once,
    in the run whose gate it is."""

    gates: Gates
    #: Choices a person must explain: ``decide`` of one of these without a comment is refused
    #: (e.g. ``mark-done``, which vouches for a step whose outcome was lost). Empty: none.
    choices_needing_comment: frozenset[str] = frozenset()

    @workflow.update
    def decide(self, input: DecideInput) -> DecideResult:
        """Make one of a waiting gate's declared choices (``decide ID GATE CHOICE``)."""
        return self.gates.decide_update(input)

    @decide.validator
    def _validate_decide(self, input: DecideInput) -> None:
        gate = self.gates.check_choice(input.model_copy(update={"gate_id": input.gate_id or input.node}), input.decision)
        if input.decision in self.choices_needing_comment and not input.comment.strip():
            raise ValueError(f"gate {gate.id}: {input.decision} needs a comment saying what was checked")
