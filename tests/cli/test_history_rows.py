"""``lockkeeper history`` rows from a stored rollout history (tests/support/histories, see
tests/support/replay.py): a node run's completion is a node row (its ID is its node's lease
ID in a large plan); a lease workflow's completion is no row."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory

from lockkeeper.cli.history import rows_from_events

HISTORY = Path(__file__).parents[1] / "support" / "histories" / "MachineConfigRolloutWorkflow.window.json"


def test_node_runs_are_node_rows_and_leases_are_none() -> None:
    data = json.loads(HISTORY.read_text())
    history = WorkflowHistory.from_json(data["workflow_id"], data["history"])
    node_ids = [f"lease/window-history/node:worker-{i}" for i in range(3)]
    rows, result = rows_from_events(history.events)
    nodes = [r for r in rows if r["kind"] == "node"]
    assert sorted(r["what"] for r in nodes) == node_ids, rows
    assert all("outcome=done" in r["detail"] for r in nodes), nodes
    # The pool's lease workflow completed: no row of its own.
    assert not [r for r in rows if r["what"].startswith("lease/") and r["kind"] != "node"], rows
    assert result is not None and result["outcome"] == "completed"
