"""NodeRolloutWorkflow: one node through the MachineConfig handshake (DESIGN.md), idempotently,
driven by what the daemon asks, not by the step we reached (issue 18, item 4).

Handshake (MCO ``pkg/daemon/drain.go``, ``pkg/controller/drain/drain_controller.go``):
desiredConfig=X → daemon desiredDrain=drain-X → cordon + drain → lastAppliedDrain=drain-X
(within 1 h) → reboot → desiredDrain=uncordon-X → uncordon → lastAppliedDrain=uncordon-X
(within 10 min) → currentConfig=X, state Done. The run's owner string (``{parent_id}/node/{node}``,
without the attempt) is the cordoned-by record, so a retry recognises an earlier attempt's cordon
as ours and a node somebody else cordoned stays cordoned.

:func:`handshake` looks at the node as observed on every turn and answers the daemon's pending
request first: ``desiredDrain=drain-X`` while ``lastAppliedDrain`` differs → cordon and drain with
the kit (:meth:`workflows.kit.noderun.NodeRun.cordon_and_drain`, its blocked-drain decision gate
included), then ``lastAppliedDrain=drain-X``; ``desiredDrain=uncordon-X`` while
``lastAppliedDrain`` differs → uncordon (only our own cordon), ``lastAppliedDrain=uncordon-X``;
otherwise wait for the daemon's next move (the drain request, the reboot, Done), each wait also
ending on a new drain request. A retry (``retry-node``) starts the same loop from what it
observes, so a node that degraded while its daemon waited for us gets the missing hand-off.

Skip/abort (the kit's signals) are honoured at safe points before the first drain hand-off: the
run rolls back (desiredConfig=currentConfig, uncordon if we cordoned). After it the daemon owns the
node and the run completes it. A drain the daemon asks for again after the hand-off is drained
again with a warning; when blocked, its gate ``drain/{node}`` opens after ``decide_after`` or at
``daemon.warn_fraction`` of the drain deadline, whichever is first, and a skip/abort decision
there ends the run with the node left cordoned (it rebooted into the target already).

Degraded: the MCO daemon retries a failed sync by itself (``pkg/daemon/daemon.go``: backoff 1 s
doubling to ``maxUpdateBackoff`` 60 s; ``completeUpdate`` polls every 10 s). So a Degraded state
observed within :func:`daemon_retry_grace_seconds` of our last hand-off, or of the start of a
retry attempt that found the node degraded, is given that time to clear (polled every
:func:`grace_poll_seconds`) before the run reports the node degraded; a Degraded state with a
request of the daemon pending is answered at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import ANN_DESIRED_CONFIG, ANN_LAST_APPLIED_DRAIN, DrainInput, NodeInfo, ReadNodeInput, SetNodeAnnotationsInput
    from activities.machineconfig.models import (
        DrainWhenAskedInput, DrainWhenAskedResult, ReportMachineConfigNodeInput, WaitForNodeDoneInput, WaitForNodeDoneResult,
        drain_value, uncordon_value,
    )
    from workflows.kit import calls as acts
    from workflows.kit.drain import DrainGateState
    from workflows.kit.models import DrainDecision, NodePhase
    from workflows.kit.noderun import NodeRun, NodeRunWorkflow, Stopped
    from workflows.machineconfig.models import NodeRolloutInput, NodeRolloutResult, NodeStep
    from workflows.machineconfig.plan import is_at_target


#: Fraction of the daemon's uncordon deadline given to it to retry a failed sync by itself: the
#: MCO daemon retries within 60 s (backoff cap) + 10 s (poll) = 70 s of its 600 s deadline; 0.15
#: is 90 s at the real deadline and scales with it in simulations.
DAEMON_RETRY_FRACTION = 0.15

AFTER_HANDOFF = "after drain hand-off: the daemon was rebooting the node, so it was completed"


def daemon_retry_grace_seconds(input: NodeRolloutInput) -> float:
    """Seconds a Degraded daemon gets to retry after our hand-off or a retry's start (see module doc)."""
    return DAEMON_RETRY_FRACTION * input.daemon.uncordon_deadline_seconds


def grace_poll_seconds(grace_seconds: float) -> float:
    """Re-read interval while a Degraded daemon is given its grace: a tenth of it, 0.5 s to 5 s."""
    return min(5.0, max(0.5, grace_seconds / 10))


def first_request_text(input: NodeRolloutInput) -> str:
    """What the run waits for first: the drain request, or (the plan expects no drain) the
    daemon's own actions then the uncordon request."""
    d = input.disruption
    if d is not None and not d.drain:
        acts = ", ".join(a.text() for a in d.actions) or "its actions"
        return (f"daemon to apply the files, {acts} (no drain, {'a reboot' if d.reboot else 'no reboot'} planned), "
                f"then set desiredDrain={uncordon_value(input.target)}")
    return f"daemon to set desiredDrain={drain_value(input.target)}, then cordon and drain"


def after_drain_text(input: NodeRolloutInput) -> str:
    """What the daemon does after the drain hand-off: reboot, or its rebootless actions."""
    d = input.disruption
    if d is not None and not d.reboot:
        return "run " + (", ".join(a.text() for a in d.actions if a.type != "Drain") or "no action") + " (no reboot planned)"
    return "reboot"


def _current_step(step: str | None) -> NodeStep:
    """The step last reported (a kit step name such as ``drain`` is one of ours too)."""
    return NodeStep(step) if step in {str(s) for s in NodeStep} else NodeStep.READ


class _Follow:
    """Loop state of one :func:`handshake` run (lives in workflow state)."""

    def __init__(self, wf: NodeRolloutWorkflow, input: NodeRolloutInput, node: NodeInfo, *, fresh: bool = False) -> None:
        """``node``: as first observed. ``fresh``: it was first observed plainly waiting for the
        daemon (``drain_when_asked`` with ``set_desired_config`` went on), and ``node`` is as
        that call last saw it: neither degraded at the start nor handed off."""
        self.wf, self.input, self.run = wf, input, wf.node_run
        self.target = input.target
        self.drain_v, self.uncordon_v = drain_value(input.target), uncordon_value(input.target)
        self.grace = timedelta(seconds=daemon_retry_grace_seconds(input))
        # A node found degraded when a retry attempt starts (retry-node): the daemon retries on its own.
        self.grace_from: datetime | None = workflow.now() if node.degraded and input.attempt > 1 and not fresh else None
        # Past the first drain hand-off the daemon owns the node (same test as the fixed sequence).
        self.handed_off = not fresh and (
            node.last_applied_drain in (self.drain_v, self.uncordon_v)
            or (node.current_config == input.target and node.desired_drain == self.uncordon_v)
        )
        self.drain_seconds: float | None = None
        self.reboot_started: datetime | None = workflow.now() if self.handed_off else None
        self.reboot_seconds: float | None = None
        self.redrains = 0
        #: When the daemon asked for the first drain, as the run saw it (``drain_when_asked``).
        self.drain_asked_at: datetime | None = None
        #: The node as our last drain hand-off left it.
        self.after_drain: NodeInfo = node

    def in_grace(self) -> bool:
        return self.grace_from is not None and workflow.now() < self.grace_from + self.grace

    # --- the daemon's requests --------------------------------------------------------------

    async def hand_off_drain(self) -> None:
        await self.report_mcn("drained")
        self.after_drain = await self.wf.annotate({ANN_LAST_APPLIED_DRAIN: self.drain_v})

    async def report_mcn(self, step: str) -> None:
        """Where MachineConfigNodes are served, the controller's side of this node's for ``step``
        (``report_machine_config_node``: best effort, a no-op when it already says so); nothing
        where the plan found no MachineConfigNodes."""
        if not self.input.machine_config_nodes:
            return
        await acts.call(
            acts.REPORT_MACHINE_CONFIG_NODE,
            ReportMachineConfigNodeInput(node=self.input.node, step=step, drain=self.drain_v),  # type: ignore[arg-type]
            bool,
            timeouts=self.run.timeouts,
        )

    def handed_off_now(self) -> NodeInfo:
        """Our first drain hand-off is done: the daemon owns the node (reboot clock, retry grace)."""
        self.handed_off, self.grace_from, self.reboot_started = True, workflow.now(), workflow.now()
        return self.after_drain

    async def wait_and_drain(self) -> tuple[NodeInfo, NodeStep, bool]:
        """Before the first hand-off: ``drain_when_asked`` until
        the daemon asks, then hand off when its pass emptied the node, or go on draining in the
        kit's loop. Interruptible: skip/abort cancels it and raises :class:`Stopped`."""
        await self.run.report(NodePhase.RUNNING, NodeStep.WAIT_DRAIN_REQUEST, first_request_text(self.input))
        return await self.after_drain_when_asked(await _drain_when_asked(self.wf, self.input))

    async def after_drain_when_asked(self, res: DrainWhenAskedResult) -> tuple[NodeInfo, NodeStep, bool]:
        """Go on from a ``drain_when_asked`` result (:meth:`wait_and_drain`)."""
        run = self.run
        if res.cordon is not None:
            run.cordoned_by_us = run.cordoned_by_us or res.cordon.cordoned_by_us
        if not res.asked:
            return res.node, NodeStep.WAIT_DRAIN_REQUEST, res.degraded and not res.matched
        self.drain_asked_at = workflow.now() - timedelta(seconds=res.drain_seconds or 0.0)
        if res.drain is not None and res.drain.done:
            self.drain_seconds = res.drain_seconds
            # Decided here, written by the next call: from now on the daemon owns the node.
            self.handed_off_now()
            return await self.wait_done(res.node, hand_off=True)
        run.check_stop()  # blocked, or pods still terminating: the kit's loop (cordon again is a no-op)
        await self.first_drain()
        return self.handed_off_now(), NodeStep.WAIT_REBOOT, False

    def escalate(self, asked: datetime) -> None:
        """Deadline guard: the drain's gate opens ``daemon.escalate_after_seconds`` after ``asked``
        at the latest (:class:`workflows.kit.drain.DrainGateState` ``ask_by``)."""
        esc = self.input.daemon.escalate_after_seconds
        if esc is not None:
            self.run.drain.ask_by = asked + timedelta(seconds=esc)

    async def first_drain(self) -> None:
        self.escalate(self.drain_asked_at or workflow.now())
        self.drain_seconds = await self.cordon_and_drain()

    async def cordon_and_drain(self, *, stoppable: bool = True) -> float:
        """The kit's cordon-and-drain with the rollout's drain policy, handing off when done;
        returns the drain's seconds (:meth:`workflows.kit.noderun.NodeRun.cordon_and_drain`)."""
        d = self.input.drain
        return await self.run.cordon_and_drain(
            wait_seconds=d.wait_seconds, backoff_initial=d.backoff_initial_seconds, backoff_max=d.backoff_max_seconds,
            deadline_seconds=self.input.daemon.drain_deadline_seconds, hand_off=self.hand_off_drain, stoppable=stoppable,
            after_cordon=self.cordoned,
        )

    async def cordoned(self, ours: bool) -> None:
        """The kit's drain loop cordoned the node (a retried node, or a drain the first pass did not
        finish): the controller's ``Cordoned`` in its MachineConfigNode when the cordon is ours,
        as ``drain_when_asked`` writes it when it cordons (a no-op when it already says so)."""
        if ours:
            await self.report_mcn("cordoned")

    async def redrain(self, node: NodeInfo) -> NodeRolloutResult | None:
        """The daemon asked for a drain again after the first hand-off. Returns a result only when
        a skip/abort decision on the drain gate ended the run (the node stays cordoned)."""
        run, inp = self.run, self.input
        self.redrains += 1
        warning = (
            f"daemon asked for a drain again (desiredDrain={self.drain_v}, lastAppliedDrain="
            f"{node.last_applied_drain or '-'}, state {node.state or '-'}); draining again (#{self.redrains})"
        )
        workflow.logger.warning("node %s: %s", inp.node, warning)
        await run.report(NodePhase.RUNNING, NodeStep.CORDON, f"drain again for the daemon ({self.drain_v})", warning=warning)
        # Never block silently until the daemon's deadline: ask by the warning point at the latest.
        ask_by = run.warn_fraction * inp.daemon.drain_deadline_seconds
        run.drain.decide_after = ask_by if run.drain.decide_after is None else min(run.drain.decide_after, ask_by)
        self.escalate(workflow.now())
        try:
            await self.cordon_and_drain(stoppable=False)
        except Stopped:
            gate = run.drain.gate
            kind = "skip" if gate is not None and gate.decision == DrainDecision.SKIP else "abort"
            reason = (
                f"{kind} decided by {gate.decided_by if gate else 'unknown'} on the repeated drain; node left "
                f"cordoned, the daemon still waits for lastAppliedDrain={self.drain_v}"
            )
            phase = NodePhase.SKIPPED if kind == "skip" else NodePhase.ABORTED
            await run.report(phase, NodeStep.FINISHED, reason=reason)
            return run.result(NodeRolloutResult, "skipped" if kind == "skip" else "aborted", reason=reason,
                              safe_point="repeated drain", drain_seconds=self.drain_seconds)
        return None

    async def hand_off_uncordon(self) -> NodeInfo:
        run, inp = self.run, self.input
        asked = workflow.now()
        deadline = asked + timedelta(seconds=inp.daemon.uncordon_deadline_seconds)
        await run.report(NodePhase.RUNNING, NodeStep.UNCORDON, f"lastAppliedDrain={self.uncordon_v} before the daemon deadline",
                         deadline=deadline)
        await run.uncordon()
        run.cordoned_by_us = False
        warning = run.warn_deadline("uncordon hand-off", asked, inp.daemon.uncordon_deadline_seconds)
        await run.report(NodePhase.RUNNING, NodeStep.HAND_OFF_UNCORDON, deadline=deadline, warning=warning)
        await self.report_mcn("uncordoned")
        return await self.wf.annotate({ANN_LAST_APPLIED_DRAIN: self.uncordon_v})

    # --- waiting for the daemon ---------------------------------------------------------------

    async def wait(self, node: NodeInfo) -> tuple[NodeInfo, NodeStep, bool]:
        """One wait for the daemon's next move; returns the node, the step and whether it ended
        only because the daemon is degraded. Before the first hand-off (desiredConfig set: the
        loop sees to it) one ``drain_when_asked`` call; after it ``wait_for_node_done`` windows."""
        if self.handed_off:
            return await self.wait_done(node)
        return await self.wait_and_drain()

    async def wait_done(self, node: NodeInfo, *, hand_off: bool = False) -> tuple[NodeInfo, NodeStep, bool]:
        """Past the hand-off: ``wait_for_node_done`` windows until the
        node is Done, the daemon asks for a drain again or is degraded with nothing to answer.
        The uncordon it answers counts as our hand-off (reboot time, the daemon's retry grace).
        ``hand_off``: the first window writes the drain hand-off."""
        run, inp = self.run, self.input
        while True:
            rebooting = node.last_applied_drain != self.uncordon_v
            step = NodeStep.WAIT_REBOOT if rebooting else NodeStep.WAIT_DONE
            first = f"lastAppliedDrain={self.drain_v}, then " if hand_off else ""
            await run.report(
                NodePhase.RUNNING, step,
                f"{first}daemon to {after_drain_text(inp)} and set desiredDrain={self.uncordon_v}, then uncordon, lastAppliedDrain="
                f"{self.uncordon_v} and currentConfig={self.target}, state=Done" if rebooting
                else f"daemon to set currentConfig={self.target}, state=Done",
            )
            res: WaitForNodeDoneResult = await acts.start(
                acts.WAIT_FOR_NODE_DONE,
                WaitForNodeDoneInput(
                    node=inp.node, target=self.target, owner=inp.owner, timeout_seconds=inp.daemon.wait_activity_timeout_seconds,
                    hand_off_drain=hand_off, machine_config_nodes=inp.machine_config_nodes,
                ),
                WaitForNodeDoneResult, seconds=inp.daemon.wait_activity_timeout_seconds, timeouts=self.run.timeouts,
            )
            node, hand_off = res.node, False
            if res.drain_handed_off_at is not None:  # the daemon's clocks start at the write
                self.reboot_started = self.grace_from = res.drain_handed_off_at
            if res.uncordon_answered_at is not None:
                if self.reboot_started is not None and self.reboot_seconds is None:
                    self.reboot_seconds = max(0.0, (res.uncordon_answered_at - self.reboot_started).total_seconds())
                self.grace_from = res.uncordon_answered_at
                run.cordoned_by_us = False
            if res.outcome != "timed_out":
                step = NodeStep.WAIT_REBOOT if node.last_applied_drain != self.uncordon_v else NodeStep.WAIT_DONE
                return node, step, res.outcome == "degraded"

    async def grace_poll(self, node: NodeInfo, step: NodeStep) -> NodeInfo:
        assert self.grace_from is not None
        until = self.grace_from + self.grace
        await self.run.report(NodePhase.RUNNING, step, f"daemon to retry after its degrade ({node.reason or node.state}); "
                              f"reported degraded after {until.isoformat()}", deadline=until)
        poll = grace_poll_seconds(self.grace.total_seconds())
        if self.handed_off:
            await workflow.sleep(timedelta(seconds=poll))
        else:  # before the hand-off a skip/abort is honoured at once (rolled back)
            try:
                await workflow.wait_condition(lambda: self.run.stop is not None, timeout=poll)
            except TimeoutError:
                pass
            self.run.check_stop()
        return await self.wf.read()


async def _drain_when_asked(
    wf: NodeRolloutWorkflow, input: NodeRolloutInput, *, set_desired_config: bool = False
) -> DrainWhenAskedResult:
    """One ``drain_when_asked`` call, interruptible: skip/abort cancels it and raises :class:`Stopped`
    once the call has ended."""
    run = wf.node_run
    run.check_stop()
    handle = acts.start(
        acts.DRAIN_WHEN_ASKED,
        DrainWhenAskedInput(
            node=input.node, target=input.target, owner=input.owner, timeout_seconds=input.daemon.wait_activity_timeout_seconds,
            drain=DrainInput(node=input.node, wait_seconds=input.drain.wait_seconds), set_desired_config=set_desired_config,
            machine_config_nodes=input.machine_config_nodes,
        ),
        DrainWhenAskedResult, seconds=input.daemon.wait_activity_timeout_seconds + input.drain.wait_seconds,
        timeouts=wf.node_run.timeouts, wait_cancelled=True,
    )
    # A skip or abort during the call rolls back once the call has ended: it may set desiredConfig
    # or cordon until its next heartbeat tells it of the cancel, and the roll-back must see that.
    return await run.until_stopped(handle, settle=True)  # type: ignore[no-any-return]


async def handshake(wf: NodeRolloutWorkflow, input: NodeRolloutInput) -> NodeRolloutResult:
    """Drive ``input.node`` to ``input.target`` by answering the daemon (module docstring).

    First one ``drain_when_asked`` call sets desiredConfig (safe in every state the node can be
    in: at target already, the daemon sees desired == current and does nothing; mid-handshake
    for the target, no request at all) and, when the node plainly waits for the daemon, goes on
    to the drain; otherwise the loop starts from the node as observed. A run asked to stop before
    it began only reads the node. Returns :class:`NodeRolloutResult`: done (also "already at
    target"), degraded (the daemon's reason, after the grace where it applies), skipped/aborted
    (rolled back before the first hand-off; after it only by a decision on a repeated drain's
    gate, the node then left cordoned)."""
    run = wf.node_run
    try:
        if run.stop:
            await run.report(NodePhase.RUNNING, NodeStep.READ)
            node = await wf.read()
        else:
            await run.report(NodePhase.RUNNING, NodeStep.WAIT_DRAIN_REQUEST, f"desiredConfig={input.target}, {first_request_text(input)}")
            res = await _drain_when_asked(wf, input, set_desired_config=True)
            node = res.node
            if not res.first_look_only:
                f = _Follow(wf, input, res.node, fresh=True)
                node, step, degraded = await f.after_drain_when_asked(res)
                result, node = await _loop(f, node, first=(step, degraded))
                return await _finish(f, result, node)
        run.cordoned_by_us = run.cordoned_by_us or node.cordoned_by == input.owner
        if is_at_target(node, input.target):
            if run.cordoned_by_us:
                await run.uncordon()
                run.cordoned_by_us = False
            await run.report(NodePhase.DONE, NodeStep.FINISHED, reason="already at target")
            return run.result(NodeRolloutResult, "done", reason="already at target", safe_point="already at target")
        f = _Follow(wf, input, node)
        result, node = await _loop(f, node)
    except Stopped:  # only raised before the first hand-off: roll back
        return await run.roll_back(NodeRolloutResult, f"before drain hand-off ({run.progress.step})", wf.undo_desired_config,
                                   before="the drain hand-off")
    return await _finish(f, result, node)


async def _finish(f: _Follow, result: NodeRolloutResult | None, node: NodeInfo) -> NodeRolloutResult:
    """The run's result: the loop's own, or done (our cordon undone)."""
    run, input = f.run, f.input
    if result is not None:
        return result
    if run.cordoned_by_us or node.cordoned_by == input.owner:
        await run.uncordon()
        run.cordoned_by_us = False
    safe_point = AFTER_HANDOFF if run.stop else None
    await run.report(NodePhase.DONE, NodeStep.FINISHED, reason=safe_point)
    return run.result(
        NodeRolloutResult, "done", drain_seconds=f.drain_seconds, reboot_seconds=f.reboot_seconds,
        safe_point=safe_point, reason=safe_point,
    )


async def _loop(
    f: _Follow, node: NodeInfo, first: tuple[NodeStep, bool] | None = None
) -> tuple[NodeRolloutResult | None, NodeInfo]:
    """Answer the daemon until the node is at its target: returns (None, node at target) or
    (a degraded / skipped / aborted result, node). Raises :class:`Stopped` before the first
    hand-off when skip/abort was requested or decided. ``first``: the step and degraded flag of
    a wait made before the loop (as :meth:`_Follow.wait` returns them)."""
    wf, run, input = f.wf, f.run, f.input
    step = NodeStep.READ
    if first is not None:
        step, degraded = first
        if degraded and not f.in_grace():
            return await wf.degraded(node, step), node
    while not is_at_target(node, input.target):
        dd, la = node.desired_drain, node.last_applied_drain
        if dd == f.drain_v and la != f.drain_v:
            if not f.handed_off:
                run.check_stop()
                await f.first_drain()
            else:
                stopped = await f.redrain(node)
                if stopped is not None:
                    return stopped, node
            node = f.handed_off_now()
            continue
        if dd == f.uncordon_v and la != f.uncordon_v:
            if f.reboot_started is not None and f.reboot_seconds is None:
                f.reboot_seconds = (workflow.now() - f.reboot_started).total_seconds()
            node = await f.hand_off_uncordon()
            f.handed_off, f.grace_from = True, workflow.now()
            continue
        if node.degraded:
            step = _current_step(run.progress.step)
            if not f.in_grace():
                return await wf.degraded(node, step), node
            node = await f.grace_poll(node, step)
            continue
        if not f.handed_off and node.desired_config != input.target:
            run.check_stop()
            await run.report(NodePhase.RUNNING, NodeStep.SET_DESIRED_CONFIG)
            node = await wf.annotate({ANN_DESIRED_CONFIG: input.target})
            continue
        node, step, degraded = await f.wait(node)
        if degraded and not f.in_grace():
            return await wf.degraded(node, step), node
    return None, node


@workflow.defn(sandboxed=False)
class NodeRolloutWorkflow(NodeRunWorkflow):
    """Drive one node to ``input.target``. Returns :class:`NodeRolloutResult` (never raises for a
    degraded node: outcome ``degraded`` with the daemon's reason). Reports to the parent (the
    kit's ``child_report``) only a blocked drain, a warning or a decision; the ``progress`` query
    has every step.

    Not sandboxed: a rollout starts one per node, and building a sandboxed instance costs about
    0.2 s of worker CPU each. This module and what it runs (:mod:`workflows.kit.noderun`,
    :mod:`workflows.kit.drain`, the models) read the clock
    only through ``workflow.now()``, do I/O only through activities and use no randomness or
    module-level mutable state; the histories are the same either way.
    """

    @workflow.init
    def __init__(self, input: NodeRolloutInput) -> None:
        self._in = input
        # Local: the run's short calls (read, annotate, cordon, uncordon, events) run as local
        # activities first (:func:`workflows.kit.calls.call`), a marker each instead of three
        # activity events and a workflow task (issue 16). The drain shares this Timeouts.
        self._timeouts = acts.Timeouts(input.calls.short_call_seconds, input.calls.heartbeat_seconds, local=True)
        d = input.drain
        # The parent learns the outcome from our result and the steps from our progress query; it
        # is signalled only a blocked drain, a warning or a decision (report_steps empty).
        self.node_run = NodeRun(
            node=input.node, attempt=input.attempt, parent_id=input.parent_id, owner=input.owner,
            warn_fraction=input.daemon.warn_fraction, timeouts=self._timeouts, report_steps=frozenset(),
            drain=DrainGateState(input.node, d.decide_after_seconds, d.decision_timeout_seconds, d.decision_timeout_outcome),
        )

    # --- calls (the handshake uses them) ---------------------------------------------------------------------------

    async def read(self) -> NodeInfo:
        """The node as the API has it now (``read_node``)."""
        return await acts.call(acts.READ_NODE, ReadNodeInput(node=self._in.node), NodeInfo, timeouts=self._timeouts)

    async def annotate(self, annotations: dict[str, str | None]) -> NodeInfo:
        """Set (a value) or remove (None) the node's ``annotations``; returns the node after."""
        # No read first: each of the run's writes is idempotent and usually needed (desiredConfig,
        # a hand-off), so one request instead of two, in a workflow task that stays open for it.
        return await acts.call(acts.SET_NODE_ANNOTATIONS, SetNodeAnnotationsInput(node=self._in.node, annotations=annotations,
                                                                                  read_first=False), NodeInfo, timeouts=self._timeouts)

    async def undo_desired_config(self) -> None:
        """Rollback before the hand-off: desiredConfig back to currentConfig."""
        node = await self.read()
        if node.current_config and node.desired_config != node.current_config:
            await self.annotate({ANN_DESIRED_CONFIG: node.current_config})

    async def degraded(self, node: NodeInfo, step: NodeStep) -> NodeRolloutResult:
        """Report the node degraded at ``step`` with the daemon's reason; the run's result."""
        reason = node.reason or f"state {node.state}"
        workflow.logger.warning("node %s degraded at %s: %s", self._in.node, step, reason)
        await self.node_run.report(NodePhase.DEGRADED, step, "retry-node or skip-node", reason=reason)
        return self.node_run.result(NodeRolloutResult, "degraded", reason=reason, safe_point=str(step))

    # --- the handshake ------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: NodeRolloutInput) -> NodeRolloutResult:
        if input.lease_scope:  # this run is the node's lease (its workflow ID): nothing to take, only to answer
            self.be_lease(input.lease_scope, holder=input.parent_id, procedure="machineconfig-rollout")
        return await self.settled(await handshake(self, input))
