"""A small procedure requiring a kit guard (:mod:`workflows.kit.guard`), for
tests/kit/test_kit_guard.py. No pytest import: the workflow sandbox re-imports this module.

The guard ``probe-settled`` asks activity ``probe_guard_check`` (answers :class:`ProbeAnswer`).
``mode``: ``require`` refuses at once unless it holds; ``wait`` waits until it holds or
``deadline_seconds`` pass, then requires it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.guard import GuardRefused, GuardSpec, HealthGuard
    from workflows.kit.health import Backoff
    from workflows.kit.models import ApprovalRules, ProcedurePhase, ProcedureResult, ProcedureStatus
    from workflows.kit.procedure import ProcedureWorkflow

PROBE_CHECK = "probe_guard_check"


class ProbeAnswer(BaseModel):
    ok: bool
    behind: list[str] = Field(default_factory=list)


SPEC = GuardSpec(name="probe-settled", activity=PROBE_CHECK, answer_type=ProbeAnswer, ok_text="all settled",
                 refusal_type="ProbeNotSettled", refusal_text="the probe's things are not settled")


class GuardProbeInput(BaseModel):
    mode: Literal["require", "wait"] = "require"
    deadline_seconds: float = 60.0
    what: str = "cluster"


class GuardProbeStatus(ProcedureStatus):
    guard_behind: list[str] = Field(default_factory=list)
    acted: bool = False


class GuardProbeResult(ProcedureResult):
    refusal_type: str = ""
    behind: list[str] = Field(default_factory=list)
    acted: bool = False


@workflow.defn
class GuardProbeWorkflow(ProcedureWorkflow):
    """Stands in for a procedure: requires the guard before its dangerous step (``acted``)."""

    @workflow.init
    def __init__(self, input: GuardProbeInput) -> None:
        self._st = GuardProbeStatus()
        self.kit_init(procedure="guard-probe", noun="probe", cluster="c1", rules=ApprovalRules(), status=self._st,
                      search_attributes=False)
        self.guard = HealthGuard(SPEC, board=self._st.health, on_change=self.touch, stop=lambda: self.control.abort)

    @workflow.run
    async def run(self, input: GuardProbeInput) -> GuardProbeResult:
        try:
            if input.mode == "wait":
                await self.guard.wait(input.what, deadline=workflow.now() + timedelta(seconds=input.deadline_seconds),
                                      backoff=Backoff(initial=5.0, maximum=10.0))
            await self.guard.require(input.what, self._st)
        except GuardRefused as err:
            return self._result("refused", err.message, refusal_type=err.type or "", behind=err.behind)
        self._st.acted = True
        return self._result("completed", "")

    def _result(self, outcome: str, message: str, **kw: object) -> GuardProbeResult:
        self.control.base_phase = ProcedurePhase.DONE
        self.touch()
        return GuardProbeResult(procedure="guard-probe", workflow_id=workflow.info().workflow_id, outcome=outcome, message=message,
                                acted=self._st.acted, finished_at=workflow.now(), **kw)  # type: ignore[arg-type]
