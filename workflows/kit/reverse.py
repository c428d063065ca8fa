"""The full revert of an ended run from its records: ``lockkeeper revert ID --full``.

A procedure that ended (completed, aborted past its point of no return, stopped) leaves its
records in its result (``open_records``: every object it changed and did not restore, with the
original values and what it wrote). For a procedure without a reverse of its own
(``ProcedureSpec.reverse``), the CLI starts :class:`RevertRecordsWorkflow` with them: it writes
every record back, last change first, only where the object still holds what the procedure
wrote, reads each one back, and ends ``reverted`` when every record was restored and verified,
``stopped`` naming each one that was refused (somebody changed it since) or differs after the
read-back. A gate ``revert`` before it writes anything shows what it will restore.
"""

from __future__ import annotations

from pydantic import Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.inputs import ProcedureInput
    from workflows.kit.models import ProcedurePhase, ProcedureResult, ProcedureStatus, RecordEntry
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.kit.spec import PRIORITY_CONTROL, ProcedureSpec

PROCEDURE_REVERT_RECORDS = "revert-records"


class RevertRecordsInput(ProcedureInput):
    """``of_workflow``: the ended run; ``records``: its ``open_records``; ``approve``: gate the
    writes behind gate ``revert`` (default)."""

    of_workflow: str
    records: list[RecordEntry] = Field(min_length=1)
    approve: bool = True


class RevertRecordsStatus(ProcedureStatus):
    of_workflow: str = ""


class RevertRecordsResult(ProcedureResult):
    of_workflow: str = ""


@workflow.defn
class RevertRecordsWorkflow(ProcedureWorkflow):
    """Input :class:`RevertRecordsInput`, result :class:`RevertRecordsResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: RevertRecordsInput) -> None:
        self.kit_init(procedure=PROCEDURE_REVERT_RECORDS, noun="revert", status=RevertRecordsStatus(of_workflow=input.of_workflow),
                      input=input, pause_on_reject=False, reject_note="nothing is reverted")

    @workflow.run
    async def run(self, input: RevertRecordsInput) -> RevertRecordsResult:
        return await self.kit_run(lambda: self._run(input), RevertRecordsResult)

    def kit_result_fields(self) -> dict[str, object]:
        return {"of_workflow": self.kit_status.of_workflow}  # type: ignore[attr-defined]

    async def _run(self, input: RevertRecordsInput) -> RevertRecordsResult:
        objects = ", ".join(e.record.ref.describe() for e in input.records)
        if input.dry_run:
            return self.kit_end(RevertRecordsResult, "dry-run", f"would restore {objects} as {input.of_workflow} found them")
        if input.approve:
            await self.gates.step("revert", f"restore {objects} as {input.of_workflow} found them (each read back after)",
                                  self.gate_policy, required=True)
        self.records.restore_entries(input.records)
        self.control.base_phase = ProcedurePhase.RUNNING
        restored, problems = await self.records.revert_all()
        if problems:
            return self.kit_end(RevertRecordsResult, "stopped", "not everything was restored: " + "; ".join(problems),
                                restored=restored, left_changed=self.records.left_changed())
        return self.kit_end(RevertRecordsResult, "reverted", f"restored what {input.of_workflow} changed", restored=restored)


SPEC = ProcedureSpec(
    name=PROCEDURE_REVERT_RECORDS,
    priority=PRIORITY_CONTROL,
    workflow=RevertRecordsWorkflow,
    input_model=RevertRecordsInput,
    status_model=RevertRecordsStatus,
    result_model=RevertRecordsResult,
    id_prefix="revert",
)
