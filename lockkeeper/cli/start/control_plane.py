"""``lockkeeper start control-plane-upgrade``: the masters one at a time (R3d, procedures-spec §4.1).

Either ``--input upgrade-cp.yaml`` (a whole :class:`ControlPlaneUpgradeInput`, e.g. with the etcd
members for the backup barrier) or flags: ``--master NAME`` (repeatable, in order) with
``--api-url https://{master}:8443`` and SSH access (``--ssh-user``; ``--ssh-port``), and the action
``--action-command "ansible-playbook ... -l {master}"`` or ``--static-pod PATH=LOCALFILE``
(repeatable). Without etcd members, ``--etcd-backup-skip-reason`` must say why the barrier is
skipped. An API that does not come back opens gate ``api/<master>/<n>``: ``lockkeeper approve ID``
waits again, ``--comment restart`` restarts the API again, ``lockkeeper reject ID`` aborts.
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
from lockkeeper.cli.start.node_upgrade import parse_argv
from lockkeeper.cli.start.shared import Launch, launch, spec_named


def _read_input(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(str(exc), param_hint="'--input'") from None
    if not isinstance(data, dict):
        raise typer.BadParameter("expected a mapping", param_hint="'--input'")
    return data


def start_control_plane_upgrade(
    ctx: typer.Context,
    input_file: Path | None = typer.Option(None, "--input", help="The whole input as YAML/JSON (flags below are ignored)."),
    master: list[str] = typer.Option([], "--master", help="Master node name, in upgrade order (repeatable)."),
    api_url: str = typer.Option("https://{master}:8443", "--api-url", help="Each master's own API URL ({master} replaced)."),
    ssh_user: str = typer.Option("root", "--ssh-user", help="SSH user on the masters."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port on the masters."),
    action_command: str | None = typer.Option(None, "--action-command", help="External master action ({master} replaced)."),
    static_pod: list[str] = typer.Option([], "--static-pod", help="PATH=LOCALFILE: manifest to write on each master."),
    expected_image: str | None = typer.Option(None, "--expected-image", help="Mirror pods' image after the action."),
    etcd_backup_skip_reason: str | None = typer.Option(None, "--etcd-backup-skip-reason", help="Why no etcd backup barrier."),
    gluster_host: bool = typer.Option(True, "--gluster-hosts/--no-gluster-hosts", help="The masters serve GlusterFS bricks."),
    approve_each: bool = typer.Option(False, "--approve-each", help="A gate before every master (default: the first)."),
    api_ca_file: str | None = typer.Option(None, "--api-ca-file", help="CA bundle for the /healthz/ready probe."),
    dry_run: bool = DryRunOpt,
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the upgrade ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Upgrade the control plane master by master, strictly one at a time (R3d)."""
    output = check_output(output)
    settings = cli_settings(ctx)
    who = identity_of(identity)
    if input_file is not None:
        fields = _read_input(input_file)
        fields.setdefault("requested_by", who)
        fields.setdefault("cluster", cluster or settings.cluster)
        fields["dry_run"] = dry_run or fields.get("dry_run", False)
    else:
        if not master:
            raise typer.BadParameter("give --master (repeatable) or --input", param_hint="'--master'")
        if bool(action_command) == bool(static_pod):
            raise typer.BadParameter("give --action-command or --static-pod, one of them", param_hint="'--action-command'")
        manifests = []
        for item in static_pod:
            path, sep, local = item.partition("=")
            if not sep:
                raise typer.BadParameter("expected PATH=LOCALFILE", param_hint="'--static-pod'")
            try:
                manifests.append({"path": path, "content": Path(local).read_text()})
            except OSError as exc:
                raise typer.BadParameter(str(exc), param_hint="'--static-pod'") from None
        action: dict[str, Any] = ({"kind": "external", "argv": parse_argv(action_command, "'--action-command'")} if action_command
                                  else {"kind": "static-pods", "manifests": manifests})
        fields = dict(
            cluster=cluster or settings.cluster, requested_by=who, dry_run=dry_run, action=action, expected_image=expected_image,
            etcd_backup_skip_reason=etcd_backup_skip_reason, approve_each=approve_each, api_ca_file=api_ca_file,
            masters=[{"name": m, "api_url": api_url.replace("{master}", m), "gluster_host": gluster_host,
                      "access": {"backend": "ssh", "host": m, "port": ssh_port, "user": ssh_user, "node": m}} for m in master],
        )
    run(_start(settings, fields, workflow_id, wait, output, who))


async def _start(settings: Any, fields: dict[str, Any], workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from pydantic import ValidationError

    from workflows.kit.scopes import node_scope

    spec = spec_named("control-plane-upgrade")
    try:
        inp = spec.input_model(**fields)
    except ValidationError as exc:
        err(f"error: invalid control-plane upgrade:\n  {validation_lines(exc)}")
        return EXIT_USAGE
    order = " -> ".join(m.name for m in inp.masters)
    req = Launch(
        name=spec.name, input=inp, cluster=inp.cluster, who=who, output=output, wait=wait, dry_run=inp.dry_run,
        scopes=[node_scope(inp.cluster, m.name) for m in inp.masters], workflow_id=workflow_id,
        summary=f"control-plane upgrade {order} on {inp.cluster} by {who}",
    )
    return await launch(req, settings)
