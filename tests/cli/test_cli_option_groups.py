"""Issue 36: the flags the start commands share are declared once, as option groups
(``lockkeeper.cli.start.groups``, ``.options``) that the registration puts into each command
naming them; the commands only say the words that differ."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from lockkeeper.cli.start.groups import OptionGroup, flags, with_option_groups

runner = CliRunner()
START = Path(__file__).resolve().parents[2] / "lockkeeper" / "cli" / "start"

#: Flags of the shared groups: declared in options.py / shared.py only, never in a procedure's module.
SHARED_FLAGS = ("--dry-run", "--cluster", "--id", "--wait", "--identity", "--output", "--four-eyes", "--allowed-approver",
                "--alert-gate")


@pytest.mark.parametrize("module", sorted(p.name for p in START.glob("*.py") if p.name not in ("options.py", "shared.py")))
def test_no_start_command_declares_a_shared_flag_itself(module: str) -> None:
    text = (START / module).read_text()
    declared = [f for f in SHARED_FLAGS if re.search(rf'"{f}"', text)]
    assert not declared, f"{module} declares {declared}: take the option group from lockkeeper.cli.start.options"


def test_a_group_parameter_becomes_its_flags_and_the_command_gets_what_the_group_builds() -> None:
    got: list[Any] = []
    pair = OptionGroup(flags(("left", int, typer.Option(1, "--left", help="The left one.")),
                             ("right", int, typer.Option(2, "--right", help="The right one."))),
                       lambda left, right: (left, right))

    def command(name: str = typer.Option("x", "--name"), both: Any = pair, last: bool = typer.Option(False, "--last")) -> None:
        got.append((name, both, last))

    app = typer.Typer()
    app.command()(with_option_groups(command))
    res = runner.invoke(app, ["--name", "n", "--right", "7", "--last"])
    assert res.exit_code == 0, res.output
    assert got == [("n", (1, 7), True)]
    help_text = runner.invoke(app, ["--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}).output
    assert "--left" in help_text and "The right one." in help_text and "--both" not in help_text


def test_a_group_flag_that_shares_a_parameters_name_is_refused() -> None:
    group = OptionGroup(flags(("name", str, typer.Option("", "--name"))), lambda name: name)

    def command(name: str = typer.Option("x", "--name"), g: Any = group) -> None:
        pass

    with pytest.raises(ValueError, match="shares its name"):
        with_option_groups(command)


def test_a_command_without_groups_is_returned_as_it_is() -> None:
    def command(name: str = typer.Option("x", "--name")) -> None:
        pass

    assert with_option_groups(command) is command
