"""A small procedure on the kit's :class:`workflows.kit.preflight.Preflight`, for
test_kit_preflight.py: check the input's preconditions, refuse when one failed
(``raise_if_failed``), then make ``steps`` writes (``kit_step`` activity calls). No pytest import
here: the workflow sandbox re-imports this module."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.preflight.models import Precondition
    from workflows.kit.models import ApprovalRules, ProcedurePhase, ProcedureResult, ProcedureStatus
    from workflows.kit.preflight import Preflight
    from workflows.kit.procedure import ProcedureWorkflow


class PreflightProbeInput(BaseModel):
    """``preconditions`` to check, ``strict`` (not-run ones refuse too), ``steps`` writes after."""

    preconditions: list[Precondition] = Field(default_factory=list)
    strict: bool = False
    steps: int = 1


class PreflightProbeResult(ProcedureResult):
    """Every check's line, and how many writes ran."""

    lines: list[str] = Field(default_factory=list)
    writes: int = 0


@workflow.defn
class PreflightProbeWorkflow(ProcedureWorkflow):
    """Preflight, then ``steps`` writes; a failed preflight fails the run before any write."""

    @workflow.init
    def __init__(self, input: PreflightProbeInput) -> None:
        self.kit_init(procedure="preflight-probe", noun="probe", cluster="c1", rules=ApprovalRules(),
                      status=ProcedureStatus(), search_attributes=False, pause_on_reject=False)
        self.preflight = Preflight(board=self.kit_status.preconditions, on_change=self.touch)

    @workflow.run
    async def run(self, input: PreflightProbeInput) -> PreflightProbeResult:
        outcome = await self.preflight.check(input.preconditions)
        outcome.raise_if_failed(strict=input.strict)
        for i in range(input.steps):
            await workflow.execute_activity("kit_step", i, result_type=int, start_to_close_timeout=timedelta(seconds=30))
        self.control.base_phase = ProcedurePhase.DONE
        self.touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return PreflightProbeResult(procedure=self.kit_procedure, workflow_id=self.kit_status.workflow_id,
                                    lines=outcome.lines(), writes=input.steps, finished_at=workflow.now())
