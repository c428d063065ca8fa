"""``lockkeeper start network-migration``: the OpenShift 4.14 offline SDN→OVN-Kubernetes
migration, guarded (issue 15, R1 prevented).

The run takes ``sdn/<cluster>`` before its first write and ``cluster/<cluster>`` before the switch
(the pre-check here refuses a start while anything on the cluster is leased), and waits until the run has read the
cluster, so bad input (the type already set, a Degraded pool) is reported as the run's refusal.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, start_options
from lockkeeper.cli.start.dryrun import workflow_dry_run


def start_network_migration(
    to: str = typer.Option(..., "--to", help="Target network plugin: OVNKubernetes."),
    reboot_via: str = typer.Option("debug-pod", "--reboot-via", help="How the reboot reaches a node: debug-pod | ssh."),
    max_unavailable: int = typer.Option(1, "--max-unavailable", min=1, help="Nodes rebooted at once (masters: one at a time)."),
    stall_after: float = typer.Option(600.0, "--stall-after", help="Seconds without pool progress before offering the takeover."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port of the nodes (--reboot-via ssh)."),
    ssh_map: str | None = typer.Option(None, "--ssh-map", help="JSON file: node -> host:port (--reboot-via ssh)."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    approvals: Approvals = approval_options("the gates"),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("migration")),
) -> None:
    """Migrate the cluster network to OVN-Kubernetes: guarded switch, controller takeover, controlled reboots."""
    import json
    from pathlib import Path

    from workflows.kit.scopes import cluster_scope

    hosts: dict[str, str] = {}
    if ssh_map is not None:
        try:
            hosts = {str(k): str(v) for k, v in json.loads(Path(ssh_map).read_text()).items()}
        except (OSError, ValueError, AttributeError) as exc:
            raise typer.BadParameter(f"cannot read {ssh_map}: {exc}", param_hint="'--ssh-map'") from None
    inp = start.validated(
        "network-migration", "invalid network migration:\n  ",
        cluster=start.cluster, to=to, reboot_via=reboot_via, max_unavailable=max_unavailable, stall_seconds=stall_after,
        ssh_port=ssh_port, ssh_hosts=hosts, ssh_user=ssh_user, **approvals.fields(start.who), dry_run=start.dry_run, alerts=alerts,
    )
    start.go(start.request(
        "network-migration", inp, cluster=inp.cluster, scopes=[cluster_scope(inp.cluster)], id_name=inp.to.lower(),
        summary=f"network migration of {inp.cluster} to {inp.to} by {start.who}",
        ready=_past_preflight, ready_timeout=60.0, ready_required=False,
    ), dry_run=lambda req, settings: workflow_dry_run(req, settings, plan=_plan_lines))


def _past_preflight(st: Any) -> bool:
    return str(getattr(st, "step", "preflight")) != "preflight"


def _plan_lines(res: Any) -> list[str]:
    """The dry run's plan: the workflow's summary, then the reboot batches."""
    return [res.message, *(f"  reboot batch {i}: {', '.join(b)}" for i, b in enumerate(res.plan, 1))]
