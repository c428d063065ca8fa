"""Answering a running procedure: ``approve``, ``reject``, ``pause``, ``resume``, ``abort``,
``skip-node``, ``retry-node``, ``hold``, ``release``, ``decide``. Generic over every procedure type.

Every procedure exposes the same Updates with the same names (the kit's base workflow):
``approve``/``reject`` (gates), ``pause``/``resume``/``abort``; node procedures also
``skip_node``, ``retry_node``, ``hold_node``, ``release_node`` (holds, :mod:`workflows.kit.holds`)
and ``decide`` (a blocked drain). Each command sends one Update
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

import asyncio
from typing import Any

import typer

from lockkeeper.cli import common, decisions
from lockkeeper.cli.common import EXIT_USAGE, CliError, IdentityOpt, OutputOpt, check_output, cli_settings, identity_of, parse_duration  # noqa: F401 - parse_duration re-exported


def send(ctx: typer.Context, wid: str, update: str, arg: Any, result_type: type, output: str, who: str, *, node: bool = False,
         gate: str | None = None) -> None:
    """Send ``update`` (after checking, for ``node`` updates, that the procedure has nodes). A
    ``gate`` that the procedure shows on behalf of a child (a phase of a cluster upgrade, a node
    run; :mod:`workflows.kit.report`) is answered on the child that owns it, so the decision is
    recorded once, where the gate is."""
    settings = cli_settings(ctx)

    async def body() -> int:
        if node:
            await require_node_procedure(settings, wid, update)
        if update == "abort" and await abort_if_never_ran(settings, wid, who, getattr(arg, "reason", None), output):
            return common.EXIT_OK
        target = await gate_owner(settings, wid, gate) if gate else wid
        if target != wid:
            common.err(f"gate {gate} belongs to {target} (shown by {wid}): answering it there")
        return await decisions.update(settings, target, update, arg, result_type, output, who)

    common.run(body(), decision=True)


async def gate_owner(settings: Any, wid: str, gate: str) -> str:
    """The workflow that owns ``gate`` as ``wid``'s status shows it (``Gate.workflow_id``), or
    ``wid`` itself (also when the status cannot be read within 3 s, as with no worker polling:
    the update then says what is wrong, within its own deadline)."""
    from datetime import timedelta

    try:
        client = await common.connect(settings)
        status = await asyncio.wait_for(client.get_workflow_handle(wid).query(
            "status", result_type=dict, rpc_timeout=timedelta(seconds=3)), 3.5)
    except Exception:  # noqa: BLE001 - a closed run or no worker: the update itself reports it
        return wid
    return owner_of(status, gate) or wid


def owner_of(status: dict[str, Any], gate: str) -> str | None:
    """The workflow that owns ``gate`` as a ``status`` (the query's JSON) shows it
    (``Gate.workflow_id``, set for a child's gate, in ``gates`` or in a node's row: the runtime
    migration's rows carry their node run's gates), None for the workflow's own or an unknown gate."""
    rows = status.get("nodes") if isinstance(status.get("nodes"), dict) else {}
    for g in [*(status.get("gates") or []), *(g for r in rows.values() if isinstance(r, dict) for g in r.get("gates") or [])]:
        if isinstance(g, dict) and g.get("id") == gate and g.get("workflow_id"):
            return str(g["workflow_id"])
    return None


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


def _gate_decision(update: str, model: str, help_text: str) -> Any:
    """``approve`` / ``reject``: send ``update`` with the kit's ``model`` (``ApproveInput`` /
    ``RejectInput``: the gate, your identity, the comment) and print its ``GateDecisionResult``."""

    def command(
        ctx: typer.Context,
        workflow_id: str = typer.Argument(..., metavar="ID"),
        gate: str | None = typer.Argument(None, help="Gate ID (default: the only waiting gate)."),
        comment: str = typer.Option("", "--comment", "-m"),
        identity: str | None = IdentityOpt,
        output: str = OutputOpt,
    ) -> None:
        from workflows.kit import models

        who = identity_of(identity)
        send(ctx, workflow_id, update, getattr(models, model)(gate_id=gate, identity=who, comment=comment),
             models.GateDecisionResult, check_output(output), who, gate=gate)

    command.__doc__ = help_text
    return command


approve = _gate_decision("approve", "ApproveInput", "Approve a waiting gate (attributed to your identity).")
reject = _gate_decision("reject", "RejectInput", "Reject a waiting gate: the procedure pauses; `resume` re-opens the gate.")


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


def _node_control(update: str, help_text: str, model: str = "NodeControlInput", text: str = "comment") -> Any:
    """A command on one node of a run: send ``update`` with the kit's ``model`` (the node, your
    identity, and ``-m`` as its ``text`` field: ``--comment`` or ``--reason``) and print its
    ``ControlResult``."""

    def command(
        ctx: typer.Context,
        workflow_id: str = typer.Argument(..., metavar="ID"),
        node: str = typer.Argument(..., metavar="NODE"),
        words: str = typer.Option("", f"--{text}", "-m"),
        identity: str | None = IdentityOpt,
        output: str = OutputOpt,
    ) -> None:
        from workflows.kit import models

        who = identity_of(identity)
        send(ctx, workflow_id, update, getattr(models, model)(node=node, identity=who, **{text: words}), models.ControlResult,
             check_output(output), who, node=True)

    command.__doc__ = help_text
    return command


def parse_time(text: str) -> Any:
    """An ISO 8601 time (``2026-11-29T14:00:00Z``, ``2026-11-29T14:00+01:00``; without an offset:
    UTC) → an aware datetime; raises typer.BadParameter (exit 2) otherwise."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is no ISO 8601 time (e.g. 2026-11-29T14:00:00Z)", param_hint="'--until'") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def hold(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    node: str = typer.Argument(..., metavar="NODE"),
    until: str | None = typer.Option(None, "--until", help="Hold until this time (ISO 8601; no offset: UTC)."),
    for_: str | None = typer.Option(None, "--for", help="Hold for this long from now (30m, 2h, 1d)."),
    reason: str = typer.Option("", "--reason", "-m", help="Why (required)."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Hold a node: the procedure does not start it (the next node in order starts instead)
    until it is released or the hold expires; a node in flight finishes normally. Without
    --until or --for the hold lasts until `lockkeeper release`."""
    from workflows.kit.models import ControlResult, HoldInput

    who = identity_of(identity)
    inp = HoldInput(node=node, identity=who, reason=reason, until=parse_time(until) if until is not None else None,
                    for_seconds=parse_duration(for_) if for_ is not None else None)
    send(ctx, workflow_id, "hold_node", inp, ControlResult, check_output(output), who, node=True)


release = _node_control("release_node", "Release a held node: it starts in its place of the order.", "ReleaseInput", "reason")


def decide(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    target: str = typer.Argument(..., metavar="NODE|GATE"),
    choice: str = typer.Argument(..., metavar="CHOICE"),
    comment: str = typer.Option("", "--comment", "-m"),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Make a choice on a gate that offers choices (``decide ID GATE CHOICE``; ``status`` lists
    them, e.g. ``wait|restart``), or answer a node's blocked drain (``decide ID NODE
    wait|skip|delete-pod|abort``: wait asks again later, skip the node, delete-pod deletes the
    blocking pods despite their PodDisruptionBudget (four-eyes applies), abort the procedure).
    The procedure refuses a choice its gate does not offer."""
    from workflows.kit.models import DecideInput, DecideResult

    who = identity_of(identity)
    send(ctx, workflow_id, "decide", DecideInput(node=target, decision=choice, identity=who, comment=comment), DecideResult,
         check_output(output), who, gate=target)


def revert(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    reason: str = typer.Option("", "--reason", "-m"),
    full: bool = typer.Option(False, "--full", help="Reverse the whole change of an ended run in a new run (its own reverse, "
                                                        "or one that restores its records); on a running run: the same as revert."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Revert what a procedure changed: a running run stops at its next safe point (every wait
    ends), restores what its records hold, reads each object back and ends ``reverted``; its
    validator says when it cannot (past its point of no return: ``--full``). An ended run:
    ``--full`` starts the reverse run. Sent with a deadline and a bounded wait like every decision."""
    from lockkeeper.cli.revert_full import revert_ended, revert_full
    from workflows.kit.models import RevertAnswer, RevertInput

    who = identity_of(identity)
    settings = cli_settings(ctx)
    if full:
        common.run(revert_full(settings, workflow_id, who, check_output(output), reason), decision=True)
        return

    async def body() -> int:
        if await revert_ended(settings, workflow_id, who):
            return EXIT_USAGE
        return await decisions.update(settings, workflow_id, "revert", RevertInput(identity=who, reason=reason), RevertAnswer,
                                      check_output(output), who)

    common.run(body(), decision=True)


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
    app.command("hold")(hold)
    app.command("release")(release)
    app.command("decide")(decide)
    app.command("revert")(revert)
