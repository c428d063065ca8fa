"""What every ``lockkeeper`` command shares: exit codes, errors, options, settings, the
connection, running a command body, and sending an Update.

Conventions (as ``temporal`` and ``kubectl``): data on stdout (``-o table|json|yaml``), messages
for people on stderr, heavy imports inside functions so ``--help`` is fast (this module imports
only typer at load time).

Exit codes (one table, applied by :func:`run` and :func:`map_exception`):

- 0 ok;
- 1 the procedure failed or was aborted, or it refused the request (a lease held by another
  procedure, an update refused by the workflow's validator);
- 2 usage or validation of the CLI's own input (a bad flag, invalid settings, a malformed
  kubeconfig, an input model the procedure would not accept);
- 3 not found (workflow, gate, node, pool), no connection, or no worker polls the task queue;
- 130 interrupted (Ctrl-C): for the decision commands, what is true after the CLI withdrew the
  decision (:mod:`lockkeeper.cli.decisions`): "interrupted; nothing was decided: ...".

Every error is one line on stderr; ``lockkeeper --debug`` adds the traceback.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from enum import StrEnum
from typing import Any

import typer

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: Set by the global ``--debug`` flag: errors then carry their traceback.
DEBUG = False

#: What Ctrl-C prints: decision commands say that nothing was decided.
INTERRUPTED = "interrupted"
INTERRUPTED_DECISION = "interrupted; nothing was decided"
#: A second Ctrl-C while a decision is being withdrawn (lockkeeper.cli.decisions): maybe it was not.
INTERRUPTED_AGAIN = "interrupted twice; the decision may not have been withdrawn: check `lockkeeper status`"
#: True once the interruption was reported (the entrypoint reports one nobody did).
INTERRUPT_REPORTED = False


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
    """A message for people (stderr). An error (``error:``/``refused:``/``not found:``) is put on
    one line, whoever prints it."""
    if msg.startswith(("error:", "refused:", "not found:")):
        msg = one_line(msg)
    typer.echo(msg, err=True)


def identity_of(identity: str | None) -> str:
    """Who the operator is: the subject CN of the Temporal client certificate when the
    connection uses one (``LOCKKEEPER_TEMPORAL_TLS_CERT``; :func:`workers.client.certificate_identity`),
    else ``identity`` (``--identity`` / ``LOCKKEEPER_IDENTITY``), else the OS user.

    With a certificate, an ``identity`` that differs is refused before anything is sent: one
    line on stderr and exit 2 (raises ``typer.Exit``); so is a certificate that cannot be read
    or has no CN. Without one the identity is self-declared (docs/production.md "Identity").
    """
    cert = _env_certificate_identity()
    if cert is not None:
        if identity and identity != cert:
            fail(identity_mismatch(identity, cert))
            raise typer.Exit(EXIT_USAGE)
        return cert
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
        fail(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    setup_logging(settings)
    return settings


def setup_logging(settings: Any, default_level: str = "warning") -> None:
    """Commands talk to people: only warnings unless ``--log-level`` asked for more."""
    from workers.logging import configure_logging

    level = settings.log_level if "log_level" in settings.model_fields_set else default_level
    configure_logging(level, settings.log_format)


def show(view: Callable[[], Any], data: Callable[[], Any], output: str) -> None:
    """Print a command's answer on stdout: ``view()`` (a rich renderable) for ``-o table``, else
    ``data()`` as JSON or YAML (:func:`lockkeeper.output.dump`); each is built only when shown."""
    from lockkeeper import output as out

    if output == "table":
        out.console().print(view())
    else:
        print(out.dump(data(), output))


def one_line(msg: str) -> str:
    """``msg`` on one line: its lines joined with ``; `` (a CLI error is one line)."""
    return "; ".join(part.strip() for part in str(msg).splitlines() if part.strip())


def fail(msg: str) -> None:
    """An error for people: one line on stderr (``--debug`` adds the traceback being handled)."""
    err(one_line(msg))
    if DEBUG:
        import sys
        import traceback

        if sys.exc_info()[0] is not None:
            traceback.print_exc()


def run(coro: Coroutine[Any, Any, int | None], *, decision: bool = False) -> None:
    """Run a command body; map known errors to one-line messages and exit codes (raises typer.Exit).

    ``decision``: the body sends a decision (approve, reject, decide, pause, resume, abort,
    skip-node, retry-node), so Ctrl-C says that nothing was decided. Ctrl-C cancels the body and
    exits 130 whatever the body raised while it was cancelled (e.g. an update's RPC cancelled
    error); a second Ctrl-C exits at once. An error nobody mapped is ``error: <type>: <message>``,
    exit 1 (the traceback only with ``--debug``)."""
    interrupted = False

    async def guarded() -> int | None:
        import signal

        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def on_sigint() -> None:
            nonlocal interrupted
            if interrupted:  # a second Ctrl-C: leave now (a decision's withdrawal may be cut short)
                import os
                import sys

                err(INTERRUPTED_AGAIN if decision else INTERRUPTED)
                sys.stderr.flush()
                os._exit(EXIT_INTERRUPTED)
            interrupted = True
            if task is not None:
                task.cancel()

        def quiet_after_interrupt(lp: Any, context: dict[str, Any]) -> None:
            # A cancelled body can leave inner tasks whose error nobody retrieves (e.g. an
            # update's RPC cancelled inside asyncio.wait_for): after Ctrl-C that is expected
            # noise, not a second error line.
            if interrupted and not DEBUG:
                return
            lp.default_exception_handler(context)

        loop.set_exception_handler(quiet_after_interrupt)
        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        except (ValueError, RuntimeError, NotImplementedError):
            installed = False  # not the main thread: KeyboardInterrupt still reaches run()
        try:
            return await coro
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    def interrupted_exit(message: str | None = None) -> int:
        global INTERRUPT_REPORTED
        fail(message or (INTERRUPTED_DECISION if decision else INTERRUPTED))
        INTERRUPT_REPORTED = True
        return EXIT_INTERRUPTED

    code = EXIT_OK
    try:
        code = asyncio.run(guarded()) or EXIT_OK
        if interrupted:  # the body swallowed the cancellation: still an interruption
            code = interrupted_exit()
    except (KeyboardInterrupt, asyncio.CancelledError):
        code = interrupted_exit()
    except CliError as exc:
        if exc.code == EXIT_INTERRUPTED:  # the body said what the interruption left (a withdrawn decision)
            code = interrupted_exit(str(exc))
        elif interrupted:
            code = interrupted_exit()
        else:
            fail(f"error: {exc}")
            code = exc.code
    except (typer.Exit, SystemExit):
        raise
    except Exception as exc:
        if interrupted:
            code = interrupted_exit()
        else:
            mapped = map_exception(exc)
            if mapped is None:
                fail(f"error: {type(exc).__name__}: {exc}")
                mapped = EXIT_FAILED
            code = mapped
    raise typer.Exit(code)


def map_exception(exc: BaseException) -> int | None:
    """A known Temporal, connection or validation error → one-line message on stderr and its
    exit code (see the module doc); None if unknown."""
    from pydantic import ValidationError
    from temporalio.client import (
        WorkflowFailureError,
        WorkflowQueryFailedError,
        WorkflowQueryRejectedError,
        WorkflowUpdateFailedError,
        WorkflowUpdateRPCTimeoutOrCancelledError,
    )
    from temporalio.service import RPCError, RPCStatusCode

    from lockkeeper.starter import NoWorker
    from workers.client import ConnectionFailed

    if isinstance(exc, ConnectionFailed):
        fail(f"error: {exc}")
        return EXIT_NOT_FOUND
    if isinstance(exc, NoWorker):
        fail(f"error: {exc}")
        return EXIT_NOT_FOUND
    if isinstance(exc, ValidationError):
        fail(f"error: invalid input: {validation_lines(exc)}")
        return EXIT_USAGE
    if isinstance(exc, WorkflowUpdateRPCTimeoutOrCancelledError):
        fail("error: nothing was decided: no worker answered in time (is `lockkeeper worker` running on the task queue?)")
        return EXIT_NOT_FOUND
    if isinstance(exc, WorkflowUpdateFailedError):
        msg = cause_message(exc)
        if msg.startswith(("unknown gate", "unknown node")):
            fail(f"not found: {msg}")
            return EXIT_NOT_FOUND
        fail(f"refused: {msg}")
        return EXIT_FAILED
    if isinstance(exc, WorkflowFailureError):
        if api_failure(exc):  # the preflight could not use the cluster's API: no connection
            fail(f"procedure failed, no connection to the cluster: {cause_message(exc)}")
            return EXIT_NOT_FOUND
        fail(f"procedure failed: {cause_message(exc)}")
        return EXIT_FAILED
    if isinstance(exc, WorkflowQueryRejectedError | WorkflowQueryFailedError):
        fail(f"query failed: {exc}")
        return EXIT_FAILED
    if isinstance(exc, RPCError):
        if "search attribute" in exc.message.lower():
            # A server without lockkeeper's attributes (a plain `temporal server start-dev`).
            from workers.search_attributes import SEARCH_ATTRIBUTES

            fail(
                f"error: {exc.message}; lockkeeper's search attributes ({', '.join(SEARCH_ATTRIBUTES)}) are not "
                "registered in this namespace. Fix: run `lockkeeper setup` (a worker started with `lockkeeper "
                "worker` registers them too), or have an admin run the commands `lockkeeper setup` prints."
            )
            return EXIT_NOT_FOUND
        if exc.status == RPCStatusCode.NOT_FOUND:
            fail(f"not found: {exc.message}")
            return EXIT_NOT_FOUND
        if "workflow task in failed state" in exc.message.lower():
            # The server refuses updates while the run's last workflow task failed or timed out
            # (a worker that is failing or too slow): the update never reached the workflow.
            fail(f"error: nothing was decided: {exc.message} (a worker is failing or too slow on this run; see its "
                 "log, then send it again)")
            return EXIT_NOT_FOUND
        if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            fail(f"error: Temporal or its worker did not answer ({exc.message}); is `lockkeeper worker` running on the task queue?")
            return EXIT_NOT_FOUND
        if exc.status == RPCStatusCode.INVALID_ARGUMENT:
            fail(f"error: {exc.message}")
            return EXIT_USAGE
        fail(f"error: {exc.message}")
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
    """A pydantic ValidationError as ``field: message`` items joined with ``; `` (one line)."""
    lines = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(lines)


async def connect(settings: Any, identity: str | None = None) -> Any:
    """A Temporal client (:func:`workers.client.connect`)."""
    from workers.client import connect as _connect

    return await _connect(settings, identity=identity)


def _env_certificate_identity() -> str | None:
    """The client certificate's CN from the environment's settings (None without a client
    certificate, or when the settings are invalid: the command's own settings check says why).
    A certificate that cannot be read or names nobody: one line, exit 2 (``typer.Exit``)."""
    from workers.client import CertificateError, certificate_identity
    from workers.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError:
        return None
    try:
        return certificate_identity(settings)
    except CertificateError as exc:
        fail(f"error: {exc}")
        raise typer.Exit(EXIT_USAGE) from None


def identity_mismatch(identity: str, cert: str) -> str:
    """The one-line refusal of an ``--identity`` the client certificate does not carry."""
    return (
        f"error: --identity {identity!r} is not the identity of your Temporal client certificate (CN {cert!r}); "
        "with a client certificate lockkeeper acts as its CN: drop --identity (and LOCKKEEPER_IDENTITY)"
    )


def check_identity(settings: Any, who: str) -> str | None:
    """The connection's identity (the client certificate's CN, None without one); raises
    :class:`CliError` exit 2 when ``who`` differs from it or the certificate cannot be read."""
    from workers.client import CertificateError, certificate_identity

    try:
        cert = certificate_identity(settings)
    except CertificateError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if cert is not None and who != cert:
        raise CliError(identity_mismatch(who, cert).removeprefix("error: "), EXIT_USAGE)
    return cert


def api_failure(exc: BaseException) -> bool:
    """True when a workflow failed because its preflight could not use the cluster's API (an
    ApplicationError of a type in ``activities.cluster.models.API_FAILURE_TYPES`` anywhere in
    the cause chain): exit 3, like any missing connection."""
    from temporalio.exceptions import ApplicationError

    from activities.cluster.models import API_FAILURE_TYPES

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type in API_FAILURE_TYPES:
            return True
        cause = cause.__cause__
    return False


def parse_duration(text: str) -> float:
    """``30m``, ``2h``, ``1d``, ``90s``, ``1h30m`` (or plain seconds) → seconds; raises
    typer.BadParameter (exit 2) for anything else or a duration that is not positive."""
    import re

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        seconds = float(t)
    elif t and re.fullmatch(r"(\d+(\.\d+)?[smhdw])+", t):
        seconds = sum(float(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)([smhdw])", t))
    else:
        raise typer.BadParameter(f"{text!r} is no duration (e.g. 30m, 2h, 1d, 1h30m)", param_hint="'--for'")
    if seconds <= 0:
        raise typer.BadParameter("must be a positive duration", param_hint="'--for'")
    return seconds
