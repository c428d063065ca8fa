"""A procedure that waits at the kit's alert gate (:mod:`workflows.kit.alerts`) before each of its
places, for tests/kit/test_kit_alerts.py. The ``check_alerts`` activity is a fake registered
by name there. No pytest import here: the workflow sandbox re-imports this module.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.alerts import AlertGate, AlertGateAnswer, AlertGateEvent, AlertGatePolicy
    from workflows.kit.models import ApprovalRules, ProcedurePhase, ProcedureResult, ProcedureStatus
    from workflows.kit.procedure import ProcedureWorkflow


class AlertProbeInput(BaseModel):
    """``policy`` of the gate; ``wheres``: the places waited for in turn (the probe stops at the
    first wait that does not pass); ``rules``: who may decide its gates."""

    policy: AlertGatePolicy
    wheres: list[str] = Field(default_factory=lambda: ["node/worker-1"])
    rules: ApprovalRules = Field(default_factory=ApprovalRules)


class AlertProbeResult(ProcedureResult):
    answers: list[AlertGateAnswer] = Field(default_factory=list)
    events: list[AlertGateEvent] = Field(default_factory=list)


@workflow.defn
class AlertGateProbeWorkflow(ProcedureWorkflow):
    """Wait at the alert gate before each place of ``wheres``; return every answer and event."""

    @workflow.init
    def __init__(self, input: AlertProbeInput) -> None:
        self.kit_init(procedure="alert-probe", noun="probe", cluster="c1", rules=input.rules, status=ProcedureStatus(),
                      search_attributes=False, pause_on_reject=False, reject_note="the wait goes on")
        self.alert_gate = AlertGate(input.policy, self.gates, self.control, self.kit_status.health, self.touch,
                                    self.timeouts, warnings=self.kit_status.warnings, on_step=self.kit_step)

    @workflow.run
    async def run(self, input: AlertProbeInput) -> AlertProbeResult:
        answers: list[AlertGateAnswer] = []
        for where in input.wheres:
            answer = await self.alert_gate.wait_clear(where)
            answers.append(answer)
            if not answer.passed:
                break
        outcome = "aborted" if self.control.abort else "completed"
        self.control.base_phase = ProcedurePhase.ABORTED if self.control.abort else ProcedurePhase.DONE
        self.touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        st = self.kit_status
        return AlertProbeResult(procedure=self.kit_procedure, workflow_id=st.workflow_id, outcome=outcome,
                                gate_history=list(st.gate_history), started_at=st.started_at, finished_at=workflow.now(),
                                answers=answers, events=self.alert_gate.take_events())
