"""``lockkeeper start drain``: take one node out durably (cordon, drain with the blocked-drain
report and decision gate, optionally a reboot command, wait for Ready, uncordon).

The command waits until the drain has cordoned the node (its first write) so that bad input,
such as an unknown node, is reported here rather than by a later ``status``. Negative
durations and an unknown timeout outcome are usage errors (exit 2) before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_USAGE,
    ClusterOpt,
    DryRunOpt,
    IdentityOpt,
    IdOpt,
    OutputOpt,
    check_output,
    cli_settings,
    err,
    identity_of,
    run,
    validation_lines,
)
from lockkeeper.cli.start.shared import Launch, launch, refuse_node_order, refuse_windows, spec_named, workflow_dry_run


def drain_started(node: str) -> Any:
    """``wait_for_status`` condition: the drain cordoned ``node`` or moved past the cordon.
    Reads the drain status's ``node`` (a ``NodeStatus``), or the node's entry of a
    rollout-shaped status (``nodes``) as the drain reported before it had its own."""

    def ready(st: Any) -> bool:
        nodes = getattr(st, "nodes", None)
        ns = nodes.get(node) if isinstance(nodes, dict) else getattr(st, "node", None)
        if ns is None or isinstance(ns, str):
            return False
        step = getattr(ns, "step", None)
        return bool(getattr(ns, "cordoned_by_us", False)) or (step is not None and str(step) != "cordon")

    return ready


def start_drain(
    ctx: typer.Context,
    node: str = typer.Option(..., "--node", help="The node to take out for maintenance."),
    reboot_command: str | None = typer.Option(None, "--reboot-command", help="Command to run after the drain (argv, shell-split)."),
    exec_via: str = typer.Option("debug-pod", "--exec-via", help="How --reboot-command reaches the node: debug-pod | ssh | local."),
    ssh_host: str | None = typer.Option(None, "--ssh-host", help="Node address for --exec-via ssh."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port of the node (--exec-via ssh)."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    uncordon_after: bool = typer.Option(False, "--uncordon-after", help="Uncordon when done (only if we cordoned)."),
    ready_timeout: float = typer.Option(1800.0, "--ready-timeout",
                                        help="Seconds the node may take to boot anew and be Ready after --reboot-command."),
    decide_after: float = typer.Option(600.0, "--decide-after", help="Seconds blocked before asking for a decision."),
    decision_timeout: float | None = typer.Option(None, "--decision-timeout", help="Seconds a decision waits (default forever)."),
    decision_timeout_outcome: str = typer.Option("wait", "--decision-timeout-outcome", help="wait | skip | abort"),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve delete-pod."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may decide (repeatable)."),
    order_by: str | None = typer.Option(None, "--order", metavar="ORDER",
                                        help="Refused: a drain takes one node (--node), there is no node order to choose."),
    node_order_file: Path | None = typer.Option(None, "--node-order", metavar="FILE", help="Refused, as --order."),
    dry_run: bool = DryRunOpt,
    window: list[str] = typer.Option([], "--window", metavar="SPEC", help="Refused: a drain takes one node and "
                                       "starts it now (the node procedures take --window)."),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the drain ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Drain one node durably (cordon, drain with the blocked report and decision gate)."""
    import shlex

    from activities.host.models import ExecBackend

    output = check_output(output)
    refuse_windows(window, f"a drain takes exactly one node (--node {node}) and starts it now; start it inside your "
                   "window, or use machineconfig-rollout, node-upgrade or runtime-migration, which take --window")
    refuse_node_order(order_by, node_order_file, f"a drain takes exactly one node (--node {node}); to drain several "
                      "in an order, start one drain per node in that order (machineconfig-rollout, node-upgrade and "
                      "runtime-migration take --order)")
    argv = None
    if reboot_command is not None:
        try:
            argv = shlex.split(reboot_command)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--reboot-command'") from None
    try:
        backend = ExecBackend(exec_via)
    except ValueError:
        raise typer.BadParameter("must be debug-pod, ssh or local", param_hint="'--exec-via'") from None
    if backend == ExecBackend.SSH and not ssh_host:
        raise typer.BadParameter("--exec-via ssh needs --ssh-host", param_hint="'--ssh-host'")
    if not 1 <= ssh_port <= 65535:
        raise typer.BadParameter("must be a port, 1 to 65535", param_hint="'--ssh-port'")
    if ready_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--ready-timeout'")
    if decide_after < 0:
        raise typer.BadParameter("must be >= 0 seconds", param_hint="'--decide-after'")
    if decision_timeout is not None and decision_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--decision-timeout'")
    if decision_timeout_outcome not in ("wait", "skip", "abort"):
        raise typer.BadParameter(
            "must be wait, skip or abort (delete-pod always needs a person)", param_hint="'--decision-timeout-outcome'"
        )
    settings = cli_settings(ctx)
    who = identity_of(identity)
    fields = dict(
        node=node, cluster=cluster or settings.cluster, requested_by=who, four_eyes=four_eyes,
        allowed_approvers=allowed_approver, reboot_command=argv, uncordon_after=uncordon_after,
        decide_after_seconds=decide_after, decision_timeout_seconds=decision_timeout,
        decision_timeout_outcome=decision_timeout_outcome, ready_timeout_seconds=ready_timeout, alerts=alerts,
    )
    access = dict(backend=backend, node=node, host=ssh_host or "127.0.0.1", port=ssh_port, user=ssh_user) if argv else None
    run(_start(settings, fields, access, dry_run, workflow_id, wait, output, who))


async def _start(settings: Any, fields: dict[str, Any], access: dict[str, Any] | None, dry_run: bool,
                 workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from pydantic import ValidationError

    from activities.host.models import HostAccess
    from workflows.kit.scopes import node_scope

    spec = spec_named("drain")
    try:
        inp = spec.input_model(**{**fields, "dry_run": dry_run or bool(fields.get("dry_run"))},
                               reboot_access=HostAccess(**access) if access else None)
    except ValidationError as exc:
        err(f"error: invalid drain: {validation_lines(exc)}")
        return EXIT_USAGE
    req = Launch(
        name=spec.name, input=inp, cluster=inp.cluster, who=who, output=output, wait=wait, dry_run=inp.dry_run,
        scopes=[node_scope(inp.cluster, inp.node)], workflow_id=workflow_id, id_name=inp.node,
        summary=f"drain of node {inp.node} on {inp.cluster} by {who}",
        ready=drain_started(inp.node), ready_timeout=30.0, ready_required=False,
    )
    if inp.dry_run:
        return await workflow_dry_run(req, settings, plan=lambda res: [res.message])
    return await launch(req, settings)
