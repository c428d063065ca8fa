"""``lockkeeper start control-plane-upgrade``: the masters one at a time (R3d, procedures-spec §4.1).

The flags are aliases of the input's fields (:class:`ControlPlaneUpgradeInput`), built with
:func:`lockkeeper.cli.start.shared.build_input`: ``-f upgrade-cp.yaml`` (or ``--input``, the same)
gives a whole input as YAML or JSON (``masters`` with each master's own ``api_url`` and
``access``, ``action``, ``etcd_backup`` / ``etcd_members``), the flags given override its fields
(``--master`` with its SSH and API flags the whole ``masters`` list, ``--action-command`` or
``--static-pod`` the whole ``action``), ``--set gates.timeout_seconds=600`` any field. Without a
file: ``--master NAME`` (repeatable, in order) and SSH access (``--ssh-user``;
``--ssh-port``, or ``--ssh-map FILE``: each master's own ``host:port``, as ``lockkeeper sim serve``
prints it in ``CLUSTERSIM_SSH_MAP``), and the action ``--action-command "ansible-playbook ... -l {master}"`` or
``--static-pod PATH=LOCALFILE`` (repeatable).

Each master's own API URL (:func:`api_urls`): ``--api-url`` is a template with ``{master}`` (the
name) and ``{port}`` (``--api-port NAME=PORT``, repeatable; default 8443, o-a's
``openshift_master_api_port``), e.g. ``--api-url 'http://127.0.0.1:{port}' --api-port
master01=18443 --api-port master02=18444``; or ``--api-url NAME=URL`` per master (repeatable;
masters without one use the template).

etcd: ``--etcd-members FILE`` (a YAML/JSON list of etcd members, the etcd procedures' members
file) is checked healthy before the first master; without it ``--etcd-health-skip-reason`` must
say why. Without etcd members for the backup, ``--etcd-backup-skip-reason`` must say why the
barrier is skipped. ``--to-version 3.10``: the release the control plane goes to (default: the
``--static-pod`` image's tag); the preflight refuses (exit 2) an update of more than one minor
version from the cluster's version, or a downgrade. An API that does not come back opens gate ``api/<master>/<n>``: ``lockkeeper approve ID``
waits again, ``lockkeeper decide ID GATE restart`` restarts the API again, ``lockkeeper reject ID`` aborts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_USAGE, err
from lockkeeper.cli.start.options import MasterSsh, Start, completes, master_ssh_options, parse_argv, start_options
from lockkeeper.cli.start.shared import INPUT_FILE, build_input, read_yaml, spec_named
from lockkeeper.cli.start.dryrun import workflow_dry_run


DEFAULT_API_PORT = 8443
_PLACEHOLDER = re.compile(r"{([^{}]*)}")


def api_urls(masters: list[str], api_url: list[str], api_port: list[str]) -> dict[str, str]:
    """Each master's own API URL from the ``--api-url`` entries (one template with ``{master}`` /
    ``{port}``, and/or ``NAME=URL`` per master) and the ``--api-port NAME=PORT`` entries.
    Raises ``typer.BadParameter`` for an unknown placeholder, a second template, a name that is
    not a ``--master``, a bad port, or a master left without a URL."""
    template: str | None = None
    per: dict[str, str] = {}
    for entry in api_url:
        name, sep, url = entry.partition("=")
        if sep and "://" in url and "/" not in name and ":" not in name:
            if name not in masters:
                raise typer.BadParameter(f"{name!r} is not a --master", param_hint="'--api-url'")
            per[name] = url
            continue
        if template is not None:
            raise typer.BadParameter(f"one template only; got {template!r} and {entry!r} (per master: NAME=URL)",
                                     param_hint="'--api-url'")
        bad = [p for p in _PLACEHOLDER.findall(entry) if p not in ("master", "port")]
        if bad:
            raise typer.BadParameter(f"unknown placeholder {{{bad[0]}}} in {entry!r}: use {{master}} and {{port}}",
                                     param_hint="'--api-url'")
        template = entry
    ports: dict[str, int] = {}
    for entry in api_port:
        name, sep, port = entry.partition("=")
        if not sep or name not in masters:
            raise typer.BadParameter(f"expected NAME=PORT with NAME a --master, got {entry!r}", param_hint="'--api-port'")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise typer.BadParameter(f"bad port in {entry!r}", param_hint="'--api-port'")
        ports[name] = int(port)
    out: dict[str, str] = {}
    for m in masters:
        if m in per:
            out[m] = per[m]
        elif template is not None:
            out[m] = template.replace("{master}", m).replace("{port}", str(ports.get(m, DEFAULT_API_PORT)))
        else:
            out[m] = f"https://{m}:{ports.get(m, DEFAULT_API_PORT)}"
    return out


def _read_members(path: Path) -> list[Any]:
    data = read_yaml(path, "'--etcd-members'")
    if isinstance(data, dict) and isinstance(data.get("members"), list):
        data = data["members"]
    if not isinstance(data, list) or not data:
        raise typer.BadParameter("expected a list of etcd members (or a mapping with `members:`)", param_hint="'--etcd-members'")
    return data


def start_control_plane_upgrade(
    input_file: Path | None = typer.Option(None, "--input", help="The whole input as YAML/JSON (the same as -f; the flags "
                                                                 "given override its fields)."),
    master: list[str] = typer.Option([], "--master", help="Master node name, in upgrade order (repeatable)."),
    api_url: list[str] = typer.Option([], "--api-url", help="Each master's own API: a template with {master} and {port} "
                                                           "(default https://{master}:{port}), or NAME=URL per master "
                                                           "(repeatable)."),
    api_port: list[str] = typer.Option([], "--api-port", help="NAME=PORT: {port} of that master (default 8443; repeatable)."),
    ssh: MasterSsh = master_ssh_options("JSON file master -> host[:port] (instead of the master's name and --ssh-port)."),
    action_command: str | None = typer.Option(None, "--action-command", help="External master action ({master} replaced)."),
    static_pod: list[str] = typer.Option([], "--static-pod", help="PATH=LOCALFILE: manifest to write on each master."),
    expected_image: str | None = typer.Option(None, "--expected-image", help="Mirror pods' image after the action."),
    etcd_backup_skip_reason: str | None = typer.Option(None, "--etcd-backup-skip-reason", help="Why no etcd backup barrier."),
    to_version: str | None = typer.Option(None, "--to-version", help="The OpenShift release the control plane goes to "
                                                                    "(3.10); refused when more than one minor version "
                                                                    "from the cluster's, or back (default: the "
                                                                    "--static-pod image's tag)."),
    etcd_members: Path | None = typer.Option(None, "--etcd-members", help="YAML/JSON list of etcd members checked healthy "
                                                                         "before the first master."),
    etcd_health_skip_reason: str | None = typer.Option(None, "--etcd-health-skip-reason", help="Why etcd health is not checked."),
    gluster_host: bool = typer.Option(True, "--gluster-hosts/--no-gluster-hosts", help="The masters serve GlusterFS bricks."),
    approve_each: bool = typer.Option(False, "--approve-each", help="A gate before every master (default: the first)."),
    api_ca_file: str | None = typer.Option(None, "--api-ca-file", help="CA bundle for the /healthz/ready probe."),
    api_ready_timeout: float | None = typer.Option(None, "--api-ready-timeout", min=1.0,
                                                   help="Seconds a restarted master's API may take to answer /healthz/ready "
                                                        "before its gate opens with master-logs (openshift-ansible waits 120, "
                                                        "the default)."),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("upgrade")),
) -> None:
    """Upgrade the control plane master by master, strictly one at a time (R3d)."""
    from workflows.kit.scopes import node_scope

    who = start.who
    if input_file is not None:
        if INPUT_FILE.get() is not None:
            raise typer.BadParameter("give --input or -f, not both (they are the same)", param_hint="'--input'")
        read_yaml(input_file, "'--input'", mapping="expected a mapping")  # exit 2 naming --input for a bad file
        INPUT_FILE.set(input_file)
    from_file = INPUT_FILE.get() is not None
    if not master and not from_file:
        raise typer.BadParameter("give --master (repeatable) or --input", param_hint="'--master'")
    if action_command and static_pod:
        raise typer.BadParameter("give --action-command or --static-pod, one of them", param_hint="'--action-command'")
    if not action_command and not static_pod and not from_file:
        raise typer.BadParameter("give --action-command or --static-pod, one of them", param_hint="'--action-command'")
    action: dict[str, Any] | None = None
    if action_command:
        action = {"kind": "external", "argv": parse_argv(action_command, "'--action-command'")}
    elif static_pod:
        manifests = []
        for item in static_pod:
            path, sep, local = item.partition("=")
            if not sep:
                raise typer.BadParameter("expected PATH=LOCALFILE", param_hint="'--static-pod'")
            try:
                manifests.append({"path": path, "content": Path(local).read_text()})
            except OSError as exc:
                raise typer.BadParameter(str(exc), param_hint="'--static-pod'") from None
        action = {"kind": "static-pods", "manifests": manifests}
    masters: list[dict[str, Any]] | None = None
    if master:
        urls = api_urls(master, api_url, api_port)
        access = ssh.access(master)
        masters = [{"name": m, "api_url": urls[m], "gluster_host": gluster_host, "access": access[m]} for m in master]
    inp = build_input(spec_named("control-plane-upgrade").input_model, {
        "cluster": start.cluster_flag or (None if from_file else start.settings.cluster),
        "approvals.requested_by": who, "dry_run": start.dry_run or None, "action": action, "expected_image": expected_image,
        "etcd_backup_skip_reason": etcd_backup_skip_reason, "target_version": to_version, "approve_each": approve_each or None, "api_ca_file": api_ca_file,
        "api_ready_timeout_seconds": api_ready_timeout, "alerts": alerts,
        "etcd_members": _read_members(etcd_members) if etcd_members else None, "etcd_health_skip_reason": etcd_health_skip_reason,
        "masters": masters,
    })
    if (problem := inp.etcd_health_problem()) is not None:
        err(f"error: invalid control-plane upgrade: {problem}")
        raise typer.Exit(EXIT_USAGE)
    order = " -> ".join(m.name for m in inp.masters)
    start.go(start.request(
        "control-plane-upgrade", inp, cluster=inp.cluster, dry_run=inp.dry_run,
        scopes=[node_scope(inp.cluster, m.name) for m in inp.masters],
        summary=f"control-plane upgrade {order} on {inp.cluster} by {who}",
    ), dry_run=lambda req, settings: workflow_dry_run(req, settings, plan=lambda res: [f"outcome {res.outcome}: {res.message}"]))


start_control_plane_upgrade.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set
