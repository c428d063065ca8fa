"""``lockkeeper sim`` (the cluster simulator's own CLI, passed through) and ``lockkeeper demo``
(R1 repaired end to end on a simulated cluster; :mod:`lockkeeper.demo`)."""

from __future__ import annotations

import typer

from lockkeeper.cli.common import EXIT_NOT_FOUND, EXIT_OK, err


def demo(
    interactive: bool = typer.Option(False, "--interactive", help="You approve the gates (commands are printed)."),
    state_dir: str | None = typer.Option(None, "--state-dir", help="Where the Temporal SQLite file and kubeconfig go."),
    time_scale: float = typer.Option(0.02, "--time-scale", help="Wall seconds per simulated second."),
    scenario: str = typer.Option("r1-ovn-interrupted", "--scenario"),
    timeout: float = typer.Option(600.0, "--timeout", help="Give up after this many seconds."),
) -> None:
    """Repair R1 (interrupted SDN→OVN migration) on a simulated cluster, end to end."""
    from lockkeeper.demo import run_demo

    if time_scale <= 0:
        raise typer.BadParameter("must be > 0", param_hint="'--time-scale'")
    raise typer.Exit(
        run_demo(interactive=interactive, state_dir=state_dir, time_scale=time_scale, scenario=scenario, timeout=timeout)
    )


def sim(ctx: typer.Context) -> None:
    """The cluster simulator (clustersim): serve a scenario, inspect it. `lockkeeper sim --help`."""
    try:
        from clustersim.cli import sim_app
    except ImportError as exc:
        err(f"error: the cluster simulator is not available ({exc})")
        raise typer.Exit(EXIT_NOT_FOUND) from None
    import click

    cmd = typer.main.get_command(sim_app)
    try:
        code = cmd.main(args=list(ctx.args), prog_name="lockkeeper sim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except click.exceptions.Abort:
        code = 130
    raise typer.Exit(code if isinstance(code, int) else EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add ``demo`` and ``sim`` (whose arguments go to the simulator's CLI untouched)."""
    app.command("demo")(demo)
    app.command(
        "sim",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
    )(sim)
