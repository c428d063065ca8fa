"""NodeDrainWorkflow: take one node out for maintenance, durably (node-maintenance-operator style).

Cordon (recording ``lockkeeper.io/cordoned-by`` = this workflow's ID) → drain with the blocked
report and the decision gate of :mod:`workflows.decisions` → optionally the reboot command →
with ``uncordon_after``, uncordon (only if we cordoned). A ``skip`` or ``abort`` decision (or
the ``abort`` update) uncordons the node if we cordoned it and ends with outcome ``aborted``.

The reboot command (an argv list, never a shell string) runs once through the
``run_node_command`` activity on the node (debug pod by default, or SSH / local), without
automatic retries: a reboot is not idempotent, so a failed or lost command fails the procedure
and leaves the node cordoned for a person to look at. With ``uncordon_after`` the procedure then
waits for the node to report Ready again before it uncordons it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.etcd_models import CommandResult, RunCommandInput
    from activities.models import (
        CordonInput,
        CordonResult,
        DrainReport,
        NodeInfo,
        ReadNodeInput,
        UncordonInput,
        UncordonResult,
    )
    from workflows import activity_calls as acts
    from workflows.decisions import DrainGateState, DrainLoop, check_decision, drain_until_done
    from workflows.models import (
        PROCEDURE_NODE_DRAIN,
        SA_CLUSTER,
        SA_PROCEDURE,
        ControlInput,
        ControlResult,
        DecideInput,
        DecideResult,
        DrainDecisionSignal,
        NodeDrainInput,
        NodeDrainResult,
        NodePhase,
        NodeResult,
        NodeStatus,
        RolloutPhase,
        RolloutStatus,
    )


@workflow.defn
class NodeDrainWorkflow:
    """Input :class:`NodeDrainInput`, result :class:`NodeDrainResult`; query ``status``
    (:class:`RolloutStatus` with the one node), updates ``decide`` and ``abort``."""

    @workflow.init
    def __init__(self, input: NodeDrainInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._gate = DrainGateState(input.node, input.decide_after_seconds, input.decision_timeout_seconds, input.decision_timeout_outcome)
        self._abort_by: str | None = None
        self._phase = RolloutPhase.RUNNING
        self._node = NodeStatus(name=input.node, pool="-", phase=NodePhase.RUNNING, step="cordon", since=workflow.now())
        self._warnings: list[str] = []
        self._command: CommandResult | None = None
        self._started = workflow.now()

    @workflow.query
    def status(self) -> RolloutStatus:
        """The drain as a one-node rollout status (``lockkeeper status`` renders it)."""
        ns = self._node.model_copy(deep=True)
        ns.blocked_since = self._gate.blocked_since if ns.phase == NodePhase.BLOCKED else None
        ns.decision_gate = self._gate.gate.model_copy() if self._gate.gate else None
        st = RolloutStatus(
            workflow_id=self._id, cluster=self._in.cluster, phase=self._phase, nodes={ns.name: ns},
            gate_history=list(self._gate.records), warnings=list(self._warnings), started_at=self._started,
            updated_at=workflow.now(), abort_requested=self._abort_by is not None,
        )
        gate = self._gate.open_gate
        st.waiting_for = (
            f"a decision on the blocked drain of node {ns.name}: lockkeeper decide {self._id} {ns.name} wait|skip|delete-pod|abort"
            if gate else (f"node {ns.name}: {ns.step}" + (f" ({ns.waiting_for})" if ns.waiting_for else ""))
        )
        st.since = gate.opened_at if gate else ns.since
        return st

    @workflow.update
    async def decide(self, input: DecideInput) -> DecideResult:
        """Answer the blocked drain's decision gate (see :mod:`workflows.decisions`)."""
        self._gate.receive(DrainDecisionSignal(decision=input.decision, identity=input.identity, comment=input.comment, at=workflow.now()))
        return DecideResult(gate_id=self._gate.gate.id if self._gate.gate else "", decision=input.decision,
                            message=f"{input.decision} decided for node {input.node} by {input.identity}")

    @decide.validator
    def _validate_decide(self, input: DecideInput) -> None:
        if input.node != self._in.node:
            raise ValueError(f"unknown node {input.node!r}; this procedure drains {self._in.node}")
        if self._gate.pending is not None:
            raise ValueError(f"node {input.node} has no drain decision waiting (one is being applied)")
        check_decision(input, self._gate.open_gate, requested_by=self._in.requested_by,
                       four_eyes=self._in.four_eyes, allowed_approvers=self._in.allowed_approvers)

    @workflow.update
    def abort(self, input: ControlInput) -> ControlResult:
        """Stop at the next safe point: uncordon if we cordoned, outcome aborted."""
        self._abort_by = input.identity
        return ControlResult(message=f"abort requested by {input.identity}")

    @abort.validator
    def _validate_abort(self, input: ControlInput) -> None:
        if self._phase != RolloutPhase.RUNNING or self._abort_by is not None:
            raise ValueError(f"drain already {self._phase if self._phase != RolloutPhase.RUNNING else 'aborting'}")

    def _set(self, phase: NodePhase, step: str, waiting_for: str | None = None, **kw) -> None:
        n = self._node
        if (n.phase, n.step) != (phase, step):
            n.since = workflow.now()
        n.phase, n.step, n.waiting_for = phase, step, waiting_for
        for k, v in kw.items():
            setattr(n, k, v)

    async def _run_reboot_command(self, input: NodeDrainInput, timeouts: acts.Timeouts) -> None:
        """Run ``reboot_command`` once; with ``uncordon_after`` wait for the node to be Ready.

        Raises a non-retryable ApplicationError (``RebootCommandFailed`` / ``NodeNotReady``)
        that fails the procedure with the node still cordoned."""
        access = input.command_access()
        self._set(NodePhase.RUNNING, "reboot-command", f"{' '.join(input.reboot_command or [])} via {access.describe()}")
        try:
            result: CommandResult = await workflow.execute_activity(
                acts.RUN_NODE_COMMAND,
                RunCommandInput(access=access, argv=list(input.reboot_command or []), timeout_seconds=input.reboot_timeout_seconds),
                result_type=CommandResult,
                start_to_close_timeout=timedelta(seconds=input.reboot_timeout_seconds) + timeouts.short_call,
                heartbeat_timeout=max(timedelta(seconds=30), timeouts.heartbeat),
                # A reboot is not idempotent: never run it twice on our own.
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError as err:
            self._set(NodePhase.FAILED, "reboot-command", reason=f"reboot command lost: {err.cause or err}; node left cordoned")
            self._phase = RolloutPhase.FAILED
            raise ApplicationError(self._node.reason or "reboot command failed", type="RebootCommandFailed", non_retryable=True) from err
        self._command = result
        if result.timed_out or result.exit_code != 0:
            tail = (result.stderr or result.stdout).strip()[-500:]
            why = "timed out" if result.timed_out else f"exited {result.exit_code}"
            self._set(NodePhase.FAILED, "reboot-command", reason=f"reboot command {why}: {tail}; node left cordoned")
            self._phase = RolloutPhase.FAILED
            raise ApplicationError(self._node.reason or why, type="RebootCommandFailed", non_retryable=True)
        if not input.uncordon_after:
            return
        # The node comes back from the reboot: poll its Ready condition on a durable timer.
        deadline = workflow.now() + timedelta(seconds=input.ready_timeout_seconds)
        self._set(NodePhase.RUNNING, "wait-ready", "node Ready after the reboot command", deadline=deadline)
        delay = 2.0
        while True:
            node: NodeInfo = await acts.call(acts.READ_NODE, ReadNodeInput(node=input.node), NodeInfo, timeouts=timeouts)
            if node.ready:
                return
            if workflow.now() >= deadline:
                self._set(NodePhase.FAILED, "wait-ready", reason=f"node not Ready {input.ready_timeout_seconds:.0f}s after the reboot command; left cordoned")
                self._phase = RolloutPhase.FAILED
                raise ApplicationError(self._node.reason or "node not Ready", type="NodeNotReady", non_retryable=True)
            await workflow.sleep(delay)
            delay = min(30.0, delay * 2)

    @workflow.run
    async def run(self, input: NodeDrainInput) -> NodeDrainResult:
        if input.search_attributes:
            workflow.upsert_search_attributes([
                SearchAttributeKey.for_keyword(SA_CLUSTER).value_set(input.cluster),
                SearchAttributeKey.for_keyword(SA_PROCEDURE).value_set(PROCEDURE_NODE_DRAIN),
            ])
        timeouts = acts.Timeouts(input.activity_timeout_seconds, input.activity_heartbeat_timeout_seconds)
        cordon: CordonResult = await acts.call(acts.CORDON_NODE, CordonInput(node=input.node, owner=self._id), CordonResult, timeouts=timeouts)
        self._node.cordoned_by_us = cordon.cordoned_by_us

        async def before_pass() -> None:
            if self._node.phase != NodePhase.BLOCKED:
                self._set(NodePhase.RUNNING, "drain", "evicted pods to be gone")

        async def blocked(report: DrainReport, reason: str) -> None:
            gate = self._gate.open_gate
            self._set(NodePhase.BLOCKED, "drain", f"a decision on gate {gate.id}" if gate else "the blocking pods to become evictable",
                      reason=reason, drain_report=report)

        async def changed() -> None:
            await blocked(self._node.drain_report or DrainReport(), self._node.reason or "")

        outcome = await drain_until_done(
            DrainLoop(node=input.node, wait_seconds=input.drain_wait_seconds, backoff_initial=input.drain_backoff_initial_seconds,
                      backoff_max=input.drain_backoff_max_seconds, timeouts=timeouts, before_pass=before_pass,
                      blocked=blocked, changed=changed, stopped=lambda: self._abort_by is not None),
            self._gate,
        )
        drained = outcome == "drained"
        uncordoned = False
        if drained and input.reboot_command:
            await self._run_reboot_command(input, timeouts)
        if not drained or input.uncordon_after:
            self._set(NodePhase.RUNNING, "uncordon")
            unc: UncordonResult = await acts.call(acts.UNCORDON_NODE, UncordonInput(node=input.node, owner=self._id), UncordonResult, timeouts=timeouts)
            uncordoned = unc.uncordoned
        if drained:
            phase, message = NodePhase.DONE, f"node {input.node} drained" + (" and uncordoned" if uncordoned else "; left cordoned for maintenance")
        else:
            by = self._abort_by or (self._gate.gate.decided_by if self._gate.gate else "unknown")
            phase = NodePhase.SKIPPED if outcome == "skip" else NodePhase.ABORTED
            message = f"{outcome if outcome != 'stopped' else 'abort'} by {by}; node uncordoned if we had cordoned it"
        self._set(phase, "finished", reason=message)
        self._phase = RolloutPhase.DONE if drained else RolloutPhase.ABORTED
        await workflow.wait_condition(workflow.all_handlers_finished)
        now = workflow.now()
        return NodeDrainResult(
            outcome="completed" if drained else "aborted", node=input.node, drained=drained, uncordoned=uncordoned,
            nodes={input.node: NodeResult(name=input.node, pool="-", phase=phase, attempts=1,
                                          duration_seconds=(now - self._started).total_seconds(), reason=message)},
            gate_history=list(self._gate.records), message=message, started_at=self._started, finished_at=now,
        )
