"""``lockkeeper start vxlan-port-change``: the live VXLAN port change (R5, procedures-spec §7).

The flags are aliases of the input's fields (:class:`workflows.vxlan_port.models.VxlanPortChangeInput`),
built with :func:`lockkeeper.cli.start.shared.build_input`, so ``-f input.yaml`` and ``--set
fanout.deadline_seconds=20`` work the same way; the model says what is missing. Hosts are reached
over SSH (``--ssh-map``: a JSON file ``{"node": "host:port", ...}``, the masters included; key,
known_hosts and user from the worker's environment) or through a debug pod per node (``--exec-via
debug-pod``). ``--node`` names the nodes (default: every node of the cluster; the masters always
belong). Masters are named with ``--master NAME=API_URL`` (that master's own API, e.g.
``https://master-1:8443``). The run leases ``cluster/<cluster>`` and checks every precondition
before its first write: a miss ends it ``refused`` (exit 2, one line per problem); ``--dry-run``
ends there and prints every precondition with its result.
"""

from __future__ import annotations

import shlex
from enum import StrEnum
from typing import Any

import typer

from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, start_options, window_options
from lockkeeper.cli.start.shared import INPUT_FILE, build_input, read_ssh_map, spec_named

PROCEDURE = "vxlan-port-change"


class SwitchVia(StrEnum):
    """``--switch-via``: how the fan-out reaches ``vxlan0``."""

    POD_EXEC = "pod-exec"
    SSH = "ssh"


class ExecVia(StrEnum):
    """``--exec-via``: how host commands reach the nodes."""

    SSH = "ssh"
    DEBUG_POD = "debug-pod"


def parse_masters(values: list[str]) -> list[tuple[str, str]]:
    """``NAME=API_URL`` pairs. Raises BadParameter naming the bad one."""
    pairs = []
    for v in values:
        name, sep, url = v.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise typer.BadParameter(f"{v!r} is not NAME=https://HOST:PORT", param_hint="'--master'")
        pairs.append((name, url))
    return pairs


def _argv(value: str | None) -> list[str] | None:
    return shlex.split(value) if value is not None else None


def host_access(exec_via: ExecVia, ssh_map: str | None, ssh_user: str | None, names: list[str]) -> dict[str, Any] | None:
    """Host access per node from the flags: every node of ``--ssh-map``, or a debug pod for each
    of ``names``; None when the flags give none (an input file may)."""
    if exec_via == ExecVia.DEBUG_POD:
        return {n: {"backend": "debug-pod", "node": n} for n in names} or None
    if ssh_map is None:
        return None
    return {n: {"backend": "ssh", "host": h, "port": p, "user": ssh_user} for n, (h, p) in read_ssh_map(ssh_map).items()}


def start_vxlan_port_change(
    port: int | None = typer.Option(None, "--port", help="The new VXLAN UDP port (e.g. 4889): new_port."),
    image: str | None = typer.Option(None, "--image", help="The custom node image without the SDN port health check: custom_image."),
    old_port: int | None = typer.Option(None, "--old-port", help="The port the cluster uses now (default 4789)."),
    master: list[str] = typer.Option([], "--master", help="NAME=API_URL of every master (repeatable): masters."),
    switch_via: SwitchVia | None = typer.Option(None, "--switch-via", help="How the fan-out reaches vxlan0 (default pod-exec)."),
    exec_via: ExecVia = typer.Option(ExecVia.SSH, "--exec-via", help="How host commands reach nodes."),
    ssh_map: str | None = typer.Option(None, "--ssh-map", help="JSON file node -> host:port (every node)."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER or core)."),
    node: list[str] = typer.Option([], "--node", help="A node to switch (repeatable; default every node; the masters always)."),
    pull_cmd: str | None = typer.Option(None, "--pull-cmd", help="Pull command (default docker pull; crictl pull on CRI-O nodes)."),
    image_present_cmd: str | None = typer.Option(None, "--image-present-cmd", help="Image presence check (default docker image inspect)."),
    master_ca: str | None = typer.Option(None, "--master-ca", help="CA file to verify the masters' API certificates."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default forever): gates.timeout_seconds."),
    approvals: Approvals = approval_options("the gates"),
    window: list[str] = window_options(),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("run")),
) -> None:
    """Change the SDN VXLAN port on a live OpenShift 3.11 cluster (stages A-H, fan-out in one step)."""
    from workflows.kit.scopes import cluster_scope

    masters = parse_masters(master)
    if switch_via == SwitchVia.SSH and exec_via == ExecVia.DEBUG_POD:
        raise typer.BadParameter("--switch-via ssh needs --exec-via ssh", param_hint="'--switch-via'")
    if masters and exec_via == ExecVia.SSH and ssh_map is None:
        raise typer.BadParameter("--exec-via ssh needs --ssh-map", param_hint="'--ssh-map'")
    names = list(dict.fromkeys([*node, *(m for m, _ in masters)]))
    access = host_access(exec_via, ssh_map, ssh_user, names)
    missing = [m for m, _ in masters if access is not None and m not in access]
    if missing:
        raise typer.BadParameter(f"no host access for master(s) {', '.join(missing)}", param_hint="'--master'")
    settings, who = start.settings, start.who
    inp = build_input(spec_named(PROCEDURE).input_model, {
        "new_port": port, "old_port": old_port, "custom_image": image, "host_access": access, "nodes": (names if node else None),
        "masters": [dict(name=m, access=access[m], api_url=u, ca_file=master_ca) for m, u in masters] if masters and access else None,
        "fanout.switch_via": switch_via.value if switch_via else None, "images.pull_cmd": _argv(pull_cmd),
        "images.present_cmd": _argv(image_present_cmd), "gates.timeout_seconds": gate_timeout,
        "approvals.requested_by": who, "approvals.four_eyes": approvals.four_eyes or None,
        "approvals.allowed_approvers": approvals.allowed_approvers or None,
        "windows": window or None, "alerts": alerts, "dry_run": start.dry_run or None,
        "cluster": start.cluster_flag or (None if INPUT_FILE.get() else settings.cluster),
    })
    # a dry run is the workflow's own (it ends after the preconditions): started, and waited for
    start.go(start.request(
        PROCEDURE, inp, cluster=inp.cluster, wait=start.wait or inp.dry_run, dry_run=False,
        scopes=[cluster_scope(inp.cluster)], id_name=f"{inp.old_port}-to-{inp.new_port}",
        summary=f"VXLAN port {inp.old_port} -> {inp.new_port} on {inp.cluster} by {who}" + (" (dry run)" if inp.dry_run else ""),
    ))


start_vxlan_port_change.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set


def panel(model: Any) -> Any:
    """The status/result panel: the generic view, then every precondition with its result (the
    status' results, or the result's lines)."""
    from rich.console import Group
    from rich.text import Text

    from lockkeeper.panels import procedure_view

    checked = getattr(model, "preconditions", None) or []
    lines = [c if isinstance(c, str) else c.line() for c in checked]
    parts: list[Any] = [procedure_view(model, skip=frozenset({"preconditions"}))]
    if lines:
        parts.append(Text("preconditions:\n  " + "\n  ".join(lines)))
    return Group(*parts)


#: The VXLAN port change's (status panel, result panel), named by its spec's ``panels``.
PANELS = (panel, panel)
