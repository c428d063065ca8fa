"""The one channel from a child workflow to its parent procedure: signal ``child_report``.

Every child reports upwards the same way, whatever it is:

- a node run (:mod:`workflows.kit.noderun`) reports its node's phase, step, wait, blocked drain
  and decision gate (``node``: a :class:`workflows.kit.models.NodeProgress`);
- a procedure started as a phase of a bigger one (a cluster upgrade's control plane, node
  upgrades, nodeSelector migration) reports its own summary: phase, what it waits for since and
  until when, its waiting gates and its error;
- either may add a procedure-specific ``detail`` (JSON-able, e.g. a runtime migration node's row).

Gates travel as data: the parent shows a child's waiting gates (with their choices and the
workflow that owns them, ``Gate.workflow_id``) and its gate records, and the operator's decision
goes to the child that owns the gate (the CLI routes ``approve PARENT GATE`` there), so one
decision is recorded once, in the workflow whose gate it is.

Reports are sent without awaiting each other (a server round trip per report would slow every
step), so two may overtake each other: each carries ``seq`` (1, 2, ... per sender) and the parent
keeps the highest (:class:`ReportInbox`). A sender that reports the same thing twice sends once.
:meth:`Reporter.settle` waits for the reports in flight before the child returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.models import ChangedItem, Gate, GateRecord, GateState, NodeProgress, ProcedureStatus

CHILD_REPORT_SIGNAL = "child_report"
#: The signal a parent procedure sends its running child when the parent is aborted
#: (:meth:`workflows.kit.procedure.ProcedureWorkflow.parent_abort`).
PARENT_ABORT_SIGNAL = "parent_abort"
#: The signals a parent procedure sends its running children when the parent is paused / resumed
#: (a campaign, issue 38: :meth:`workflows.kit.procedure.ProcedureWorkflow.parent_pause`).
PARENT_PAUSE_SIGNAL = "parent_pause"
PARENT_RESUME_SIGNAL = "parent_resume"


class ChildReport(BaseModel):
    """What a child tells its parent (see the module doc). ``workflow_id`` the child's ID;
    ``procedure`` its procedure name (a node run: the parent's); ``seq`` the sender's count;
    ``phase``, ``waiting_for``, ``since``, ``deadline``: its summary; ``gates`` its waiting gates
    (each with ``workflow_id`` set to the child's); ``gate_history`` its gate records; ``error``
    why it failed; ``node`` a node run's progress; ``detail`` the procedure's own data."""

    workflow_id: str
    procedure: str = ""
    seq: int = 0
    phase: str = ""
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    gates: list[Gate] = Field(default_factory=list)
    gate_history: list[GateRecord] = Field(default_factory=list)
    error: str | None = None
    node: NodeProgress | None = None
    detail: dict[str, Any] | None = None
    #: What the child says stays changed (its status's ``left_changed``, set as it fails or stops).
    left_changed: list[ChangedItem] = Field(default_factory=list)

    def same_as(self, other: ChildReport | None) -> bool:
        """Equal but for ``seq``."""
        return other is not None and self.model_copy(update={"seq": 0}) == other.model_copy(update={"seq": 0})

    def milestone(self) -> tuple[Any, ...]:
        """What a parent of many children must hold in its own state: the waiting gates (ID and
        state: it shows their commands), the error and what stays changed; not the phase, the
        step, the wait or the detail (progress, which its status reads live from the child)."""
        return ([(g.id, str(g.state)) for g in self.gates], self.error, [i.model_dump() for i in self.left_changed])


def summary(status: ProcedureStatus, *, detail: dict[str, Any] | None = None) -> ChildReport:
    """A procedure's report from its status: phase, wait, waiting gates (owned by it), gate
    records, error."""
    wid = status.workflow_id
    gates = [g.model_copy(update={"workflow_id": g.workflow_id or wid}) for g in status.gates if g.state == GateState.WAITING]
    return ChildReport(workflow_id=wid, procedure=status.procedure, phase=str(status.phase), waiting_for=status.waiting_for,
                       since=status.since, deadline=status.deadline, gates=gates, gate_history=list(status.gate_history),
                       error=status.error, detail=detail, left_changed=list(status.left_changed))


class Reporter:
    """Sends :class:`ChildReport` s to ``parent_id`` (None: sends nothing). ``progress`` False:
    only reports whose :meth:`ChildReport.milestone` differs from the last one sent (at first:
    no gate, no error, nothing changed), so a parent of many children (a campaign) holds a signal
    per gate opened or closed, error and change left, not one per step."""

    def __init__(self, parent_id: str | None, *, progress: bool = True) -> None:
        self.parent_id = parent_id
        self.progress = progress
        self.last: ChildReport | None = None
        self.seq = 0
        self._tasks: list[asyncio.Future[None]] = []

    def send(self, report: ChildReport) -> bool:
        """Signal the parent unless ``report`` says what the last one said; True when sent."""
        if self.parent_id is None or report.same_as(self.last):
            return False
        if not self.progress and report.milestone() == (self.last.milestone() if self.last is not None else ([], None, [])):
            return False
        self.seq += 1
        self.last = report.model_copy(update={"seq": self.seq})
        self._tasks.append(asyncio.ensure_future(self._send(self.last)))
        return True

    async def _send(self, report: ChildReport) -> None:
        try:
            await workflow.get_external_workflow_handle(self.parent_id or "").signal(CHILD_REPORT_SIGNAL, report)
        except Exception as err:  # noqa: BLE001 - advisory: a gone parent must not fail the child
            workflow.logger.warning("report to %s failed: %s", self.parent_id, err)

    async def settle(self) -> None:
        """Wait until every report went out (call before the child returns)."""
        if self._tasks:
            await asyncio.gather(*self._tasks)


class ReportInbox:
    """The parent's side: the latest report of each child (by ``workflow_id``; a report with a
    lower ``seq`` than the one kept is older and dropped). ``accept(report)`` decides whether a
    report counts at all (e.g. only the current child of a phase) and defaults to every child."""

    def __init__(self, accept: Callable[[ChildReport], bool] = lambda r: True) -> None:
        self.accept = accept
        self.latest: dict[str, ChildReport] = {}

    def receive(self, report: ChildReport) -> bool:
        """Keep ``report`` when it is accepted and newer than the one kept; True when kept."""
        if not self.accept(report):
            return False
        kept = self.latest.get(report.workflow_id)
        if kept is not None and report.seq and kept.seq >= report.seq:
            return False
        self.latest[report.workflow_id] = report
        return True

    def gates(self) -> list[Gate]:
        """Every child's waiting gates (owned by the child: ``workflow_id`` set)."""
        return [g for r in self.latest.values() for g in r.gates if g.state == GateState.WAITING]
