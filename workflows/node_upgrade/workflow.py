"""NodeUpgradeWorkflow: nodes by label in openshift-ansible ``serial`` batches with a canary first
(R3d nodes, procedures-spec §1.2, §4.2).

Flow: read every Node → plan (:mod:`workflows.node_upgrade.plan`: selection without masters, done
nodes skipped by kubelet version, canary, serial batches) → dry run stops here → leases (the
planned nodes) → the canary batch → gate ``canary`` → each serial batch in order, every node of a
batch in parallel as a :class:`NodeUpgradeNodeWorkflow` child (the kit's node window with the
batch as its width), the next batch only when the whole batch is final → after a batch: the
GlusterFS gate when the batch held a GlusterFS host, then the stop rule: ``failed / batch size *
100 > max_fail_percentage`` ends the run as ``stopped`` (re-running continues: done nodes are
skipped).

The operator surface is the kit's :class:`NodeProcedureWorkflow` (status, approve, reject, pause,
resume, abort, skip_node, retry_node, decide on a blocked drain).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.gluster.models import GlusterTarget
    from activities.node_upgrade.models import READ_UPGRADE_NODES, ReadUpgradeNodesInput, UpgradeNodes
    from workflows.shared.glusterfs.health import GlusterHealth
    from workflows.shared.glusterfs.models import GlusterHealthParams
    from workflows.kit import calls as acts
    from workflows.kit.batches import Group, NodeBatches, pass_planned_gate
    from workflows.kit.board import NodeBoard
    from workflows.kit.control import Aborted
    from workflows.kit.models import (
        ApprovalRules,
        ControlResult,
        DecideInput,
        DecideResult,
        GateKind,
        GateTimeoutOutcome,
        NodeControlInput,
        NodePhase,
        NodeProgress,
        ProcedurePhase,
    )
    from workflows.kit.plan import PlannedGate
    from workflows.kit.planning import planning_abort_message, planning_call
    from workflows.kit.report import Reporter
    from workflows.kit.procedure import NodeProcedureWorkflow
    from workflows.kit.scopes import node_scope
    from workflows.node_upgrade.models import (
        PROCEDURE_NODE_UPGRADE,
        BatchStatus,
        NodeUpgradeInput,
        NodeUpgradeNodeInput,
        NodeUpgradeNodeResult,
        NodeUpgradeResult,
        NodeUpgradeStatus,
        UpgradePlan,
        node_owner,
        node_workflow_id,
    )
    from workflows.node_upgrade.node import NodeUpgradeNodeWorkflow
    from workflows.node_upgrade.plan import PlanError, batch_failed_too_much, plan_lines, plan_upgrade

CANARY_GATE = "canary"
FAILED_PHASES = (NodePhase.FAILED, NodePhase.DEGRADED, NodePhase.ABORTED)


@workflow.defn
class NodeUpgradeWorkflow(NodeProcedureWorkflow):
    """Input :class:`NodeUpgradeInput`, result :class:`NodeUpgradeResult`, status
    :class:`NodeUpgradeStatus`. Fails (non-retryable ApplicationError) before any write when the
    plan is invalid (``InvalidPlan``: no node matches, a bad serial or canary, a host action
    without host access) or another procedure holds a node (``LeaseHeld``)."""

    @workflow.init
    def __init__(self, input: NodeUpgradeInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._status = NodeUpgradeStatus()
        self._timeouts = acts.Timeouts(input.activity_timeout_seconds, input.activity_heartbeat_timeout_seconds)
        self._gluster_hosts: set[str] = set()
        self.kit_init(
            procedure=PROCEDURE_NODE_UPGRADE, noun="node upgrade", cluster=input.cluster,
            rules=ApprovalRules(requested_by=input.requested_by, four_eyes=input.four_eyes, allowed_approvers=input.allowed_approvers),
            status=self._status, search_attributes=input.search_attributes, reject_note="node upgrade paused",
            base_phase=ProcedurePhase.PLANNING,
        )
        self.board = NodeBoard(
            procedure=PROCEDURE_NODE_UPGRADE, cluster=input.cluster, nodes=self._status.nodes,
            gate_history=self._status.gate_history, warnings=self._status.warnings, on_change=self.touch, noun="node upgrade",
        )
        self.batches = NodeBatches(
            board=self.board, control=self.control, gates=self.gates, start_child=self._start_child,
            rollback=self._rollback, recheck_unavailable=self._recheck, result_type=NodeUpgradeNodeResult,
            pause_on_degraded=False, gate_timeout_seconds=input.gate_timeout_seconds,
            gate_timeout_outcome=GateTimeoutOutcome.REJECT,
        )
        self.gluster = GlusterHealth(
            target=GlusterTarget(namespace=input.gluster_namespace),
            params=GlusterHealthParams(timeout_s=input.gluster_timeout_seconds, interval_s=5.0),
            gates=self.gates, control=self.control, board=self._status.health, progress={}, on_change=self.touch,
            short_call_s=input.activity_timeout_seconds * 3,
        )
        self.kit_reporter = Reporter(input.report_to)  # the kit's touch reports to the parent (workflows.kit.report)

    # --- the kit's hooks ------------------------------------------------------------------------

    @workflow.query
    def status(self) -> NodeUpgradeStatus:
        """The plan, batches, node rows, gates and what the upgrade waits for."""
        return self.procedure_status()

    def procedure_status(self) -> NodeUpgradeStatus:
        s = super().procedure_status()
        assert isinstance(s, NodeUpgradeStatus)
        s.in_flight = self.batches.in_flight()
        s.totals = self.batches.totals()
        if not s.waiting_for:
            deciding = self.board.deciding(s.workflow_id)
            running = self.board.in_flight_summary(s.in_flight, s.updated_at)
            if deciding:
                s.waiting_for, s.since, s.deadline = deciding
            elif running:
                s.waiting_for, s.since, s.deadline = running
        return s

    def on_abort(self, identity: str) -> None:
        self.batches.abort_children(identity)

    def on_node_progress(self, progress: NodeProgress) -> None:
        self.board.on_progress(progress)

    def check_skip_node(self, input: NodeControlInput) -> None:
        self.batches.check_request(input, "skip", finished=self.control.finished())

    def on_skip_node(self, input: NodeControlInput) -> ControlResult:
        return ControlResult(message=self.batches.request("skip", input))

    def check_retry_node(self, input: NodeControlInput) -> None:
        self.batches.check_request(input, "retry", finished=self.control.finished())

    def on_retry_node(self, input: NodeControlInput) -> ControlResult:
        return ControlResult(message=self.batches.request("retry", input))

    def check_decide(self, input: DecideInput) -> None:
        finished = str(self.control.base_phase) if self.control.finished() else None
        self.board.check_decide(input, self.gates.rules, finished=finished, in_flight=input.node in self.batches.children)

    async def on_decide(self, input: DecideInput) -> DecideResult:
        return await self.board.decide(input, self.batches.children.get(input.node), self.control)

    # --- main flow ------------------------------------------------------------------------------


    @workflow.run
    async def run(self, input: NodeUpgradeInput) -> NodeUpgradeResult:
        self.kit_status_attributes()
        self.touch()
        try:
            result = await self._run(input)
        except ApplicationError as err:
            self.control.base_phase = ProcedurePhase.FAILED
            self._status.error = str(err)
            self.touch()
            await self.kit_reporter.settle()
            raise
        await self.kit_reporter.settle()
        return result

    def _result(self, outcome: str, message: str) -> NodeUpgradeResult:
        return NodeUpgradeResult(workflow_id=self._id, outcome=outcome, plan=self._status.plan, nodes=self.batches.node_results(),
                                 message=message, started_at=self._status.started_at, finished_at=workflow.now())

    async def _run(self, input: NodeUpgradeInput) -> NodeUpgradeResult:
        try:
            plan = await self._plan(input)
        except Aborted as stop:  # an abort while reading the nodes (workflows.kit.planning): no lease, nothing written
            self.control.base_phase = ProcedurePhase.ABORTED
            self.touch()
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self._result("aborted", planning_abort_message(self.control, stop))
        if input.dry_run:
            self.control.base_phase = ProcedurePhase.DONE
            self.touch()
            return self._result("dry-run", "; ".join(plan_lines(plan)))
        todo = [n for _, nodes in plan.all_batches() for n in nodes]
        await self.leases.acquire([node_scope(input.cluster, n) for n in todo], probe_cluster=True)
        self.control.base_phase = ProcedurePhase.RUNNING
        self.touch()
        outcome, message = "completed", ""
        for i, (name, nodes) in enumerate(plan.all_batches()):
            if self.control.abort:
                break
            if name != "canary" and i > 0 and plan.canary and plan.canary_gate and not await self._canary_gate(plan):
                break
            stop = await self._batch(i, name, nodes, plan)
            if stop:
                outcome, message = "stopped", stop
                break
        await self.batches.settle()
        await self.leases.release()
        if self.control.abort:
            self.board.abort_pending()
            outcome, message = "aborted", self.control.abort_reason or "aborted"
        self.control.base_phase = {"completed": ProcedurePhase.DONE, "aborted": ProcedurePhase.ABORTED}.get(outcome, ProcedurePhase.FAILED)
        if outcome == "stopped":
            self._status.error = message
        self.touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        if outcome == "completed":
            message = f"{self.batches.totals().get('done', 0)} node(s) at {plan.target_version}"
        return self._result(outcome, message)

    async def _plan(self, input: NodeUpgradeInput) -> UpgradePlan:
        try:  # read-only: the planning retry policy fails fast on API errors (issue 18)
            read: UpgradeNodes = await planning_call(self.control, READ_UPGRADE_NODES, ReadUpgradeNodesInput(), UpgradeNodes,
                                                     seconds=0, timeouts=self._timeouts)
        except ActivityError as err:
            api = acts.planning_api_failure(err, "planning")
            if api is not None:
                raise api from err
            raise
        try:
            plan = plan_upgrade(read.nodes, input.selection, input.policy, input.target_version)
        except PlanError as err:
            raise ApplicationError(str(err), type="InvalidPlan", non_retryable=True) from err
        if input.action.kind == "host":
            missing = [n for _, b in plan.all_batches() for n in b if n not in input.host_access]
            if missing:
                raise ApplicationError(f"host action without host access for: {', '.join(missing)}", type="InvalidPlan",
                                       non_retryable=True)
        facts = {n.name: n for n in read.nodes}
        self._gluster_hosts = {n for n in plan.selected if input.gluster_label in facts[n].labels}
        for name, nodes in plan.all_batches():
            self.batches.add_group(name, max_unavailable=len(nodes), nodes=nodes, skipped=[])
            self._status.batches.append(BatchStatus(name=name, nodes=nodes))
        for n in plan.done:
            self.board.add(n, "done-before", phase=NodePhase.SKIPPED, reason=f"already at {plan.target_version}")
        self._status.plan = plan
        self._status.plan_lines = plan_lines(plan)
        self.touch()
        return plan

    async def _canary_gate(self, plan: UpgradePlan) -> bool:
        """Gate ``canary`` after the canary batch; a rejection pauses, resume opens it again."""
        if CANARY_GATE in self.gates.passed:
            return True
        planned = PlannedGate(id=CANARY_GATE, kind=GateKind.CANARY, after_node=plan.canary[-1])
        while not self.control.abort:
            if await pass_planned_gate(self.gates, planned, timeout_seconds=self._in.gate_timeout_seconds,
                                       timeout_outcome=GateTimeoutOutcome.REJECT, on_change=self.touch, noun="node upgrade"):
                return True
            await workflow.wait_condition(lambda: not self.control.paused or self.control.abort)
        return False

    async def _batch(self, index: int, name: str, nodes: list[str], plan: UpgradePlan) -> str | None:
        """Run one batch; returns why the run stops (max_fail_percentage, GlusterFS) or None."""
        bs = self._status.batches[index]
        bs.state = "running"
        self._status.current_batch = name
        self.touch()
        await self.batches.run_group(name)
        bs.failed = [n for n in nodes if self.board.nodes[n].phase in FAILED_PHASES]
        bs.state = "done"
        self.touch()
        if self.control.abort:
            return None
        if batch_failed_too_much(len(bs.failed), len(nodes), plan.max_fail_percentage):
            bs.state = "stopped"
            why = "; ".join(f"{n}: {self.board.nodes[n].reason}" for n in bs.failed)
            return (f"batch {name}: {len(bs.failed)} of {len(nodes)} node(s) failed ({why}), more than "
                    f"max_fail_percentage {plan.max_fail_percentage:g}; fix them and start the upgrade again (done nodes are skipped)")
        hosts = [n for n in nodes if n in self._gluster_hosts and n not in bs.failed]
        if hosts:
            result = await self.gluster.gate(f"after-{name}")
            if result.outcome != "healthy" and not self.control.abort:
                bs.state = "stopped"
                return f"GlusterFS not healthy after batch {name} ({', '.join(hosts)}): {result.detail}"
        return None

    # --- hooks of the node window ---------------------------------------------------------------

    async def _start_child(self, node: str, group: Group, attempt: int) -> workflow.ChildWorkflowHandle:
        child = NodeUpgradeNodeInput(node=node, batch=group.name, parent_id=self._id, owner=node_owner(self._id, node),
                                     attempt=attempt, run=self._in, gluster_host=node in self._gluster_hosts)
        return await workflow.start_child_workflow(
            NodeUpgradeNodeWorkflow.run, child, id=node_workflow_id(self._id, node, attempt),
            parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
            static_summary=f"node {node} · upgrade in batch {group.name} (attempt {attempt})",
        )

    async def _rollback(self, node: str) -> None:
        """A failed node stays as it is (cordoned, for the person to look at): nothing to undo."""

    async def _recheck(self, nodes: list[str]) -> list[str]:
        """Batches start with no node counted unavailable, so there is nothing to re-read."""
        return []
