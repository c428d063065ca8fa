"""NodeRolloutWorkflow: one node through the MachineConfig handshake (DESIGN.md), idempotently.

The child compares what it observes with what it wants and does only what is missing, so a new
attempt (retry_node) or a worker crash anywhere resumes at the right step. Its owner string
(``{parent_id}/node/{node}``, without the attempt) is the cordoned-by record, so a retry
recognises an earlier attempt's cordon as ours and a node somebody else cordoned stays cordoned.

Handshake (MCO ``pkg/daemon/drain.go``, ``pkg/controller/drain/drain_controller.go``):
desiredConfig=X → daemon desiredDrain=drain-X → cordon + drain → lastAppliedDrain=drain-X
(within 1 h) → reboot → desiredDrain=uncordon-X → uncordon → lastAppliedDrain=uncordon-X
(within 10 min) → currentConfig=X, state Done.

The run drives the handshake from the observed annotations (:mod:`workflows.machineconfig.follow`):
a drain the daemon asks for again while we wait for Done is drained again (or gated), and a retry
answers what the daemon waits for.

Signals ``skip`` / ``abort`` (from :class:`workflows.kit.noderun.NodeRunWorkflow`) are honoured
at safe points: before the drain hand-off the child rolls back (desiredConfig=currentConfig,
uncordon if we cordoned); after it, the daemon is already rebooting the node, so the child
completes the node and reports that safe point. Progress, safe points, deadline warnings and the
cordon-and-drain with its decision gate are the kit's (:mod:`workflows.kit.noderun`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import ANN_DESIRED_CONFIG, NodeInfo, ReadNodeInput, SetNodeAnnotationsInput
    from workflows.kit import calls as acts
    from workflows.kit.drain import DrainGateState
    from workflows.kit.scopes import LeaseScope
    from workflows.kit.noderun import NodeRun, NodeRunWorkflow
    from workflows.machineconfig.follow import follow_daemon, follow_from_start
    from workflows.machineconfig.plan import is_at_target
    from workflows.kit.models import LeaseInfo, NodePhase
    from workflows.machineconfig.models import NodeRolloutInput, NodeRolloutResult, NodeStep


@workflow.defn(sandboxed=False)
class NodeRolloutWorkflow(NodeRunWorkflow):
    """Drive one node to ``input.target``. Returns :class:`NodeRolloutResult` (never raises for a
    degraded node: outcome ``degraded`` with the daemon's reason). Reports to the parent (the
    kit's ``child_report``) only a blocked drain, a warning or a decision; the ``progress`` query
    has every step.

    Not sandboxed: a rollout starts one per node, and building a sandboxed instance costs about
    0.2 s of worker CPU each. This module and what it runs (:mod:`workflows.kit.noderun`,
    :mod:`workflows.kit.drain`, :mod:`workflows.machineconfig.follow`, the models) read the clock
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
        self.node_run = NodeRun(
            node=input.node,
            attempt=input.attempt,
            parent_id=input.parent_id,
            owner=input.owner,
            warn_fraction=input.daemon.warn_fraction,
            timeouts=self._timeouts,
            drain=DrainGateState(
                input.node, input.drain.decide_after_seconds, input.drain.decision_timeout_seconds, input.drain.decision_timeout_outcome
            ),
            # The parent learns the outcome from our result and the steps from our progress
            # query; it is signalled only a blocked drain, a warning or a decision.
            report_steps=frozenset(),
        )

    # --- calls (follow.py uses them) -----------------------------------------------------------------------------

    async def read(self) -> NodeInfo:
        """The node as the API has it now (``read_node``)."""
        return await acts.call(acts.READ_NODE, ReadNodeInput(node=self._in.node), NodeInfo, timeouts=self._timeouts)

    async def annotate(self, annotations: dict[str, str | None]) -> NodeInfo:
        """Set (a value) or remove (None) the node's ``annotations``; returns the node after."""
        return await acts.call(
            # No read first: each of the run's writes is idempotent and usually needed (desiredConfig,
            # a hand-off), so one request instead of two, in a workflow task that stays open for it.
            acts.SET_NODE_ANNOTATIONS, SetNodeAnnotationsInput(node=self._in.node, annotations=annotations, read_first=False),
            NodeInfo,
            timeouts=self._timeouts,
        )

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
        if input.lease_scope:
            # This run is the node's lease (its workflow ID): nothing to take, only to answer.
            self.lease_info = LeaseInfo(cluster=LeaseScope.parse(input.lease_scope).cluster, scope=input.lease_scope,
                                        holder=input.parent_id, procedure="machineconfig-rollout",
                                        acquired_at=workflow.info().start_time)
        result = await self._handshake(input)
        await self.node_run.settle()
        if self.lease_info is not None:  # a contender's answer still going out
            await workflow.wait_condition(workflow.all_handlers_finished)
        return result

    async def _handshake(self, input: NodeRolloutInput) -> NodeRolloutResult:
        run = self.node_run
        target = input.target
        # 1. Where is the node? Asking for the target config first is safe in every state the
        # node can be in (at target already: the daemon sees desired == current and does
        # nothing; mid-handshake for the target: no request at all): one drain_when_asked call
        # sets desiredConfig and, when the node plainly waits for the daemon, goes on to the
        # drain (follow.py). A run asked to stop before it began only reads the node.
        if run.stop:
            await run.report(NodePhase.RUNNING, NodeStep.READ)
            node = await self.read()
        else:
            first = await follow_from_start(self, input)
            if isinstance(first, NodeRolloutResult):
                return first
            node = first
        if node.cordoned_by == input.owner:
            run.cordoned_by_us = True
        if is_at_target(node, target):
            if run.cordoned_by_us:
                await run.uncordon()
                run.cordoned_by_us = False
            await run.report(NodePhase.DONE, NodeStep.FINISHED, reason="already at target")
            return run.result(NodeRolloutResult, "done", reason="already at target", safe_point="already at target")
        # 2. Answer whatever the daemon asks, from the observed annotations (follow.py).
        return await follow_daemon(self, input, node)
