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

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.node_upgrade.models import READ_UPGRADE_NODES, ReadUpgradeNodesInput, UpgradeNodes
    from workflows.shared.glusterfs.health import GlusterHealth
    from workflows.kit.batches import Group, NodeBatches, pass_planned_gate
    from workflows.kit.board import NodeBoard
    from activities.preflight.models import (
        HostExecutable,
        NamesExist,
        Precondition,
        SelectorMatches,
        VersionSkew,
        WorkerExecutable,
    )
    from workflows.kit.models import (
        ChangedItem,
        GateKind,
        NodePhase,
        ProcedurePhase,
    )
    from workflows.kit.plan import PlannedGate
    from workflows.kit.planning import planning_read
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
    plan is invalid or a precondition fails (outcome ``refused``: no node matches, a bad serial
    or canary, a host action without host access, the action's program missing, a kubelet newer
    than the control plane) or another procedure holds a node (``LeaseHeld``)."""

    @workflow.init
    def __init__(self, input: NodeUpgradeInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._status = NodeUpgradeStatus()
        self._gluster_hosts: set[str] = set()
        self.kit_init(
            procedure=PROCEDURE_NODE_UPGRADE, noun="node upgrade", input=input, status=self._status,
            reject_note="node upgrade paused", base_phase=ProcedurePhase.PLANNING, preflight=True,
        )
        self._timeouts = self.timeouts  # the input's calls (workflows.kit.inputs.CallTimeouts)
        self.board = NodeBoard(
            procedure=PROCEDURE_NODE_UPGRADE, cluster=input.cluster, nodes=self._status.nodes,
            gate_history=self._status.gate_history, warnings=self._status.warnings, on_change=self.touch, noun="node upgrade",
        )
        self.batches = NodeBatches(
            board=self.board, control=self.control, gates=self.gates, start_child=self._start_child,
            rollback=self._rollback, recheck_unavailable=self._recheck, result_type=NodeUpgradeNodeResult,
            pause_on_degraded=False, gate_timeout_seconds=input.gates.timeout_seconds,
            gate_timeout_outcome=input.gates.timeout_outcome, alerts=self.alerts,
        )
        self.kit_windows(input.windows)  # no node starts outside a maintenance window (workflows.kit.windows)
        self.gluster = GlusterHealth.of_procedure(self, namespace=input.gluster_namespace, timeout_s=input.gluster_timeout_seconds,
                                                  short_call_s=input.calls.short_call_seconds * 3)

    # --- the kit's hooks ------------------------------------------------------------------------

    @workflow.query
    def status(self) -> NodeUpgradeStatus:
        """The plan, batches, node rows, gates and what the upgrade waits for."""
        return self.procedure_status()

    def procedure_status(self) -> NodeUpgradeStatus:
        s = super().procedure_status()
        assert isinstance(s, NodeUpgradeStatus)
        s.totals = self.batches.totals()
        return s

    # --- main flow ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: NodeUpgradeInput) -> NodeUpgradeResult:
        return await self.kit_run(lambda: self._run(input), NodeUpgradeResult)

    def kit_result_fields(self) -> dict[str, object]:
        return {"plan": self._status.plan, "nodes": self.batches.node_results()}

    def kit_left_changed(self) -> list[ChangedItem]:
        """What stays changed (issue 39): the kit's nodes left cordoned by this run (with
        ``kubectl uncordon NODE``), then each node this run upgraded, named as the simulator's
        diff names it: ``Node NAME`` (its kubelet version and the labels/annotations of its new
        node group) and ``host NAME`` (what the node action changed there: the node
        configuration files and node group). An upgraded node has no undo (lockkeeper has no
        downgrade). A node counts as upgraded by this run when it was planned (so not at the
        target before) and its last attempt saw the kubelet at the target version."""
        items = super().kit_left_changed()
        plan = self._status.plan
        if plan is None:
            return items
        for name, res in self.batches.results.items():
            if getattr(res, "kubelet_version", None) != plan.target_version:
                continue
            items.append(ChangedItem(target=f"Node {name}", what=f"upgraded by this run: kubelet {plan.target_version} and its "
                                     "node group's labels (no downgrade)"))
            items.append(ChangedItem(target=f"host {name}", what="upgraded by the node action: node configuration and node "
                                     "group (no downgrade)"))
        return items

    def check_revert(self, input: Any) -> None:
        raise ValueError("a node upgrade cannot be reverted: an upgraded node stays upgraded (retry-node, skip-node "
                         "or abort act on the nodes not done yet)")

    async def _run(self, input: NodeUpgradeInput) -> NodeUpgradeResult:
        plan = await self._plan(input)
        outcome = await self.kit_preflight(self._preconditions(input, plan), refuse=not input.dry_run)
        self._status.plan_lines = plan_lines(plan) + [f"precondition {line}" for line in outcome.lines()]
        if input.dry_run:  # every check's result, the failed ones as what a real start would refuse
            return self.kit_end(NodeUpgradeResult, "dry-run", "; ".join(self._status.plan_lines), problems=outcome.problems)
        todo = [n for _, nodes in plan.all_batches() for n in nodes]
        await self.leases.acquire([node_scope(input.cluster, n) for n in todo], probe_cluster=True)
        self.control.base_phase = ProcedurePhase.RUNNING
        self.touch()
        outcome_word, message = "completed", ""
        for i, (name, nodes) in enumerate(plan.all_batches()):
            if self.control.abort:
                break
            if name != "canary" and i > 0 and plan.canary and plan.canary_gate and not await self._canary_gate(plan):
                break
            stop = await self._batch(i, name, nodes, plan)
            if stop:
                outcome_word, message = "stopped", stop
                break
        await self.batches.settle()
        if self.control.abort:
            self.board.abort_pending()
            outcome_word, message = "aborted", self.control.abort_reason or "aborted"
        if outcome_word == "stopped":
            self._status.error = message
        if outcome_word == "completed":
            message = f"{self.batches.totals().get('done', 0)} node(s) at {plan.target_version}"
            return self.kit_end(NodeUpgradeResult, outcome_word, message)
        # Stopped or aborted: say what stays as it is (nodes left cordoned, with the command).
        left = self.kit_left_changed()
        if left:
            message += "; left changed: " + "; ".join(i.line() for i in left)
        return self.kit_end(NodeUpgradeResult, outcome_word, message, left_changed=left, next_commands=self.kit_next_commands(left))

    def _preconditions(self, input: NodeUpgradeInput, plan: UpgradePlan) -> list[Precondition]:
        """What the upgrade needs before it touches a node (issue 39): the action's program where
        it runs (the worker, or each node's host), the canary names, a selection that matches,
        and no kubelet newer than the control plane."""
        todo = [n for _, nodes in plan.all_batches() for n in nodes]
        program = input.action.argv[0]
        pre: list[Precondition] = []
        if input.action.kind == "external":
            pre.append(WorkerExecutable(program=program, why="the node action runs it on the worker for each node"))
        else:
            pre += [HostExecutable(program=program, node=n, access=input.host_access[n], why="the node action runs it there")
                    for n in todo if n in input.host_access]
        canary = input.policy.canary
        if isinstance(canary, list) and canary:
            pre.append(NamesExist(names=list(canary), role="canary", why="--canary"))
        if input.selection.nodes:
            pre.append(NamesExist(names=list(input.selection.nodes), why="the nodes to upgrade"))
        if input.selection.label_selector:
            pre.append(SelectorMatches(selector=input.selection.label_selector, why="--selector picks the nodes"))
        if todo:
            pre.append(VersionSkew(node=input.selection.label_selector or ", ".join(todo), target_version=plan.target_version,
                                   why="a kubelet may not be newer than the API server (upgrade the control plane first)"))
        return pre

    async def _plan(self, input: NodeUpgradeInput) -> UpgradePlan:
        # read-only: the planning retry policy fails fast on API errors (issue 18)
        read: UpgradeNodes = await planning_read(self.control, READ_UPGRADE_NODES, ReadUpgradeNodesInput(), UpgradeNodes,
                                                 what="planning", timeouts=self._timeouts)
        try:
            plan = plan_upgrade(read.nodes, input.selection, input.policy, input.target_version, input.node_order)
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
            if await pass_planned_gate(self.gates, planned, timeout_seconds=self._in.gates.timeout_seconds,
                                       timeout_outcome=self._in.gates.timeout_outcome, on_change=self.touch, noun="node upgrade"):
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
