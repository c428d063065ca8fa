"""Small procedures built on the kit, for the kit's own tests (tests/kit/test_kit_*.py).

Each exercises one building block through the real operator surface of
:class:`workflows.kit.procedure.ProcedureWorkflow`, on the time-skipping server, with fake
activities registered by name (:func:`kit_activities`). No pytest import here: the workflow
sandbox re-imports this module.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import ObjectRef
    from activities.host.models import HostAccess
    from workflows.kit.barrier import Barrier
    from workflows.kit.control import Aborted
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostStep, HostStepFailed, HostSteps, RebootFailed, reboot
    from workflows.kit.models import (
        ApprovalRules,
        GateTimeoutOutcome,
        ProcedurePhase,
        ProcedureResult,
        ProcedureStatus,
    )
    from workflows.kit.inputs import ProcedureInput
    from workflows.kit.procedure import ProcedureStopped, ProcedureWorkflow
    from workflows.kit.records import RecordRefused, Records


class ProbeInput(BaseModel):
    """What a probe does: ``cluster``; approval ``rules``; gate ``timeout_seconds`` and
    ``timeout_outcome``; ``scopes`` / ``covers`` to lease; ``steps`` safe-pointed activity
    steps; ``targets`` of a barrier (``hold`` = the blocking form); ``health_until`` polls;
    ``record`` object; ``host_steps``; ``probe_chunk`` > 0: only probe ``scopes`` that many
    per workflow task (``Leases.probe``), take nothing."""

    cluster: str = "c1"
    rules: ApprovalRules = Field(default_factory=ApprovalRules)
    timeout_seconds: float | None = None
    timeout_outcome: GateTimeoutOutcome = GateTimeoutOutcome.REJECT
    scopes: list[str] = Field(default_factory=list)
    covers: list[str] = Field(default_factory=list)
    hold_seconds: float | None = 0
    steps: int = 0
    targets: list[str] = Field(default_factory=list)
    hold: bool = False
    health_deadline_seconds: float | None = None
    record: ObjectRef | None = None
    record_values: dict[str, Any] = Field(default_factory=dict)
    touch_between: bool = False
    host_steps: list[HostStep] = Field(default_factory=list)
    probe_chunk: int = 0


class ProbeResult(ProcedureResult):
    passed: bool | None = None
    gate_state: str | None = None
    done: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    detail: str = ""


class _Probe(ProcedureWorkflow):
    procedure_name = "probe"

    def _setup(self, input: ProbeInput) -> None:
        self.kit_init(
            procedure=self.procedure_name, noun="probe", cluster=input.cluster, rules=input.rules,
            status=ProcedureStatus(), search_attributes=False, pause_on_reject=False, reject_note="probe stops",
        )

    def _result(self, outcome: str, **kw: Any) -> ProbeResult:
        return ProbeResult(procedure=self.kit_procedure, workflow_id=self.kit_status.workflow_id, outcome=outcome,
                           gate_history=list(self.kit_status.gate_history), started_at=self.kit_status.started_at,
                           finished_at=workflow.now(), **kw)

    async def _finish(self, outcome: str, **kw: Any) -> ProbeResult:
        self.control.base_phase = ProcedurePhase.ABORTED if outcome == "aborted" else ProcedurePhase.DONE
        self.touch()
        await self.leases.release()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result(outcome, **kw)


@workflow.defn
class GateProbeWorkflow(_Probe):
    """One approval gate ``step-1`` with the input's rules, timeout and declared outcome."""

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        gate = await self.gates.approval("step-1", "the probe's step", timeout_seconds=input.timeout_seconds,
                                         timeout_outcome=input.timeout_outcome)
        passed = gate.id in self.gates.passed
        outcome = "aborted" if self.control.abort else "completed" if passed else "rejected"
        return await self._finish(outcome, passed=passed, gate_state=str(gate.state))


@workflow.defn
class StepsProbeWorkflow(_Probe):
    """``steps`` activity calls (``kit_step``) with a safe point before each."""

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        done: list[str] = []
        try:
            for i in range(input.steps):
                await self.control.safe_point()
                await workflow.execute_activity("kit_step", i, result_type=int, start_to_close_timeout=timedelta(seconds=30))
                done.append(str(i))
                self.touch()
        except Aborted as ab:
            return await self._finish("aborted", done=done, detail=ab.reason)
        return await self._finish("completed", done=done)


class _LeaseProbe(_Probe):
    """Take ``scopes`` (with ``covers``), hold them ``hold_seconds`` (None: until aborted)."""

    async def hold(self, input: ProbeInput) -> ProbeResult:
        if input.probe_chunk:
            await self.leases.probe(input.scopes, chunk=input.probe_chunk)
            return await self._finish("completed")
        await self.leases.acquire(input.scopes, covers=input.covers)
        self.kit_status.leases = list(self.leases.held)
        self.touch()
        # hold_seconds None: until aborted or terminated.
        try:
            await workflow.wait_condition(lambda: self.control.abort,
                                          timeout=timedelta(seconds=input.hold_seconds) if input.hold_seconds is not None else None)
        except TimeoutError:
            pass
        return await self._finish("aborted" if self.control.abort else "completed", done=list(self.leases.held))


@workflow.defn
class AlphaLeaseProbeWorkflow(_LeaseProbe):
    """One procedure type holding scopes."""

    procedure_name = "alpha-procedure"

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        return await self.hold(input)


@workflow.defn
class BetaLeaseProbeWorkflow(_LeaseProbe):
    """A second procedure type holding scopes."""

    procedure_name = "beta-procedure"

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        return await self.hold(input)


@workflow.defn
class HealthProbeWorkflow(_Probe):
    """Wait until ``kit_health`` says ok, with the input's deadline."""

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        async def check() -> Check:
            ok, detail = await workflow.execute_activity("kit_health", None, result_type=tuple[bool, str],
                                                        start_to_close_timeout=timedelta(seconds=30))
            return Check(ok, detail)

        deadline = workflow.now() + timedelta(seconds=input.health_deadline_seconds) if input.health_deadline_seconds else None
        hs = await wait_until(check, name="api", backoff=Backoff(initial=5, maximum=20), deadline=deadline,
                              stop=lambda: self.control.abort, board=self.kit_status.health, on_poll=lambda _: self.touch())
        return await self._finish("completed" if hs.state == "ok" else hs.state, detail=f"{hs.state} after {hs.polls} polls")


@workflow.defn
class BarrierProbeWorkflow(_Probe):
    """``kit_target_step`` on every target (``hold``: pause on failure, re-check on resume)."""

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        async def step(target: str) -> str:
            return await workflow.execute_activity("kit_target_step", target, result_type=str,
                                                   start_to_close_timeout=timedelta(seconds=30))

        barrier = Barrier("pre-pull", input.targets, step, board=self.kit_status.barriers, on_change=self.touch)
        try:
            result = await (barrier.hold(self.control) if input.hold else barrier.run())
        except Aborted as ab:
            return await self._finish("aborted", detail=ab.reason)
        return await self._finish("completed" if result.ok else "failed", done=list(result.done),
                                  failed=result.failed, detail=result.message)


@workflow.defn
class RecordProbeWorkflow(_Probe):
    """Change ``record`` (``record_values``), wait for ``approve`` of gate ``revert``, revert."""

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        assert input.record is not None
        records = Records(board=self.kit_status.records, on_change=self.touch)
        await records.change("ds", input.record, input.record_values)
        await self.gates.approval("revert", "revert the change", timeout_seconds=None)
        try:
            restored = await records.revert("ds")
        except RecordRefused as ref:
            return await self._finish("refused", detail=ref.message)
        return await self._finish("completed", done=restored.restored)


@workflow.defn
class HostProbeWorkflow(_Probe):
    """Run ``host_steps`` in order on a local host."""

    @workflow.init
    def __init__(self, input: ProbeInput) -> None:
        self._setup(input)

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeResult:
        steps = HostSteps(self.gates, board=self.kit_status.host_steps, on_change=self.touch)
        done: list[str] = []
        for step in input.host_steps:
            try:
                r = await steps.run(step, HostAccess())
            except HostStepFailed as err:
                return await self._finish("failed", done=done, detail=err.status.detail)
            done.append(step.name if r is not None else f"{step.name} (already done)")
        return await self._finish("completed", done=done)


class TemplateProbeInput(ProcedureInput):
    """The run template's probe: ``problems`` refuse before anything (PreconditionFailed);
    else change ``record`` to ``record_values``, declare the point of no return when ``pnr``,
    pass gate ``go`` (with ``choices`` when given), then fail with ``fail`` (an ApplicationError
    of type StepFailed), or run activity ``kit_target_step`` on ``step_target`` (which the fake
    may fail: an ActivityError the body does not handle), or complete naming the choice."""

    problems: list[str] = Field(default_factory=list)
    record: ObjectRef | None = None
    record_values: dict[str, Any] = Field(default_factory=dict)
    pnr: bool = False
    choices: list[str] = Field(default_factory=list)
    fail: str | None = None
    step_target: str | None = None
    #: After the change: stop by the probe's own rule (the kit's ProcedureStopped) with this reason.
    stop: str | None = None


@workflow.defn
class TemplateProbeWorkflow(ProcedureWorkflow):
    kit_keeps_records = True

    @workflow.init
    def __init__(self, input: TemplateProbeInput) -> None:
        self.kit_init(procedure="template-probe", noun="probe", status=ProcedureStatus(), input=input, pause_on_reject=False)

    @workflow.run
    async def run(self, input: TemplateProbeInput) -> ProbeResult:
        return await self.kit_run(lambda: self._run(input), ProbeResult)

    async def _run(self, input: TemplateProbeInput) -> ProbeResult:
        if input.problems:
            raise ApplicationError("\n".join(input.problems), type="PreconditionFailed", non_retryable=True)
        if input.record is not None:
            await self.records.change("obj", input.record, input.record_values)
        if input.pnr:
            self.control.passed_point_of_no_return("the probe's change went out")
        if input.stop:
            raise ProcedureStopped(input.stop, outcome="stopped", detail="by the probe's rule")
        answer = await self.gates.step("go", "go on?", self.gate_policy, choices=input.choices, required=True)
        await self.control.safe_point()
        if input.fail:
            raise ApplicationError(input.fail, type="StepFailed", non_retryable=True)
        if input.step_target is not None:
            await workflow.execute_activity("kit_target_step", input.step_target, result_type=str,
                                            start_to_close_timeout=timedelta(seconds=30))
        return self.kit_end(ProbeResult, "completed", f"choice {answer.choice}", passed=True)


class RebootProbeInput(ProcedureInput):
    """Reboot node ``n1`` (over a local host access) with ``argv``, confirmed by the boot ID read
    on the host, within ``timeout_seconds``."""

    argv: list[str] = Field(default_factory=lambda: ["systemctl", "reboot"])
    timeout_seconds: float = 60.0
    #: The kit's options: ``resend_after_grace_seconds`` and ``on_timeout``.
    grace_seconds: float | None = None
    on_timeout: str = "gate"


@workflow.defn
class RebootProbeWorkflow(ProcedureWorkflow):
    @workflow.init
    def __init__(self, input: RebootProbeInput) -> None:
        self.kit_init(procedure="reboot-probe", noun="probe", status=ProcedureStatus(), input=input, pause_on_reject=False)
        self.host = HostSteps(self.gates, board=self.kit_status.host_steps, on_change=self.touch,
                              gate_timeout_seconds=input.gates.timeout_seconds)

    @workflow.run
    async def run(self, input: RebootProbeInput) -> ProbeResult:
        return await self.kit_run(lambda: self._run(input), ProbeResult)

    async def _run(self, input: RebootProbeInput) -> ProbeResult:
        try:
            done = await reboot(self.host, "n1", HostAccess(), input.argv, via="host", timeout_seconds=input.timeout_seconds,
                                board=self.kit_status.health, resend_after_grace_seconds=input.grace_seconds,
                                on_timeout=input.on_timeout)
        except RebootFailed as err:
            return self.kit_end(ProbeResult, "failed-reboot", err.reason, detail=err.kind)
        return self.kit_end(ProbeResult, "completed", done.how, detail=str(done.after))


class DebugPodProbeInput(ProcedureInput):
    """Run ``steps`` on node ``n1`` through ``backend`` (debug pods in namespace ``namespace``, or
    local); a failed step fails the run (an ApplicationError of type StepFailed)."""

    steps: list[HostStep] = Field(default_factory=list)
    backend: str = "debug-pod"
    namespace: str = "lk-debug"


@workflow.defn
class DebugPodProbeWorkflow(ProcedureWorkflow):
    """Host steps through debug pods inside the kit's run template (its end-of-run sweep)."""

    @workflow.init
    def __init__(self, input: DebugPodProbeInput) -> None:
        self.kit_init(procedure="debug-pod-probe", noun="probe", status=ProcedureStatus(), input=input, pause_on_reject=False)
        self.host = HostSteps(self.gates, board=self.kit_status.host_steps, on_change=self.touch)

    @workflow.run
    async def run(self, input: DebugPodProbeInput) -> ProbeResult:
        return await self.kit_run(lambda: self._run(input), ProbeResult)

    async def _run(self, input: DebugPodProbeInput) -> ProbeResult:
        access = HostAccess(backend=input.backend, node="n1", namespace=input.namespace)
        for step in input.steps:
            try:
                await self.host.run(step, access, unknown_opens_gate=False)
            except HostStepFailed as err:
                raise ApplicationError(err.status.detail, type="StepFailed", non_retryable=True) from err
        return self.kit_end(ProbeResult, "completed", f"{len(input.steps)} step(s) ran")


PROBES = [GateProbeWorkflow, StepsProbeWorkflow, AlphaLeaseProbeWorkflow, BetaLeaseProbeWorkflow, HealthProbeWorkflow,
          BarrierProbeWorkflow, RecordProbeWorkflow, HostProbeWorkflow, TemplateProbeWorkflow, RebootProbeWorkflow,
          DebugPodProbeWorkflow]


@workflow.defn(name="LeaseWorkflow")
class StuckLeaseWorkflow:
    """A lease that never closes: it takes ``release`` and ``contend`` and ignores both (a lease
    no healthy worker runs, for the kit's close timeout)."""

    @workflow.signal
    def release(self, holder: str = "") -> None:
        pass

    @workflow.signal
    def contend(self, requester_workflow_id: str) -> None:
        pass

    @workflow.run
    async def run(self, input: Any) -> None:
        await workflow.wait_condition(lambda: False)
