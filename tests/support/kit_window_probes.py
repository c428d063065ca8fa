"""A node procedure and a node run built only on the kit's window (plan, batches, board, noderun),
for tests/kit/test_kit_window.py. The node run does no Kubernetes work: it reports a step,
sleeps on a workflow timer and ends done (or degraded on the attempts it is told to fail), so the
tests see the window itself: capacity, unavailable nodes, gates, skip and retry. No pytest import
here: the workflow sandbox re-imports this module.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import calls as acts
    from workflows.kit.alerts import AlertGate
    from workflows.kit.batches import Group, LocalStop, NodeBatches, StopGate, local_run
    from workflows.kit.inputs import AlertGatePolicy
    from workflows.kit.board import NodeBoard
    from workflows.kit.drain import DrainGateState
    from workflows.kit.models import (
        ApprovalRules,
        DrainDecision,
        NodePhase,
        NodeStatus,
        ProcedurePhase,
        ProcedureStatus,
    )
    from workflows.kit.noderun import NodeRun, NodeRunResult, NodeRunWorkflow
    from workflows.kit.plan import ApprovalPolicy, plan_gates
    from workflows.kit.procedure import NodeProcedureWorkflow


class WindowProbeInput(BaseModel):
    """``nodes`` to run in order; ``unavailable`` nodes of the group that already count against
    ``max_unavailable`` (they come back on the ``comes_back_after``-th recheck, 0 = never);
    ``fail_first`` nodes whose first attempt degrades; ``approval`` the plan's gates."""

    nodes: list[str]
    max_unavailable: int = 1
    unavailable: list[str] = Field(default_factory=list)
    comes_back_after: int = 0
    fail_first: list[str] = Field(default_factory=list)
    approval: ApprovalPolicy = ApprovalPolicy.NONE
    work_seconds: float = 30.0
    #: run each node as an in-process step (LocalRun) instead of a child workflow
    in_process: bool = False
    #: the window's alert gate (None: none)
    alerts: AlertGatePolicy | None = None
    #: a held node keeps the nodes after it waiting (NodeBatches.holds_keep_order)
    holds_keep_order: bool = False
    #: maintenance windows (workflows.kit.windows): no node starts outside them
    windows: list[str] = Field(default_factory=list)
    #: a failed node opens its stop gate (NodeBatches' StopGate) instead of pausing; a retry of
    #: ``refuse_retry`` nodes is refused
    stop_gate: bool = False
    refuse_retry: list[str] = Field(default_factory=list)
    #: nodes whose run passes its point of no return (step "work") as it starts working
    no_return: list[str] = Field(default_factory=list)


class WindowProbeStatus(ProcedureStatus):
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    in_flight: list[str] = Field(default_factory=list)


class WindowProbeResult(BaseModel):
    phases: dict[str, NodePhase]
    attempts: dict[str, int]
    max_in_flight: int
    rolled_back: list[str]
    rechecks: int
    gate_actions: list[str]
    stopped: str | None = None
    #: skipped nodes past their point of no return, left as they are (NodeBatches' ``leave``)
    left: list[str] = Field(default_factory=list)


class ProbeNodeInput(BaseModel):
    node: str
    parent_id: str
    attempt: int = 1
    fail: bool = False
    work_seconds: float = 30.0
    no_return: bool = False


@workflow.defn
class ProbeNodeWorkflow(NodeRunWorkflow):
    """A node run that works for ``work_seconds`` (a timer) and ends done, or degraded when told."""

    @workflow.init
    def __init__(self, input: ProbeNodeInput) -> None:
        self.node_run = NodeRun(
            node=input.node, attempt=input.attempt, parent_id=input.parent_id, owner=f"{input.parent_id}/node/{input.node}",
            warn_fraction=0.5, timeouts=acts.Timeouts(), drain=DrainGateState(input.node, None, None, DrainDecision.WAIT),
        )

    @workflow.run
    async def run(self, input: ProbeNodeInput) -> NodeRunResult:
        run = self.node_run
        if input.no_return:
            run.past_no_return = "work"
        await run.report(NodePhase.RUNNING, "work", "the timer")
        await workflow.sleep(input.work_seconds)
        if input.fail:
            await run.report(NodePhase.DEGRADED, "work", reason="told to fail")
            result = run.result(NodeRunResult, "degraded", reason="told to fail")
        else:
            await run.report(NodePhase.DONE, "finished")
            result = run.result(NodeRunResult, "done")
        await run.settle()
        return result


@workflow.defn
class WindowProbeWorkflow(NodeProcedureWorkflow):
    """One group through :class:`NodeBatches` with the kit's operator surface."""

    @workflow.init
    def __init__(self, input: WindowProbeInput) -> None:
        self._in = input
        self._status = WindowProbeStatus()
        self.kit_init(procedure="window-probe", noun="probe", cluster="c1", rules=ApprovalRules(), status=self._status,
                      search_attributes=False, base_phase=ProcedurePhase.PLANNING)
        self.board = NodeBoard(procedure="window-probe", cluster="c1", nodes=self._status.nodes,
                               gate_history=self._status.gate_history, warnings=self._status.warnings, on_change=self.touch)
        self.alerts = (AlertGate(input.alerts, self.gates, self.control, board=self._status.health, on_change=self.touch)
                       if input.alerts is not None else None)
        self.batches = NodeBatches(board=self.board, control=self.control, gates=self.gates, start_child=self._start,
                                   rollback=self._rollback, leave=self._leave, recheck_unavailable=self._recheck, alerts=self.alerts,
                                   stop_gate=StopGate(text=lambda n, r, why: f"{n} stopped: {r.reason}; {why or 'approve retries'}",
                                                      refusal=lambda n, r: "told so" if n in input.refuse_retry else None)
                                   if input.stop_gate else None)
        self.batches.holds_keep_order = input.holds_keep_order
        self.kit_windows(input.windows)
        self._max_in_flight = 0
        self._rolled_back: list[str] = []
        self._left: list[str] = []
        self._rechecks = 0

    @workflow.query
    def status(self) -> WindowProbeStatus:
        s = self.procedure_status()
        s.in_flight = self.batches.in_flight()
        return s

    async def _start(self, node: str, group: Group, attempt: int) -> workflow.ChildWorkflowHandle:
        self._max_in_flight = max(self._max_in_flight, len(self.batches.children) + 1)
        wf_id = workflow.info().workflow_id
        if self._in.in_process:
            fail = attempt == 1 and node in self._in.fail_first

            async def step(stop: LocalStop) -> NodeRunResult:
                self.board.nodes[node].step = "work"
                for _ in range(int(self._in.work_seconds)):
                    stop.check()
                    await workflow.sleep(1)
                if fail:
                    raise ApplicationError("told to fail")
                return NodeRunResult(node=node, outcome="done", attempt=attempt)

            return await local_run(node, attempt, step)
        return await workflow.start_child_workflow(
            ProbeNodeWorkflow.run,
            ProbeNodeInput(node=node, parent_id=wf_id, attempt=attempt, work_seconds=self._in.work_seconds,
                           fail=attempt == 1 and node in self._in.fail_first, no_return=node in self._in.no_return),
            id=f"{wf_id}/node/{node}/{attempt}",
        )

    async def _rollback(self, node: str) -> None:
        self._rolled_back.append(node)

    async def _leave(self, node: str) -> None:
        self._left.append(node)

    async def _recheck(self, nodes: list[str]) -> list[str]:
        self._rechecks += 1
        back = self._in.comes_back_after and self._rechecks >= self._in.comes_back_after
        return [] if back else list(nodes)

    @workflow.run
    async def run(self, input: WindowProbeInput) -> WindowProbeResult:
        self.batches.add_group("pool", max_unavailable=input.max_unavailable, nodes=input.nodes,
                               unavailable=input.unavailable, gates=plan_gates("pool", input.nodes, input.approval))
        self.control.base_phase = ProcedurePhase.RUNNING
        self.touch()
        await self.batches.run_group("pool")
        await self.batches.settle()
        self.control.base_phase = ProcedurePhase.DONE
        self.touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return WindowProbeResult(
            phases={n: s.phase for n, s in self._status.nodes.items()},
            attempts=dict(self.batches.attempts),
            max_in_flight=self._max_in_flight,
            rolled_back=self._rolled_back,
            rechecks=self._rechecks,
            gate_actions=[f"{r.gate_id}:{r.action}" for r in self._status.gate_history],
            stopped=self.batches.stopped,
            left=self._left,
        )
