"""NodeRolloutWorkflow: one node through the MachineConfig handshake (DESIGN.md), idempotently.

The child compares what it observes with what it wants and does only what is missing, so a new
attempt (retry_node) or a worker crash anywhere resumes at the right step. Its owner string
(``{parent_id}/node/{node}``, without the attempt) is the cordoned-by record, so a retry
recognises an earlier attempt's cordon as ours and a node somebody else cordoned stays cordoned.

Handshake (MCO ``pkg/daemon/drain.go``, ``pkg/controller/drain/drain_controller.go``):
desiredConfig=X → daemon desiredDrain=drain-X → cordon + drain → lastAppliedDrain=drain-X
(within 1 h) → reboot → desiredDrain=uncordon-X → uncordon → lastAppliedDrain=uncordon-X
(within 10 min) → currentConfig=X, state Done.

Signals ``skip`` / ``abort`` are honoured at safe points: before the drain hand-off the child
rolls back (desiredConfig=currentConfig, uncordon if we cordoned); after it, the daemon is
already rebooting the node, so the child completes the node and reports that safe point.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        ANN_CURRENT_CONFIG,
        ANN_DESIRED_CONFIG,
        ANN_DESIRED_DRAIN,
        ANN_LAST_APPLIED_DRAIN,
        CordonInput,
        CordonResult,
        DrainReport,
        NodeInfo,
        ReadNodeInput,
        SetNodeAnnotationsInput,
        UncordonInput,
        UncordonResult,
        WaitForNodeInput,
        WaitForNodeResult,
        drain_value,
        uncordon_value,
    )
    from workflows import activity_calls as acts
    from workflows.decisions import DrainGateState, DrainLoop, drain_until_done
    from workflows.models import (
        DrainDecisionSignal,
        NodePhase,
        NodeProgress,
        NodeRolloutInput,
        NodeRolloutResult,
        NodeStep,
    )
    from workflows.planning import is_at_target


#: ``workflow.patched`` id: progress signals to the parent are sent without awaiting each one.
PATCH_ASYNC_PROGRESS = "async-progress-signals"
#: ``workflow.patched`` id: the node run starts by setting desiredConfig (which also reads the node).
PATCH_SET_DESIRED_FIRST = "set-desired-config-first"


class _Stopped(Exception):
    """Internal: a skip/abort signal reached a safe point before the drain hand-off."""


@workflow.defn
class NodeRolloutWorkflow:
    """Drive one node to ``input.target``. Returns :class:`NodeRolloutResult` (never raises for a
    degraded node: outcome ``degraded`` with the daemon's reason). Reports every step change to
    the parent with the ``node_progress`` signal (:class:`NodeProgress`)."""

    @workflow.init
    def __init__(self, input: NodeRolloutInput) -> None:
        self._in = input
        self._stop: Literal["skip", "abort"] | None = None
        self._stop_by: str | None = None
        self._progress = NodeProgress(node=input.node, attempt=input.attempt, phase=NodePhase.PENDING)
        self._cordoned_by_us = False
        self._warned: set[str] = set()
        self._drain = DrainGateState(
            input.node, input.decide_after_seconds, input.decision_timeout_seconds, input.decision_timeout_outcome
        )
        self._abort_requested = False
        self._signals: list[asyncio.Future[None]] = []
        self._timeouts = acts.Timeouts(input.activity_timeout_seconds, input.activity_heartbeat_timeout_seconds)

    # --- signals and query --------------------------------------------------------------------

    @workflow.signal
    def skip(self, identity: str = "") -> None:
        """Skip this node at the next safe point (rollback before the drain hand-off)."""
        if self._stop is None:
            self._stop, self._stop_by = "skip", identity

    @workflow.signal
    def abort(self, identity: str = "") -> None:
        """Abort at the next safe point (rollback before the drain hand-off, complete after it)."""
        self._stop, self._stop_by = "abort", identity

    @workflow.signal
    def drain_decision(self, decision: DrainDecisionSignal) -> None:
        """A decision on this node's blocked drain, validated by the procedure's ``decide``
        update; applied at the end of the current backoff (ignored when no gate waits)."""
        if not self._drain.receive(decision):
            workflow.logger.info("node %s: decision %s ignored, no gate waiting", self._in.node, decision.decision)

    @workflow.query
    def progress(self) -> NodeProgress:
        """The node's current phase/step/waiting_for/since/deadline."""
        return self._progress

    # --- helpers ------------------------------------------------------------------------------

    async def _report(
        self,
        phase: NodePhase,
        step: NodeStep | str | None,
        waiting_for: str | None = None,
        *,
        deadline: datetime | None = None,
        warning: str | None = None,
        reason: str | None = None,
        drain_report: DrainReport | None = None,
    ) -> None:
        """Record a step change and signal it to the parent (``since`` = now)."""
        p = self._progress
        step_s = str(step) if step else None
        moved = (p.phase, p.step) != (phase, step_s)
        progress = NodeProgress(
            node=self._in.node,
            attempt=self._in.attempt,
            phase=phase,
            step=step_s,
            waiting_for=waiting_for,
            since=workflow.now() if moved or p.since is None else p.since,
            deadline=deadline,
            warning=warning or p.warning,
            reason=reason,
            drain_report=drain_report,
            cordoned_by_us=self._cordoned_by_us,
            blocked_since=self._drain.blocked_since if phase == NodePhase.BLOCKED else None,
            decision_gate=self._drain.gate.model_copy() if self._drain.gate is not None else None,
            decisions=list(self._drain.records),
        )
        if progress == p:
            return
        self._progress = progress
        parent = workflow.get_external_workflow_handle(self._in.parent_id)
        if workflow.patched(PATCH_ASYNC_PROGRESS):
            # Fire and forget: the signal command goes out with the next activity's command in
            # the same workflow task instead of costing a server round trip before every step
            # (the reaction latency to the daemon and the rollout overhead both depend on it).
            # Tasks run in creation order, so the parent still sees the steps in order; ``run``
            # waits for all of them before the node run closes.
            self._signals.append(asyncio.ensure_future(self._send_progress(parent, self._progress)))
        else:
            await parent.signal("node_progress", self._progress)

    async def _send_progress(self, parent: workflow.ExternalWorkflowHandle, progress: NodeProgress) -> None:
        try:
            await parent.signal("node_progress", progress)
        except Exception as err:  # noqa: BLE001 - progress is advisory; a gone parent must not fail the node
            workflow.logger.warning("progress signal to %s failed: %s", self._in.parent_id, err)

    async def _read(self) -> NodeInfo:
        return await acts.call(acts.READ_NODE, ReadNodeInput(node=self._in.node), NodeInfo, timeouts=self._timeouts)

    async def _annotate(self, annotations: dict[str, str | None]) -> NodeInfo:
        return await acts.call(
            acts.SET_NODE_ANNOTATIONS, SetNodeAnnotationsInput(node=self._in.node, annotations=annotations), NodeInfo,
            timeouts=self._timeouts,
        )

    async def _wait(self, wait: WaitForNodeInput, *, interruptible: bool) -> WaitForNodeResult:
        """Loop short watch attempts until matched or degraded. When ``interruptible``, a
        skip/abort signal cancels the watch and raises :class:`_Stopped` (a safe point)."""
        while True:
            if interruptible and self._stop:
                raise _Stopped()
            handle = acts.start(acts.WAIT_FOR_NODE, wait, WaitForNodeResult, seconds=wait.timeout_seconds, timeouts=self._timeouts)
            if interruptible:
                await workflow.wait_condition(lambda: handle.done() or self._stop is not None)
                if not handle.done():
                    handle.cancel()
                    raise _Stopped()
            result: WaitForNodeResult = await handle
            if result.matched or result.degraded:
                return result

    def _warn_deadline(self, what: str, started: datetime, total_seconds: float) -> str | None:
        """A warning once ``deadline_warn_fraction`` of a daemon deadline has elapsed."""
        elapsed = (workflow.now() - started).total_seconds()
        if elapsed < self._in.deadline_warn_fraction * total_seconds:
            return None
        deadline = started + timedelta(seconds=total_seconds)
        text = (
            f"{what} pending for {int(elapsed)}s; the daemon degrades node {self._in.node} "
            f"at {deadline.isoformat()} ({int(total_seconds)}s deadline)"
        )
        if what not in self._warned:
            self._warned.add(what)
            workflow.logger.warning(text)
        return text

    def _result(self, outcome: str, **kw) -> NodeRolloutResult:
        return NodeRolloutResult(
            node=self._in.node,
            attempt=self._in.attempt,
            outcome=outcome,
            cordoned_by_us=self._cordoned_by_us,
            started_at=self._started,
            finished_at=workflow.now(),
            decisions=list(self._drain.records),
            abort_requested=self._abort_requested,
            **kw,
        )

    async def _rollback(self, safe_point: str) -> NodeRolloutResult:
        """Undo what this node run changed before the drain hand-off: desiredConfig back to
        currentConfig, and uncordon only if we cordoned (cordoned-by == owner)."""
        kind = self._stop or "abort"
        await self._report(NodePhase.RUNNING, NodeStep.ROLLBACK, f"rolling back ({kind} requested)")
        node = await self._read()
        if node.current_config and node.desired_config != node.current_config:
            await self._annotate({ANN_DESIRED_CONFIG: node.current_config})
        unc: UncordonResult = await acts.call(
            acts.UNCORDON_NODE, UncordonInput(node=self._in.node, owner=self._in.owner), UncordonResult,
            timeouts=self._timeouts,
        )
        if unc.uncordoned:
            self._cordoned_by_us = False
        phase = NodePhase.SKIPPED if kind == "skip" else NodePhase.ABORTED
        reason = f"{kind} requested by {self._stop_by or 'unknown'}; rolled back before the drain hand-off"
        await self._report(phase, NodeStep.FINISHED, reason=reason)
        return self._result("skipped" if kind == "skip" else "aborted", reason=reason, safe_point=safe_point)

    # --- the handshake ------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: NodeRolloutInput) -> NodeRolloutResult:
        result = await self._handshake(input)
        if self._signals:
            await asyncio.gather(*self._signals)
        return result

    async def _handshake(self, input: NodeRolloutInput) -> NodeRolloutResult:
        self._started = workflow.now()
        target, drain_v, uncordon_v = input.target, drain_value(input.target), uncordon_value(input.target)
        wait_s = input.wait_activity_timeout_seconds
        drain_seconds: float | None = None

        # 1. Where is the node? Asking for the target config first is safe in every state the
        # node can be in (at target already: the daemon sees desired == current and does
        # nothing; mid-handshake for the target: no request at all), and the answer is the
        # node as observed, so one activity does both the read and step 2.
        if not self._stop and workflow.patched(PATCH_SET_DESIRED_FIRST):
            await self._report(NodePhase.RUNNING, NodeStep.SET_DESIRED_CONFIG)
            node = await self._annotate({ANN_DESIRED_CONFIG: target})
        else:
            await self._report(NodePhase.RUNNING, NodeStep.READ)
            node = await self._read()
        if node.cordoned_by == input.owner:
            self._cordoned_by_us = True
        if is_at_target(node, target):
            if self._cordoned_by_us:
                await acts.call(acts.UNCORDON_NODE, UncordonInput(node=input.node, owner=input.owner), UncordonResult, timeouts=self._timeouts)
                self._cordoned_by_us = False
            await self._report(NodePhase.DONE, NodeStep.FINISHED, reason="already at target")
            return self._result("done", reason="already at target", safe_point="already at target")

        try:
            handed_off = node.last_applied_drain in (drain_v, uncordon_v) or (
                node.current_config == target and node.desired_drain == uncordon_v
            )
            if not handed_off:
                # 2. Ask for the config.
                if self._stop:
                    raise _Stopped()
                if node.desired_config != target:
                    await self._report(NodePhase.RUNNING, NodeStep.SET_DESIRED_CONFIG)
                    node = await self._annotate({ANN_DESIRED_CONFIG: target})
                # 3. Wait for the daemon's drain request.
                if node.desired_drain not in (drain_v, uncordon_v):
                    await self._report(
                        NodePhase.RUNNING, NodeStep.WAIT_DRAIN_REQUEST, f"daemon to set desiredDrain={drain_v}"
                    )
                    res = await self._wait(
                        WaitForNodeInput(
                            node=input.node,
                            annotation=ANN_DESIRED_DRAIN,
                            value=drain_v,
                            any_of=[(ANN_DESIRED_DRAIN, uncordon_v), (ANN_CURRENT_CONFIG, target)],
                            timeout_seconds=wait_s,
                        ),
                        interruptible=True,
                    )
                    node = res.node
                    if res.degraded:
                        return await self._degraded(node, NodeStep.WAIT_DRAIN_REQUEST)
                # 4. Cordon, drain, hand off.
                if node.desired_drain == drain_v and node.last_applied_drain != drain_v:
                    drain_seconds = await self._cordon_and_drain(drain_v)
        except _Stopped:
            return await self._rollback(safe_point=f"before drain hand-off ({self._progress.step})")

        # 5. Past the hand-off the daemon owns the node until it asks for the uncordon.
        after_handoff = "after drain hand-off: the daemon was rebooting the node, so it was completed"
        reboot_started = workflow.now()
        # A node found already at its target (e.g. currentConfig was right, only desiredConfig lagged)
        # needs neither reboot nor uncordon hand-off; only our own cordon is undone.
        done = is_at_target(node, target)
        if not done and node.desired_drain != uncordon_v and node.last_applied_drain != uncordon_v:
            await self._report(NodePhase.RUNNING, NodeStep.WAIT_REBOOT, f"daemon to reboot and set desiredDrain={uncordon_v}")
            res = await self._wait(
                WaitForNodeInput(
                    node=input.node,
                    annotation=ANN_DESIRED_DRAIN,
                    value=uncordon_v,
                    any_of=[(ANN_LAST_APPLIED_DRAIN, uncordon_v), (ANN_CURRENT_CONFIG, target)],
                    timeout_seconds=wait_s,
                ),
                interruptible=False,
            )
            node = res.node
            if res.degraded:
                return await self._degraded(node, NodeStep.WAIT_REBOOT)
        reboot_seconds = (workflow.now() - reboot_started).total_seconds()

        # 6. Uncordon (only ours) and hand back; the daemon allows 10 minutes.
        if not done and node.last_applied_drain != uncordon_v:
            uncordon_asked = workflow.now()
            deadline = uncordon_asked + timedelta(seconds=input.daemon_uncordon_deadline_seconds)
            await self._report(
                NodePhase.RUNNING, NodeStep.UNCORDON, f"lastAppliedDrain={uncordon_v} before the daemon deadline", deadline=deadline
            )
            await acts.call(acts.UNCORDON_NODE, UncordonInput(node=input.node, owner=input.owner), UncordonResult, timeouts=self._timeouts)
            self._cordoned_by_us = False
            warning = self._warn_deadline("uncordon hand-off", uncordon_asked, input.daemon_uncordon_deadline_seconds)
            await self._report(NodePhase.RUNNING, NodeStep.HAND_OFF_UNCORDON, deadline=deadline, warning=warning)
            node = await self._annotate({ANN_LAST_APPLIED_DRAIN: uncordon_v})
        elif self._cordoned_by_us or node.cordoned_by == input.owner:
            await acts.call(acts.UNCORDON_NODE, UncordonInput(node=input.node, owner=input.owner), UncordonResult, timeouts=self._timeouts)
            self._cordoned_by_us = False

        # 7. The daemon reports the config done.
        if not is_at_target(node, target):
            await self._report(NodePhase.RUNNING, NodeStep.WAIT_DONE, f"daemon to set currentConfig={target}, state=Done")
            res = await self._wait(
                WaitForNodeInput(node=input.node, kind="config_done", value=target, timeout_seconds=wait_s),
                interruptible=False,
            )
            if res.degraded:
                return await self._degraded(res.node, NodeStep.WAIT_DONE)
        safe_point = after_handoff if self._stop else None
        await self._report(NodePhase.DONE, NodeStep.FINISHED, reason=safe_point)
        return self._result(
            "done", drain_seconds=drain_seconds, reboot_seconds=reboot_seconds, safe_point=safe_point, reason=safe_point
        )

    async def _cordon_and_drain(self, drain_v: str) -> float:
        """Steps 3-4: cordon for our owner, drain until empty (backing off while blocked, with an
        Event on the first block and a warning at the deadline fraction), then hand off.
        Raises :class:`_Stopped` at a safe point when skip/abort arrives. Returns drain seconds."""
        input = self._in
        asked = workflow.now()
        deadline = asked + timedelta(seconds=input.daemon_drain_deadline_seconds)
        await self._report(NodePhase.RUNNING, NodeStep.CORDON, deadline=deadline)
        cordon: CordonResult = await acts.call(
            acts.CORDON_NODE, CordonInput(node=input.node, owner=input.owner), CordonResult,
            timeouts=self._timeouts,
        )
        self._cordoned_by_us = self._cordoned_by_us or cordon.cordoned_by_us

        async def before_pass() -> None:
            warning = self._warn_deadline("drain hand-off", asked, input.daemon_drain_deadline_seconds)
            if self._progress.phase != NodePhase.BLOCKED:
                await self._report(NodePhase.RUNNING, NodeStep.DRAIN, "evicted pods to be gone", deadline=deadline, warning=warning)

        async def blocked(report: DrainReport, reason: str) -> None:
            warning = self._warn_deadline("drain hand-off", asked, input.daemon_drain_deadline_seconds)
            await self._report(
                NodePhase.BLOCKED, NodeStep.DRAIN, self._blocked_waiting_for(),
                deadline=deadline, warning=warning, reason=reason, drain_report=report,
            )

        async def changed() -> None:
            p = self._progress
            await self._report(
                p.phase, p.step, self._blocked_waiting_for(), deadline=p.deadline, reason=p.reason, drain_report=p.drain_report
            )

        outcome = await drain_until_done(
            DrainLoop(
                node=input.node,
                wait_seconds=input.drain_wait_seconds,
                backoff_initial=input.drain_backoff_initial_seconds,
                backoff_max=input.drain_backoff_max_seconds,
                timeouts=self._timeouts,
                before_pass=before_pass,
                blocked=blocked,
                changed=changed,
                stopped=lambda: self._stop is not None,
            ),
            self._drain,
        )
        if outcome != "drained":
            if outcome in ("skip", "abort") and self._stop is None:
                gate = self._drain.gate
                self._stop, self._stop_by = outcome, (gate.decided_by if gate else None)
                self._abort_requested = outcome == "abort"
            raise _Stopped()
        await self._report(NodePhase.RUNNING, NodeStep.HAND_OFF_DRAIN, deadline=deadline)
        await self._annotate({ANN_LAST_APPLIED_DRAIN: drain_v})
        return (workflow.now() - asked).total_seconds()

    def _blocked_waiting_for(self) -> str:
        gate = self._drain.open_gate
        if gate is not None:
            return f"a decision on gate {gate.id}: wait, skip, delete-pod or abort"
        if self._drain.next_ask is not None:
            return f"the blocking pods to become evictable (decision asked at {self._drain.next_ask.isoformat()})"
        return "the blocking pods to become evictable (drain retried with backoff)"

    async def _degraded(self, node: NodeInfo, step: NodeStep) -> NodeRolloutResult:
        reason = node.reason or f"state {node.state}"
        workflow.logger.warning("node %s degraded at %s: %s", self._in.node, step, reason)
        await self._report(NodePhase.DEGRADED, step, "retry-node or skip-node", reason=reason)
        return self._result("degraded", reason=reason, safe_point=str(step))

