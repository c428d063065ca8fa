"""Answering a running procedure: ``approve``, ``reject``, ``pause``, ``resume``, ``abort``,
``skip-node``, ``retry-node``, ``decide``. Generic over every procedure type.

Every procedure exposes the same Updates with the same names (the kit's base workflow):
``approve``/``reject`` (gates), ``pause``/``resume``/``abort``; node procedures also
``skip_node``, ``retry_node`` and ``decide`` (a blocked drain). Each command sends one Update
attributed to ``--identity`` (default: the OS user); the workflow's validator decides, and its
refusal is exit 1 with its own words (an unknown gate or node: exit 3). The node commands check
the procedure's spec first, so asking an etcd restore to skip a node is a clear usage error
(exit 2), not a missing-handler failure. Ctrl-C prints "interrupted; nothing was decided" and
exits 130.

``abort`` of a procedure that no worker has picked up yet (started with ``--queue``: its history
has no completed workflow task, so it has done nothing) terminates it at once: no worker is
needed to answer, and nothing can have been written.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli import common, decisions
from lockkeeper.cli.common import EXIT_USAGE, CliError, IdentityOpt, OutputOpt, check_output, cli_settings, identity_of


def send(ctx: typer.Context, wid: str, update: str, arg: Any, result_type: type, output: str, who: str, *, node: bool = False) -> None:
    """Send ``update`` (after checking, for ``node`` updates, that the procedure has nodes)."""
    settings = cli_settings(ctx)

    async def body() -> int:
        if node:
            await require_node_procedure(settings, wid, update)
        if update == "abort" and await abort_if_never_ran(settings, wid, who, getattr(arg, "reason", None), output):
            return common.EXIT_OK
        return await decisions.update(settings, wid, update, arg, result_type, output, who)

    common.run(body(), decision=True)


async def abort_if_never_ran(settings: Any, wid: str, who: str, reason: str | None, output: str) -> bool:
    """Terminate ``wid`` when it runs but no worker ever completed a workflow task for it (a
    queued start: it has done nothing); True if it did. A run that has started working is left
    to the ``abort`` Update (False)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowExecutionStatus

    client = await common.connect(settings, identity=who)
    handle = client.get_workflow_handle(wid)
    if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
        return False
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return False
    await handle.terminate(reason=f"aborted by {who} before any worker picked it up" + (f": {reason}" if reason else ""))
    msg = f"aborted: {wid} never ran (no worker had picked it up); it is terminated and nothing was done"
    if output == "table":
        common.err(msg)
    else:
        from lockkeeper import output as out

        print(out.dump({"workflow_id": wid, "aborted": True, "terminated": True, "message": msg}, output))
    return True


async def require_node_procedure(settings: Any, wid: str, update: str) -> None:
    """Raise :class:`CliError` (exit 2) when ``wid``'s procedure has no node updates."""
    from lockkeeper.cli.observe import spec_of

    client = await common.connect(settings)
    desc = await client.get_workflow_handle(wid).describe()
    spec = spec_of(desc.workflow_type)
    if not spec.node_procedure:
        raise CliError(f"{spec.name} {wid} has no nodes to {update.replace('_', '-')}", EXIT_USAGE)


def approve(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    gate: str | None = typer.Argument(None, help="Gate ID (default: the only waiting gate)."),
    comment: str = typer.Option("", "--comment", "-m"),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Approve a waiting gate (attributed to your identity)."""
    from workflows.kit.models import ApproveInput, GateDecisionResult

    who = identity_of(identity)
    send(ctx, workflow_id, "approve", ApproveInput(gate_id=gate, identity=who, comment=comment), GateDecisionResult,
         check_output(output), who)


def reject(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    gate: str | None = typer.Argument(None, help="Gate ID (default: the only waiting gate)."),
    comment: str = typer.Option("", "--comment", "-m"),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Reject a waiting gate: the procedure pauses; `resume` re-opens the gate."""
    from workflows.kit.models import GateDecisionResult, RejectInput

    who = identity_of(identity)
    send(ctx, workflow_id, "reject", RejectInput(gate_id=gate, identity=who, comment=comment), GateDecisionResult,
         check_output(output), who)


def _control(update: str, help_text: str) -> Any:
    def command(
        ctx: typer.Context,
        workflow_id: str = typer.Argument(..., metavar="ID"),
        comment: str = typer.Option("", "--comment", "-m"),
        reason: str | None = typer.Option(None, "--reason"),
        identity: str | None = IdentityOpt,
        output: str = OutputOpt,
    ) -> None:
        from workflows.kit.models import ControlInput, ControlResult

        who = identity_of(identity)
        send(ctx, workflow_id, update, ControlInput(identity=who, comment=comment, reason=reason), ControlResult,
             check_output(output), who)

    command.__doc__ = help_text
    return command


def _node_control(update: str, help_text: str) -> Any:
    def command(
        ctx: typer.Context,
        workflow_id: str = typer.Argument(..., metavar="ID"),
        node: str = typer.Argument(..., metavar="NODE"),
        comment: str = typer.Option("", "--comment", "-m"),
        identity: str | None = IdentityOpt,
        output: str = OutputOpt,
    ) -> None:
        from workflows.kit.models import ControlResult, NodeControlInput

        who = identity_of(identity)
        send(ctx, workflow_id, update, NodeControlInput(node=node, identity=who, comment=comment), ControlResult,
             check_output(output), who, node=True)

    command.__doc__ = help_text
    return command


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
    from workflows.kit.models import DecideInput, DecideResult, DrainDecision

    try:
        choice = DrainDecision(decision)
    except ValueError:
        raise typer.BadParameter("must be wait, skip, delete-pod or abort", param_hint="DECISION") from None
    who = identity_of(identity)
    send(ctx, workflow_id, "decide", DecideInput(node=node, decision=choice, identity=who, comment=comment), DecideResult,
         check_output(output), who, node=True)


def revert(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    reason: str = typer.Option("", "--reason", "-m"),
    full: bool = typer.Option(False, "--full", help="Reverse the whole change (a running run decides; an ended one "
                                                        "gets a reverse run, see lockkeeper.cli.revert_full)."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Revert a procedure's recorded changes (procedures with a ``revert`` Update, e.g. the
    network migration before its cleanup); the procedure's validator says when it cannot. Sent
    with a deadline and a bounded wait like every decision (:func:`lockkeeper.cli.decisions.update`)."""
    from lockkeeper.cli.revert_full import RevertArgs, RevertReply, revert_full

    who = identity_of(identity)
    if full:
        common.run(revert_full(cli_settings(ctx), workflow_id, who, check_output(output), reason), decision=True)
        return
    send(ctx, workflow_id, "revert", RevertArgs(identity=who, reason=reason), RevertReply, check_output(output), who)


def register(app: typer.Typer) -> None:
    """Add the operator commands."""
    app.command("approve")(approve)
    app.command("reject")(reject)
    app.command("pause")(_control("pause", "Pause: no new node, gate or step starts; in-flight work finishes."))
    app.command("resume")(_control("resume", "Resume a paused procedure (re-opens a rejected gate)."))
    app.command("abort")(_control("abort", "Abort: nothing new starts; in-flight work rolls back or stops at a safe point."))
    app.command("skip-node")(_node_control(
        "skip_node", "Skip a node (pending/degraded: reset and uncordon; in flight: at a safe point)."))
    app.command("retry-node")(_node_control("retry_node", "Retry a degraded or failed node (new attempt) and resume."))
    app.command("decide")(decide)
    app.command("revert")(revert)
