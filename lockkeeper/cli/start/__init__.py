"""``lockkeeper start <procedure>``: one subcommand per procedure, read from ``workflows.PROCEDURES``.

Each procedure's spec names its start command (``ProcedureSpec.start``, a typer command in a
module of this package); every subcommand gets ``--queue``, ``-f`` and ``--set`` (added by
:func:`.shared.with_common_options`) and takes the flags it shares with others as option groups
(:mod:`.groups`, :mod:`.options`): ``--id``, ``--cluster``, ``--dry-run``, ``--wait``, ``--identity``
and ``-o table|json|yaml`` (:func:`.options.start_options`), approvals, node order and windows, the
masters' SSH; a command with an ``alerts`` parameter (the node procedures) gets the ``--alert-*``
flags (:func:`.shared.with_alert_gate_options`). It prints the workflow ID; :mod:`.shared` does the starting
(:func:`lockkeeper.starter.start_procedure`: no worker on the task queue → exit 3, unless
``--queue``). A procedure without a start command of its own is not offered here.

The subcommands are built when ``lockkeeper start`` is used (:class:`StartGroup`): reading the
registry loads the workflow code, which the other commands (``--help``, ``status``) do not need.
"""

from __future__ import annotations

from typing import Any

import click
import typer
from typer.core import TyperGroup


def register(start_app: typer.Typer) -> None:
    """Add every procedure's ``start`` subcommand to ``start_app``, in the order of
    ``workflows.PROCEDURES``."""
    from lockkeeper.cli.start.groups import with_option_groups
    from lockkeeper.cli.start.shared import takes_alert_gate, with_alert_gate_options, with_common_options
    from workflows.kit.spec import resolve
    from workflows.registry import PROCEDURES

    for spec in PROCEDURES:
        if spec.start is not None:
            command = with_option_groups(resolve(spec.start))  # the groups its signature names (.options)
            if takes_alert_gate(command):  # the node procedures: the --alert-* option group
                command = with_alert_gate_options(command)
            start_app.command(spec.name)(with_common_options(command))  # type: ignore[arg-type]


class StartGroup(TyperGroup):
    """``lockkeeper start``: its subcommands are added from the registry on first use."""

    _loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        tmp = typer.Typer()
        register(tmp)
        for name, cmd in typer.main.get_group(tmp).commands.items():
            self.add_command(cmd, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Any:
        self._load()
        return super().get_command(ctx, cmd_name)
