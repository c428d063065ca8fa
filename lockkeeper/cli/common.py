"""What every ``lockkeeper`` command shares: exit codes, errors, options, settings, the
connection, running a command body, and sending an Update.

Conventions (as ``temporal`` and ``kubectl``): data on stdout (``-o table|json|yaml``), messages
for people on stderr, heavy imports inside functions so ``--help`` is fast (this module imports
only typer at load time).

Exit codes: 0 ok; 1 the procedure failed, was aborted or refused the request (e.g. a lease held
by another procedure); 2 usage or validation error (bad flag, invalid settings, an update refused
by the workflow's validator); 3 not found or cannot connect.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from enum import StrEnum
from typing import Any

import typer

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3


class Output(StrEnum):
    """``-o``: a table for people, JSON or YAML for scripts."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


OutputOpt = typer.Option("table", "--output", "-o", help="table | json | yaml")
IdentityOpt = typer.Option(None, "--identity", envvar="LOCKKEEPER_IDENTITY", help="Who you are (default: OS user).")
IdOpt = typer.Option(None, "--id", help="Workflow ID (default: generated from the procedure, cluster and time).")
ClusterOpt = typer.Option(None, "--cluster", help="Cluster name (LOCKKEEPER_CLUSTER).")
DryRunOpt = typer.Option(False, "--dry-run", help="Validate and show what would run; start nothing that writes.")


class CliError(Exception):
    """A failure with a message for people and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def err(msg: str) -> None:
    """A message for people (stderr)."""
    typer.echo(msg, err=True)


def identity_of(identity: str | None) -> str:
    """``identity`` or the OS user."""
    if identity:
        return identity
    import getpass

    return getpass.getuser()


def check_output(fmt: str) -> str:
    """Validate ``-o``; raises typer.BadParameter (exit 2)."""
    try:
        return str(Output(fmt))
    except ValueError:
        raise typer.BadParameter(f"must be table, json or yaml, not {fmt!r}", param_hint="'-o'") from None


def settings_of(ctx: typer.Context, **more: Any) -> Any:
    """The settings from the environment and the global flags; raises :class:`CliError` (exit 2)."""
    from workers.settings import SettingsError, load_settings

    try:
        return load_settings(**(ctx.obj or {}), **more)
    except SettingsError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def cli_settings(ctx: typer.Context) -> Any:
    """:func:`settings_of`, exiting with the message on an error; logging set up for people."""
    try:
        settings = settings_of(ctx)
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    setup_logging(settings)
    return settings


def setup_logging(settings: Any, default_level: str = "warning") -> None:
    """Commands talk to people: only warnings unless ``--log-level`` asked for more."""
    from workers.logging import configure_logging

    level = settings.log_level if "log_level" in settings.model_fields_set else default_level
    configure_logging(level, settings.log_format)


def run(coro: Coroutine[Any, Any, int | None]) -> None:
    """Run a command body; map known errors to messages and exit codes (raises typer.Exit)."""
    code = EXIT_OK
    try:
        code = asyncio.run(coro) or EXIT_OK
    except CliError as exc:
        err(f"error: {exc}")
        code = exc.code
    except KeyboardInterrupt:
        err("interrupted")
        code = 130
    except Exception as exc:
        mapped = map_exception(exc)
        if mapped is None:
            raise
        code = mapped
    raise typer.Exit(code)


def map_exception(exc: BaseException) -> int | None:
    """A known Temporal or connection error → message on stderr and exit code; None if unknown."""
    from temporalio.client import (
        WorkflowFailureError,
        WorkflowQueryFailedError,
        WorkflowQueryRejectedError,
        WorkflowUpdateFailedError,
    )
    from temporalio.service import RPCError, RPCStatusCode

    from workers.client import ConnectionFailed

    if isinstance(exc, ConnectionFailed):
        err(f"error: {exc}")
        return EXIT_NOT_FOUND
    if isinstance(exc, WorkflowUpdateFailedError):
        err(f"refused: {cause_message(exc)}")
        return EXIT_USAGE
    if isinstance(exc, WorkflowFailureError):
        err(f"procedure failed: {cause_message(exc)}")
        return EXIT_FAILED
    if isinstance(exc, WorkflowQueryRejectedError | WorkflowQueryFailedError):
        err(f"query failed: {exc}")
        return EXIT_FAILED
    if isinstance(exc, RPCError):
        if "search attribute" in exc.message.lower():
            # A server without lockkeeper's attributes (a plain `temporal server start-dev`).
            from workers.search_attributes import SEARCH_ATTRIBUTES

            err(
                f"error: {exc.message}\nlockkeeper's search attributes ({', '.join(SEARCH_ATTRIBUTES)}) are not "
                "registered in this namespace. Fix: run `lockkeeper setup` (a worker started with `lockkeeper "
                "worker` registers them too), or have an admin run the commands `lockkeeper setup` prints."
            )
            return EXIT_NOT_FOUND
        if exc.status == RPCStatusCode.NOT_FOUND:
            err(f"not found: {exc.message}")
            return EXIT_NOT_FOUND
        if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            err(f"error: Temporal did not answer ({exc.message}); is a worker running on the task queue?")
            return EXIT_NOT_FOUND
        err(f"error: {exc.message}")
        return EXIT_FAILED
    return None


def cause_message(exc: BaseException) -> str:
    """The innermost failure message (the validator's or the activity's own words)."""
    msg = str(exc)
    cur: BaseException | None = exc
    while cur is not None:
        if str(cur):
            msg = str(cur)
        cur = cur.__cause__
    # A validator's ValueError arrives as "ValueError: <message>"; people need the message.
    return re.sub(r"^[A-Za-z_]*(Error|Exception): ", "", msg)


def validation_lines(exc: Any) -> str:
    """A pydantic ValidationError as ``field: message`` lines (joined for an indented list)."""
    lines = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "\n  ".join(lines)


async def connect(settings: Any, identity: str | None = None) -> Any:
    """A Temporal client (:func:`workers.client.connect`)."""
    from workers.client import connect as _connect

    return await _connect(settings, identity=identity)


async def update(settings: Any, wid: str, name: str, arg: Any, result_type: type, output: str, who: str) -> int:
    """Send Update ``name`` with ``arg`` to workflow ``wid`` and print its answer (the message on
    stderr for a table, the whole answer as JSON/YAML on stdout). A missing workflow is exit 3,
    a validator's refusal exit 2 (:func:`map_exception`)."""
    client = await connect(settings, identity=who)
    handle = client.get_workflow_handle(wid)
    await handle.describe()  # NOT_FOUND → exit 3 with the ID in the message
    res = await handle.execute_update(name, arg, result_type=result_type)
    from lockkeeper import output as out

    if output == Output.TABLE:
        err(getattr(res, "message", str(res)))
    else:
        print(out.dump(res, output))
    return EXIT_OK
