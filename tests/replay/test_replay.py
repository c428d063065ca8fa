"""Every stored history of the current build (tests/support/histories/, see replay.py) replays
against the current workflows. Record them with ``LOCKKEEPER_WRITE_HISTORY=1 pytest
<the tests that call replay.record>`` after a deliberate change of a build."""

from __future__ import annotations

import pytest
from tests.support.replay import HISTORIES, load, replay_history_file

STORED = sorted(p.name for p in HISTORIES.glob("*.json"))


def test_every_procedure_has_a_stored_history() -> None:
    from workflows import PROCEDURES

    types = {load(HISTORIES / n).events[0].workflow_execution_started_event_attributes.workflow_type.name for n in STORED}
    missing = [s.workflow_type for s in PROCEDURES if s.workflow_type not in types]
    assert not missing, f"no stored history names these workflows: {missing}"


@pytest.mark.parametrize("name", STORED)
async def test_stored_history_replays(name: str) -> None:
    result = await replay_history_file(HISTORIES / name)
    assert result.replay_failure is None
    assert result.history.events, "the stored history has no events"
