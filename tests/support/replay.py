"""Stored workflow histories of the current build, and their replay.

lockkeeper runs under worker deployment versioning (workers/versioning.py): a run stays on the
build it started on, so the histories a build must replay are its own. Each procedure records one
or two runs of the current code into ``tests/support/histories/<name>.json`` (a JSON object:
``{"workflow_id": ..., "history": <WorkflowHistory.to_json()>}``), and test_replay.py replays
every file there against the code, so a change that alters the commands of a run of this build
fails until it is guarded (``workflow.patched``, a fix inside the build) or recorded again with
a new build. Record with ``LOCKKEEPER_WRITE_HISTORY=1 pytest <the recording tests>`` (each test
that records names its file; :func:`record` overwrites).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, WorkflowReplayResult

from workflows import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"
_ROOT = Path(__file__).resolve().parent.parent.parent
#: An installed package's folder wherever the recording machine kept it (a venv, a system path).
_SITE = re.compile(r"(?<![\w.-])/[^\s\"']*?/(site-packages|dist-packages)/")


def recording() -> bool:
    """Whether this test run records histories (``LOCKKEEPER_WRITE_HISTORY`` set)."""
    return bool(os.environ.get("LOCKKEEPER_WRITE_HISTORY"))


async def record(handle: WorkflowHandle, name: str) -> None:
    """Store ``handle``'s history as ``histories/<name>.json`` when :func:`recording`."""
    if recording():
        await store(await handle.fetch_history(), name)


def machine_neutral(text: str) -> str:
    """``text`` (a recorded history's JSON) without the recording machine's paths: the checkout's
    root becomes relative (``tests/support/...``) and an installed package's folder starts at
    ``site-packages/``. Only failures' stack traces carry such paths, and replay reads none of
    them."""
    return _SITE.sub(r"\1/", text.replace(f"{_ROOT}/", ""))


async def store(history: WorkflowHistory, name: str) -> None:
    """Write ``history`` as ``histories/<name>.json`` (with its workflow ID), machine-neutral
    (:func:`machine_neutral`)."""
    HISTORIES.mkdir(exist_ok=True)
    text = json.dumps({"workflow_id": history.workflow_id, "history": json.loads(history.to_json())}, indent=1)
    (HISTORIES / f"{name}.json").write_text(machine_neutral(text) + "\n")


def load(path: Path) -> WorkflowHistory:
    """The stored history in ``path`` (see the module doc)."""
    data = json.loads(path.read_text())
    return WorkflowHistory.from_json(data["workflow_id"], data["history"])


async def replay(history: WorkflowHistory) -> WorkflowReplayResult:
    """Replay ``history`` with every lockkeeper workflow registered; raises the replay failure
    (e.g. ``temporalio.workflow.NondeterminismError``) if the code does not produce its commands."""
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    return await replayer.replay_workflow(history, raise_on_replay_failure=True)


async def replay_history_file(path: Path) -> WorkflowReplayResult:
    """:func:`replay` of the stored history in ``path``."""
    return await replay(load(path))
