"""A small procedure whose one row runs named steps on the kit's :class:`workflows.kit.steprow.StepRow`,
for tests/kit/test_kit_steprow.py. No pytest import: the workflow sandbox re-imports this module.

Each of the input's ``host_steps`` runs once on the worker (:meth:`StepRow.external`); a step the
row already has in ``done`` (the input's ``done``) is not run again. ``health_polls``: before the
steps, a health wait ``ready`` that passes on that poll (0: no wait; its timeout is ``wait_seconds``).
``reboot_from``: before the steps, a reboot (``systemctl reboot``) from that boot ID, the new one
in the result's ``boot_id``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.host.models import HostAccess
    from workflows.kit.health import Backoff, Check
    from workflows.kit.host import HostStep, HostSteps
    from workflows.kit.models import ApprovalRules, HealthStatus, ProcedurePhase, ProcedureResult, ProcedureStatus
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.kit.steprow import LastCommand, StepRow, StepStopped


class Row(BaseModel):
    """The row :class:`StepRow` moves (the fields of :class:`workflows.kit.steprow.StepRowFields`)."""

    step: str | None = None
    phase: str = "running"
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    done_steps: list[str] = Field(default_factory=list)
    last_command: LastCommand | None = None


class StepRowProbeInput(BaseModel):
    host_steps: list[HostStep] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)
    health_polls: int = 0
    wait_seconds: float = 30.0
    gate_timeout_seconds: float | None = None
    reboot_from: str | None = None


class StepRowProbeResult(ProcedureResult):
    row: Row
    stopped: str | None = None
    aborted: bool = False
    boot_id: str | None = None


@workflow.defn
class StepRowProbeWorkflow(ProcedureWorkflow):
    """Input :class:`StepRowProbeInput`, result :class:`StepRowProbeResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: StepRowProbeInput) -> None:
        self.kit_init(procedure="probe", noun="probe", cluster="c1", rules=ApprovalRules(), status=ProcedureStatus(),
                      search_attributes=False, pause_on_reject=False, reject_note="probe stops")
        self.row = Row(done_steps=list(input.done))
        self.polls = 0

    @workflow.query
    def probe_row(self) -> Row:
        return self.row

    async def _ready(self) -> Check:
        self.polls += 1
        return Check(self.polls >= self.inp.health_polls, f"poll {self.polls}")

    @workflow.run
    async def run(self, input: StepRowProbeInput) -> StepRowProbeResult:
        self.inp = input
        host = HostSteps(self.gates, on_change=self.touch, gate_timeout_seconds=input.gate_timeout_seconds)
        steps = StepRow(self.row, prefix="n1", gates=self.gates, host=host, access=HostAccess(), push=self.touch,
                        gate_timeout_seconds=input.gate_timeout_seconds, command_timeout_seconds=60.0, backoff=Backoff(1.0, 2.0))
        board: dict[str, HealthStatus] = {}
        stopped: dict[str, Any] = {}
        try:
            if input.reboot_from is not None:
                stopped["boot_id"] = await steps.reboot("reboot", ["systemctl", "reboot"], before=input.reboot_from, timeout_seconds=60,
                                                        poll_seconds=1, board=board)
                steps.done("reboot")
            if input.health_polls:
                await steps.wait_ok("ready", "the probe ready", self._ready, input.wait_seconds, board)
                steps.done("ready")
            for s in input.host_steps:
                if steps.todo(s.name):
                    await steps.external(s.name, s.argv, timeout_seconds=s.timeout_seconds, env={})
                    steps.done(s.name)
        except StepStopped as err:
            stopped.update(stopped=f"{err.step}: {err.reason}", aborted=err.aborted)
        failed = "stopped" in stopped
        self.control.base_phase = ProcedurePhase.FAILED if failed else ProcedurePhase.DONE
        self.touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        st = self.kit_status
        return StepRowProbeResult(procedure="probe", workflow_id=st.workflow_id, outcome="failed" if failed else "completed",
                                  gate_history=list(st.gate_history), started_at=st.started_at, finished_at=workflow.now(),
                                  row=self.row, **stopped)
