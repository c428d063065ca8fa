"""``lockkeeper deployment status`` and ``lockkeeper deployment promote BUILD_ID``: the worker
deployment's builds, and which one new procedures start on (:mod:`workers.versioning`).

Every lockkeeper worker is one build (``LOCKKEEPER_BUILD_ID``, default the package version) of
one deployment (``LOCKKEEPER_DEPLOYMENT_NAME``, default ``lockkeeper``); every procedure runs to
its end on the build it started on. ``status`` shows, per build: current / ramping / draining /
drained / inactive, the task queues it polls, its live workers, and how many runs are still open
on it and pinned to it (visibility; a build with none pinned and no longer current can be
stopped). ``promote`` makes a build current: new procedures start there, the open ones stay
where they are; a rollback is a promotion of the older build.

Exit codes: 0 done (or already current); 3 no such deployment or build, no worker of the build
polls, or the build misses a task queue the current build serves (``--force`` skips the last
two), or the server does not run worker versioning.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    CliError,
    IdentityOpt,
    OutputOpt,
    check_output,
    cli_settings,
    identity_of,
    run,
)

deployment_app = typer.Typer(
    help="The worker deployment: its builds, and which one new procedures start on.", no_args_is_help=True
)

DeploymentOpt = typer.Option(
    None, "--deployment", help="Worker deployment name (LOCKKEEPER_DEPLOYMENT_NAME, default lockkeeper)."
)


def _versioning_error(exc: Any) -> CliError | None:
    """A server that does not run worker versioning, as a one-line error (exit 3)."""
    from workers.versioning import refuses_versioning

    if refuses_versioning(exc):
        return CliError(
            f"the server does not run worker versioning ({exc.message}); workers there run with "
            "LOCKKEEPER_VERSIONING=false and have no builds to show or promote",
            EXIT_NOT_FOUND,
        )
    return None


def status(ctx: typer.Context, deployment: str | None = DeploymentOpt, output: str = OutputOpt) -> None:
    """The deployment's builds: current and ramping, task queues, live workers, open and pinned runs."""
    output = check_output(output)
    settings = cli_settings(ctx)
    name = deployment or settings.deployment_name

    async def body() -> int:
        from temporalio.service import RPCError

        from lockkeeper import output as out
        from lockkeeper.cli.common import connect
        from workers.versioning import deployment_state

        client = await connect(settings)
        try:
            state = await deployment_state(client, name)
        except RPCError as exc:
            raise (_versioning_error(exc) or exc) from None
        if state is None:
            raise CliError(
                f"no worker deployment {name!r} in namespace {settings.temporal_namespace!r}: it appears when a "
                "versioned worker of it first polls (`lockkeeper worker`)",
                EXIT_NOT_FOUND,
            )
        if output != "table":
            print(out.dump(state.to_data(), output))
            return EXIT_OK
        console = out.console()
        ramp = f", ramping {state.ramping} ({state.ramping_percentage:g}%)" if state.ramping else ""
        console.print(f"deployment {state.name}: current build {state.current or '(none: unversioned workers)'}{ramp}")
        console.print(status_table(state))
        return EXIT_OK

    run(body())


def status_table(state: Any) -> Any:
    """A rich table of a :class:`workers.versioning.DeploymentState`: one row per build."""
    from rich.table import Table

    t = Table()
    for col in ("build", "status", "running", "pinned", "workers", "task queues", "created"):
        t.add_column(col, overflow="fold")
    for v in state.versions:
        t.add_row(
            v.build_id,
            v.status,
            "?" if v.running is None else str(v.running),
            "?" if v.pinned is None else str(v.pinned),
            "\n".join(v.workers) or "-",
            ", ".join(v.task_queues) or "-",
            v.created.isoformat(timespec="seconds") if v.created else "-",
        )
    return t


def promote(
    ctx: typer.Context,
    build_id: str = typer.Argument(..., metavar="BUILD_ID"),
    deployment: str | None = DeploymentOpt,
    force: bool = typer.Option(
        False, "--force",
        help="Promote even if no worker of the build polls, or it misses a task queue the current build serves.",
    ),
    identity: str | None = IdentityOpt,
) -> None:
    """Make BUILD_ID the current build: new procedures start on it, running ones stay on theirs."""
    settings = cli_settings(ctx)
    name = deployment or settings.deployment_name
    who = identity_of(identity)

    async def body() -> int:
        from temporalio.service import RPCError

        from lockkeeper.cli.common import connect, err
        from workers.versioning import PromoteRefused
        from workers.versioning import promote as promote_build

        client = await connect(settings, identity=who)
        try:
            before = await promote_build(client, name, build_id, identity=who, force=force)
        except PromoteRefused as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from None
        except RPCError as exc:
            raise (_versioning_error(exc) or exc) from None
        if before == build_id:
            err(f"build {build_id} is already the current version of deployment {name}")
        else:
            err(
                f"build {build_id} is now the current version of deployment {name} (before: {before or 'none'}); "
                f"new procedures start on it. Runs pinned to {before or 'older builds'} finish there: keep those "
                "workers until `lockkeeper deployment status` shows none pinned"
            )
        return EXIT_OK

    run(body())


def register(app: typer.Typer) -> None:
    """Add ``deployment status`` and ``deployment promote``."""
    deployment_app.command("status")(status)
    deployment_app.command("promote")(promote)
    app.add_typer(deployment_app, name="deployment")
