"""The ``lockkeeper`` command: start procedures, watch them, answer them, run a worker.

The app is assembled here from one module per concern, each of which registers its commands
and none of which imports this package back: :mod:`.common` (exit codes, errors, options,
settings, connection, updates), :mod:`.operate` (approve, reject, pause, resume, abort,
skip-node, retry-node, hold, release, decide), :mod:`.observe` (status, list), :mod:`.start` (one module per
procedure), :mod:`.diagnose`, :mod:`.worker`, :mod:`.deployment` (the worker builds: status,
promote) and :mod:`.sim` (sim, demo). Every module imports only typer at load time, so
``--help`` stays fast; the procedures come from ``workflows.PROCEDURES`` when a command runs.

Exit codes (:mod:`.common`): 0 ok; 1 the procedure failed, was aborted or refused the request;
2 usage or validation of the CLI's input; 3 not found, no connection or no worker; 130
interrupted. Errors are one line (``--debug``: with the traceback). Settings come from the
environment (:mod:`workers.settings`); the global flags override them.
"""

from __future__ import annotations

import sys

import typer

from lockkeeper.cli import deployment, diagnose, history, observe, operate, setup, sim, start, worker

app = typer.Typer(
    name="lockkeeper",
    help="Run OpenShift/Kubernetes maintenance procedures as durable Temporal workflows.",
    no_args_is_help=True,
    add_completion=True,  # typer's --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
)
start_app = typer.Typer(help="Start a procedure.", no_args_is_help=True, cls=start.StartGroup)
app.add_typer(start_app, name="start")


@app.callback()
def _main(
    ctx: typer.Context,
    address: str | None = typer.Option(None, "--address", help="Temporal host:port (TEMPORAL_ADDRESS)."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Temporal namespace."),
    task_queue: str | None = typer.Option(None, "--task-queue", help="Task queue (LOCKKEEPER_TASK_QUEUE)."),
    log_level: str | None = typer.Option(None, "--log-level", help="debug|info|warning|error"),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error (errors are one line otherwise)."),
) -> None:
    from lockkeeper.cli import common

    common.DEBUG = debug
    ctx.obj = {"temporal_address": address, "temporal_namespace": namespace, "task_queue": task_queue, "log_level": log_level}


observe.register(app)
operate.register(app)
diagnose.register(app)
worker.register(app)
deployment.register(app)
setup.register(app)
history.register(app)
sim.register(app)


#: The commands that send a decision: Ctrl-C says that nothing was decided.
DECISION_COMMANDS = frozenset(
    {"approve", "reject", "decide", "pause", "resume", "abort", "skip-node", "retry-node", "hold", "release", "revert"}
)


def main() -> None:
    """Console entrypoint ``lockkeeper``.

    Runs the app in non-standalone mode so that every path maps to the exit-code table with a
    one-line message: a usage error is ``error: <what>; see `<command> --help``` and exit 2
    (``lockkeeper`` alone prints the help), an error no command mapped is one line and exit 1
    (``--debug``: with its traceback), and Ctrl-C anywhere exits 130 with one line: inside a
    command body :func:`.common.run` says what was (not) decided; outside one (while parsing or
    importing) this prints ``interrupted``. Exits through ``os._exit`` after flushing: the
    Temporal core runtime's threads can abort the interpreter's own finalization
    (``PyGILState_Release``), which would turn exit code 3 into a crash (-6).
    """
    import os

    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

    from lockkeeper.cli import common

    code: int = 0
    try:
        res = app(standalone_mode=False)
        code = res if isinstance(res, int) else 0
    except NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except UsageError as exc:
        where = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
        common.fail(f"error: {exc.format_message()}{where}")
        code = exc.exit_code
    except ClickException as exc:
        common.fail(f"error: {exc.format_message()}")
        code = exc.exit_code
    except common.CliError as exc:  # raised in a command body before it reached common.run
        common.fail(f"error: {exc}")
        code = exc.code
    except (KeyboardInterrupt, typer.Abort):
        code = common.EXIT_INTERRUPTED
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 1
        common.fail(f"error: {type(exc).__name__}: {exc}")
        code = common.EXIT_FAILED
    if code == common.EXIT_INTERRUPTED and not common.INTERRUPT_REPORTED:
        # Interrupted before the body ran (parsing, imports): a decision was not even sent.
        decision = bool(DECISION_COMMANDS & set(sys.argv[1:]))
        common.err(common.INTERRUPTED_DECISION if decision else common.INTERRUPTED)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


__all__ = ["app", "main", "start_app"]
