"""What every ``lockkeeper start`` subcommand does after it has built its input.

:func:`launch` starts the procedure through :func:`lockkeeper.starter.start_procedure` (lease
pre-check, ID scheme, search attributes), prints the workflow ID (stdout: the first line of a
table, ``workflow_id`` of a JSON/YAML document), optionally waits for a first status (the
rollout's plan), and with ``--wait`` follows the run to its end: exit 0 only when it succeeded.
A ``--dry-run`` of a procedure without a planning step of its own validates the input, checks the
leases and prints what would run, starting nothing.

Honest starts: nothing starts while no worker polls the task queue (exit 3, naming the queue and
``lockkeeper worker``; :func:`lockkeeper.starter.start_procedure`). ``--queue``, a common option
that :func:`with_common_options` adds to every ``start`` subcommand, starts it anyway and says
plainly that it is queued and how to cancel it (``lockkeeper abort ID``). A start the CLI stops
waiting for (no plan or first step within the ready timeout) is reported as ``started, still
running: ID`` with exit 0: the workflow runs, so it is never called failed.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, connect, err
from lockkeeper.cli.start.groups import OptionGroup, flags

#: Workflow IDs started in this process while no worker polled their task queue (``--queue``).
QUEUED: set[str] = set()


def queued_notice(workflow_id: str, task_queue: str) -> None:
    """Say plainly that ``workflow_id`` is queued and how to cancel it (stderr)."""
    QUEUED.add(workflow_id)
    err(f"queued: {workflow_id} waits for a worker on task queue {task_queue!r} (none polls it now); it starts "
        f"when `lockkeeper worker` runs there. Cancel it with: lockkeeper abort {workflow_id}")


#: ``-f FILE`` and ``--set KEY=VALUE`` of the running start command (:func:`with_common_options`).
INPUT_FILE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("lockkeeper_input_file", default=None)
INPUT_SETS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("lockkeeper_input_sets", default=())


def with_common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with the common start options added to its signature (typer reads the
    signature, so every procedure's subcommand gets them without declaring them):

    - ``--queue``: start even when no worker polls the task queue;
    - ``-f/--input-file FILE``: the procedure's input as YAML or JSON (its input model's fields,
      nested as the model nests them);
    - ``--set KEY=VALUE`` (repeatable): one field of the input by its dotted path
      (``approvals.four_eyes=true``); the value is read as YAML (``3``, ``true``, ``[a, b]``).

    The input is the file, then the flags the operator gave, then the ``--set`` values
    (:func:`build_input`). A command that builds its input another way (no
    ``takes_input_overrides = True`` attribute) refuses ``-f``/``--set`` with exit 2 rather than
    silently ignoring them."""
    sig = inspect.signature(command)
    extra = [
        inspect.Parameter("queue", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
            False, "--queue", help="Start even when no worker polls the task queue: it waits for one (cancel with "
                                   "`lockkeeper abort ID`).")),
        inspect.Parameter("common_input_file", inspect.Parameter.KEYWORD_ONLY, annotation=Path | None, default=typer.Option(
            None, "--input-file", "-f", help="The procedure's input as YAML or JSON (its input model; the flags and "
                                             "--set override it).", exists=True, dir_okay=False)),
        inspect.Parameter("common_sets", inspect.Parameter.KEYWORD_ONLY, annotation=list[str], default=typer.Option(
            [], "--set", help="KEY=VALUE: one input field by its dotted path, the value as YAML (repeatable).")),
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, queue: bool = False, common_input_file: Path | None = None, common_sets: list[str] | None = None,
                **kwargs: Any) -> Any:
        from lockkeeper.starter import ON_QUEUED, QUEUE_WITHOUT_WORKER

        if (common_input_file is not None or common_sets) and not getattr(command, "takes_input_overrides", False):
            raise typer.BadParameter(
                "this procedure's input is built from its own flags only (its --input FILE where it has one); "
                "-f/--input-file and --set are not applied to it, so they are refused rather than ignored",
                param_hint="'--input-file' / '--set'")
        QUEUE_WITHOUT_WORKER.set(queue)
        ON_QUEUED.set(queued_notice)
        INPUT_FILE.set(common_input_file)
        INPUT_SETS.set(tuple(common_sets or ()))
        return command(*args, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**getattr(command, "__annotations__", {}), "queue": bool, "common_input_file": Path | None,
                               "common_sets": list[str]}
    return wrapper


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    cur = data
    for k in keys[:-1]:
        nxt = cur.get(k)
        if not isinstance(nxt, dict):
            nxt = cur[k] = {}
        cur = nxt
    cur[keys[-1]] = value


def input_data(flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """The start command's input fields as given: the ``-f`` file (YAML or JSON), then ``flags``
    (dotted field path -> value; only the flags the operator gave, None values are left out),
    then every ``--set KEY=VALUE`` (the value read as YAML). Raises :class:`CliError` (exit 2)
    for a file that cannot be read or is no mapping, and a malformed ``--set``."""
    import yaml

    data: dict[str, Any] = {}
    path = INPUT_FILE.get()
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise CliError(f"cannot read {path}: {exc}", EXIT_USAGE) from None
        if loaded is not None and not isinstance(loaded, dict):
            raise CliError(f"{path}: the input must be a mapping of the procedure's fields, not {type(loaded).__name__}",
                           EXIT_USAGE)
        data = loaded or {}
    for key, value in (flags or {}).items():
        if value is not None:
            _set_path(data, key, value)
    for item in INPUT_SETS.get():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set {item!r}: expected KEY=VALUE", EXIT_USAGE)
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise CliError(f"--set {key}: {exc}", EXIT_USAGE) from None
        _set_path(data, key.strip(), value)
    return data


def build_input(model: type[Any], flags: dict[str, Any] | None = None) -> Any:
    """The start command's input ``model`` from :func:`input_data` (the ``-f`` file, then
    ``flags``, then every ``--set``), validated once. Raises :class:`CliError` (exit 2) with one
    ``field: message`` item per problem, naming the file, before anything is started."""
    from pydantic import ValidationError

    from lockkeeper.cli.common import validation_lines

    data = input_data(flags)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        path = INPUT_FILE.get()
        where = f" ({path})" if path is not None else ""
        raise CliError(f"invalid input{where}: {validation_lines(exc)}", EXIT_USAGE) from None


@dataclass
class Launch:
    """One start request: the procedure (spec ``name``), its validated ``input``, the
    ``cluster`` and lease ``scopes`` for the pre-check, ``pools`` for the pool check (the rollout),
    ``workflow_id`` or an ``id_name`` part for the generated ID, and the common options.
    ``ready``: a condition on the first statuses to wait for (a failed run raises its failure
    here, exit 1), ``show_ready`` what to print then. A timeout is never a failure: the CLI says
    ``started, still running: ID`` and exits 0 (``ready_required`` is kept for callers; it no
    longer changes that)."""

    name: str
    input: Any
    cluster: str
    who: str
    output: str
    wait: bool = False
    dry_run: bool = False
    scopes: Sequence[str] = ()
    pools: Sequence[str] | None = None
    workflow_id: str | None = None
    id_name: str | None = None
    summary: str | None = None
    ready: Callable[[Any], bool] | None = None
    show_ready: Callable[[Any], Any] | None = None
    ready_timeout: float = 120.0
    ready_required: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def spec_named(name: str) -> Any:
    """The procedure spec called ``name`` from ``workflows.PROCEDURES``."""
    from workflows import PROCEDURES
    from workflows.kit.spec import spec_by_name

    return spec_by_name(PROCEDURES, name)


def emit(data: dict[str, Any], output: str) -> None:
    from lockkeeper import output as out

    print(out.dump(data, output))


async def start_run(req: Launch, settings: Any, *, precheck: bool | None = None) -> Any:
    """Start ``req`` (:func:`lockkeeper.starter.start_procedure`: its scopes, pools, ID and
    summary; the lease pre-check unless ``precheck`` is False, by default unless a dry run) and
    return the workflow handle. Raises :class:`CliError` ``refused: ...`` (exit 1) when a lease
    holder or an existing workflow ID refuses it; ``NoWorker`` (exit 3) as ``start_procedure``."""
    from lockkeeper.starter import StartRefused, start_procedure

    client = await connect(settings, identity=req.who)
    try:
        return await start_procedure(
            client, settings, spec_named(req.name), req.input, cluster=req.cluster, scopes=req.scopes, pools=req.pools,
            workflow_id=req.workflow_id, id_name=req.id_name, summary=req.summary,
            precheck=not req.dry_run if precheck is None else precheck,
        )
    except StartRefused as exc:
        raise CliError(f"refused: {exc}", EXIT_FAILED) from None


async def launch(req: Launch, settings: Any) -> int:
    """Start, print the ID, then (``ready``) show the first ready status, (``wait``) follow it."""
    from rich.console import Console
    from rich.text import Text

    from lockkeeper import output as out
    from lockkeeper import panels
    from lockkeeper.cli.observe import watch_until_closed
    from lockkeeper.starter import wait_for_status

    spec = spec_named(req.name)
    handle = await start_run(req, settings)
    if req.output == "table":
        print(handle.id, flush=True)
    queued = handle.id in QUEUED
    if not queued:
        err(f"started {handle.id}" + (" (dry run)" if req.dry_run else ""))
    doc: dict[str, Any] = {"workflow_id": handle.id, "queued": queued, **req.extra}
    if queued and not req.wait:  # nothing will answer a status query until a worker comes
        if req.output != "table":
            emit(doc, req.output)
        return EXIT_OK
    if not queued and await refused_before_any_change(handle, spec, req, doc):
        return EXIT_USAGE
    if req.ready is not None and not queued:
        try:
            st = await wait_for_status(handle, spec, req.ready, timeout=req.ready_timeout)
        except TimeoutError:
            # The workflow exists and runs: never call it failed. Say so and how to follow it.
            err(f"started, still running: {handle.id} (no answer within {req.ready_timeout:.0f}s; "
                f"follow it with `lockkeeper status {handle.id}`, stop it with `lockkeeper abort {handle.id}`)")
            st = None
            doc["still_running"] = True
        if st is not None and req.show_ready is not None:
            shown = req.show_ready(st)
            if req.output == "table":
                # plain text is printed as it is: "[node01]" is a batch, not rich markup
                out.console().print(Text(shown) if isinstance(shown, str) else shown)
            else:
                doc["status"] = out.to_data(st)
    if req.dry_run:
        show_window_plan(req)
    if not req.wait:
        if req.output != "table":
            emit(doc, req.output)
        err(f"follow it with: lockkeeper status {handle.id} --watch")
        return EXIT_OK
    err_console = Console(stderr=True)
    res = await watch_until_closed(handle, spec, err_console, live=err_console.is_terminal)
    if req.output == "table":
        out.console().print(panels.result_panel(spec.name, res))
    else:
        emit({**doc, "result": out.to_data(res)}, req.output)
    return EXIT_OK if panels.result_ok(res) else EXIT_FAILED


async def refused_before_any_change(handle: Any, spec: Any, req: Launch, doc: dict[str, Any]) -> bool:
    """Wait for the procedure's preflight (``status.preflight`` past ``pending``; a procedure
    that declares no preconditions is past it at once) and, when the run ended ``refused``, say
    why on stderr, one line per problem, and return True (the caller exits 2: nothing was
    written). A run that does not answer within the ready timeout is left running (False)."""
    from lockkeeper import output as out
    from lockkeeper.starter import wait_for_status

    try:
        st = await wait_for_status(handle, spec, lambda s: getattr(s, "preflight", "none") != "pending",
                                   timeout=req.ready_timeout)
    except TimeoutError:
        return False
    if st is not None and getattr(st, "preflight", None) != "refused":
        return False  # passed: the run goes on (refused: it is ending, its result says why)
    result = await handle.result()
    if isinstance(result, dict):  # a handle made without result_type decodes to a dict
        result = spec.result_model.model_validate(result)
    if getattr(result, "outcome", None) != "refused":
        return False
    problems = list(getattr(result, "problems", None) or []) or [getattr(result, "message", "refused")]
    err(f"refused before any change: {handle.id} ({spec.name})")
    for line in problems:
        err(f"  {line}")
    if req.output != "table":
        emit({**doc, "result": out.to_data(result)}, req.output)
    elif getattr(req.input, "dry_run", False):  # a dry run shows all it checked, as one that passed does
        from lockkeeper import panels

        out.console().print(panels.result_panel(spec.name, result))
    return True


def read_yaml(path: Path, hint: str, mapping: str | None = None) -> Any:
    """The YAML (or JSON) document in the file ``path`` of option ``hint`` (``'--plan'``).
    Raises ``typer.BadParameter`` naming the option when the file cannot be read or parsed, and,
    when ``mapping`` (the message) is given, when the document is not a mapping."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None
    if mapping is not None and not isinstance(data, dict):
        raise typer.BadParameter(mapping, param_hint=hint)
    return data


def read_ssh_map(path: str | Path) -> dict[str, tuple[str, int]]:
    """Node -> (host, port) from a JSON object ``{"node": "host:port" | "host", ...}`` (port 22 when
    none), the file ``lockkeeper sim serve`` prints as ``CLUSTERSIM_SSH_MAP``. Raises
    ``typer.BadParameter`` (``--ssh-map``) for an unreadable file, anything but a non-empty object,
    or a bad port."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="'--ssh-map'") from None
    if not isinstance(doc, dict) or not doc:
        raise typer.BadParameter(f"{path} must be a JSON object node -> host[:port]", param_hint="'--ssh-map'")
    out: dict[str, tuple[str, int]] = {}
    for node, addr in doc.items():
        host, _, port = str(addr).rpartition(":") if ":" in str(addr) else (str(addr), "", "22")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise typer.BadParameter(f"{path}: bad address {addr!r} for {node}", param_hint="'--ssh-map'")
        out[str(node)] = (host, int(port))
    return out


# --- the alert gate's flags (kit: workflows.kit.alerts), one option group for every node procedure ---

def _alert_policy_of_flags(alert_gate: str | None, alert_filter: str | None, alert_firing_only: bool | None,
                           alert_severity: list[str] | None, alert_gate_fail_open: bool | None,
                           alert_bearer_token_file: str | None, alert_ca_file: str | None) -> dict[str, Any] | None:
    return alert_policy(alert_gate, alert_filter, True if alert_firing_only is None else alert_firing_only,
                        list(alert_severity or []), bool(alert_gate_fail_open), alert_bearer_token_file, alert_ca_file)


#: The ``--alert-*`` flags; the group builds the input's ``alerts`` (:func:`alert_policy`).
#: :func:`with_alert_gate_options` gives them to every start command that takes ``alerts``
#: (:func:`takes_alert_gate`).
ALERTS = OptionGroup(flags(
    ("alert_gate", str | None, typer.Option(
        None, "--alert-gate", metavar="URL", rich_help_panel="Alert gate (Prometheus)",
        help="Prometheus base URL: no node (batch, phase) starts while a blocking alert fires (/api/v1/alerts); "
             "an unreachable Prometheus blocks too, unless --alert-gate-fail-open.")),
    ("alert_filter", str | None, typer.Option(
        None, "--alert-filter", metavar="REGEX", rich_help_panel="Alert gate (Prometheus)",
        help="Alert names to IGNORE (searched, e.g. '^Watchdog$').")),
    ("alert_firing_only", bool, typer.Option(
        True, "--alert-firing-only/--alert-pending-blocks", rich_help_panel="Alert gate (Prometheus)",
        help="Only firing alerts block (default), or pending ones too.")),
    ("alert_severity", list[str], typer.Option(
        [], "--alert-severity", metavar="LEVEL", rich_help_panel="Alert gate (Prometheus)",
        help="Only alerts of this severity block (repeatable).")),
    ("alert_gate_fail_open", bool, typer.Option(
        False, "--alert-gate-fail-open", rich_help_panel="Alert gate (Prometheus)",
        help="Prometheus unreachable or in error: go on (with a warning).")),
    ("alert_bearer_token_file", str | None, typer.Option(
        None, "--alert-bearer-token-file", metavar="PATH", rich_help_panel="Alert gate (Prometheus)",
        help="Bearer token for Prometheus (a path on the worker).")),
    ("alert_ca_file", str | None, typer.Option(
        None, "--alert-ca-file", metavar="PATH", rich_help_panel="Alert gate (Prometheus)",
        help="CA bundle for an https Prometheus (a path on the worker).")),
), _alert_policy_of_flags)


def alert_policy(url: str | None, filter: str | None, firing_only: bool, severities: list[str], fail_open: bool,
                 token_file: str | None, ca_file: str | None) -> dict[str, Any] | None:
    """The input's ``alerts`` (:class:`workflows.kit.inputs.AlertGatePolicy` fields) from the
    ``--alert-*`` flags, or None without ``--alert-gate``. Raises ``typer.BadParameter`` when an
    ``--alert-*`` flag is given without ``--alert-gate`` (the model validates the rest: the URL's
    scheme, the filter's regex)."""
    if url is None:
        given = [n for n, v in (("--alert-filter", filter), ("--alert-severity", severities), ("--alert-gate-fail-open", fail_open),
                                ("--alert-bearer-token-file", token_file), ("--alert-ca-file", ca_file)) if v]
        if given:
            raise typer.BadParameter(f"{', '.join(given)} need(s) --alert-gate URL", param_hint="'--alert-gate'")
        return None
    return {"url": url, "filter": filter, "firing_only": firing_only, "severities": list(severities), "fail_open": fail_open,
            "bearer_token_file": token_file, "ca_file": ca_file}


def takes_alert_gate(command: Callable[..., Any]) -> bool:
    """Whether a start command takes the alert gate: it has a parameter named ``alerts`` (the
    input's ``alerts`` fields, a dict, or None)."""
    return "alerts" in inspect.signature(command).parameters


def with_alert_gate_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` (a start command with an ``alerts`` parameter) with the ``--alert-*`` flags of
    :data:`ALERTS` in its signature instead of ``alerts``: typer offers them, and the wrapper
    passes ``alerts=`` :func:`alert_policy` of them (None without ``--alert-gate``;
    ``typer.BadParameter``, exit 2, for a flag without it). The one place the flags are
    declared, so every node procedure reads them the same way."""
    return ALERTS.replace(command, "alerts")


# --- the node order's flags (kit: workflows.kit.plan.order_nodes), shared by the node procedures ---

ORDERS = ("zone-oldest", "oldest-first", "newest-first", "explicit")

OrderOpt = typer.Option(None, "--order", metavar="ORDER",
                        help="Which node goes first: zone-oldest (default, the machine-config-controller's: zone label, "
                             "then creationTimestamp oldest first, then name) | oldest-first | newest-first "
                             "(creationTimestamp, then name) | explicit (with --node-order FILE).")
NodeOrderOpt = typer.Option(None, "--node-order", metavar="FILE",
                            help="With --order explicit: one node name per line ('#' starts a comment); these nodes "
                                 "first in this order, the rest zone-oldest.")


def read_node_order(path: Path) -> list[str]:
    """The node names of a ``--node-order`` file: one per line, ``#`` to the end of a line is a
    comment, blank lines are skipped. Raises ``typer.BadParameter`` (``--node-order``) for a file
    that cannot be read, names nothing, or names a node twice."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="'--node-order'") from None
    names: list[str] = []
    for i, line in enumerate(text.splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if len(name.split()) != 1:
            raise typer.BadParameter(f"{path}:{i}: one node name per line, not {name!r}", param_hint="'--node-order'")
        if name in names:
            raise typer.BadParameter(f"{path}:{i}: node {name} is listed twice", param_hint="'--node-order'")
        names.append(name)
    if not names:
        raise typer.BadParameter(f"{path} names no node", param_hint="'--node-order'")
    return names


def node_order(order: str | None, file: Path | None) -> str | list[str] | None:
    """The input's ``node_order`` (:data:`workflows.kit.inputs.NodeOrder`) from ``--order`` and
    ``--node-order FILE``: the order's name, the file's names for ``explicit``, or None when
    neither flag is given (the procedure's default). Raises ``typer.BadParameter`` (exit 2,
    before anything starts) for an unknown order, ``explicit`` without a file, a file with another
    order, and a file that is missing or unreadable, names nothing or names a node twice."""
    if order is None and file is None:
        return None
    if order is not None and order not in ORDERS:
        raise typer.BadParameter(f"unknown order {order!r}: expected {', '.join(ORDERS[:-1])} or {ORDERS[-1]}",
                                 param_hint="'--order'")
    if file is not None and order != "explicit":
        raise typer.BadParameter(f"--node-order FILE needs --order explicit (not {order or 'the default order'})",
                                 param_hint="'--node-order'")
    if order == "explicit":
        if file is None:
            raise typer.BadParameter("--order explicit needs --node-order FILE (one node name per line)",
                                     param_hint="'--order'")
        return read_node_order(file)
    return order


def refuse_node_order(order: str | None, file: Path | None, why: str) -> None:
    """Refuse ``--order`` / ``--node-order`` for a procedure whose node order cannot be chosen
    (``why`` says why); raises ``typer.BadParameter`` (exit 2) when either is given."""
    if order is not None or file is not None:
        raise typer.BadParameter(f"this procedure takes no node order: {why}",
                                 param_hint="'--order'" if order is not None else "'--node-order'")


# --- maintenance windows (kit: workflows.kit.windows), shared by the node procedures ---------------

WindowOpt = typer.Option([], "--window", metavar="SPEC",
                         help="A maintenance window, 'DAYS HH:MM-HH:MM ZONE' (e.g. 'Mon-Fri 22:00-06:00 Europe/Berlin', "
                              "'Sat 00:00-24:00 UTC'; repeatable, a union): no node starts outside one; nodes in flight "
                              "finish.")


def windows(specs: list[str] | None) -> list[str]:
    """The input's ``windows`` from ``--window`` (each parsed; a bad one exits 2 naming it)."""
    from workflows.kit.windows import parse_window

    out = []
    for spec in specs or []:
        try:
            out.append(parse_window(spec).spec)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--window'") from None
    return out


def refuse_windows(specs: list[str] | None, why: str) -> None:
    """Refuse ``--window`` for a procedure that does not take maintenance windows (exit 2)."""
    if specs:
        raise typer.BadParameter(f"this procedure takes no maintenance window: {why}", param_hint="'--window'")


def window_plan_lines(specs: Sequence[str], now: Any = None) -> list[str]:
    """The plan's lines of the windows: each as given and the next opening (from ``now``, by
    default the clock of this machine: the run decides with its own workflow time)."""
    from datetime import datetime, timezone

    from workflows.kit.windows import next_opening, open_interval, parse_windows

    if not specs:
        return []
    ws = parse_windows(specs)
    now = now or datetime.now(timezone.utc)
    lines = [f"window: {w.spec}" for w in ws]
    current = open_interval(ws, now)
    if current is not None:
        lines.append(f"windows: open now, until {current[1].isoformat(timespec='seconds')}")
    else:
        opening = next_opening(ws, now)
        lines.append(f"windows: closed now; no node starts before the next opening at "
                     f"{opening.isoformat(timespec='seconds') if opening else '-'}")
    return lines


def show_window_plan(req: Launch) -> None:
    """Print the windows' plan lines of a dry run (stdout for a table, stderr otherwise)."""
    lines = window_plan_lines(getattr(req.input, "windows", None) or [])
    for line in lines:
        if req.output == "table":
            print(line, flush=True)
        else:
            err(line)
