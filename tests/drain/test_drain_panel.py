"""The drain's own panel: its node, the blocked-drain report and the decision command."""

from __future__ import annotations

from datetime import UTC, datetime

from lockkeeper import panels
from tests.cli.test_starter_panels import render
from workflows import PROCEDURES


def test_drain_panel_shows_the_node_and_its_blocked_report() -> None:
    from workflows.kit.models import Gate, GateKind, GateState, NodePhase, NodeStatus
    from tests.support.wf_fakes import r2_block_report

    spec = next(s for s in PROCEDURES if s.name == "drain")
    gate = Gate(id="drain/worker-1", kind=GateKind.DRAIN, state=GateState.WAITING,
                opened_at=datetime(2026, 1, 1, tzinfo=UTC))
    node = NodeStatus(name="worker-1", pool="", phase=NodePhase.BLOCKED, step="drain",
                      drain_report=r2_block_report("worker-1"), decision_gate=gate)
    text = render(panels.status_panel(spec.name, spec.status_model(workflow_id="drain-1", node=node)))
    for expected in ("drain-1", "worker-1", "blocked", "Blocked drain on node worker-1",
                     "lockkeeper decide drain-1 worker-1"):
        assert expected in text, (expected, text)
