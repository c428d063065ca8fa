"""``lockkeeper start network-migration``: the OpenShift 4.14 offline SDN→OVN-Kubernetes
migration, guarded (issue 15, R1 prevented).

The run takes ``sdn/<cluster>`` before its first write and ``cluster/<cluster>`` before the switch
(the pre-check here refuses a start while anything on the cluster is leased), and waits until the run has read the
cluster, so bad input (the type already set, a Degraded pool) is reported as the run's refusal.

The flags are aliases of the input's fields (:class:`workflows.network_migration.models.NetworkMigrationInput`:
``--stall-after`` ``stall_seconds``, ``--ssh-map FILE`` ``ssh_hosts``, ``--four-eyes``
``approvals.four_eyes``, ...); ``-f input.yaml`` gives the input, the flags given override it,
``--set gates.timeout_seconds=3600`` any field (:func:`lockkeeper.cli.start.shared.build_input`).
The model validates once: an unknown target, reboot path or field is exit 2 before anything starts.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, max_unavailable_flag, start_options
from lockkeeper.cli.start.shared import build_input, spec_named
from lockkeeper.cli.start.dryrun import workflow_dry_run


def start_network_migration(
    to: str | None = typer.Option(None, "--to", help="Target network plugin: OVNKubernetes (or to: in -f)."),
    reboot_via: str | None = typer.Option(None, "--reboot-via", help="How the reboot reaches a node: debug-pod (default) | ssh."),
    max_unavailable: str | None = typer.Option(None, "--max-unavailable", help="Nodes rebooted at once: N or N% of the nodes "
                                                                               "outside the masters (default 1; masters: one "
                                                                               "at a time)."),
    stall_after: float | None = typer.Option(None, "--stall-after", help="Seconds without pool progress before offering the "
                                                                         "takeover (default 600)."),
    ssh_port: int | None = typer.Option(None, "--ssh-port", help="SSH port of the nodes (--reboot-via ssh; default 22)."),
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

    hosts: dict[str, str] | None = None
    if ssh_map is not None:
        try:
            hosts = {str(k): str(v) for k, v in json.loads(Path(ssh_map).read_text()).items()}
        except (OSError, ValueError, AttributeError) as exc:
            raise typer.BadParameter(f"cannot read {ssh_map}: {exc}", param_hint="'--ssh-map'") from None
    inp = build_input(spec_named("network-migration").input_model, {
        **start.input_fields(), **approvals.flags(), "to": to, "reboot_via": reboot_via,
        "max_unavailable": max_unavailable_flag(max_unavailable), "stall_seconds": stall_after, "ssh_port": ssh_port,
        "ssh_hosts": hosts, "ssh_user": ssh_user, "alerts": alerts,
    })
    start.go(start.request(
        "network-migration", inp, cluster=inp.cluster, scopes=[cluster_scope(inp.cluster)], id_name=inp.to.lower(),
        summary=f"network migration of {inp.cluster} to {inp.to} by {start.who}",
        ready=_past_preflight, ready_timeout=60.0, ready_required=False,
    ), dry_run=lambda req, settings: workflow_dry_run(req, settings, plan=_plan_lines))


start_network_migration.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set


def _past_preflight(st: Any) -> bool:
    return str(getattr(st, "step", "preflight")) != "preflight"


def _plan_lines(res: Any) -> list[str]:
    """The dry run's plan: the workflow's summary, then the reboot batches."""
    return [res.message, *(f"  reboot batch {i}: {', '.join(b)}" for i, b in enumerate(res.plan, 1))]
