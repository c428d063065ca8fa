"""A procedure started as a phase of a bigger one reports its own status upwards.

The upgrade procedures (node upgrade, control plane, nodeSelector migration) take ``report_to``
(the parent's workflow ID, set by the cluster upgrade). :class:`ParentReporter` sends the parent
signal ``child_status`` with a :class:`ChildReport` (phase, what it waits for, since/until, its
waiting gates, its error, a sequence number) whenever that summary changes, fire and forget like the kit's node
progress, so the parent's ``status`` shows the child's own state without querying it (a workflow
cannot query another). :meth:`ParentReporter.settle` waits for the signals before the run returns.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.models import GateState, ProcedureStatus

CHILD_STATUS_SIGNAL = "child_status"


class ChildReport(BaseModel):
    """The child's summary: ``workflow_id``, ``procedure``, ``phase``, ``waiting_for``/``since``/
    ``deadline``, ``gates_waiting`` (gate IDs to approve on the child), ``error``."""

    workflow_id: str
    procedure: str = ""
    phase: str = ""
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    gates_waiting: list[str] = Field(default_factory=list)
    error: str | None = None
    #: Increases with every report: signals from separate commands may arrive out of order, so
    #: the parent keeps the highest.
    seq: int = 0


class ParentReporter:
    """Sends :class:`ChildReport` s to ``parent_id`` (None: reports nothing)."""

    def __init__(self, parent_id: str | None) -> None:
        self.parent_id = parent_id
        self.last: ChildReport | None = None
        self.seq = 0
        self._tasks: list[asyncio.Future[None]] = []

    def report(self, st: ProcedureStatus) -> None:
        """Signal the parent when the summary of ``st`` changed since the last report."""
        if self.parent_id is None:
            return
        rep = ChildReport(workflow_id=st.workflow_id, procedure=st.procedure, phase=str(st.phase), waiting_for=st.waiting_for,
                          since=st.since, deadline=st.deadline, error=st.error,
                          gates_waiting=[g.id for g in st.gates if g.state == GateState.WAITING])
        if self.last is not None and rep == self.last.model_copy(update={"seq": 0}):
            return
        self.last = rep.model_copy()
        self.seq += 1
        rep.seq = self.seq
        self._tasks.append(asyncio.ensure_future(self._send(rep)))

    async def _send(self, rep: ChildReport) -> None:
        try:
            await workflow.get_external_workflow_handle(self.parent_id or "").signal(CHILD_STATUS_SIGNAL, rep)
        except Exception as err:  # noqa: BLE001 - advisory: a gone parent must not fail the procedure
            workflow.logger.warning("status report to %s failed: %s", self.parent_id, err)

    async def settle(self) -> None:
        """Wait until every report went out."""
        if self._tasks:
            await asyncio.gather(*self._tasks)
