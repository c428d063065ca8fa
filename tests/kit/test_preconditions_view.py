"""``status`` shows the preconditions the kit checked: every line while a gate waits (the plan
gate, issue 39) or when one was not ok, one summary line otherwise; the rollout's own view and
the generic view alike."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.preflight.models import (
    InputCheck,
    NamesExist,
    PreconditionResult,
    PreconditionState,
)
from lockkeeper import panels
from tests.cli.test_starter_panels import render
from workflows import PROCEDURES
from workflows.kit.models import Gate, GateKind, GateState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _results(*, not_run: bool = False) -> list[PreconditionResult]:
    pools = InputCheck(about="MachineConfigPools (worker)", ok=True, detail="worker → rendered-worker-2 (3 node(s))",
                       why="--pool and --target")
    names = NamesExist(names=["node02"], why="--node-order puts them first")
    return [
        PreconditionResult(precondition=pools, state=PreconditionState.OK, detail="worker → rendered-worker-2 (3 node(s))"),
        PreconditionResult(precondition=names, state=PreconditionState.NOT_RUN if not_run else PreconditionState.OK,
                           detail="" if not_run else "node02 found", why_not_run="API unreachable" if not_run else None),
    ]


def _status(spec_name: str, *, gate_state: GateState | None, not_run: bool = False):
    spec = next(s for s in PROCEDURES if s.name == spec_name)
    gates = [Gate(id="worker/canary", kind=GateKind.POOL, state=gate_state, opened_at=T0)] if gate_state else []
    return spec, spec.status_model(workflow_id="run-1", preconditions=_results(not_run=not_run), gates=gates)


def test_a_waiting_gate_lists_every_check_with_its_result() -> None:
    for name in ("machineconfig-rollout", "drain"):
        spec, st = _status(name, gate_state=GateState.WAITING)
        text = render(panels.status_panel(spec.name, st))
        assert "Preconditions (2 ok), checked before the first write:" in text, (name, text)
        assert "MachineConfigPools (worker): worker → rendered-worker-2 (3 node(s))" in text, (name, text)
        assert "node02 found (needed: --node-order puts them first)" in text, (name, text)


def test_without_a_waiting_gate_one_summary_line_unless_a_check_was_not_ok() -> None:
    for name in ("machineconfig-rollout", "drain"):
        spec, st = _status(name, gate_state=GateState.APPROVED)
        text = render(panels.status_panel(spec.name, st))
        assert "preconditions: 2 ok (checked before the first write)" in text, (name, text)
        assert "node02 found" not in text, (name, text)
        spec, st = _status(name, gate_state=None, not_run=True)
        text = render(panels.status_panel(spec.name, st))
        assert "Preconditions (1 ok, 1 not-run)" in text, (name, text)
        assert "not run: API unreachable" in text, (name, text)
