"""Stored histories (tests/workflows/histories/*.json) replay against the current workflows.

Regenerate after a deliberate, patched change with
``LOCKKEEPER_WRITE_HISTORY=1 pytest tests/workflows -k full_rollout`` (it records the parent
run and one node run of the full two-pool rollout) and keep the old files as well.
"""

from __future__ import annotations

import pytest
from replay import HISTORIES, replay_history_file

#: file -> the workflow ID it was recorded under (children and owners are named after it).
HISTORY_IDS = {
    "machineconfig_rollout_full.json": "rollout-full",
    "node_rollout_full.json": "rollout-full/node/worker-0/1",
}


@pytest.mark.parametrize("name", sorted(HISTORY_IDS))
async def test_stored_history_replays(name):
    path = HISTORIES / name
    assert path.exists(), f"missing stored history {path}"
    result = await replay_history_file(path, HISTORY_IDS[name])
    assert result.replay_failure is None
    assert result.history.events, "the stored history has no events"
