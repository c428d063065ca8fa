"""CLI for blocked drains (R2): ``decide``, ``diagnose pool``, ``start drain``.

Registered on the main app by :func:`register` (lockkeeper/cli.py). Exit codes as in
:mod:`lockkeeper.cli`: 2 for a decision the workflow's validator refused, 3 for an unknown pool.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    IdentityOpt,
    OutputOpt,
    CliError,
    _check_output,
    _cli_settings,
    _connect,
    _err,
    _identity,
    _run,
    _update,
)

diagnose_app = typer.Typer(help="Read-only diagnosis straight from the API (no workflow needed).", no_args_is_help=True)


def decide(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    node: str = typer.Argument(..., metavar="NODE"),
    decision: str = typer.Argument(..., metavar="wait|skip|delete-pod|abort"),
    comment: str = typer.Option("", "--comment", "-m"),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Answer a blocked drain: wait (ask again later), skip the node, delete the blocking pods
    despite their PodDisruptionBudget (needs an approver; four-eyes applies), or abort."""
    from workflows.models import DecideInput, DecideResult, DrainDecision

    try:
        choice = DrainDecision(decision)
    except ValueError:
        raise typer.BadParameter("must be wait, skip, delete-pod or abort", param_hint="DECISION") from None
    settings = _cli_settings(ctx)
    who = _identity(identity)
    arg = DecideInput(node=node, decision=choice, identity=who, comment=comment)
    _run(_update(settings, workflow_id, "decide", arg, DecideResult, _check_output(output), who))


@diagnose_app.command("pool")
def diagnose_pool_cmd(
    ctx: typer.Context,
    pool: str = typer.Argument(..., metavar="NAME"),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Path (KUBECONFIG)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context (KUBE_CONTEXT)."),
    output: str = OutputOpt,
) -> None:
    """Why a MachineConfigPool is stuck: nodes behind, degraded reasons, drain blockers, Pending pods, conditions."""
    from lockkeeper.cli import _settings

    output = _check_output(output)
    try:
        settings = _settings(ctx, kubeconfig=kubeconfig, kube_context=context)
    except CliError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(exc.code) from None

    async def body() -> int:
        import asyncio

        from activities.diagnose import DiagnoseError, diagnose_pool
        from lockkeeper import output as out
        from workers.registry import build_gateway

        def work() -> Any:
            gw = build_gateway(settings)
            try:
                return diagnose_pool(gw, pool)
            finally:
                gw.close()

        try:
            diag = await asyncio.to_thread(work)
        except DiagnoseError as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from None
        except Exception as exc:
            if type(exc).__name__ in ("KubeconfigError", "Unavailable"):
                raise CliError(str(exc), EXIT_NOT_FOUND) from None
            raise
        if output == "table":
            out.console().print(out.diagnosis_view(diag))
        else:
            print(out.dump(diag, output))
        return EXIT_OK

    _run(body())


def start_drain(
    ctx: typer.Context,
    node: str = typer.Option(..., "--node", help="The node to take out for maintenance."),
    reboot_command: str | None = typer.Option(None, "--reboot-command", help="Command to run after the drain (argv, shell-split)."),
    exec_via: str = typer.Option(
        "debug-pod", "--exec-via", help="How --reboot-command reaches the node: debug-pod | ssh | local."
    ),
    ssh_host: str | None = typer.Option(None, "--ssh-host", help="Node address for --exec-via ssh."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    uncordon_after: bool = typer.Option(False, "--uncordon-after", help="Uncordon when done (only if we cordoned)."),
    decide_after: float = typer.Option(600.0, "--decide-after", help="Seconds blocked before asking for a decision."),
    decision_timeout: float | None = typer.Option(None, "--decision-timeout", help="Seconds a decision waits (default forever)."),
    decision_timeout_outcome: str = typer.Option("wait", "--decision-timeout-outcome", help="wait | skip | abort"),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve delete-pod."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may decide (repeatable)."),
    cluster: str | None = typer.Option(None, "--cluster"),
    workflow_id: str | None = typer.Option(None, "--id", help="Workflow ID (default: generated)."),
    identity: str | None = IdentityOpt,
) -> None:
    """Drain one node durably (cordon, drain with the blocked report and decision gate)."""
    import shlex

    from pydantic import ValidationError

    from workflows.models import NodeDrainInput

    argv = None
    if reboot_command is not None:
        try:
            argv = shlex.split(reboot_command)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--reboot-command'") from None
    from activities.etcd_models import ExecBackend, HostAccess

    try:
        backend = ExecBackend(exec_via)
    except ValueError:
        raise typer.BadParameter("must be debug-pod, ssh or local", param_hint="'--exec-via'") from None
    if backend == ExecBackend.SSH and not ssh_host:
        raise typer.BadParameter("--exec-via ssh needs --ssh-host", param_hint="'--ssh-host'")
    settings = _cli_settings(ctx)
    who = _identity(identity)
    try:
        access = HostAccess(backend=backend, node=node, host=ssh_host or "127.0.0.1", user=ssh_user)
        inp = NodeDrainInput(
            reboot_access=access if argv else None,
            node=node, cluster=cluster or settings.cluster, requested_by=who, four_eyes=four_eyes,
            allowed_approvers=allowed_approver, reboot_command=argv, uncordon_after=uncordon_after,
            decide_after_seconds=decide_after, decision_timeout_seconds=decision_timeout,
            decision_timeout_outcome=decision_timeout_outcome,
        )
    except ValidationError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(2) from None

    async def body() -> int:
        import secrets
        from datetime import UTC, datetime

        from temporalio.exceptions import WorkflowAlreadyStartedError

        from workflows.models import NodeDrainResult

        client = await _connect(settings, identity=who)
        wid = workflow_id or f"drain-{inp.cluster}-{node}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
        try:
            handle = await client.start_workflow(
                "NodeDrainWorkflow", inp, id=wid, task_queue=settings.task_queue, result_type=NodeDrainResult,
            )
        except WorkflowAlreadyStartedError:
            raise CliError(f"refused: a workflow with ID {wid} already exists", EXIT_FAILED) from None
        print(handle.id)
        # Bad input (an unknown node) fails the workflow at its first read, before any write:
        # report that here with exit 1 instead of leaving it to a later `status`.
        await _wait_started(handle, node)
        _err(f"follow it with: lockkeeper status {handle.id}")
        return EXIT_OK

    _run(body())


async def _wait_started(handle: Any, node: str, timeout: float = 30.0) -> None:
    """Wait until the drain has cordoned ``node`` (its first write) or the workflow closed.

    A closed run raises WorkflowFailureError (mapped to exit 1 with the cause, e.g.
    ``NodeNotFound: node X not found``); after ``timeout`` seconds without either, returns
    quietly (a worker may simply be slow to pick it up; ``status`` tells more)."""
    import asyncio
    import time

    from temporalio.client import WorkflowExecutionStatus

    from workflows.models import RolloutStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            await handle.result()
            return
        try:
            st: RolloutStatus = await handle.query("status", result_type=RolloutStatus)
        except Exception:  # noqa: BLE001 - no worker has the run yet; keep waiting
            st = None
        ns = st.nodes.get(node) if st is not None else None
        if ns is not None and (ns.cordoned_by_us or ns.step not in (None, "cordon")):
            return
        await asyncio.sleep(0.3)


def register(app: typer.Typer, start_app: typer.Typer) -> None:
    """Add ``decide``, ``diagnose pool`` and ``start drain`` to the CLI."""
    app.command("decide")(decide)
    app.add_typer(diagnose_app, name="diagnose")
    start_app.command("drain")(start_drain)
