"""``lockkeeper start drain``: take one node out durably (cordon, drain with the blocked-drain
report and decision gate, optionally a reboot command, wait for Ready, uncordon).

The command waits until the drain has cordoned the node (its first write) so that bad input,
such as an unknown node, is reported here rather than by a later ``status``. Negative
durations and an unknown timeout outcome are usage errors (exit 2) before anything starts.

The flags are aliases of the input's fields (:class:`workflows.drain.models.NodeDrainInput`):
``--decide-after`` ``drain.decide_after_seconds``, ``--decision-timeout`` /
``--decision-timeout-outcome`` ``drain.decision_timeout_seconds`` / ``drain.decision_timeout_outcome``,
``--exec-via ssh --ssh-host H --ssh-port P --ssh-user U`` ``reboot_access``, ``--four-eyes``
``approvals.four_eyes``, ...; ``-f input.yaml`` gives the input, the flags given override it,
``--set drain.wait_seconds=5`` any field (:func:`lockkeeper.cli.start.shared.build_input`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.start.options import (
    Approvals,
    Start,
    approval_options,
    check_decision,
    completes,
    parse_argv,
    positive_seconds,
    start_options,
)
from lockkeeper.cli.start.shared import INPUT_FILE, INPUT_SETS, build_input, refuse_node_order, refuse_windows, spec_named
from lockkeeper.cli.start.dryrun import workflow_dry_run


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
    node: str | None = typer.Option(None, "--node", help="The node to take out for maintenance (or node: in -f)."),
    reboot_command: str | None = typer.Option(None, "--reboot-command", help="Command to run after the drain (argv, shell-split)."),
    exec_via: str | None = typer.Option(None, "--exec-via", help="How --reboot-command reaches the node: debug-pod (default) | "
                                                                 "ssh | local."),
    ssh_host: str | None = typer.Option(None, "--ssh-host", help="Node address for --exec-via ssh."),
    ssh_port: int | None = typer.Option(None, "--ssh-port", help="SSH port of the node (--exec-via ssh; default 22)."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    uncordon_after: bool = typer.Option(False, "--uncordon-after", help="Uncordon when done (only if we cordoned)."),
    ready_timeout: float | None = typer.Option(None, "--ready-timeout", help="Seconds the node may take to boot anew and be "
                                                                             "Ready after --reboot-command (default 1800)."),
    decide_after: float | None = typer.Option(None, "--decide-after", help="Seconds blocked before asking for a decision "
                                                                           "(default 600)."),
    decision_timeout: float | None = typer.Option(None, "--decision-timeout", help="Seconds a decision waits (default forever)."),
    decision_timeout_outcome: str | None = typer.Option(None, "--decision-timeout-outcome", help="wait (default) | skip | abort"),
    approvals: Approvals = approval_options("delete-pod", verb="decide"),
    order_by: str | None = typer.Option(None, "--order", metavar="ORDER",
                                        help="Refused: a drain takes one node (--node), there is no node order to choose."),
    node_order_file: Path | None = typer.Option(None, "--node-order", metavar="FILE", help="Refused, as --order."),
    window: list[str] = typer.Option([], "--window", metavar="SPEC", help="Refused: a drain takes one node and "
                                       "starts it now (the node procedures take --window)."),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("drain")),
) -> None:
    """Drain one node durably (cordon, drain with the blocked report and decision gate)."""
    from activities.host.models import ExecBackend
    from workflows.kit.scopes import node_scope

    which = f"--node {node}" if node else "--node"
    refuse_windows(window, f"a drain takes exactly one node ({which}) and starts it now; start it inside your "
                   "window, or use machineconfig-rollout, node-upgrade or runtime-migration, which take --window")
    refuse_node_order(order_by, node_order_file, f"a drain takes exactly one node ({which}); to drain several "
                      "in an order, start one drain per node in that order (machineconfig-rollout, node-upgrade and "
                      "runtime-migration take --order)")
    if node is None and INPUT_FILE.get() is None and not any(s.startswith("node=") for s in INPUT_SETS.get()):
        raise typer.BadParameter("the node to drain is missing: --node NODE (or node: in -f FILE)", param_hint="'--node'")
    backend = None
    if exec_via is not None:
        try:
            backend = ExecBackend(exec_via)
        except ValueError:
            raise typer.BadParameter("must be debug-pod, ssh or local", param_hint="'--exec-via'") from None
    if backend == ExecBackend.SSH and not ssh_host:
        raise typer.BadParameter("--exec-via ssh needs --ssh-host", param_hint="'--ssh-host'")
    if ssh_port is not None and not 1 <= ssh_port <= 65535:
        raise typer.BadParameter("must be a port, 1 to 65535", param_hint="'--ssh-port'")
    positive_seconds(ready_timeout, "'--ready-timeout'")
    check_decision(decide_after, decision_timeout, decision_timeout_outcome)
    # --exec-via debug-pod is the input's default (a debug pod on the node): no access to give
    ssh = backend not in (None, ExecBackend.DEBUG_POD)
    inp = build_input(spec_named("drain").input_model, {
        **start.input_fields(), **approvals.flags(), "node": node, "alerts": alerts,
        "reboot_command": parse_argv(reboot_command, "'--reboot-command'") if reboot_command is not None else None,
        "reboot_access.backend": backend.value if ssh and backend else None, "reboot_access.node": node if ssh else None,
        "reboot_access.host": ssh_host if ssh else None, "reboot_access.port": ssh_port if ssh else None,
        "reboot_access.user": ssh_user if ssh else None,
        "uncordon_after": uncordon_after or None, "ready_timeout_seconds": ready_timeout,
        "drain.decide_after_seconds": decide_after, "drain.decision_timeout_seconds": decision_timeout,
        "drain.decision_timeout_outcome": decision_timeout_outcome,
    })
    start.go(start.request(
        "drain", inp, cluster=inp.cluster, scopes=[node_scope(inp.cluster, inp.node)], id_name=inp.node,
        summary=f"drain of node {inp.node} on {inp.cluster} by {start.who}",
        ready=drain_started(inp.node), ready_timeout=30.0, ready_required=False,
    ), dry_run=lambda req, settings: workflow_dry_run(req, settings, plan=lambda res: [res.message]))


start_drain.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set
