"""NodeRolloutWorkflow: one node through the MachineConfig handshake (DESIGN.md), idempotently.

The child compares what it observes with what it wants and does only what is missing, so a new
attempt (retry_node) or a worker crash anywhere resumes at the right step. Its owner string
(``{parent_id}/node/{node}``, without the attempt) is the cordoned-by record, so a retry
recognises an earlier attempt's cordon as ours and a node somebody else cordoned stays cordoned.

Handshake (MCO ``pkg/daemon/drain.go``, ``pkg/controller/drain/drain_controller.go``):
desiredConfig=X → daemon desiredDrain=drain-X → cordon + drain → lastAppliedDrain=drain-X
(within 1 h) → reboot → desiredDrain=uncordon-X → uncordon → lastAppliedDrain=uncordon-X
(within 10 min) → currentConfig=X, state Done.

Runs recorded under ``workflow.patched("handshake-follows-daemon")`` drive the handshake from the
observed annotations (:mod:`workflows.machineconfig.follow`): a drain the daemon asks for again
while we wait for Done is drained again (or gated), and a retry answers what the daemon waits for;
older runs replay the fixed sequence below.

Signals ``skip`` / ``abort`` (from :class:`workflows.kit.noderun.NodeRunWorkflow`) are honoured
at safe points: before the drain hand-off the child rolls back (desiredConfig=currentConfig,
uncordon if we cordoned); after it, the daemon is already rebooting the node, so the child
completes the node and reports that safe point. Progress, safe points, deadline warnings and the
cordon-and-drain with its decision gate are the kit's (:mod:`workflows.kit.noderun`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import (
        ANN_CURRENT_CONFIG,
        ANN_DESIRED_CONFIG,
        ANN_DESIRED_DRAIN,
        ANN_LAST_APPLIED_DRAIN,
        NodeInfo,
        ReadNodeInput,
        SetNodeAnnotationsInput,
    )
    from activities.machineconfig.models import (
        WaitForNodeInput,
        WaitForNodeResult,
        drain_value,
        uncordon_value,
    )
    from workflows.kit import calls as acts
    from workflows.kit.drain import PATCH_DECISION_GATE, DrainGateState
    from workflows.kit.features import Features
    from workflows.kit.lease import Leases
    from workflows.kit.scopes import LeaseScope
    from workflows.kit.noderun import PATCH_ASYNC_PROGRESS, PATCH_MILESTONE_PROGRESS, NodeRun, NodeRunWorkflow, Stopped
    from workflows.machineconfig.follow import (
        PATCH_DESIRED_IN_DRAIN,
        PATCH_DRAIN_WHEN_ASKED,
        PATCH_STOP_SETTLES,
        PATCH_FOLLOW_DAEMON,
        PATCH_HAND_OFF_IN_TAIL,
        PATCH_TAIL_ONE_CALL,
        desired_in_drain,
        follow_daemon,
        follow_from_start,
    )
    from workflows.machineconfig.plan import is_at_target
    from workflows.kit.models import LeaseInfo, NodePhase
    from workflows.machineconfig.models import NodeRolloutInput, NodeRolloutResult, NodeStep

#: ``workflow.patched`` id: the node run starts by setting desiredConfig (which also reads the node).
PATCH_SET_DESIRED_FIRST = "set-desired-config-first"

#: ``workflow.patched`` id: the node run's short API calls (read, annotate, cordon, uncordon,
#: events) run as local activities first (:func:`workflows.kit.calls.call`): a marker each
#: instead of three activity events and a workflow task (issue 16). Asked only when the input's
#: ``local_calls`` is set (plans above the rollout's ``local_calls_above``: every plan by default).
PATCH_LOCAL_CALLS = "node-run-local-calls"

#: ``workflow.patched`` id (a node-run feature): the run signals its parent no step at all on the
#: normal path (``report_steps`` empty; blocked drains, warnings and decisions still go), and
#: ``status`` asks the running node runs' ``progress`` query for their step instead
#: (:mod:`lockkeeper.live`): 5 history events per node fewer in the run, 1 to 3 in the parent
#: and, above all, one parent workflow task per node fewer (issue 16).
PATCH_STEPS_BY_QUERY = "node-steps-by-query"

#: ``safe_point`` of a run whose node lease was refused: it changed nothing.
LEASE_REFUSED = "node lease refused: nothing changed"

#: The patches a node run started by the current rollout takes as given (``NodeRolloutInput.features``,
#: :mod:`workflows.kit.features`): each would otherwise cost every node run a marker and a search
#: attribute upsert, 8 to 10 events per node (issue 16). Whether the short calls go local is still
#: ``NodeRolloutInput.local_calls``.
NODE_RUN_FEATURES: tuple[str, ...] = (
    PATCH_SET_DESIRED_FIRST,
    PATCH_FOLLOW_DAEMON,
    PATCH_LOCAL_CALLS,
    PATCH_MILESTONE_PROGRESS,
    PATCH_ASYNC_PROGRESS,
    PATCH_DECISION_GATE,
    PATCH_TAIL_ONE_CALL,
    PATCH_STEPS_BY_QUERY,
    PATCH_DRAIN_WHEN_ASKED,
    PATCH_HAND_OFF_IN_TAIL,
    PATCH_DESIRED_IN_DRAIN,
    PATCH_STOP_SETTLES,
)

#: Steps a node rollout signals to its parent (besides blocked drains, warnings and decisions):
#: one signal per node on the normal path instead of one per step; none under
#: :data:`PATCH_STEPS_BY_QUERY`.
REPORTED_STEPS = frozenset({str(NodeStep.WAIT_REBOOT)})


@workflow.defn(sandboxed=False)
class NodeRolloutWorkflow(NodeRunWorkflow):
    """Drive one node to ``input.target``. Returns :class:`NodeRolloutResult` (never raises for a
    degraded node: outcome ``degraded`` with the daemon's reason). Signals the parent
    (``node_progress``, :class:`workflows.kit.models.NodeProgress`) only at :data:`REPORTED_STEPS`
    (at none under :data:`PATCH_STEPS_BY_QUERY`), a blocked drain, a warning or a decision; the
    ``progress`` query has every step.

    Not sandboxed: a rollout starts one per node, and building a sandboxed instance costs about
    0.2 s of worker CPU each. This module and what it runs (:mod:`workflows.kit.noderun`,
    :mod:`workflows.kit.drain`, :mod:`workflows.machineconfig.follow`, the models) read the clock
    only through ``workflow.now()``, do I/O only through activities and use no randomness or
    module-level mutable state; the histories are the same either way.
    """

    @workflow.init
    def __init__(self, input: NodeRolloutInput) -> None:
        self._in = input
        self._timeouts = acts.Timeouts(input.activity_timeout_seconds, input.activity_heartbeat_timeout_seconds)
        self._features = Features(input.features)
        self.node_run = NodeRun(
            node=input.node,
            attempt=input.attempt,
            parent_id=input.parent_id,
            owner=input.owner,
            warn_fraction=input.deadline_warn_fraction,
            timeouts=self._timeouts,
            drain=DrainGateState(
                input.node, input.decide_after_seconds, input.decision_timeout_seconds, input.decision_timeout_outcome
            ),
            # The parent learns the outcome from our result; of the steps it shows only when the
            # node is in the daemon's hands (rebooting), the rest stays in our progress query.
            report_steps=REPORTED_STEPS,
            features=self._features,
        )

    # --- activities -----------------------------------------------------------------------------

    async def _read(self) -> NodeInfo:
        return await acts.call(acts.READ_NODE, ReadNodeInput(node=self._in.node), NodeInfo, timeouts=self._timeouts)

    async def _annotate(self, annotations: dict[str, str | None]) -> NodeInfo:
        return await acts.call(
            # No read first: each of the run's writes is idempotent and usually needed (desiredConfig,
            # a hand-off), so one request instead of two, in a workflow task that stays open for it.
            acts.SET_NODE_ANNOTATIONS, SetNodeAnnotationsInput(node=self._in.node, annotations=annotations, read_first=False),
            NodeInfo,
            timeouts=self._timeouts,
        )

    async def _wait(self, wait: WaitForNodeInput, *, interruptible: bool) -> WaitForNodeResult:
        """Loop short watch attempts until matched or degraded. When ``interruptible``, a
        skip/abort signal cancels the watch and raises :class:`Stopped` (a safe point)."""
        run = self.node_run
        while True:
            if interruptible:
                run.check_stop()
            handle = acts.start(acts.WAIT_FOR_NODE, wait, WaitForNodeResult, seconds=wait.timeout_seconds, timeouts=self._timeouts)
            result: WaitForNodeResult = await (run.until_stopped(handle) if interruptible else handle)
            if result.matched or result.degraded:
                return result

    async def _undo_desired_config(self) -> None:
        """Rollback before the hand-off: desiredConfig back to currentConfig."""
        node = await self._read()
        if node.current_config and node.desired_config != node.current_config:
            await self._annotate({ANN_DESIRED_CONFIG: node.current_config})

    async def _degraded(self, node: NodeInfo, step: NodeStep) -> NodeRolloutResult:
        reason = node.reason or f"state {node.state}"
        workflow.logger.warning("node %s degraded at %s: %s", self._in.node, step, reason)
        await self.node_run.report(NodePhase.DEGRADED, step, "retry-node or skip-node", reason=reason)
        return self.node_run.result(NodeRolloutResult, "degraded", reason=reason, safe_point=str(step))

    # --- the handshake ------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: NodeRolloutInput) -> NodeRolloutResult:
        if self._features.on(PATCH_STEPS_BY_QUERY):
            self.node_run.report_steps = frozenset()
        # The same Timeouts object is the node run's and its drain's: all short calls go local.
        self._timeouts.local = input.local_calls and self._features.on(PATCH_LOCAL_CALLS)
        if input.lease_scope and input.lease_is_run:
            # This run is the node's lease (its workflow ID): nothing to take, only to answer.
            self.lease_info = LeaseInfo(cluster=LeaseScope.parse(input.lease_scope).cluster, scope=input.lease_scope,
                                        holder=input.parent_id, procedure="machineconfig-rollout",
                                        acquired_at=workflow.info().start_time)
        elif input.lease_scope:
            # The node's lease, held in the rollout's name for as long as this run lives.
            self.run_leases = Leases(input.parent_id, "machineconfig-rollout", requester=workflow.info().workflow_id)
            try:
                await self.run_leases.hold_while_running(input.lease_scope)
            except ApplicationError as err:
                if err.type != "LeaseHeld":
                    raise
                workflow.logger.warning("node %s not touched: %s", input.node, err.message)
                return self.node_run.result(NodeRolloutResult, "failed", reason=err.message, safe_point=LEASE_REFUSED)
        result = await self._handshake(input)
        await self.node_run.settle()
        if self.lease_info is not None:  # a contender's answer still going out
            await workflow.wait_condition(workflow.all_handlers_finished)
        return result

    async def _handshake(self, input: NodeRolloutInput) -> NodeRolloutResult:
        run = self.node_run
        target, drain_v, uncordon_v = input.target, drain_value(input.target), uncordon_value(input.target)
        wait_s = input.wait_activity_timeout_seconds
        drain_seconds: float | None = None

        # 1. Where is the node? Asking for the target config first is safe in every state the
        # node can be in (at target already: the daemon sees desired == current and does
        # nothing; mid-handshake for the target: no request at all), and the answer is the
        # node as observed, so one activity does both the read and step 2.
        if not run.stop and self._features.on(PATCH_SET_DESIRED_FIRST):
            if desired_in_drain(self):  # desiredConfig in the first drain_when_asked call
                first = await follow_from_start(self, input)
                if isinstance(first, NodeRolloutResult):
                    return first
                node = first
            else:
                await run.report(NodePhase.RUNNING, NodeStep.SET_DESIRED_CONFIG)
                node = await self._annotate({ANN_DESIRED_CONFIG: target})
        else:
            await run.report(NodePhase.RUNNING, NodeStep.READ)
            node = await self._read()
        if node.cordoned_by == input.owner:
            run.cordoned_by_us = True
        if is_at_target(node, target):
            if run.cordoned_by_us:
                await run.uncordon()
                run.cordoned_by_us = False
            await run.report(NodePhase.DONE, NodeStep.FINISHED, reason="already at target")
            return run.result(NodeRolloutResult, "done", reason="already at target", safe_point="already at target")
        if self._features.on(PATCH_FOLLOW_DAEMON):
            # Answer whatever the daemon asks, from the observed annotations (follow.py).
            return await follow_daemon(self, input, node)

        try:
            handed_off = node.last_applied_drain in (drain_v, uncordon_v) or (
                node.current_config == target and node.desired_drain == uncordon_v
            )
            if not handed_off:
                # 2. Ask for the config.
                run.check_stop()
                if node.desired_config != target:
                    await run.report(NodePhase.RUNNING, NodeStep.SET_DESIRED_CONFIG)
                    node = await self._annotate({ANN_DESIRED_CONFIG: target})
                # 3. Wait for the daemon's drain request.
                if node.desired_drain not in (drain_v, uncordon_v):
                    await run.report(
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
                # 4. Cordon, drain, hand off (lastAppliedDrain=drain-X; the daemon waits 1 h).
                if node.desired_drain == drain_v and node.last_applied_drain != drain_v:

                    async def hand_off() -> None:
                        await self._annotate({ANN_LAST_APPLIED_DRAIN: drain_v})

                    drain_seconds = await run.cordon_and_drain(
                        wait_seconds=input.drain_wait_seconds,
                        backoff_initial=input.drain_backoff_initial_seconds,
                        backoff_max=input.drain_backoff_max_seconds,
                        deadline_seconds=input.daemon_drain_deadline_seconds,
                        hand_off=hand_off,
                    )
        except Stopped:
            return await run.roll_back(
                NodeRolloutResult,
                f"before drain hand-off ({run.progress.step})",
                self._undo_desired_config,
                before="the drain hand-off",
            )

        # 5. Past the hand-off the daemon owns the node until it asks for the uncordon.
        after_handoff = "after drain hand-off: the daemon was rebooting the node, so it was completed"
        reboot_started = workflow.now()
        # A node found already at its target (e.g. currentConfig was right, only desiredConfig lagged)
        # needs neither reboot nor uncordon hand-off; only our own cordon is undone.
        done = is_at_target(node, target)
        if not done and node.desired_drain != uncordon_v and node.last_applied_drain != uncordon_v:
            await run.report(NodePhase.RUNNING, NodeStep.WAIT_REBOOT, f"daemon to reboot and set desiredDrain={uncordon_v}")
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
            await run.report(
                NodePhase.RUNNING, NodeStep.UNCORDON, f"lastAppliedDrain={uncordon_v} before the daemon deadline", deadline=deadline
            )
            await run.uncordon()
            run.cordoned_by_us = False
            warning = run.warn_deadline("uncordon hand-off", uncordon_asked, input.daemon_uncordon_deadline_seconds)
            await run.report(NodePhase.RUNNING, NodeStep.HAND_OFF_UNCORDON, deadline=deadline, warning=warning)
            node = await self._annotate({ANN_LAST_APPLIED_DRAIN: uncordon_v})
        elif run.cordoned_by_us or node.cordoned_by == input.owner:
            await run.uncordon()
            run.cordoned_by_us = False

        # 7. The daemon reports the config done.
        if not is_at_target(node, target):
            await run.report(NodePhase.RUNNING, NodeStep.WAIT_DONE, f"daemon to set currentConfig={target}, state=Done")
            res = await self._wait(
                WaitForNodeInput(node=input.node, kind="config_done", value=target, timeout_seconds=wait_s),
                interruptible=False,
            )
            if res.degraded:
                return await self._degraded(res.node, NodeStep.WAIT_DONE)
        safe_point = after_handoff if run.stop else None
        await run.report(NodePhase.DONE, NodeStep.FINISHED, reason=safe_point)
        return run.result(
            NodeRolloutResult, "done", drain_seconds=drain_seconds, reboot_seconds=reboot_seconds, safe_point=safe_point,
            reason=safe_point,
        )
