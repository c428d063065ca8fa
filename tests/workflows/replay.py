"""Replay stored workflow histories against the current workflow code.

A history recorded from a real run (JSON, ``WorkflowHistory.to_json()``) must replay without a
nondeterminism error after any change to workflows/; a change that alters the commands of an
existing history needs a ``workflow.patched`` guard (DESIGN.md, durability rules).
"""

from __future__ import annotations

from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, WorkflowReplayResult

from workflows import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"


async def replay_history_file(path: Path, workflow_id: str) -> WorkflowReplayResult:
    """Replay the history in ``path`` (recorded for ``workflow_id``, which the workflows use to
    name children and owners) with every lockkeeper workflow registered.

    Raises the replay failure (e.g. ``temporalio.workflow.NondeterminismError``) if the current
    code does not produce the recorded commands.
    """
    history = WorkflowHistory.from_json(workflow_id, path.read_text())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    return await replayer.replay_workflow(history, raise_on_replay_failure=True)
