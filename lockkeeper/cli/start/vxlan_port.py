"""``lockkeeper start vxlan-port-change``: the live VXLAN port change (R5, procedures-spec §7).

Hosts are reached over SSH (``--ssh-map``: a JSON file ``{"node": "host:port", ...}``, every
node of the cluster, masters included; key, known_hosts and user from the worker's environment)
or through a debug pod per node (``--exec-via debug-pod`` with ``--node`` for every node).
Masters are named with ``--master NAME=API_URL`` (that master's own API, e.g.
``https://master-1:8443``). The input is validated before anything is contacted; the run leases
``cluster/<cluster>``. ``--dry-run`` starts a run that only does phase A (preflight) and stops.
"""

from __future__ import annotations

import shlex
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
from lockkeeper.cli.start.shared import Launch, launch, read_ssh_map, spec_named


def parse_masters(values: list[str]) -> list[tuple[str, str]]:
    """``NAME=API_URL`` pairs. Raises BadParameter naming the bad one."""
    pairs = []
    for v in values:
        name, sep, url = v.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise typer.BadParameter(f"{v!r} is not NAME=https://HOST:PORT", param_hint="'--master'")
        pairs.append((name, url))
    return pairs


def start_vxlan_port_change(
    ctx: typer.Context,
    port: int = typer.Option(..., "--port", help="The new VXLAN UDP port (e.g. 4889)."),
    image: str = typer.Option(..., "--image", help="The custom node image without the SDN port health check."),
    old_port: int = typer.Option(4789, "--old-port", help="The port the cluster uses now."),
    master: list[str] = typer.Option(..., "--master", help="NAME=API_URL of every master (repeatable)."),
    switch_via: str = typer.Option("pod-exec", "--switch-via", help="How the fan-out reaches vxlan0: pod-exec | ssh."),
    exec_via: str = typer.Option("ssh", "--exec-via", help="How host commands reach nodes: ssh | debug-pod."),
    ssh_map: str | None = typer.Option(None, "--ssh-map", help="JSON file node -> host:port (every node)."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    node: list[str] = typer.Option([], "--node", help="Every node, for --exec-via debug-pod (repeatable)."),
    pull_cmd: str = typer.Option("docker pull", "--pull-cmd", help="Pull command (crictl pull on CRI-O nodes)."),
    image_present_cmd: str = typer.Option("docker image inspect", "--image-present-cmd", help="Image presence check."),
    master_ca: str | None = typer.Option(None, "--master-ca", help="CA file to verify the masters' API certificates."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default forever)."),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve the gates."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may approve (repeatable)."),
    dry_run: bool = DryRunOpt,
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the run ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Change the SDN VXLAN port on a live OpenShift 3.11 cluster (phases A-H, fan-out in one step)."""
    from activities.host.models import ExecBackend, HostAccess

    output = check_output(output)
    if switch_via not in ("pod-exec", "ssh"):
        raise typer.BadParameter("must be pod-exec or ssh", param_hint="'--switch-via'")
    masters = parse_masters(master)
    if exec_via == "ssh":
        if not ssh_map:
            raise typer.BadParameter("--exec-via ssh needs --ssh-map", param_hint="'--ssh-map'")
        access = {n: HostAccess(backend=ExecBackend.SSH, host=h, port=p, user=ssh_user) for n, (h, p) in read_ssh_map(ssh_map).items()}
    elif exec_via == "debug-pod":
        if switch_via == "ssh":
            raise typer.BadParameter("--switch-via ssh needs --exec-via ssh", param_hint="'--switch-via'")
        access = {n: HostAccess(backend=ExecBackend.DEBUG_POD, node=n) for n in dict.fromkeys([*node, *(m for m, _ in masters)])}
    else:
        raise typer.BadParameter("must be ssh or debug-pod", param_hint="'--exec-via'")
    missing = [m for m, _ in masters if m not in access]
    if missing:
        raise typer.BadParameter(f"no host access for master(s) {', '.join(missing)}", param_hint="'--master'")
    settings = cli_settings(ctx)
    who = identity_of(identity)
    fields: dict[str, Any] = dict(
        new_port=port, old_port=old_port, custom_image=image, cluster=cluster or settings.cluster, requested_by=who,
        four_eyes=four_eyes, allowed_approvers=allowed_approver, switch_via=switch_via, host_access=access,
        nodes=sorted(access), masters=[dict(name=m, access=access[m], api_url=u, ca_file=master_ca) for m, u in masters],
        pull_cmd=shlex.split(pull_cmd), image_present_cmd=shlex.split(image_present_cmd), gate_timeout_s=gate_timeout,
        dry_run=dry_run,
    )
    run(_start(settings, fields, workflow_id, wait, output, who))


def stage_started(st: Any) -> bool:
    """``wait_for_status`` condition: the run is past its lease and shows a stage."""
    return bool(getattr(st, "stage", None)) and bool(getattr(st, "leases", None))


async def _start(settings: Any, fields: dict[str, Any], workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from pydantic import ValidationError

    from workflows.kit.scopes import cluster_scope

    spec = spec_named("vxlan-port-change")
    try:
        inp = spec.input_model(**fields)
    except ValidationError as exc:
        err(f"error: invalid vxlan-port-change:\n  {validation_lines(exc)}")
        return EXIT_USAGE
    req = Launch(
        name=spec.name, input=inp, cluster=inp.cluster, who=who, output=output, wait=wait or inp.dry_run, dry_run=False,
        scopes=[cluster_scope(inp.cluster)], workflow_id=workflow_id, id_name=f"{inp.old_port}-to-{inp.new_port}",
        summary=f"VXLAN port {inp.old_port} -> {inp.new_port} on {inp.cluster} by {who}" + (" (dry run)" if inp.dry_run else ""),
        ready=stage_started, ready_timeout=30.0, ready_required=False,
    )
    return await launch(req, settings)
