"""MachineConfigRolloutWorkflow: lockkeeper standing in for the machine-config-controller (R1, R2).

Flow: search attributes → preflight (read-only) → the preconditions, checked as data before the
first write (:meth:`ProcedureWorkflow.kit_preflight`: a failed one refuses the run, one line per
problem; a dry run lists every check) → plan (:mod:`workflows.machineconfig.plan`) → dry run
stops here → leases (the pools, and the nodes of the plan) → pools in stages (``pool_order``:
one after another, all at once, or masters first then the rest at once), each through the kit's
node window (:class:`workflows.kit.batches.NodeBatches`) of NodeRolloutWorkflow children, never
exceeding maxUnavailable (minus nodes already unavailable), gated per the approval policy →
optional R1 network repair (:mod:`workflows.machineconfig.network_repair`) → result.

The operator surface (status, approve, reject, pause, resume, abort, skip_node, retry_node,
decide, node_progress) is the kit's :class:`workflows.kit.procedure.NodeProcedureWorkflow`; this
module adds only what is MachineConfig: the plan, the child input, the rollback of a node without
a child (desiredConfig := currentConfig) and the recheck of unavailable nodes. The ``plan`` query
returns the plan once computed.
"""

from __future__ import annotations

from typing import Any
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import (
        ANN_DESIRED_CONFIG, NodeInfo, ReadNodeInput, SetNodeAnnotationsInput, UncordonInput, UncordonResult,
    )
    from activities.machineconfig.models import PoolNodesInput, PoolNodesPage, PreflightInput, PreflightResult
    from activities.preflight.models import InputCheck, NamesExist, Precondition, PreconditionState
    from workflows.kit import calls as acts
    from workflows.kit.batches import Group, NodeBatches, WindowCarry, unpack
    from workflows.kit.board import NodeBoard
    from workflows.kit.models import ChangedItem, DecideInput, NodePhase
    from workflows.kit.plan import ApprovalPolicy, PlanError, is_unavailable
    from workflows.kit.planning import planning_call
    from workflows.kit.procedure import SA_KEY_POOLS, NodeProcedureWorkflow
    from workflows.machineconfig.models import (
        PROCEDURE_MACHINECONFIG_ROLLOUT, MachineConfigRolloutInput, MachineConfigRolloutResult, NetworkRepairStatus,
        NodeRolloutInput, NodeRolloutResult, PoolPlan, RolloutPhase, RolloutPlan, RolloutStatus, RolloutTotals, node_owner,
        node_workflow_id,
    )
    from workflows.kit.windowleases import WindowLeases
    from workflows.kit.scopes import pool_scope
    from workflows.machineconfig.node import NodeRolloutWorkflow
    from workflows.machineconfig.network_repair import repair_network
    from workflows.machineconfig.plan import plan_rollout, pool_stages

#: The preflight activity's refusals of the operator's input (a pool or target config named
#: wrong): a failed precondition, never a failed run.
#: What rolls pool ``{0}`` back (or on): the undo of each of its updated nodes.
_BACK = ("lockkeeper start machineconfig-rollout --pool {0} --target {0}=<its previous rendered config>"
         "  # or roll on: lockkeeper start machineconfig-rollout --pool {0}")
INPUT_REFUSALS = frozenset({"UnknownPool", "MissingConfig", "ConfigOfOtherPool", "ConfigTooOld", "NoNodes"})


class RolloutCarry(WindowCarry):
    """What one run of the rollout hands to the next at a continue-as-new (the kit's
    :class:`WindowCarry` and the plan), packed into the input's ``carried``."""

    plan: RolloutPlan


@workflow.defn
class MachineConfigRolloutWorkflow(NodeProcedureWorkflow):
    """Roll rendered MachineConfigs onto the nodes of one or more pools (see module docstring).

    Input :class:`MachineConfigRolloutInput`, result :class:`MachineConfigRolloutResult`, status
    :class:`RolloutStatus`. Ends ``refused`` (nothing written) when a precondition fails (a pool
    or target config the preflight refuses: UnknownPool, MissingConfig, ConfigOfOtherPool,
    ConfigTooOld, NoNodes; a node of ``node_order`` that is no Node) or the plan is invalid
    (InvalidPlan); fails (non-retryable ApplicationError) when another procedure holds a pool's
    or node's lease (LeaseHeld, naming its ID).
    """

    @workflow.init
    def __init__(self, input: MachineConfigRolloutInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._status = RolloutStatus(workflow_id=self._id, cluster=input.cluster, started_at=workflow.now())
        self._pool_plans: dict[str, PoolPlan] = {}
        self.kit_init(procedure=PROCEDURE_MACHINECONFIG_ROLLOUT, noun="rollout", status=self._status, input=input,
                      reject_note="rollout paused", base_phase=RolloutPhase.PLANNING, preflight=not input.carried)
        self.board = NodeBoard(procedure=PROCEDURE_MACHINECONFIG_ROLLOUT, cluster=input.cluster, nodes=self._status.nodes,
                               gate_history=self._status.gate_history, warnings=self._status.warnings, on_change=self.touch,
                               noun="rollout")
        self.batches = NodeBatches(
            board=self.board, control=self.control, gates=self.gates, start_child=self._start_child, rollback=self._cleanup_node,
            recheck_unavailable=self._recheck_unavailable, result_type=NodeRolloutResult, pause_on_degraded=input.pause_on_degraded,
            gate_timeout_seconds=input.gates.timeout_seconds, gate_timeout_outcome=input.gates.timeout_outcome,
            on_node_finished=lambda node: self.node_leases.node_finished(node), alerts=self.alerts,
        )
        # Its pools for the whole run; its nodes up front, or each while in the window (a large plan).
        self.node_leases = WindowLeases(self.leases, self.batches, cluster=input.cluster, timeouts=self.timeouts,
                                        window_above=input.window_node_leases_above, touch=self.touch)
        # The window starts every free place in one workflow task (NodeBatches.next_starts).
        self.batches.start_together = True
        self.kit_windows(input.windows)  # no node starts outside a maintenance window (workflows.kit.windows)
        self._carry = unpack(input.carried, RolloutCarry) if input.carried else None
        if self._carry is not None:  # the previous run's state, so the first query sees it
            self._add_groups(self._carry.plan)
            self.batches.take_over(self._carry, self._status)
            self._status.plan, self._status.continued = self._carry.plan, self._carry.continued
            if self._carry.holds or self._carry.hold_history:
                self.kit_notifier.seen_holds()

    # --- the kit's hooks ----------------------------------------------------------------------------

    @workflow.query
    def status(self) -> RolloutStatus:
        """Everything an operator needs (see :meth:`procedure_status`); typed as the rollout's
        own status so clients decode nodes, totals and the plan."""
        return self.procedure_status()

    @workflow.query
    def plan(self) -> RolloutPlan | None:
        """The plan once computed (None while planning)."""
        return self._status.plan

    def check_decide(self, input: DecideInput) -> None:
        """As the kit's, but a node that is not the rollout's is refused naming its nodes."""
        finished = str(self.control.base_phase) if self.control.finished() else None
        self.board.check_decide(input, self.gates.rules, finished=finished, in_flight=input.node in self.batches.children)

    def procedure_status(self) -> RolloutStatus:
        """The kit's node-procedure status (a gate, the pause, a window or hold, a blocked drain's
        decision, the in-flight node closest to its daemon deadline), the pools in flight, the
        totals, and the network repair while it runs."""
        s = super().procedure_status()
        assert isinstance(s, RolloutStatus)
        s.current_pool, s.current_pools = self.batches.current, list(self.batches.running)
        s.totals = RolloutTotals(**self.batches.totals())
        if s.network_repair is not None and s.phase == RolloutPhase.COMPLETING and not s.waiting_for:
            s.waiting_for = f"network repair: {s.network_repair.stage}"
        return s

    def kit_result_fields(self) -> dict[str, Any]:
        """Every ending's rollout fields: the plan (empty before one exists), the nodes, the
        totals and the network repair."""
        return {"plan": self._status.plan or RolloutPlan(), "nodes": self.batches.node_results(),
                "summary": RolloutTotals(**self.batches.totals()), "network_repair": self._status.network_repair}

    def kit_left_changed(self) -> list[ChangedItem]:
        """What the rollout leaves changed (issue 39), on every ending and for a parent: each node
        the daemon already took to its pool's target (a node before its hand-off was rolled
        back), then the kit's (each node still cordoned by this run)."""
        plan = self._status.plan or RolloutPlan()
        targets = {p.name: p.target_config for p in plan.pools}
        done = [(name, r.pool) for name, r in sorted(self.batches.node_results().items()) if r.phase == NodePhase.DONE]
        return [ChangedItem(target=f"Node {name}", undo=_BACK.format(pool),  # also the run's next commands, once per pool
                            what=f"on rendered config {targets.get(pool, '?')} (the daemon applied it and rebooted the node; "
                                 "machineconfiguration.openshift.io/currentConfig and desiredConfig)") for name, pool in done
                ] + super().kit_left_changed()

    # --- main flow ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: MachineConfigRolloutInput) -> MachineConfigRolloutResult:
        self.kit_identity_attributes()
        return await self.kit_run(lambda: self._run(input), MachineConfigRolloutResult)

    async def _run(self, input: MachineConfigRolloutInput) -> MachineConfigRolloutResult:
        plan = self._carry.plan if self._carry is not None else await self._make_plan(input)
        if input.dry_run:  # every check's result; the failed ones are what a real start would refuse
            failed = [r.problem() for r in self._status.preconditions if r.state == PreconditionState.FAILED]
            message = (f"{plan.node_count} node(s) in {len(plan.pools)} pool(s) would be rolled"
                       + (f"; refused today: {len(failed)} precondition(s) failed" if failed else ""))
            return self.kit_end(MachineConfigRolloutResult, "dry-run", message, plan=plan, problems=failed)
        await self._take_leases(plan, self._carry)
        self.batches.continue_after(input.continue_as_new_after_events)
        self.control.base_phase = RolloutPhase.RUNNING
        self.touch()
        # Stages of pools (pool_order): one pool each when sequential, all of them when parallel.
        for stage in pool_stages(plan):
            if self.control.abort:
                break
            todo = [name for name in stage if not self.batches.groups[name].finished]
            if todo:
                await self.batches.run_groups(todo)
            if self.batches.holding():
                await self.batches.hand_over(input, self._status, self.leases, RolloutCarry, plan=plan)
        if input.repair_network and not self.control.abort:
            self._status.network_repair = net = NetworkRepairStatus()
            await repair_network(self, input, net, plan)
        # A skip/abort signal task may still be in flight; let it settle before closing.
        await self.batches.settle()
        await self.leases.release(concurrent=True, wait_closed=True)
        if not self.control.abort:
            return self.kit_end(MachineConfigRolloutResult, "completed", f"{self.batches.totals()['done']} node(s) updated", plan=plan)
        self.board.abort_pending()
        left = self.kit_left_changed()
        return self.kit_end(MachineConfigRolloutResult, "aborted", self.control.abort_reason or "aborted", plan=plan,
                            **({"left_changed": left, "next_commands": self.kit_next_commands(left)} if left else {}))

    async def _make_plan(self, input: MachineConfigRolloutInput) -> RolloutPlan:
        """Preflight, the preconditions (:meth:`_preconditions`: a failed one refuses the run, or
        in a dry run is listed and leaves the plan empty), then the plan."""
        pre, refusal = await self._preflight(input)
        outcome = await self.kit_preflight(self._preconditions(input, pre, refusal), refuse=not input.dry_run)
        if pre is None or not outcome.ok:
            return RolloutPlan()
        try:
            plan = plan_rollout(
                pre.pools, requested_pools=input.pools, max_unavailable=input.max_unavailable, node_order=input.node_order,
                approval=input.approval, repair_network=input.repair_network, network_type=pre.network_type,
                pool_order=input.pool_order, machine_config_nodes=pre.machine_config_nodes,
            )
        except PlanError as err:
            raise ApplicationError(str(err), type="InvalidPlan", non_retryable=True) from err
        self._add_groups(plan)
        self._status.plan = plan
        if input.search_attributes:
            workflow.upsert_search_attributes([SA_KEY_POOLS.value_set([p.name for p in plan.pools])])
        self.touch()
        return plan

    def _preconditions(self, input: MachineConfigRolloutInput, pre: PreflightResult | None, refusal: str | None) -> list[Precondition]:
        """What the rollout needs before its first write (issue 39), as data: the pools and target
        rendered configs the operator named, as the read-only preflight judged them (each pool
        exists and has nodes, each target is the pool's own and not older than ``not_before``;
        ``refusal`` its words otherwise), and every node an explicit ``node_order`` names (a
        Node: the first of each pool goes first and, with ``approval`` canary, is its canary).
        The rollout runs no program and reboots no node itself (the machine-config-daemon does)
        and sets no kubelet version, so it declares no executable, reboot access or version skew."""
        named = ", ".join(input.pools) or "every pool behind its newest rendered config"
        found = "; ".join(f"{p.name} → {p.target_config} ({len(p.nodes)} node(s))" for p in pre.pools) if pre else ""
        checks: list[Precondition] = [InputCheck(
            about=f"MachineConfigPools ({named})", ok=refusal is None, detail=refusal or found or "no pool to roll",
            why="--pool and --target: the pools to roll and the rendered config each goes to")]
        if not isinstance(input.node_order, str) and input.node_order:
            canary = ", the first of each pool is its canary" if input.approval == ApprovalPolicy.CANARY else ""
            checks.append(NamesExist(names=list(input.node_order), why=f"--node-order puts them first{canary}"))
        return checks

    async def _take_leases(self, plan: RolloutPlan, carry: RolloutCarry | None = None) -> None:
        """The pools' leases (``LeaseInput.scope`` ``pool/<pool>``) and the planned nodes'
        (:class:`workflows.kit.windowleases.WindowLeases`; again after a continue-as-new)."""
        pools = {pool_scope(self._in.cluster, pp.name): f"pool/{pp.name}" for pp in plan.pools}
        await self.node_leases.take(pools, [n for pp in plan.pools for n in pp.nodes], carry)

    def _add_groups(self, plan: RolloutPlan) -> None:
        """One window group per pool of ``plan``, in plan order."""
        for pp in plan.pools:
            self._pool_plans[pp.name] = pp
            self.batches.add_group(pp.name, max_unavailable=pp.max_unavailable, nodes=pp.nodes, unavailable=pp.unavailable,
                                   gates=pp.gates, skipped=pp.skipped)

    async def _preflight(self, input: MachineConfigRolloutInput) -> tuple[PreflightResult | None, str | None]:
        """Preflight, its node list in pages of ``input.preflight_page_size``. Returns the result, or
        None and the refusal's words when it refused the operator's input (:data:`INPUT_REFUSALS`).
        Raises the API failure's ApplicationError when the cluster's API could not be used, any
        other failure as it came."""
        def call(name: str, arg: Any, result_type: type) -> Any:
            return planning_call(self.control, name, arg, result_type, seconds=60, timeouts=self.timeouts,
                                 heartbeat=self.timeouts.heartbeat)  # it beats while it lists
        try:
            pre: PreflightResult = await call(acts.PREFLIGHT, PreflightInput(
                pools=input.pools, target_configs=input.target_configs, not_before=input.not_before, page_size=input.preflight_page_size,
            ), PreflightResult)
        except ActivityError as err:
            if (api := acts.planning_api_failure(err, "preflight")) is not None:
                raise api from err
            if isinstance(err.cause, ApplicationError) and err.cause.type in INPUT_REFUSALS:
                return None, f"{err.cause.type}: {err.cause.message}"
            raise
        for pool in pre.pools:
            after = pool.more_after
            while after is not None:
                page: PoolNodesPage = await call(acts.LIST_POOL_NODES, PoolNodesInput(pool=pool.name, after=after,
                                                                                      limit=input.preflight_page_size), PoolNodesPage)
                pool.nodes.extend(page.nodes)
                after = page.more_after
        return pre, None

    # --- hooks of the node window -------------------------------------------------------------------

    async def _start_child(self, node: str, group: Group, attempt: int) -> workflow.ChildWorkflowHandle:
        """Start the node's NodeRolloutWorkflow attempt (ID ``{rollout}/node/{node}/{attempt}``, or the
        node's lease ID), after taking the node's lease (:class:`workflows.kit.windowleases.WindowLeases`;
        raises LeaseHeld when another procedure holds the node: the window records a failed node)."""
        i, pp = self._in, self._pool_plans[group.name]
        child_input = NodeRolloutInput(
            node=node, pool=group.name, target=pp.target_config, parent_id=self._id, owner=node_owner(self._id, node),
            attempt=attempt, drain=i.drain, daemon=i.daemon, calls=i.calls, lease_scope=self.node_leases.scope_for_run(node),
            disruption=next((d for d in pp.disruption if node in d.nodes), None),
            machine_config_nodes=self._status.plan is not None and self._status.plan.machine_config_nodes,
        )
        return await self.node_leases.start_run(
            NodeRolloutWorkflow.run, child_input, node_workflow_id(self._id, node, attempt), f"node {node} · MachineConfig handshake (attempt {attempt})"
        )

    async def _read(self, node: str) -> NodeInfo:
        return await acts.call(acts.READ_NODE, ReadNodeInput(node=node), NodeInfo, timeouts=self.timeouts)

    async def _cleanup_node(self, node: str) -> None:
        """Child-free rollback of a degraded/failed node: desiredConfig back to currentConfig,
        uncordon only if we cordoned it."""
        info = await self._read(node)
        if info.current_config and info.desired_config != info.current_config:
            await acts.call(acts.SET_NODE_ANNOTATIONS, SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: info.current_config}),
                            NodeInfo, timeouts=self.timeouts)
        await acts.call(acts.UNCORDON_NODE, UncordonInput(node=node, owner=node_owner(self._id, node)), UncordonResult, timeouts=self.timeouts)

    async def _recheck_unavailable(self, nodes: list[str]) -> list[str]:
        """Re-read the nodes that blocked capacity (one at a time); those still unavailable."""
        return [name for name in nodes if is_unavailable(await self._read(name))]
