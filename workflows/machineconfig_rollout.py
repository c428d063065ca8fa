"""MachineConfigRolloutWorkflow: lockkeeper standing in for the machine-config-controller (R1, R2).

Flow: search attributes → preflight (read-only) → plan (workflows/planning.py) → dry run stops
here → one LeaseWorkflow per pool → pools in order, each a sliding window of NodeRolloutWorkflow
children never exceeding maxUnavailable (minus nodes already unavailable), gated per the approval
policy → optional R1 network repair → result.

Operators steer it with validated, attributed updates (approve, reject, pause, resume, abort,
skip_node, retry_node) and watch it with the ``status`` and ``plan`` queries. Children report each
step with the ``node_progress`` signal, so ``status`` always says what every node waits for,
since when, and until which daemon deadline.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from workflows.approvers import check_approver, find_waiting_gate
    from activities.models import (
        ANN_DESIRED_CONFIG,
        DeleteAllPodsInput,
        DeleteAllPodsResult,
        NodeInfo,
        PodsReadyInput,
        PodsReadyResult,
        PreflightInput,
        PreflightResult,
        ReadNodeInput,
        SetNodeAnnotationsInput,
        UncordonInput,
        UncordonResult,
    )
    from workflows import activity_calls as acts
    from workflows import metrics as lk_metrics
    from workflows.decisions import check_decision
    from workflows.lease import LeaseWorkflow
    from workflows.models import (
        FINAL_NODE_PHASES,
        PROCEDURE_MACHINECONFIG_ROLLOUT,
        SA_CLUSTER,
        SA_POOLS,
        SA_PROCEDURE,
        SA_STATUS,
        ApproveInput,
        ControlInput,
        ControlResult,
        DecideInput,
        DecideResult,
        DrainDecision,
        DrainDecisionSignal,
        Gate,
        GateDecisionResult,
        GateKind,
        GateRecord,
        GateState,
        GateTimeoutOutcome,
        LeaseInfo,
        LeaseInput,
        MachineConfigRolloutInput,
        MachineConfigRolloutResult,
        NetworkRepairStatus,
        NodeControlInput,
        NodePhase,
        NodeProgress,
        NodeResult,
        NodeRolloutInput,
        NodeRolloutResult,
        NodeStatus,
        PlannedGate,
        PoolPlan,
        RejectInput,
        RolloutPhase,
        RolloutPlan,
        RolloutStatus,
        RolloutTotals,
        lease_workflow_id,
        node_owner,
        node_workflow_id,
    )
    from workflows.node_rollout import NodeRolloutWorkflow
    from workflows.planning import PlanError, is_unavailable, plan_rollout

SA_KEY_CLUSTER = SearchAttributeKey.for_keyword(SA_CLUSTER)
SA_KEY_PROCEDURE = SearchAttributeKey.for_keyword(SA_PROCEDURE)
SA_KEY_STATUS = SearchAttributeKey.for_keyword(SA_STATUS)
SA_KEY_POOLS = SearchAttributeKey.for_keyword_list(SA_POOLS)

OVN_NAMESPACE = "openshift-ovn-kubernetes"
OVNKUBE_NODE_SELECTOR = "app=ovnkube-node"
#: How long a refused lease waits for the holder's answer before failing with the lease ID only.
LEASE_ANSWER_TIMEOUT = timedelta(seconds=30)

_RETRYABLE_PHASES = frozenset({NodePhase.DEGRADED, NodePhase.FAILED, NodePhase.ABORTED})
_Action = Literal["requests", "done", "abort", "gate", "start", "no-capacity", "stuck"]


def _failure_message(err: BaseException) -> str:
    """The innermost failure message of a Temporal error chain (the activity's own words)."""
    message = str(err)
    cause: BaseException | None = err
    while cause is not None:
        message = getattr(cause, "message", None) or str(cause) or message
        cause = getattr(cause, "cause", None)
    return message


class _PoolRun:
    """Mutable per-pool state of the sliding window (lives only inside one workflow run)."""

    def __init__(self, plan: PoolPlan) -> None:
        self.plan = plan
        self.queue: list[str] = list(plan.nodes)
        self.started: set[str] = set()
        self.unavailable: list[str] = list(plan.unavailable)
        self.finished = False
        self.gate: PlannedGate | None = None


@workflow.defn
class MachineConfigRolloutWorkflow:
    """Roll rendered MachineConfigs onto the nodes of one or more pools (see module docstring).

    Input :class:`MachineConfigRolloutInput`, result :class:`MachineConfigRolloutResult`.
    Fails (non-retryable ApplicationError) when preflight refuses (types UnknownPool,
    MissingConfig, ConfigOfOtherPool, ConfigTooOld, NoNodes), when the plan is invalid
    (InvalidPlan) or when another rollout holds a pool's lease (LeaseHeld, naming its ID).
    """

    @workflow.init
    def __init__(self, input: MachineConfigRolloutInput) -> None:
        info = workflow.info()
        self._in = input
        self._id = info.workflow_id
        self._status = RolloutStatus(workflow_id=self._id, cluster=input.cluster, started_at=workflow.now())
        self._base_phase = RolloutPhase.PLANNING
        self._paused = False
        self._abort = False
        self._gates: dict[str, Gate] = {}
        self._passed_gates: set[str] = set()
        self._requests: list[tuple[Literal["skip", "retry"], NodeControlInput]] = []
        self._children: dict[str, workflow.ChildWorkflowHandle] = {}
        self._child_tasks: list[asyncio.Task] = []
        self._attempts: dict[str, int] = {}
        self._pool_of: dict[str, str] = {}
        self._pools: dict[str, _PoolRun] = {}
        self._results: dict[str, NodeRolloutResult] = {}
        self._leases: dict[str, workflow.ChildWorkflowHandle] = {}
        self._lease_denied: LeaseInfo | None = None
        self._sa_status: str | None = None
        self._abort_reason = ""
        self._timeouts = acts.Timeouts(input.activity_timeout_seconds, input.activity_heartbeat_timeout_seconds)
        #: node -> (attempt, number of its decision records already in gate_history)
        self._decisions_seen: dict[str, tuple[int, int]] = {}

    # --- queries ------------------------------------------------------------------------------

    @workflow.query
    def status(self) -> RolloutStatus:
        """Everything an operator needs: phase, paused reason, per-node status, gates, totals and
        the top-level summary of what the rollout waits for, since when, until when."""
        return self._snapshot()

    @workflow.query
    def plan(self) -> RolloutPlan | None:
        """The plan once computed (None while planning)."""
        return self._status.plan

    # --- signals ------------------------------------------------------------------------------

    @workflow.signal
    def node_progress(self, progress: NodeProgress) -> None:
        """A child's step change. Stale attempts and nodes already finished are ignored."""
        ns = self._status.nodes.get(progress.node)
        if ns is None or progress.attempt != ns.attempt or ns.phase in FINAL_NODE_PHASES:
            return
        if progress.phase == NodePhase.BLOCKED and ns.phase != NodePhase.BLOCKED:
            lk_metrics.record_drain_blocked(procedure=PROCEDURE_MACHINECONFIG_ROLLOUT, cluster=self._in.cluster, pool=ns.pool)
        ns.phase = progress.phase
        ns.step = progress.step
        ns.waiting_for = progress.waiting_for
        ns.since = progress.since
        ns.deadline = progress.deadline
        ns.reason = progress.reason
        ns.cordoned_by_us = progress.cordoned_by_us
        if progress.drain_report is not None or progress.phase != NodePhase.BLOCKED:
            ns.drain_report = progress.drain_report
        ns.blocked_since = progress.blocked_since
        ns.decision_gate = progress.decision_gate
        self._merge_decisions(progress.node, progress.attempt, progress.decisions)
        if progress.warning and progress.warning != ns.warning:
            ns.warning = progress.warning
            self._status.warnings.append(f"{progress.node}: {progress.warning}")
            workflow.logger.warning("node %s: %s", progress.node, progress.warning)
        self._touch()

    @workflow.signal
    def lease_denied(self, info: LeaseInfo) -> None:
        """A lease's answer to our ``contend``: who holds it."""
        self._lease_denied = info

    # --- updates: gates -----------------------------------------------------------------------

    def _find_gate(self, gate_id: str | None) -> Gate:
        return find_waiting_gate(self._gates, gate_id)

    def _check_approver(self, identity: str, *, approving: bool) -> None:
        check_approver(
            identity,
            approving=approving,
            requested_by=self._in.requested_by,
            four_eyes=self._in.four_eyes,
            allowed_approvers=self._in.allowed_approvers,
            procedure="rollout",
        )

    @workflow.update
    def approve(self, input: ApproveInput) -> GateDecisionResult:
        """Approve a waiting gate (``gate_id`` None = the only waiting gate)."""
        gate = self._find_gate(input.gate_id)
        self._decide(gate, GateState.APPROVED, input.identity, input.comment)
        return GateDecisionResult(gate_id=gate.id, state=gate.state, message=f"gate {gate.id} approved by {input.identity}")

    @approve.validator
    def _validate_approve(self, input: ApproveInput) -> None:
        self._find_gate(input.gate_id)
        self._check_approver(input.identity, approving=True)

    @workflow.update
    def reject(self, input: RejectInput) -> GateDecisionResult:
        """Reject a waiting gate: the rollout pauses; ``resume`` re-opens the gate."""
        gate = self._find_gate(input.gate_id)
        self._decide(gate, GateState.REJECTED, input.identity, input.comment)
        return GateDecisionResult(
            gate_id=gate.id, state=gate.state, message=f"gate {gate.id} rejected by {input.identity}; rollout paused"
        )

    @reject.validator
    def _validate_reject(self, input: RejectInput) -> None:
        self._find_gate(input.gate_id)
        self._check_approver(input.identity, approving=False)

    def _decide(self, gate: Gate, state: GateState, identity: str, comment: str) -> None:
        gate.state = state
        gate.decided_by = identity
        gate.decided_at = workflow.now()
        gate.comment = comment
        action = "approved" if state == GateState.APPROVED else "rejected"
        self._record(gate.id, action, identity, comment)
        if state == GateState.REJECTED:
            self._pause(f"gate {gate.id} rejected by {identity}" + (f": {comment}" if comment else ""))
        self._touch()

    # --- updates: blocked-drain decisions -------------------------------------------------------

    def _merge_decisions(self, node: str, attempt: int, records: list[GateRecord]) -> None:
        """Append a node run's new decision-gate records (opened/decided/timeout/cancelled) to
        gate_history; the child sends its whole list, so only the unseen tail is added."""
        seen_attempt, seen = self._decisions_seen.get(node, (attempt, 0))
        if seen_attempt != attempt:
            seen = 0
        if len(records) > seen:
            self._status.gate_history.extend(r.model_copy() for r in records[seen:])
            self._decisions_seen[node] = (attempt, len(records))

    @workflow.update
    async def decide(self, input: DecideInput) -> DecideResult:
        """Answer a blocked drain's decision gate (``drain/{node}``): wait, skip, delete-pod or
        abort. The node run applies it and records who/when/which/comment; ``abort`` also aborts
        the whole rollout."""
        ns = self._status.nodes[input.node]
        gate = ns.decision_gate
        assert gate is not None
        # Marked at once so a second decision on the same gate is refused by the validator.
        gate.state, gate.decided_by, gate.decided_at = GateState.DECIDED, input.identity, workflow.now()
        gate.decision, gate.comment = input.decision, input.comment
        handle = self._children.get(input.node)
        signal = DrainDecisionSignal(
            decision=input.decision, identity=input.identity, comment=input.comment, at=workflow.now()
        )
        if handle is not None:
            await handle.signal("drain_decision", signal)
        if input.decision == DrainDecision.ABORT:
            self._request_abort(
                f"abort decided on the blocked drain of {input.node} by {input.identity}"
                + (f": {input.comment}" if input.comment else ""),
                input.identity,
            )
        self._touch()
        return DecideResult(
            gate_id=gate.id, decision=input.decision, message=f"{input.decision} decided for node {input.node} by {input.identity}"
        )

    @decide.validator
    def _validate_decide(self, input: DecideInput) -> None:
        ns = self._status.nodes.get(input.node)
        if ns is None:
            known = ", ".join(sorted(self._status.nodes)) or "none yet (still planning)"
            raise ValueError(f"unknown node {input.node!r}; nodes of this rollout: {known}")
        if self._finished():
            raise ValueError(f"rollout already {self._base_phase}")
        if input.node not in self._children:
            raise ValueError(f"node {input.node} is not in flight (it is {ns.phase})")
        check_decision(
            input,
            ns.decision_gate,
            requested_by=self._in.requested_by,
            four_eyes=self._in.four_eyes,
            allowed_approvers=self._in.allowed_approvers,
        )

    # --- updates: control ---------------------------------------------------------------------

    def _finished(self) -> bool:
        return self._base_phase in (RolloutPhase.DONE, RolloutPhase.ABORTED, RolloutPhase.FAILED)

    @workflow.update
    def pause(self, input: ControlInput) -> ControlResult:
        """Start no new node or gate; in-flight nodes finish."""
        self._pause(input.reason or input.comment or f"paused by {input.identity}", by=input.identity)
        return ControlResult(message=f"rollout paused by {input.identity}", status=self._snapshot())

    @pause.validator
    def _validate_pause(self, input: ControlInput) -> None:
        if self._finished():
            raise ValueError(f"rollout already {self._base_phase}")
        if self._paused:
            raise ValueError(f"rollout already paused: {self._status.paused_reason}")

    @workflow.update
    def resume(self, input: ControlInput) -> ControlResult:
        """Continue; a rejected or timed-out gate is opened again."""
        self._paused = False
        self._status.paused_reason = None
        workflow.logger.info("rollout resumed by %s", input.identity)
        self._touch()
        return ControlResult(message=f"rollout resumed by {input.identity}", status=self._snapshot())

    @resume.validator
    def _validate_resume(self, input: ControlInput) -> None:
        if self._finished():
            raise ValueError(f"rollout already {self._base_phase}")
        if not self._paused:
            raise ValueError("rollout is not paused")

    @workflow.update
    def abort(self, input: ControlInput) -> ControlResult:
        """Start nothing more; in-flight nodes stop at their next safe point."""
        self._request_abort(input.reason or input.comment or f"aborted by {input.identity}", input.identity)
        return ControlResult(message=f"abort requested by {input.identity}", status=self._snapshot())

    @abort.validator
    def _validate_abort(self, input: ControlInput) -> None:
        if self._finished():
            raise ValueError(f"rollout already {self._base_phase}")
        if self._abort:
            raise ValueError("abort already requested")

    # --- updates: nodes -----------------------------------------------------------------------

    def _check_node(self, input: NodeControlInput, allowed: frozenset[NodePhase] | None) -> NodeStatus:
        if not input.identity.strip():
            raise ValueError("an identity is required")
        ns = self._status.nodes.get(input.node)
        if ns is None:
            known = ", ".join(sorted(self._status.nodes)) or "none yet (still planning)"
            raise ValueError(f"unknown node {input.node!r}; nodes of this rollout: {known}")
        if self._abort or self._finished():
            raise ValueError("rollout is aborting or finished")
        pool = self._pools.get(ns.pool)
        if pool is not None and pool.finished:
            raise ValueError(f"node {input.node} belongs to pool {ns.pool}, which has finished")
        if any(kind == "skip" and r.node == input.node for kind, r in self._requests):
            raise ValueError(f"a request for node {input.node} is already pending")
        if allowed is not None and ns.phase not in allowed:
            raise ValueError(
                f"node {input.node} is {ns.phase}; only {', '.join(sorted(allowed))} nodes can be retried"
            )
        if allowed is None and ns.phase in FINAL_NODE_PHASES:
            raise ValueError(f"node {input.node} is already {ns.phase}")
        return ns

    @workflow.update
    def skip_node(self, input: NodeControlInput) -> ControlResult:
        """Skip a node: pending → skipped; degraded/failed → rolled back then skipped; in flight →
        the child rolls back at its next safe point (or completes it past the drain hand-off)."""
        self._requests.append(("skip", input))
        return ControlResult(message=f"node {input.node} will be skipped (requested by {input.identity})")

    @skip_node.validator
    def _validate_skip(self, input: NodeControlInput) -> None:
        self._check_node(input, None)

    @workflow.update
    def retry_node(self, input: NodeControlInput) -> ControlResult:
        """Run a degraded/failed/aborted node again as a new child attempt, and resume."""
        self._requests.append(("retry", input))
        return ControlResult(message=f"node {input.node} will be retried (requested by {input.identity})")

    @retry_node.validator
    def _validate_retry(self, input: NodeControlInput) -> None:
        self._check_node(input, _RETRYABLE_PHASES)

    # --- state helpers ------------------------------------------------------------------------

    def _record(self, gate_id: str, action: str, by: str, comment: str = "", outcome: GateTimeoutOutcome | None = None) -> None:
        self._status.gate_history.append(
            GateRecord(gate_id=gate_id, action=action, by=by, at=workflow.now(), comment=comment, outcome=outcome)
        )

    def _pause(self, reason: str, by: str | None = None) -> None:
        if not self._paused:
            workflow.logger.warning("rollout paused: %s", reason)
        self._paused = True
        self._status.paused_reason = reason
        self._touch()

    def _request_abort(self, reason: str, identity: str) -> None:
        self._abort = True
        self._status.abort_requested = True
        self._status.paused_reason = None
        self._paused = False
        self._abort_reason = reason
        workflow.logger.warning("abort requested by %s: %s", identity, reason)
        for node, handle in list(self._children.items()):
            self._child_tasks.append(asyncio.create_task(self._signal_child(node, handle, "abort", identity)))
        self._touch()

    async def _signal_child(self, node: str, handle: workflow.ChildWorkflowHandle, name: str, identity: str) -> None:
        try:
            await handle.signal(name, identity)
        except Exception as err:  # noqa: BLE001 - a child that just finished needs no signal
            workflow.logger.info("signal %s to node %s not delivered: %s", name, node, err)

    def _phase(self) -> RolloutPhase:
        if self._base_phase != RolloutPhase.RUNNING:
            return self._base_phase
        if self._paused:
            return RolloutPhase.PAUSED
        if any(g.state == GateState.WAITING for g in self._gates.values()):
            return RolloutPhase.WAITING_APPROVAL
        return RolloutPhase.RUNNING

    def _touch(self) -> None:
        self._status.updated_at = workflow.now()
        self._sync_search_attributes()
        lk_metrics.record_gates_waiting(
            procedure=PROCEDURE_MACHINECONFIG_ROLLOUT,
            cluster=self._in.cluster,
            waiting=sum(g.state == GateState.WAITING for g in self._gates.values()),
        )

    def _sync_search_attributes(self) -> None:
        """Upsert LockkeeperStatus when the phase changed (an event only on changes)."""
        phase = self._phase()
        self._status.phase = phase
        if not self._in.search_attributes or self._sa_status == phase:
            return
        self._sa_status = phase
        workflow.upsert_search_attributes([SA_KEY_STATUS.value_set(str(phase))])

    def _snapshot(self) -> RolloutStatus:
        s = self._status.model_copy(deep=True)
        s.phase = self._phase()
        s.gates = [g.model_copy() for g in self._gates.values()]
        s.in_flight = sorted(self._children)
        totals = RolloutTotals(in_flight=len(self._children))
        for ns in s.nodes.values():
            match ns.phase:
                case NodePhase.DONE:
                    totals.done += 1
                case NodePhase.SKIPPED:
                    totals.skipped += 1
                case NodePhase.FAILED:
                    totals.failed += 1
                case NodePhase.DEGRADED:
                    totals.degraded += 1
                case NodePhase.ABORTED:
                    totals.aborted += 1
                case NodePhase.PENDING | NodePhase.WAITING_APPROVAL:
                    totals.pending += 1
        s.totals = totals
        waiting = [g for g in s.gates if g.state == GateState.WAITING]
        deciding = [
            n for n in s.nodes.values() if n.decision_gate is not None and n.decision_gate.state == GateState.WAITING
        ]
        if deciding and not waiting:
            n = deciding[0]
            gate = n.decision_gate
            s.waiting_for = (
                f"a decision on the blocked drain of node {n.name} (gate {gate.id}): "
                f"lockkeeper decide {s.workflow_id} {n.name} wait|skip|delete-pod|abort"
            )
            s.since, s.deadline = gate.opened_at, gate.timeout_at
        elif waiting:
            g = waiting[0]
            s.waiting_for, s.since, s.deadline = f"approval of gate {g.id}", g.opened_at, g.timeout_at
        elif s.phase == RolloutPhase.PAUSED:
            s.waiting_for, s.since, s.deadline = f"resume (paused: {s.paused_reason})", s.updated_at, None
        elif s.network_repair is not None and s.phase == RolloutPhase.COMPLETING:
            s.waiting_for = f"network repair: {s.network_repair.stage}"
        elif s.in_flight:
            flights = [s.nodes[n] for n in s.in_flight if n in s.nodes]
            flights.sort(key=lambda n: (n.deadline is None, n.deadline or n.since or s.updated_at, n.name))
            if flights:
                n = flights[0]
                s.waiting_for = f"node {n.name}: {n.step or n.phase}" + (f" ({n.waiting_for})" if n.waiting_for else "")
                s.since, s.deadline = n.since, n.deadline
        return s

    # --- main flow ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: MachineConfigRolloutInput) -> MachineConfigRolloutResult:
        if input.search_attributes:
            workflow.upsert_search_attributes(
                [
                    SA_KEY_CLUSTER.value_set(input.cluster),
                    SA_KEY_PROCEDURE.value_set(PROCEDURE_MACHINECONFIG_ROLLOUT),
                ]
            )
        self._touch()
        try:
            return await self._run(input)
        except ApplicationError as err:
            self._base_phase = RolloutPhase.FAILED
            self._status.error = str(err)
            self._touch()
            raise

    async def _run(self, input: MachineConfigRolloutInput) -> MachineConfigRolloutResult:
        plan = await self._make_plan(input)
        if input.dry_run:
            self._base_phase = RolloutPhase.DONE
            self._touch()
            return MachineConfigRolloutResult(
                outcome="dry-run",
                plan=plan,
                nodes=self._node_results(),
                summary=self._snapshot().totals,
                message=f"dry run: {plan.node_count} node(s) in {len(plan.pools)} pool(s) would be rolled",
                started_at=self._status.started_at,
                finished_at=workflow.now(),
            )
        await self._acquire_leases(input, plan)
        self._base_phase = RolloutPhase.RUNNING
        self._touch()
        for pool_plan in plan.pools:
            if self._abort:
                break
            await self._run_pool(self._pools[pool_plan.name])
        if input.repair_network and not self._abort:
            await self._repair_network(plan)
        # A skip/abort signal task may still be in flight; let it settle before closing.
        if self._child_tasks:
            await asyncio.gather(*self._child_tasks, return_exceptions=True)
        for handle in self._leases.values():
            await self._signal_child("lease", handle, "release", self._id)
        for ns in self._status.nodes.values():
            if ns.phase in (NodePhase.PENDING, NodePhase.WAITING_APPROVAL) and self._abort:
                ns.phase, ns.reason = NodePhase.ABORTED, "not started: rollout aborted"
        self._base_phase = RolloutPhase.ABORTED if self._abort else RolloutPhase.DONE
        self._touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        snap = self._snapshot()
        return MachineConfigRolloutResult(
            outcome="aborted" if self._abort else "completed",
            plan=plan,
            nodes=self._node_results(),
            gate_history=snap.gate_history,
            summary=snap.totals,
            network_repair=snap.network_repair,
            message=self._abort_reason if self._abort else f"{snap.totals.done} node(s) updated",
            started_at=snap.started_at,
            finished_at=workflow.now(),
        )

    async def _make_plan(self, input: MachineConfigRolloutInput) -> RolloutPlan:
        try:
            pre: PreflightResult = await acts.call(
                acts.PREFLIGHT,
                PreflightInput(pools=input.pools, target_configs=input.target_configs, not_before=input.not_before),
                PreflightResult,
                seconds=60,
                timeouts=self._timeouts,
            )
        except ActivityError as err:
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else None
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            raise ApplicationError(f"preflight refused the rollout: {message}", type=kind or "PreflightFailed", non_retryable=True) from err
        try:
            plan = plan_rollout(
                pre.pools,
                requested_pools=input.pools,
                max_unavailable=input.max_unavailable,
                node_order=input.node_order,
                approval=input.approval,
                repair_network=input.repair_network,
                network_type=pre.network_type,
            )
        except PlanError as err:
            raise ApplicationError(str(err), type="InvalidPlan", non_retryable=True) from err
        now = workflow.now()
        for pp in plan.pools:
            self._pools[pp.name] = _PoolRun(pp)
            for name in pp.nodes:
                self._pool_of[name] = pp.name
                self._status.nodes[name] = NodeStatus(name=name, pool=pp.name, since=now)
            for name in pp.skipped:
                self._pool_of[name] = pp.name
                self._status.nodes[name] = NodeStatus(
                    name=name, pool=pp.name, phase=NodePhase.SKIPPED, reason="already at target", since=now
                )
        self._status.plan = plan
        if input.search_attributes:
            workflow.upsert_search_attributes([SA_KEY_POOLS.value_set([p.name for p in plan.pools])])
        self._touch()
        return plan

    async def _acquire_leases(self, input: MachineConfigRolloutInput, plan: RolloutPlan) -> None:
        """One LeaseWorkflow per pool; a pool held by another rollout fails us with LeaseHeld."""
        for pp in plan.pools:
            lease_id = lease_workflow_id(input.cluster, pp.name)
            try:
                self._leases[pp.name] = await workflow.start_child_workflow(
                    LeaseWorkflow.run,
                    LeaseInput(cluster=input.cluster, scope=f"pool/{pp.name}", holder=self._id),
                    id=lease_id,
                    parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                )
            except WorkflowAlreadyStartedError as err:
                holder = await self._ask_lease_holder(lease_id)
                who = f"rollout {holder.holder}" if holder else f"another rollout (lease workflow {lease_id})"
                raise ApplicationError(
                    f"pool {pp.name} on cluster {input.cluster} is held by {who}",
                    holder.holder if holder else lease_id,
                    type="LeaseHeld",
                    non_retryable=True,
                ) from err

    async def _ask_lease_holder(self, lease_id: str) -> LeaseInfo | None:
        self._lease_denied = None
        try:
            await workflow.get_external_workflow_handle(lease_id).signal("contend", self._id)
            await workflow.wait_condition(lambda: self._lease_denied is not None, timeout=LEASE_ANSWER_TIMEOUT)
        except Exception as err:  # noqa: BLE001 - lease gone or no answer: name the lease ID only
            workflow.logger.info("lease %s did not answer: %s", lease_id, err)
            return None
        return self._lease_denied

    # --- the sliding window -------------------------------------------------------------------

    def _in_flight(self, pool: _PoolRun) -> list[str]:
        return [n for n in self._children if self._pool_of.get(n) == pool.plan.name]

    def _limit(self, pool: _PoolRun) -> int:
        """maxUnavailable minus the nodes already unavailable that we have not taken over."""
        external = [n for n in pool.unavailable if n not in pool.started]
        return pool.plan.max_unavailable - len(external)

    def _canary_pending(self, pool: _PoolRun, node: str) -> PlannedGate | None:
        for g in pool.plan.gates:
            if g.after_node and g.after_node != node and g.id not in self._passed_gates:
                return g
        return None

    def _next_action(self, pool: _PoolRun) -> tuple[_Action, PlannedGate | str | None] | None:
        if self._requests:
            return ("requests", None)
        in_flight = self._in_flight(pool)
        if self._abort:
            return None if in_flight else ("abort", None)
        unfinished = [n for n in pool.plan.nodes if self._status.nodes[n].phase not in FINAL_NODE_PHASES]
        if not unfinished:
            return ("done", None)
        if self._paused:
            return None
        if pool.queue:
            node = pool.queue[0]
            canary = self._canary_pending(pool, node)
            if canary is not None:
                after = self._status.nodes.get(canary.after_node)
                if after is not None and after.phase in (NodePhase.DONE, NodePhase.SKIPPED) and not in_flight:
                    return ("gate", canary)
                if after is not None and after.phase not in FINAL_NODE_PHASES and canary.after_node not in pool.queue and not in_flight:
                    return ("stuck", None)
                return None
            if len(in_flight) >= self._limit(pool):
                return ("no-capacity", None) if not in_flight else None
            for g in pool.plan.gates:
                if g.before_node == node and g.id not in self._passed_gates:
                    return ("gate", g)
            return ("start", node)
        if not in_flight:
            return ("stuck", None)
        return None

    async def _run_pool(self, pool: _PoolRun) -> None:
        self._status.current_pool = pool.plan.name
        pool.queue = [n for n in pool.queue if self._status.nodes[n].phase not in FINAL_NODE_PHASES]
        self._touch()
        while True:
            await workflow.wait_condition(lambda: self._next_action(pool) is not None)
            action, arg = self._next_action(pool)
            match action:
                case "requests":
                    await self._process_requests()
                case "done" | "abort":
                    pool.finished = True
                    return
                case "gate":
                    await self._gate(arg)
                case "start":
                    await self._start_node(pool, arg)
                case "no-capacity":
                    external = [n for n in pool.unavailable if n not in pool.started]
                    await self._refresh_unavailable(pool)
                    if self._next_action(pool) == ("no-capacity", None):
                        self._pause(
                            f"pool {pool.plan.name} has no capacity: maxUnavailable={pool.plan.max_unavailable} and "
                            f"{len(external)} node(s) already unavailable ({', '.join(external)})"
                        )
                case "stuck":
                    stuck = [
                        n for n in pool.plan.nodes
                        if self._status.nodes[n].phase not in FINAL_NODE_PHASES and n not in self._children
                    ]
                    reasons = "; ".join(f"{n} {self._status.nodes[n].phase}: {self._status.nodes[n].reason}" for n in stuck)
                    self._pause(f"pool {pool.plan.name} cannot finish: {reasons}; retry-node or skip-node")

    async def _refresh_unavailable(self, pool: _PoolRun) -> None:
        """Re-read the nodes that blocked capacity: one may have come back since planning."""
        still: list[str] = []
        for name in pool.unavailable:
            if name in pool.started:
                still.append(name)
                continue
            node: NodeInfo = await acts.call(acts.READ_NODE, ReadNodeInput(node=name), NodeInfo, timeouts=self._timeouts)
            if is_unavailable(node):
                still.append(name)
        pool.unavailable = still

    async def _start_node(self, pool: _PoolRun, node: str) -> None:
        pool.queue.remove(node)
        pool.started.add(node)
        attempt = self._attempts.get(node, 0) + 1
        self._attempts[node] = attempt
        ns = self._status.nodes[node]
        now = workflow.now()
        ns.phase, ns.step, ns.attempt, ns.since = NodePhase.RUNNING, None, attempt, now
        ns.reason, ns.warning, ns.waiting_for, ns.deadline, ns.drain_report = None, None, None, None, None
        ns.started_at = ns.started_at or now
        i = self._in
        child_input = NodeRolloutInput(
            node=node,
            pool=pool.plan.name,
            target=pool.plan.target_config,
            parent_id=self._id,
            owner=node_owner(self._id, node),
            attempt=attempt,
            daemon_drain_deadline_seconds=i.daemon_drain_deadline_seconds,
            daemon_uncordon_deadline_seconds=i.daemon_uncordon_deadline_seconds,
            deadline_warn_fraction=i.deadline_warn_fraction,
            drain_backoff_initial_seconds=i.drain_backoff_initial_seconds,
            drain_backoff_max_seconds=i.drain_backoff_max_seconds,
            drain_wait_seconds=i.drain_wait_seconds,
            wait_activity_timeout_seconds=i.wait_activity_timeout_seconds,
            activity_timeout_seconds=i.activity_timeout_seconds,
            activity_heartbeat_timeout_seconds=i.activity_heartbeat_timeout_seconds,
            decide_after_seconds=i.decide_after_seconds,
            decision_timeout_seconds=i.decision_timeout_seconds,
            decision_timeout_outcome=i.decision_timeout_outcome,
        )
        handle = await workflow.start_child_workflow(
            NodeRolloutWorkflow.run,
            child_input,
            id=node_workflow_id(self._id, node, attempt),
            parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
        )
        self._children[node] = handle
        if self._abort:  # the abort arrived while the child was starting: it missed the broadcast
            self._child_tasks.append(asyncio.create_task(self._signal_child(node, handle, "abort", "abort")))
        self._touch()
        self._child_tasks.append(asyncio.create_task(self._watch_child(node, attempt, handle)))

    async def _watch_child(self, node: str, attempt: int, handle: workflow.ChildWorkflowHandle) -> None:
        try:
            result: NodeRolloutResult = await handle
        except ChildWorkflowError as err:
            message = _failure_message(err)
            result = NodeRolloutResult(node=node, outcome="failed", attempt=attempt, reason=message, finished_at=workflow.now())
        self._children.pop(node, None)
        self._results[node] = result
        self._merge_decisions(node, attempt, result.decisions)
        if result.abort_requested and not self._abort:
            # The node's decision gate timed out with the declared default "abort".
            self._request_abort(f"node {node}: {result.reason}", "timeout")
        ns = self._status.nodes[node]
        ns.phase = {
            "done": NodePhase.DONE,
            "degraded": NodePhase.DEGRADED,
            "skipped": NodePhase.SKIPPED,
            "aborted": NodePhase.ABORTED,
            "failed": NodePhase.FAILED,
        }[result.outcome]
        ns.reason = result.reason
        ns.cordoned_by_us = result.cordoned_by_us
        ns.finished_at = result.finished_at or workflow.now()
        ns.since = ns.finished_at
        ns.waiting_for, ns.deadline, ns.blocked_since = None, None, None
        if result.outcome in ("done", "skipped", "aborted"):
            ns.step = "finished"
        if result.outcome == "degraded" and not self._in.pause_on_degraded:
            ns.phase = NodePhase.FAILED
        if result.outcome in ("degraded", "failed") and self._in.pause_on_degraded and not self._abort:
            self._pause(f"node {node} {result.outcome}: {result.reason}")
        lk_metrics.record_node_finished(
            procedure=PROCEDURE_MACHINECONFIG_ROLLOUT, cluster=self._in.cluster, pool=ns.pool, outcome=result.outcome
        )
        self._touch()

    async def _process_requests(self) -> None:
        while self._requests:
            kind, req = self._requests.pop(0)
            ns = self._status.nodes[req.node]
            pool = self._pools[ns.pool]
            if kind == "retry":
                if ns.phase not in _RETRYABLE_PHASES or req.node in self._children:
                    continue
                ns.phase, ns.reason, ns.waiting_for = NodePhase.PENDING, f"retry requested by {req.identity}", None
                ns.since = workflow.now()
                pool.queue.insert(0, req.node)
                if self._paused:
                    self._paused = False
                    self._status.paused_reason = None
                workflow.logger.info("node %s retry requested by %s", req.node, req.identity)
            elif req.node in self._children:
                await self._signal_child(req.node, self._children[req.node], "skip", req.identity)
            elif ns.phase not in FINAL_NODE_PHASES:
                if req.node in pool.queue:
                    pool.queue.remove(req.node)
                for g in self._gates.values():
                    if g.node == req.node and g.state == GateState.WAITING:
                        g.state = GateState.CANCELLED
                        self._record(g.id, "cancelled", req.identity, f"node {req.node} skipped")
                if ns.phase in (NodePhase.DEGRADED, NodePhase.FAILED) or req.node in pool.started:
                    await self._cleanup_node(req.node)
                ns.phase, ns.reason = NodePhase.SKIPPED, f"skipped by {req.identity}" + (f": {req.comment}" if req.comment else "")
                ns.finished_at = ns.since = workflow.now()
                if self._paused and self._status.paused_reason and req.node in self._status.paused_reason:
                    self._paused = False
                    self._status.paused_reason = None
            self._touch()

    async def _cleanup_node(self, node: str) -> None:
        """Child-free rollback of a degraded/failed node: desiredConfig back to currentConfig,
        uncordon only if we cordoned it."""
        info: NodeInfo = await acts.call(acts.READ_NODE, ReadNodeInput(node=node), NodeInfo, timeouts=self._timeouts)
        if info.current_config and info.desired_config != info.current_config:
            await acts.call(
                acts.SET_NODE_ANNOTATIONS,
                SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: info.current_config}),
                NodeInfo,
                timeouts=self._timeouts,
            )
        await acts.call(acts.UNCORDON_NODE, UncordonInput(node=node, owner=node_owner(self._id, node)), UncordonResult, timeouts=self._timeouts)

    # --- gates --------------------------------------------------------------------------------

    async def _gate(self, planned: PlannedGate) -> bool:
        """Open ``planned`` and wait for a decision, the timeout, or an abort.

        Returns True when passed (approved, or timed out with outcome approve). A timeout is
        recorded with ``by="timeout"`` and the declared outcome, never as an approval.
        """
        now = workflow.now()
        timeout = self._in.gate_timeout_seconds
        gate = Gate(
            id=planned.id,
            kind=planned.kind,
            pool=planned.pool,
            node=planned.before_node,
            opened_at=now,
            timeout_at=now + timedelta(seconds=timeout) if timeout is not None else None,
        )
        self._gates[gate.id] = gate
        self._record(gate.id, "opened", "workflow")
        node_status = self._status.nodes.get(planned.before_node or "")
        if node_status is not None and planned.kind == GateKind.NODE:
            node_status.phase, node_status.waiting_for, node_status.since = (
                NodePhase.WAITING_APPROVAL, f"approval of gate {gate.id}", now)
            node_status.deadline = gate.timeout_at
        self._touch()
        workflow.logger.info("gate %s waiting for approval", gate.id)
        while True:
            remaining = None if gate.timeout_at is None else (gate.timeout_at - workflow.now()).total_seconds()
            try:
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: gate.state != GateState.WAITING or self._abort or bool(self._requests), timeout=remaining
                )
            except TimeoutError:
                self._gate_timed_out(gate, timeout)
                break
            if self._requests and gate.state == GateState.WAITING and not self._abort:
                # skip_node/retry_node while a gate waits (skipping the gated node cancels the gate).
                await self._process_requests()
                continue
            break
        if gate.state == GateState.WAITING:  # aborted while waiting
            gate.state = GateState.CANCELLED
            self._record(gate.id, "cancelled", "workflow", "rollout aborted")
        if gate.state == GateState.APPROVED:
            self._passed_gates.add(gate.id)
        passed = gate.id in self._passed_gates
        if node_status is not None and node_status.phase == NodePhase.WAITING_APPROVAL:
            node_status.phase, node_status.waiting_for, node_status.deadline = NodePhase.PENDING, None, None
        self._touch()
        return passed

    def _gate_timed_out(self, gate: Gate, timeout: float | None) -> None:
        outcome = self._in.gate_timeout_outcome
        gate.state, gate.decided_by, gate.decided_at = GateState.TIMED_OUT, "timeout", workflow.now()
        self._record(gate.id, "timeout", "timeout", f"no decision within {timeout}s", outcome=outcome)
        workflow.logger.warning("gate %s timed out; declared outcome %s", gate.id, outcome)
        if outcome == GateTimeoutOutcome.APPROVE:
            self._passed_gates.add(gate.id)
        elif outcome == GateTimeoutOutcome.ABORT:
            self._request_abort(f"gate {gate.id} timed out after {timeout}s (declared outcome: abort)", "timeout")
        else:
            self._pause(f"gate {gate.id} timed out after {timeout}s (declared outcome: reject)")

    # --- R1 completion ------------------------------------------------------------------------

    async def _poll_ready(self, net: NetworkRepairStatus, stage: str, check: PodsReadyInput) -> bool:
        """Poll check_pods_ready with a durable backoff timer until ready; False on abort."""
        net.stage = stage
        delay = self._in.network_poll_initial_seconds
        while not self._abort:
            result: PodsReadyResult = await acts.call(acts.CHECK_PODS_READY, check, PodsReadyResult, timeouts=self._timeouts)
            net.polls += 1
            net.not_ready = (result.not_ready + [f"missing on {n}" for n in result.nodes_missing])[:20]
            self._touch()
            if result.ready:
                return True
            try:
                await workflow.wait_condition(lambda: self._abort, timeout=delay)
            except TimeoutError:
                pass
            delay = min(delay * 2, self._in.network_poll_max_seconds)
        return False

    async def _repair_network(self, plan: RolloutPlan) -> None:
        """R1: ovnkube-node Ready on every node → gate delete-all-pods → delete → all Ready."""
        self._base_phase = RolloutPhase.COMPLETING
        net = self._status.network_repair = NetworkRepairStatus()
        self._touch()
        check = PodsReadyInput(namespace=OVN_NAMESPACE, label_selector=OVNKUBE_NODE_SELECTOR, expect_per_node=True)
        if not await self._poll_ready(net, "wait-ovnkube", check):
            return
        net.ovnkube_ready = True
        net.stage = "gate"
        # The gate is shown as a waiting approval although the base phase is completing.
        self._base_phase = RolloutPhase.RUNNING
        for planned in plan.final_gates:
            while not await self._gate(planned):
                if self._abort:
                    return
                await workflow.wait_condition(lambda: not self._paused or self._abort)
                if self._abort:
                    return
        self._base_phase = RolloutPhase.COMPLETING
        net.stage = "delete-pods"
        self._touch()
        deleted: DeleteAllPodsResult = await acts.call(
            acts.DELETE_ALL_PODS, DeleteAllPodsInput(), DeleteAllPodsResult, seconds=300, timeouts=self._timeouts
        )
        net.pods_deleted = deleted.deleted
        if await self._poll_ready(net, "wait-workloads", PodsReadyInput()):
            net.workloads_ready = True
            net.stage = "done"
        self._touch()

    # --- result -------------------------------------------------------------------------------

    def _node_results(self) -> dict[str, NodeResult]:
        out: dict[str, NodeResult] = {}
        for name, ns in self._status.nodes.items():
            res = self._results.get(name)
            duration = None
            if ns.started_at and ns.finished_at:
                duration = (ns.finished_at - ns.started_at).total_seconds()
            out[name] = NodeResult(
                name=name,
                pool=ns.pool,
                phase=ns.phase,
                attempts=self._attempts.get(name, 0),
                duration_seconds=duration,
                drain_seconds=res.drain_seconds if res else None,
                reboot_seconds=res.reboot_seconds if res else None,
                reason=ns.reason,
                safe_point=res.safe_point if res else None,
            )
        return out
