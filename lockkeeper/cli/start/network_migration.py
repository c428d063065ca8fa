"""``lockkeeper start network-migration``: the OpenShift 4.14 offline SDN→OVN-Kubernetes
migration, guarded (issue 15, R1 prevented).

The run takes ``sdn/<cluster>`` before its first write and ``cluster/<cluster>`` before the switch
(the pre-check here refuses a start while anything on the cluster is leased), and waits until the run has read the
cluster, so bad input (the type already set, a Degraded pool) is reported as the run's refusal.
"""

from __future__ import annotations

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
from lockkeeper.cli.start.shared import Launch, launch, spec_named, workflow_dry_run


def start_network_migration(
    ctx: typer.Context,
    to: str = typer.Option(..., "--to", help="Target network plugin: OVNKubernetes."),
    reboot_via: str = typer.Option("debug-pod", "--reboot-via", help="How the reboot reaches a node: debug-pod | ssh."),
    max_unavailable: int = typer.Option(1, "--max-unavailable", min=1, help="Nodes rebooted at once (masters: one at a time)."),
    stall_after: float = typer.Option(600.0, "--stall-after", help="Seconds without pool progress before offering the takeover."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port of the nodes (--reboot-via ssh)."),
    ssh_map: str | None = typer.Option(None, "--ssh-map", help="JSON file: node -> host:port (--reboot-via ssh)."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve the gates."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may approve (repeatable)."),
    dry_run: bool = DryRunOpt,
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the migration ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Migrate the cluster network to OVN-Kubernetes: guarded switch, controller takeover, controlled reboots."""
    import json
    from pathlib import Path

    output = check_output(output)
    hosts: dict[str, str] = {}
    if ssh_map is not None:
        try:
            hosts = {str(k): str(v) for k, v in json.loads(Path(ssh_map).read_text()).items()}
        except (OSError, ValueError, AttributeError) as exc:
            raise typer.BadParameter(f"cannot read {ssh_map}: {exc}", param_hint="'--ssh-map'") from None
    settings = cli_settings(ctx)
    who = identity_of(identity)
    fields = dict(cluster=cluster or settings.cluster, to=to, reboot_via=reboot_via, max_unavailable=max_unavailable,
                  stall_seconds=stall_after, ssh_port=ssh_port, ssh_hosts=hosts, ssh_user=ssh_user, requested_by=who, four_eyes=four_eyes,
                  allowed_approvers=allowed_approver, dry_run=dry_run, alerts=alerts)
    run(_start(settings, fields, dry_run, workflow_id, wait, output, who))


def _past_preflight(st: Any) -> bool:
    return str(getattr(st, "step", "preflight")) != "preflight"


async def _start(settings: Any, fields: dict[str, Any], dry_run: bool, workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from pydantic import ValidationError

    from workflows.kit.scopes import cluster_scope

    spec = spec_named("network-migration")
    try:
        inp = spec.input_model(**fields)
    except ValidationError as exc:
        err(f"error: invalid network migration:\n  {validation_lines(exc)}")
        return EXIT_USAGE
    req = Launch(
        name=spec.name, input=inp, cluster=inp.cluster, who=who, output=output, wait=wait, dry_run=dry_run,
        scopes=[cluster_scope(inp.cluster)], workflow_id=workflow_id, id_name=inp.to.lower(),
        summary=f"network migration of {inp.cluster} to {inp.to} by {who}",
        ready=_past_preflight, ready_timeout=60.0, ready_required=False,
    )
    if dry_run:
        return await workflow_dry_run(req, settings, plan=_plan_lines)
    return await launch(req, settings)


def _plan_lines(res: Any) -> list[str]:
    """The dry run's plan: the workflow's summary, then the reboot batches."""
    return [res.message, *(f"  reboot batch {i}: {', '.join(b)}" for i, b in enumerate(res.plan, 1))]
