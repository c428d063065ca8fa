"""``lockkeeper history`` rows from stored rollout histories (tests/workflows/histories): a node
run's completion is a node row whether its ID is ``{rollout}/node/{node}/{attempt}`` or its node's
lease ID (patch ``node-run-is-node-lease``); a lease workflow's completion is no row."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from lockkeeper.cli.history import rows_from_events

HISTORIES = Path(__file__).parents[1] / "workflows" / "histories"


@pytest.mark.parametrize(
    ("name", "node_ids"),
    [
        ("machineconfig_rollout_window.json", [f"rollout-window/node/worker-{i}/1" for i in range(3)]),
        ("machineconfig_rollout_window_run_lease.json", [f"lease/window-history/node:worker-{i}" for i in range(3)]),
        ("machineconfig_rollout_window_probe_activity.json", [f"lease/window-history/node:worker-{i}" for i in range(3)]),
    ],
)
def test_node_runs_are_node_rows_and_leases_are_none(name: str, node_ids: list[str]) -> None:
    history = WorkflowHistory.from_json("rollout-window", (HISTORIES / name).read_text())
    rows, result = rows_from_events(history.events)
    nodes = [r for r in rows if r["kind"] == "node"]
    assert sorted(r["what"] for r in nodes) == node_ids, rows
    assert all("outcome=done" in r["detail"] for r in nodes), nodes
    # The pool's lease workflow completed in both histories: no row of its own.
    assert not [r for r in rows if r["what"].startswith("lease/") and r["kind"] != "node"], rows
    assert result is not None and result["outcome"] == "completed"
