"""Issue 40: ``--window SPEC`` on the node procedures' start commands: a bad spec exits 2 before
anything connects (one clear message naming it), a good one reaches the server, the drain
refuses it, and the plan's lines of a dry run. No server: a dead address shows that refusals
come first."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from tests.cli.test_order_cli import START, _args
from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli.start.shared import window_plan_lines, windows
from lockkeeper.devserver import free_port

runner = CliRunner()
VXLAN = ["start", "vxlan-port-change", "--port", "4889", "--image", "img:1", "--master", "m1=https://m1:8443",
         "--exec-via", "debug-pod"]


@pytest.fixture(scope="module")
def dead() -> list[str]:
    return ["--address", f"127.0.0.1:{free_port()}"]


def _start(name: str, tmp_path: Path) -> list[str]:
    return VXLAN if name == "vxlan-port-change" else _args(name, tmp_path)


@pytest.mark.parametrize("name", [*START, "vxlan-port-change"])
@pytest.mark.parametrize(("spec", "words"), [
    ("Mon-Fri 22:00-06:00 Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
    ("weekends", "window 'weekends': expected DAYS"),
    ("Mon 25:00-06:00 UTC", "not a time of day"),
])
def test_a_bad_window_exits_2_before_connecting(dead: list[str], tmp_path: Path, name: str, spec: str, words: str) -> None:
    res = runner.invoke(cli.app, [*dead, *_start(name, tmp_path), "--window", "Sat 00:00-24:00 UTC", "--window", spec])
    assert res.exit_code == 2, res.output
    assert words in " ".join(res.output.split()), res.output


@pytest.mark.parametrize("name", list(START))
def test_good_windows_pass_validation_and_reach_the_server(dead: list[str], tmp_path: Path, name: str) -> None:
    res = runner.invoke(cli.app, [*dead, *_args(name, tmp_path), "--window", "Mon-Fri 22:00-06:00 Europe/Berlin",
                                  "--window", "Sat 00:00-24:00 UTC", "--dry-run"])
    assert res.exit_code == 3 and "cannot connect to Temporal" in res.output, res.output


def test_the_drain_refuses_a_window(dead: list[str]) -> None:
    res = runner.invoke(cli.app, [*dead, "start", "drain", "--node", "n1", "--window", "Sat 00:00-24:00 UTC"])
    assert res.exit_code == 2, res.output
    assert "takes no maintenance window" in " ".join(res.output.split()), res.output


def test_the_flag_is_normalised_and_the_plan_lists_windows_and_the_next_opening() -> None:
    assert windows(["Sat  00:00-24:00   UTC"]) == ["Sat 00:00-24:00 UTC"]
    specs = ["Mon-Fri 22:00-06:00 Europe/Berlin", "Sat 00:00-24:00 UTC"]
    sunday = datetime(2026, 11, 29, 12, tzinfo=timezone.utc)
    assert window_plan_lines(specs, sunday) == [
        "window: Mon-Fri 22:00-06:00 Europe/Berlin", "window: Sat 00:00-24:00 UTC",
        "windows: closed now; no node starts before the next opening at 2026-11-30T21:00:00+00:00",
    ]
    saturday = datetime(2026, 11, 28, 12, tzinfo=timezone.utc)
    assert window_plan_lines(specs, saturday)[-1] == "windows: open now, until 2026-11-29T00:00:00+00:00"
    assert window_plan_lines([], sunday) == []


def test_every_window_procedure_offers_the_flag() -> None:
    for name in [*START, "vxlan-port-change", "drain"]:
        res = runner.invoke(cli.app, ["start", name, "--help"])
        assert res.exit_code == 0 and "--window" in res.output, (name, res.output)
