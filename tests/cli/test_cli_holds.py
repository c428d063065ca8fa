"""``lockkeeper hold`` / ``release`` (issue 40): the arguments they send, the durations they
read, and how ``status`` and ``history`` show holds. No Temporal server."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli import decisions, operate
from lockkeeper.cli.history import rows_from_state
from workflows.kit.models import HoldRecord, NodeHold, NodeStatus

runner = CliRunner()


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, Any]]:
    calls: list[tuple[str, str, Any]] = []

    async def fake_update(settings: Any, wid: str, name: str, arg: Any, result_type: type, output: str, who: str) -> int:
        calls.append((wid, name, arg))
        return 0

    async def is_node_procedure(settings: Any, wid: str, update: str) -> None:
        return None

    monkeypatch.setattr(decisions, "update", fake_update)
    monkeypatch.setattr(operate, "require_node_procedure", is_node_procedure)
    return calls


def render(renderable: Any) -> str:
    console = Console(width=220, file=io.StringIO())
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_hold_and_release_send_their_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _capture(monkeypatch)
    argv = [["hold", "mcr-1", "worker-3", "--for", "2h", "-m", "firmware check", "--identity", "bob"],
            ["hold", "mcr-1", "worker-4", "--until", "2026-11-29T14:00:00Z", "-m", "app team", "--identity", "bob"],
            ["hold", "mcr-1", "worker-5", "-m", "until told", "--identity", "bob"],
            ["release", "mcr-1", "worker-3", "-m", "done", "--identity", "carol"]]
    for a in argv:
        res = runner.invoke(cli.app, a)
        assert res.exit_code == 0, res.output
    (_, n1, a1), (_, n2, a2), (_, n3, a3), (_, n4, a4) = calls
    assert (n1, a1.node, a1.identity, a1.reason, a1.for_seconds, a1.until) == ("hold_node", "worker-3", "bob", "firmware check", 7200, None)
    assert (n2, a2.until, a2.for_seconds) == ("hold_node", datetime(2026, 11, 29, 14, tzinfo=UTC), None)
    assert (a3.until, a3.for_seconds) == (None, None)  # until released
    assert (n4, a4.node, a4.identity, a4.reason) == ("release_node", "worker-3", "carol", "done")


def test_both_flags_and_an_empty_reason_go_to_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    # The workflow's validator refuses them with its own words (tests/kit/test_kit_holds.py).
    calls = _capture(monkeypatch)
    res = runner.invoke(cli.app, ["hold", "mcr-1", "w3", "--for", "1d", "--until", "2026-11-29T14:00", "--identity", "bob"])
    assert res.exit_code == 0, res.output
    arg = calls[0][2]
    assert arg.for_seconds == 86400 and arg.until == datetime(2026, 11, 29, 14, tzinfo=UTC) and arg.reason == ""


@pytest.mark.parametrize(("argv", "hint"), [
    (["--for", "soon"], "--for"), (["--for", "0m"], "--for"), (["--for", "-5m"], "--for"), (["--until", "tomorrow"], "--until"),
])
def test_unreadable_durations_and_times_are_usage_errors(monkeypatch: pytest.MonkeyPatch, argv: list[str], hint: str) -> None:
    calls = _capture(monkeypatch)
    res = runner.invoke(cli.app, ["hold", "mcr-1", "w3", "-m", "x", *argv])
    assert res.exit_code == 2 and hint in res.output and calls == []


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("90", 90), ("45s", 45)])
def test_durations(text: str, seconds: float) -> None:
    assert operate.parse_duration(text) == seconds


def test_help_lists_hold_and_release() -> None:
    res = runner.invoke(cli.app, ["--help"])
    assert "hold" in res.output and "release" in res.output
    res = runner.invoke(cli.app, ["hold", "--help"])
    assert "--until" in res.output and "--for" in res.output


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOLDS = {"w3": NodeHold(node="w3", by="bob", reason="firmware check", since=NOW - timedelta(minutes=5), until=NOW + timedelta(hours=2)),
         "w4": NodeHold(node="w4", by="alice", reason="app team", since=NOW - timedelta(minutes=1))}
HISTORY = [HoldRecord(node="w3", action="held", by="bob", at=NOW - timedelta(minutes=5), reason="firmware check", until=NOW + timedelta(hours=2)),
           HoldRecord(node="w4", action="held", by="alice", at=NOW - timedelta(minutes=1), reason="app team"),
           HoldRecord(node="w2", action="expired", by="timer", at=NOW, reason="held by bob until 2026-11-29T12:00:00+00:00")]


def test_the_rollout_status_shows_who_holds_which_node_why_and_until_when() -> None:
    from lockkeeper.output import status_view
    from workflows.machineconfig.models import RolloutStatus

    st = RolloutStatus(workflow_id="mcr-1", phase="running", holds=HOLDS, hold_history=HISTORY,
                       nodes={n: NodeStatus(name=n, pool="worker") for n in ("w2", "w3", "w4")},
                       waiting_for="hold on w4 until released (by alice: app team)")
    text = render(status_view(st, NOW))
    assert "waiting for hold on w4 until released (by alice: app team)" in text
    assert "Holds" in text and "firmware check" in text and "2026-11-29 14:00:00 UTC (in 2h" in text
    row = next(ln for ln in text.splitlines() if "w4" in ln and "alice" in ln)
    assert "until released" in row
    assert any("w2" in ln and "expired" in ln and "timer" in ln for ln in text.splitlines())
    assert any("w4" in ln and "pending" in ln and "held until released" in ln for ln in text.splitlines())  # the node's row


def test_the_generic_status_panel_shows_holds() -> None:
    from lockkeeper import panels
    from workflows import PROCEDURES

    spec = next(s for s in PROCEDURES if s.name == "node-upgrade")
    st = spec.status_model(workflow_id="nu-1", holds=HOLDS, hold_history=HISTORY)
    text = render(panels.status_panel(spec.name, st))
    assert "Holds" in text and "until released" in text and "firmware check" in text
    assert "hold_history" not in text  # shown as the table, not as raw fields


def test_history_rows_of_holds() -> None:
    state = {"hold_history": [r.model_dump(mode="json") for r in HISTORY]}
    rows = rows_from_state(state)
    assert [(r["kind"], r["what"], r["by"]) for r in rows] == [
        ("hold", "hold on w3 held", "bob"), ("hold", "hold on w4 held", "alice"), ("hold", "hold on w2 expired", "timer")]
    assert "reason=firmware check" in rows[0]["detail"] and "until=" in rows[0]["detail"]
