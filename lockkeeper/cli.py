"""The ``lockkeeper`` command: start procedures, watch them, answer their gates, run a worker.

Conventions (as ``temporal`` and ``kubectl``): data on stdout (``-o table|json|yaml``), messages
for people on stderr, heavy imports inside commands so ``--help`` is fast.

Exit codes: 0 ok; 1 the procedure failed, was aborted or refused the request (e.g. a lease
held by another rollout); 2 usage or validation error (bad flag, invalid settings, an update
refused by the workflow's validator); 3 not found or cannot connect.

Settings come from the environment (see :mod:`lockkeeper.settings`); the global flags override
them.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Coroutine
from typing import Any

import typer

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3

app = typer.Typer(
    name="lockkeeper",
    help="Run OpenShift/Kubernetes maintenance procedures as durable Temporal workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
start_app = typer.Typer(help="Start a procedure.", no_args_is_help=True)
app.add_typer(start_app, name="start")

OutputOpt = typer.Option("table", "--output", "-o", help="table | json | yaml")
IdentityOpt = typer.Option(None, "--identity", envvar="LOCKKEEPER_IDENTITY", help="Who you are (default: OS user).")


class CliError(Exception):
    """A failure with a message for people and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _identity(identity: str | None) -> str:
    if identity:
        return identity
    import getpass

    return getpass.getuser()


def _check_output(fmt: str) -> str:
    if fmt not in ("table", "json", "yaml"):
        raise typer.BadParameter(f"must be table, json or yaml, not {fmt!r}", param_hint="'-o'")
    return fmt


def parse_max_unavailable(value: str) -> int | str:
    """``N`` (≥1) → int, ``N%`` (1..100) → ``"N%"``; anything else raises typer.BadParameter."""
    v = value.strip()
    m = re.fullmatch(r"(\d+)(%?)", v)
    if not m:
        raise typer.BadParameter(f"must be a count (2) or a percentage (25%), not {value!r}")
    n = int(m.group(1))
    if m.group(2):
        if not 1 <= n <= 100:
            raise typer.BadParameter(f"percentage must be 1%..100%, not {value!r}")
        return f"{n}%"
    if n < 1:
        raise typer.BadParameter(f"must be at least 1, not {value!r}")
    return n


def parse_targets(values: list[str]) -> dict[str, str]:
    """``POOL=RENDERED`` pairs → dict; raises typer.BadParameter on a malformed pair."""
    out: dict[str, str] = {}
    for v in values:
        pool, sep, rendered = v.partition("=")
        if not sep or not pool or not rendered:
            raise typer.BadParameter(f"must be POOL=RENDERED-CONFIG, not {v!r}", param_hint="'--target'")
        out[pool] = rendered
    return out


# --- global options, settings, errors -----------------------------------------------------------


@app.callback()
def _main(
    ctx: typer.Context,
    address: str | None = typer.Option(None, "--address", help="Temporal host:port (TEMPORAL_ADDRESS)."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Temporal namespace."),
    task_queue: str | None = typer.Option(None, "--task-queue", help="Task queue (LOCKKEEPER_TASK_QUEUE)."),
    log_level: str | None = typer.Option(None, "--log-level", help="debug|info|warning|error"),
) -> None:
    ctx.obj = {
        "temporal_address": address,
        "temporal_namespace": namespace,
        "task_queue": task_queue,
        "log_level": log_level,
    }


def _settings(ctx: typer.Context, **more: Any) -> Any:
    from lockkeeper.settings import SettingsError, load_settings

    try:
        return load_settings(**(ctx.obj or {}), **more)
    except SettingsError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _setup_logging(settings: Any, default_level: str = "warning") -> None:
    from workers.logging import configure_logging

    # Commands talk to people: only warnings unless asked; the worker logs at info.
    level = settings.log_level if "log_level" in settings.model_fields_set else default_level
    configure_logging(level, settings.log_format)


def _run(coro: Coroutine[Any, Any, int | None]) -> None:
    """Run a command body; map known errors to messages and exit codes."""
    code = EXIT_OK
    try:
        code = asyncio.run(coro) or EXIT_OK
    except CliError as exc:
        _err(f"error: {exc}")
        code = exc.code
    except KeyboardInterrupt:
        _err("interrupted")
        code = 130
    except Exception as exc:
        code = _map_exception(exc)
        if code is None:
            raise
    raise typer.Exit(code)


def _map_exception(exc: BaseException) -> int | None:
    from temporalio.client import (
        WorkflowFailureError,
        WorkflowQueryFailedError,
        WorkflowQueryRejectedError,
        WorkflowUpdateFailedError,
    )
    from temporalio.service import RPCError, RPCStatusCode

    from lockkeeper.client import ConnectionFailed

    if isinstance(exc, ConnectionFailed):
        _err(f"error: {exc}")
        return EXIT_NOT_FOUND
    if isinstance(exc, WorkflowUpdateFailedError):
        _err(f"refused: {_cause_message(exc)}")
        return EXIT_USAGE
    if isinstance(exc, WorkflowFailureError):
        _err(f"procedure failed: {_cause_message(exc)}")
        return EXIT_FAILED
    if isinstance(exc, WorkflowQueryRejectedError | WorkflowQueryFailedError):
        _err(f"query failed: {exc}")
        return EXIT_FAILED
    if isinstance(exc, RPCError):
        if exc.status == RPCStatusCode.NOT_FOUND:
            _err(f"not found: {exc.message}")
            return EXIT_NOT_FOUND
        if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            _err(f"error: Temporal did not answer ({exc.message}); is a worker running on the task queue?")
            return EXIT_NOT_FOUND
        _err(f"error: {exc.message}")
        return EXIT_FAILED
    return None


def _cause_message(exc: BaseException) -> str:
    """The innermost failure message (the validator's or the activity's own words)."""
    msg = str(exc)
    cur: BaseException | None = exc
    while cur is not None:
        if str(cur):
            msg = str(cur)
        cur = cur.__cause__
    # A validator's ValueError arrives as "ValueError: <message>"; people need the message.
    return re.sub(r"^[A-Za-z_]*(Error|Exception): ", "", msg)


async def _connect(settings: Any, identity: str | None = None) -> Any:
    from lockkeeper.client import connect

    return await connect(settings, identity=identity)


# --- worker ---------------------------------------------------------------------------------------


@app.command()
def worker(
    ctx: typer.Context,
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Path (KUBECONFIG)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context (KUBE_CONTEXT)."),
    in_cluster: bool | None = typer.Option(None, "--in-cluster", help="Use the pod's service account."),
) -> None:
    """Run a worker: every procedure's workflows and activities on the task queue."""
    from lockkeeper.settings import SettingsError
    from workers.worker import run_worker

    settings = None
    try:
        settings = _settings(ctx, kubeconfig=kubeconfig, kube_context=context, in_cluster=in_cluster)
    except CliError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    from workers.logging import configure_logging

    configure_logging(settings.log_level, settings.log_format)

    async def body() -> int:
        try:
            await run_worker(settings)
        except SettingsError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except Exception as exc:
            if type(exc).__name__ == "KubeconfigError":
                raise CliError(str(exc), EXIT_USAGE) from None
            raise
        return EXIT_OK

    _run(body())


# --- start ----------------------------------------------------------------------------------------


def _new_id(cluster: str) -> str:
    import secrets
    from datetime import UTC, datetime

    return f"mcr-{cluster}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def _quote(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


async def find_running_rollouts(client: Any, cluster: str, pools: list[str]) -> list[tuple[str, list[str]]]:
    """Running machineconfig rollouts on ``cluster`` touching ``pools`` (any pool when empty),
    from visibility: ``[(workflow_id, pools)]``."""
    from workflows.models import PROCEDURE_MACHINECONFIG_ROLLOUT, SA_CLUSTER, SA_POOLS, SA_PROCEDURE

    q = (
        f"{SA_PROCEDURE} = {_quote(PROCEDURE_MACHINECONFIG_ROLLOUT)} AND {SA_CLUSTER} = {_quote(cluster)}"
        " AND ExecutionStatus = 'Running'"
    )
    if pools:
        q += f" AND {SA_POOLS} IN ({', '.join(_quote(p) for p in pools)})"
    found = []
    async for wf in client.list_workflows(q):
        found.append((wf.id, list(wf.search_attributes.get(SA_POOLS, []) or [])))
    return found


async def wait_for_plan(handle: Any, timeout: float = 120.0) -> Any:
    """Poll the ``status`` query until the rollout has a plan (or is no longer planning).

    Returns the :class:`RolloutStatus`. Raises WorkflowFailureError when the workflow failed
    (e.g. preflight), TimeoutError after ``timeout`` seconds.
    """
    import time
    from datetime import timedelta

    from temporalio.client import WorkflowExecutionStatus

    from workflows.models import RolloutPhase, RolloutStatus

    deadline = time.monotonic() + timeout
    while True:
        desc = await handle.describe()
        if desc.status != WorkflowExecutionStatus.RUNNING:
            await handle.result()  # raises WorkflowFailureError for failed/terminated runs
            return None
        try:
            st: RolloutStatus = await handle.query(
                "status", result_type=RolloutStatus, rpc_timeout=timedelta(seconds=10)
            )
            if st.plan is not None or st.phase not in (RolloutPhase.PLANNING,):
                return st
        except Exception as exc:
            from temporalio.service import RPCError

            if not isinstance(exc, RPCError):
                raise
        if time.monotonic() > deadline:
            raise CliError(
                f"no plan after {timeout:.0f}s; is a worker running on the task queue? "
                f"(lockkeeper status {handle.id})",
                EXIT_FAILED,
            )
        await asyncio.sleep(0.3)


@start_app.command("machineconfig-rollout")
def start_machineconfig_rollout(
    ctx: typer.Context,
    pool: list[str] = typer.Option([], "--pool", "-p", help="Pool to roll (repeatable; default: every pool behind)."),
    target: list[str] = typer.Option([], "--target", help="POOL=RENDERED-CONFIG (default: newest rendered config)."),
    not_before: str | None = typer.Option(None, "--not-before", help="Refuse targets created before this ISO time."),
    max_unavailable: str = typer.Option("1", "--max-unavailable", help="Nodes at a time: N or N%."),
    approve_each: str = typer.Option("none", "--approve-each", help="none | pool | node | canary"),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default: forever)."),
    gate_timeout_outcome: str = typer.Option("reject", "--gate-timeout-outcome", help="reject | approve | abort"),
    no_pause_on_degraded: bool = typer.Option(False, "--no-pause-on-degraded", help="Keep going when a node degrades."),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may approve (repeatable)."),
    repair_network: bool = typer.Option(False, "--repair-network", help="R1: then wait for OVN, delete all pods (gated)."),
    decide_after: float = typer.Option(
        600.0, "--decide-after", help="Seconds a drain may stay blocked before its decision gate opens (0: never)."
    ),
    decision_timeout: float | None = typer.Option(
        None, "--decision-timeout", help="Seconds a drain decision gate waits (default: forever)."
    ),
    decision_timeout_outcome: str = typer.Option(
        "wait", "--decision-timeout-outcome", help="wait | skip | abort (never delete-pod)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and stop."),
    cluster: str | None = typer.Option(None, "--cluster", help="Cluster name (LOCKKEEPER_CLUSTER)."),
    workflow_id: str | None = typer.Option(None, "--id", help="Workflow ID (default: generated)."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the rollout ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Start a MachineConfig rollout (lockkeeper drives the node handshake) and print its plan."""
    from datetime import datetime

    from pydantic import ValidationError

    from workflows.models import ApprovalPolicy, GateTimeoutOutcome, MachineConfigRolloutInput

    output = _check_output(output)
    mu = parse_max_unavailable(max_unavailable)
    targets = parse_targets(target)
    try:
        approval = ApprovalPolicy(approve_each)
    except ValueError:
        raise typer.BadParameter("must be none, pool, node or canary", param_hint="'--approve-each'") from None
    try:
        outcome = GateTimeoutOutcome(gate_timeout_outcome)
    except ValueError:
        raise typer.BadParameter("must be reject, approve or abort", param_hint="'--gate-timeout-outcome'") from None
    nb = None
    if not_before:
        try:
            nb = datetime.fromisoformat(not_before.replace("Z", "+00:00"))
        except ValueError:
            raise typer.BadParameter(f"not an ISO 8601 time: {not_before!r}", param_hint="'--not-before'") from None
        if nb.tzinfo is None:
            raise typer.BadParameter("give a timezone (e.g. 2024-05-01T10:00:00Z)", param_hint="'--not-before'")
    if gate_timeout is not None and gate_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--gate-timeout'")
    if decide_after < 0:
        raise typer.BadParameter("must be >= 0 seconds", param_hint="'--decide-after'")
    if decision_timeout is not None and decision_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--decision-timeout'")
    if decision_timeout_outcome not in ("wait", "skip", "abort"):
        raise typer.BadParameter(
            "must be wait, skip or abort (delete-pod always needs a person)", param_hint="'--decision-timeout-outcome'"
        )

    settings = _cli_settings(ctx)
    who = _identity(identity)
    try:
        inp = MachineConfigRolloutInput(
            cluster=cluster or settings.cluster,
            pools=pool,
            target_configs=targets,
            not_before=nb,
            max_unavailable=mu,
            approval=approval,
            gate_timeout_seconds=gate_timeout,
            gate_timeout_outcome=outcome,
            pause_on_degraded=not no_pause_on_degraded,
            dry_run=dry_run,
            requested_by=who,
            four_eyes=four_eyes,
            allowed_approvers=allowed_approver,
            repair_network=repair_network,
            decide_after_seconds=decide_after or None,
            decision_timeout_seconds=decision_timeout,
            decision_timeout_outcome=decision_timeout_outcome,
        )
    except ValidationError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    _run(_start(settings, inp, workflow_id, wait, output, who))


def _cli_settings(ctx: typer.Context) -> Any:
    try:
        settings = _settings(ctx)
    except CliError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    _setup_logging(settings)
    return settings


async def start_rollout(client: Any, settings: Any, inp: Any, workflow_id: str | None = None) -> Any:
    """Refuse when a rollout already runs on the same cluster+pools (visibility pre-check),
    then start ``MachineConfigRolloutWorkflow`` with the Lockkeeper* search attributes set.
    Returns the workflow handle. Raises :class:`CliError` (exit 1) naming the running rollout."""
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from workflows.models import (
        PROCEDURE_MACHINECONFIG_ROLLOUT,
        SA_CLUSTER,
        SA_POOLS,
        SA_PROCEDURE,
        SA_STATUS,
        MachineConfigRolloutResult,
        RolloutPhase,
    )

    if not inp.dry_run:
        running = await find_running_rollouts(client, inp.cluster, inp.pools)
        if running:
            wid, pools = running[0]
            what = f"pool(s) {', '.join(pools)}" if pools else "this cluster"
            hint = "" if inp.pools else " (no --pool given: any running rollout on the cluster conflicts)"
            raise CliError(
                f"refused: rollout {wid} is already running on {what} of cluster {inp.cluster}{hint}; "
                f"see `lockkeeper status {wid}`",
                EXIT_FAILED,
            )
    wid = workflow_id or _new_id(inp.cluster)
    sa = TypedSearchAttributes(
        [
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_CLUSTER), inp.cluster),
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_PROCEDURE), PROCEDURE_MACHINECONFIG_ROLLOUT),
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_STATUS), str(RolloutPhase.PLANNING)),
            SearchAttributePair(SearchAttributeKey.for_keyword_list(SA_POOLS), list(inp.pools)),
        ]
    )
    try:
        return await client.start_workflow(
            "MachineConfigRolloutWorkflow",
            inp,
            id=wid,
            task_queue=settings.task_queue,
            search_attributes=sa,
            static_summary=f"MachineConfig rollout on {inp.cluster} by {inp.requested_by}",
            result_type=MachineConfigRolloutResult,
        )
    except WorkflowAlreadyStartedError:
        raise CliError(f"refused: a workflow with ID {wid} already exists", EXIT_FAILED) from None


async def _start(settings: Any, inp: Any, workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from rich.console import Console

    from lockkeeper import output as out
    from workflows.models import MachineConfigRolloutResult

    client = await _connect(settings, identity=who)
    handle = await start_rollout(client, settings, inp, workflow_id)
    _err(f"started {handle.id}" + (" (dry run)" if inp.dry_run else ""))
    if inp.dry_run:
        res: MachineConfigRolloutResult = await handle.result()
        _print_plan(res.plan, output, handle.id)
        return EXIT_OK if res.outcome == "dry-run" else EXIT_FAILED
    st = await wait_for_plan(handle)
    if st is not None and st.plan is not None:
        _print_plan(st.plan, output, handle.id)
    _err(f"follow it with: lockkeeper status {handle.id} --watch")
    if not wait:
        return EXIT_OK
    err_console = Console(stderr=True)
    res = await _watch(handle, err_console, live=err_console.is_terminal)
    if output == "table":
        out.console().print(out.result_view(res))
    else:
        print(out.dump(res, output))
    return EXIT_OK if res.outcome == "completed" else EXIT_FAILED


def _print_plan(plan: Any, output: str, wid: str) -> None:
    from rich.console import Console

    from lockkeeper import output as out

    if plan is None:
        _err("no plan")
        return
    if output == "table":
        out.console().print(out.plan_table(plan))
    else:
        print(out.dump({"workflow_id": wid, "plan": out.to_data(plan)}, output))


async def _watch(handle: Any, console: Any, *, live: bool, interval: float = 1.0) -> Any:
    """Show the status live (rich) until the workflow closes; returns its result."""
    from datetime import timedelta

    from rich.live import Live
    from temporalio.client import WorkflowExecutionStatus

    from lockkeeper import output as out
    from workflows.models import MachineConfigRolloutResult, RolloutStatus

    async def closed() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    if live:
        with Live(console=console, auto_refresh=False, transient=False) as lv:
            while not await closed():
                try:
                    st = await handle.query("status", result_type=RolloutStatus, rpc_timeout=timedelta(seconds=10))
                    lv.update(out.status_view(st), refresh=True)
                except Exception as exc:  # a query can time out while no worker runs; keep watching
                    from temporalio.service import RPCError

                    if not isinstance(exc, RPCError):
                        raise
                await asyncio.sleep(interval)
    else:
        last = None
        while not await closed():
            try:
                st = await handle.query("status", result_type=RolloutStatus, rpc_timeout=timedelta(seconds=10))
                line = f"{st.phase} {st.waiting_for or ''}".strip()
                if line != last:
                    console.print(line)
                    last = line
            except Exception as exc:
                from temporalio.service import RPCError

                if not isinstance(exc, RPCError):
                    raise
            await asyncio.sleep(interval)
    return await handle.result()


# --- start etcd-backup / etcd-restore (R3) -----------------------------------------------------------


def load_members_file(path: str, **overrides: Any) -> Any:
    """Read and validate ``members.yaml`` (:class:`workflows.etcd_models.EtcdMembersFile`);
    ``overrides`` (None values ignored) replace its top-level fields. Raises :class:`CliError`
    (exit 2) with one line per problem; nothing is contacted."""
    from pathlib import Path

    import yaml
    from pydantic import ValidationError

    from workflows.etcd_models import EtcdMembersFile

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"--members: cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    except yaml.YAMLError as exc:
        raise CliError(f"--members: {path} is not valid YAML: {exc}", EXIT_USAGE) from None
    if isinstance(doc, list):
        doc = {"members": doc}
    if not isinstance(doc, dict):
        raise CliError(f"--members: {path} must hold a mapping with `members:`", EXIT_USAGE)
    doc.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return EtcdMembersFile.model_validate(doc)
    except ValidationError as exc:
        raise CliError(f"invalid members file {path}:\n  " + _validation_lines(exc), EXIT_USAGE) from None


def _validation_lines(exc: Any) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "\n  ".join(lines)


def _etcd_id(kind: str) -> str:
    import secrets
    from datetime import UTC, datetime

    return f"{kind}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


async def _start_etcd(settings: Any, workflow: str, inp: Any, result_type: Any, wid: str, wait: bool, output: str, who: str) -> int:
    from lockkeeper import output as out

    client = await _connect(settings, identity=who)
    from temporalio.exceptions import WorkflowAlreadyStartedError

    try:
        handle = await client.start_workflow(workflow, inp, id=wid, task_queue=settings.task_queue, result_type=result_type)
    except WorkflowAlreadyStartedError:
        raise CliError(f"refused: a workflow with ID {wid} already exists", EXIT_FAILED) from None
    _err(f"started {handle.id}")
    if not wait:
        print(out.dump({"workflow_id": handle.id}, "json" if output == "table" else output))
        _err(f"follow it with: temporal workflow query --name status -w {handle.id}")
        return EXIT_OK
    res = await handle.result()
    print(out.dump(res, "yaml" if output == "table" else output))
    ok = res.ok if hasattr(res, "ok") else res.outcome == "completed"
    _err(res.message)
    return EXIT_OK if ok else EXIT_FAILED


@start_app.command("etcd-backup")
def start_etcd_backup(
    ctx: typer.Context,
    members: str = typer.Option(..., "--members", help="members.yaml (validated before anything runs)."),
    attempts: int = typer.Option(2, "--attempts", min=1, help="Tries per member."),
    workflow_id: str | None = typer.Option(None, "--id", help="Workflow ID (default: generated)."),
    wait: bool = typer.Option(False, "--wait", help="Wait; exit 0 only if every member was backed up."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Snapshot every etcd member (a barrier: the result names any member that failed)."""
    from workflows.etcd_models import EtcdBackupInput, EtcdBackupResult

    output = _check_output(output)
    try:
        mf = load_members_file(members)
    except CliError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    settings = _cli_settings(ctx)
    inp = EtcdBackupInput(members=mf.members, attempts=attempts)
    _run(_start_etcd(settings, "EtcdBackupWorkflow", inp, EtcdBackupResult, workflow_id or _etcd_id("etcd-backup"),
                     wait, output, _identity(identity)))


@start_app.command("etcd-restore")
def start_etcd_restore(
    ctx: typer.Context,
    members: str = typer.Option(..., "--members", help="members.yaml (validated before anything is stopped)."),
    strategy: str = typer.Option(..., "--strategy", help="force-new-cluster | snapshot-restore"),
    survivor: str | None = typer.Option(None, "--survivor", help="Member the new cluster starts from (default: first)."),
    snapshot: str | None = typer.Option(None, "--snapshot", help="Snapshot path on the survivor's host (snapshot-restore)."),
    auto_approve: bool = typer.Option(False, "--auto-approve", help="Pass the gates without asking (demo/test)."),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may approve (repeatable)."),
    workflow_id: str | None = typer.Option(None, "--id", help="Workflow ID (default: generated)."),
    wait: bool = typer.Option(False, "--wait", help="Wait; exit 0 only if the restore completed and verified."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Restore etcd quorum (R3): stop all, new cluster from the survivor, re-add the others."""
    from pydantic import ValidationError

    from workflows.etcd_models import EtcdRestoreInput, EtcdRestoreResult, RestoreStrategy

    output = _check_output(output)
    try:
        strat = RestoreStrategy(strategy)
    except ValueError:
        raise typer.BadParameter("must be force-new-cluster or snapshot-restore", param_hint="'--strategy'") from None
    who = _identity(identity)
    try:
        mf = load_members_file(members, survivor=survivor, snapshot=snapshot)
        inp = EtcdRestoreInput(
            members=mf.members, strategy=strat, survivor=mf.survivor, snapshot=mf.snapshot, auto_approve=auto_approve,
            requested_by=who, four_eyes=four_eyes, allowed_approvers=allowed_approver,
        )
    except CliError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    except ValidationError as exc:
        _err(f"error: invalid restore request:\n  {_validation_lines(exc)}")
        raise typer.Exit(EXIT_USAGE) from None
    settings = _cli_settings(ctx)
    _run(_start_etcd(settings, "EtcdQuorumRestoreWorkflow", inp, EtcdRestoreResult,
                     workflow_id or _etcd_id("etcd-restore"), wait, output, who))


# --- status / list --------------------------------------------------------------------------------


@app.command()
def status(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    output: str = OutputOpt,
    watch: bool = typer.Option(False, "--watch", "-w", help="Live view until the rollout ends."),
) -> None:
    """Where a rollout is: per node phase/step/waiting for/since/deadline, gates, totals."""
    output = _check_output(output)
    settings = _cli_settings(ctx)
    _run(_status(settings, workflow_id, output, watch))


async def _status(settings: Any, wid: str, output: str, watch: bool) -> int:
    from datetime import timedelta

    from rich.console import Console
    from temporalio.client import WorkflowExecutionStatus

    from lockkeeper import output as out
    from workflows.models import MachineConfigRolloutResult, RolloutStatus

    client = await _connect(settings)
    handle = client.get_workflow_handle(wid, result_type=MachineConfigRolloutResult)
    desc = await handle.describe()
    console = out.console()
    if desc.status == WorkflowExecutionStatus.RUNNING:
        if watch and output == "table":
            res = await _watch(handle, console, live=True)
            console.print(out.result_view(res))
            return EXIT_OK if res.outcome == "completed" else EXIT_FAILED
        st = await handle.query("status", result_type=RolloutStatus, rpc_timeout=timedelta(seconds=15))
        if output == "table":
            console.print(out.status_view(st))
        else:
            print(out.dump(st, output))
        return EXIT_OK
    # Closed: the result holds the final state (no worker needed to answer).
    res = await handle.result()
    if output == "table":
        console.print(out.result_view(res))
    else:
        print(out.dump(res, output))
    return EXIT_OK if res.outcome in ("completed", "dry-run") else EXIT_FAILED


@app.command("list")
def list_(
    ctx: typer.Context,
    cluster: str | None = typer.Option(None, "--cluster", help="Only this cluster."),
    procedure: str | None = typer.Option(None, "--procedure", help="e.g. machineconfig-rollout"),
    state: str | None = typer.Option(None, "--status", help="LockkeeperStatus, e.g. running, paused, done"),
    running: bool = typer.Option(False, "--running", help="Only executions still running."),
    limit: int = typer.Option(50, "--limit"),
    output: str = OutputOpt,
) -> None:
    """List procedures (visibility query on LockkeeperProcedure/Cluster/Status)."""
    output = _check_output(output)
    settings = _cli_settings(ctx)
    _run(_list(settings, cluster, procedure, state, running, limit, output))


def build_list_query(cluster: str | None, procedure: str | None, state: str | None, running: bool) -> str:
    """The visibility query of ``lockkeeper list``."""
    from workflows.models import SA_CLUSTER, SA_PROCEDURE, SA_STATUS

    terms = [f"{SA_PROCEDURE} = {_quote(procedure)}" if procedure else f"{SA_PROCEDURE} IS NOT NULL"]
    if cluster:
        terms.append(f"{SA_CLUSTER} = {_quote(cluster)}")
    if state:
        terms.append(f"{SA_STATUS} = {_quote(state)}")
    if running:
        terms.append("ExecutionStatus = 'Running'")
    return " AND ".join(terms)


async def _list(settings: Any, cluster: str | None, procedure: str | None, state: str | None, running: bool, limit: int, output: str) -> int:
    from rich.console import Console

    from lockkeeper import output as out
    from workflows.models import SA_CLUSTER, SA_POOLS, SA_PROCEDURE, SA_STATUS

    client = await _connect(settings)
    rows = []
    async for wf in client.list_workflows(build_list_query(cluster, procedure, state, running), limit=limit):
        sa = wf.search_attributes
        first = lambda k: (sa.get(k) or [None])[0]  # noqa: E731 - untyped SAs come as lists
        rows.append(
            {
                "id": wf.id,
                "procedure": first(SA_PROCEDURE),
                "cluster": first(SA_CLUSTER),
                "pools": list(sa.get(SA_POOLS) or []),
                "status": first(SA_STATUS),
                "execution": wf.status.name.lower() if wf.status else None,
                "started": wf.start_time.isoformat(timespec="seconds") if wf.start_time else None,
            }
        )
    if output == "table":
        out.console().print(out.list_table(rows))
    else:
        print(out.dump(rows, output))
    return EXIT_OK


# --- decisions ------------------------------------------------------------------------------------


async def _update(settings: Any, wid: str, name: str, arg: Any, result_type: type, output: str, who: str) -> int:
    client = await _connect(settings, identity=who)
    handle = client.get_workflow_handle(wid)
    await handle.describe()  # NOT_FOUND → exit 3 with the ID in the message
    res = await handle.execute_update(name, arg, result_type=result_type)
    from lockkeeper import output as out

    if output == "table":
        _err(getattr(res, "message", str(res)))
    else:
        print(out.dump(res, output))
    return EXIT_OK


@app.command()
def approve(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    gate: str | None = typer.Argument(None, help="Gate ID (default: the only waiting gate)."),
    comment: str = typer.Option("", "--comment", "-m"),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Approve a waiting gate (attributed to your identity)."""
    from workflows.models import ApproveInput, GateDecisionResult

    settings = _cli_settings(ctx)
    who = _identity(identity)
    arg = ApproveInput(gate_id=gate, identity=who, comment=comment)
    _run(_update(settings, workflow_id, "approve", arg, GateDecisionResult, _check_output(output), who))


@app.command()
def reject(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    gate: str | None = typer.Argument(None, help="Gate ID (default: the only waiting gate)."),
    comment: str = typer.Option("", "--comment", "-m"),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Reject a waiting gate: the rollout pauses; `resume` re-opens the gate."""
    from workflows.models import GateDecisionResult, RejectInput

    settings = _cli_settings(ctx)
    who = _identity(identity)
    arg = RejectInput(gate_id=gate, identity=who, comment=comment)
    _run(_update(settings, workflow_id, "reject", arg, GateDecisionResult, _check_output(output), who))


def _control(name: str, help_text: str) -> None:
    def command(
        ctx: typer.Context,
        workflow_id: str = typer.Argument(..., metavar="ID"),
        comment: str = typer.Option("", "--comment", "-m"),
        reason: str | None = typer.Option(None, "--reason"),
        identity: str | None = IdentityOpt,
        output: str = OutputOpt,
    ) -> None:
        from workflows.models import ControlInput, ControlResult

        settings = _cli_settings(ctx)
        who = _identity(identity)
        arg = ControlInput(identity=who, comment=comment, reason=reason)
        _run(_update(settings, workflow_id, name, arg, ControlResult, _check_output(output), who))

    command.__doc__ = help_text
    app.command(name)(command)


def _node_control(name: str, update: str, help_text: str) -> None:
    def command(
        ctx: typer.Context,
        workflow_id: str = typer.Argument(..., metavar="ID"),
        node: str = typer.Argument(..., metavar="NODE"),
        comment: str = typer.Option("", "--comment", "-m"),
        identity: str | None = IdentityOpt,
        output: str = OutputOpt,
    ) -> None:
        from workflows.models import ControlResult, NodeControlInput

        settings = _cli_settings(ctx)
        who = _identity(identity)
        arg = NodeControlInput(node=node, identity=who, comment=comment)
        _run(_update(settings, workflow_id, update, arg, ControlResult, _check_output(output), who))

    command.__doc__ = help_text
    app.command(name)(command)


_control("pause", "Pause: no new node or gate starts; in-flight nodes finish.")
_control("resume", "Resume a paused rollout (re-opens a rejected gate).")
_control("abort", "Abort: no new node; in-flight nodes roll back or finish at a safe point.")
_node_control("skip-node", "skip_node", "Skip a node (pending/degraded: reset and uncordon; in flight: at a safe point).")
_node_control("retry-node", "retry_node", "Retry a degraded or failed node (new attempt) and resume.")


# --- demo / sim -----------------------------------------------------------------------------------


@app.command()
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
    raise typer.Exit(run_demo(
            interactive=interactive, state_dir=state_dir, time_scale=time_scale, scenario=scenario, timeout=timeout
        )
    )


@app.command(
    "sim",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def sim(ctx: typer.Context) -> None:
    """The cluster simulator (clustersim): serve a scenario, inspect it. `lockkeeper sim --help`."""
    try:
        from clustersim.cli import sim_app
    except ImportError as exc:
        _err(f"error: the cluster simulator is not available ({exc})")
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


# Blocked drains (R2): decide, diagnose pool, start drain.
from lockkeeper import cli_drain as _cli_drain  # noqa: E402 - it imports this module's helpers

_cli_drain.register(app, start_app)


def main() -> None:
    """Console entrypoint ``lockkeeper``.

    Exits through ``os._exit`` after flushing: the Temporal core runtime's threads can abort the
    interpreter's own finalization (``PyGILState_Release``), which would turn exit code 3 into
    a crash (-6).
    """
    import os

    code: int = 0
    try:
        app()  # standalone mode: usage errors are printed by typer and end in SystemExit(2)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
