"""``lockkeeper start runtime-migration``: CRI-O → Docker on GlusterFS nodes, one node at a time
(R4, procedures-spec §6).

Host access is SSH (the Node object is deleted during the run, so debug pods cannot serve): the
node → address map is a JSON file ``{"gluster1.demo": "10.0.0.5" | "10.0.0.5:22", ...}`` given
with ``--ssh-map`` (or ``LOCKKEEPER_SSH_MAP``). Key and known_hosts come from the worker's
environment, never from here. External commands are shell-split argv; ``{node}`` in them becomes
the node's name and ``{group}`` its Docker node group, so one command line serves every node.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import err
from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, ordering_options, start_options
from lockkeeper.cli.start.shared import Launch
from lockkeeper.cli.start.dryrun import workflow_dry_run
from lockkeeper.cli.start.shared import read_ssh_map as shared_ssh_map


PROCEDURE = "runtime-migration"
ENV_SSH_MAP = "LOCKKEEPER_SSH_MAP"


def nodes_table(model: Any) -> Any:
    """Per node: phase, step, what it waits for and since when, the last host command (argv,
    where, exit code, output tail), the heal entries while the heal wait runs, and whether the
    Node object is deleted and not yet registered again."""
    from rich.table import Table
    from rich.text import Text

    from lockkeeper.output import fmt_time

    t = Table(title="Nodes", title_justify="left")
    for col in ("node", "phase", "step", "waiting for / reason", "since", "last command", "heal entries"):
        t.add_column(col, overflow="fold")
    nodes = getattr(model, "nodes", None) or {}
    rows = list(nodes.values()) if isinstance(nodes, dict) else [r.status for r in nodes]  # status: dict; result: list
    for row in rows:
        name = row.node
        cmd = row.last_command
        last = Text("-")
        if cmd is not None:
            code = "no exit status" if cmd.exit_code is None else f"exit {cmd.exit_code}"
            last = Text(f"{' '.join(cmd.argv)[:120]} ({cmd.where}): {code}")
            if cmd.tail:
                last.append("\n" + "\n".join(cmd.tail.strip().splitlines()[-3:]), style="dim")
        heal = ", ".join(f"{v}={'?' if n is None else n}" for v, n in row.heal.items()) if row.heal else "-"
        what = row.waiting_for or row.reason or "-"
        if row.node_deleted:
            what = f"NODE DELETED, not registered again; {what}"
        t.add_row(name, str(row.phase), row.step or "-", what, fmt_time(row.since) if row.since else "-", last, heal)
    return t


def panel(model: Any) -> Any:
    """The status/result panel: the generic view, the node rows and the post-check findings."""
    from rich.console import Group
    from rich.text import Text

    from lockkeeper.panels import procedure_view

    parts: list[Any] = [procedure_view(model, skip=frozenset({"nodes", "findings"})), nodes_table(model)]
    for f in getattr(model, "findings", None) or []:
        done = f.resolved is not None and f.resolved.startswith("installed")
        parts.append(Text(f"post-check: {f.message}" + (f" ({f.resolved})" if f.resolved else ""), style="green" if done else "yellow"))
    nodes = getattr(model, "nodes", None) or {}
    rows = nodes.values() if isinstance(nodes, dict) else [n.status for n in nodes]  # status: rows; result: node results
    for where in sorted({r.record_configmap for r in rows if r.record_configmap}):
        parts.append(Text(f"node records: ConfigMap {where} (kubectl get configmap -n {where.replace('/', ' ', 1)} -o yaml)"))
    return Group(*parts)


#: The runtime migration's (status panel, result panel), named by its spec's ``panels``.
PANELS = (panel, panel)


def read_ssh_map(path: Path, user: str | None) -> dict[str, dict[str, Any]]:
    """``node → HostAccess fields`` from a JSON map of node → ``host`` or ``host:port``
    (:func:`lockkeeper.cli.start.shared.read_ssh_map`). Raises typer.BadParameter for an
    unreadable or malformed file."""
    return {node: dict(backend="ssh", host=host, port=port, user=user, node=node)
            for node, (host, port) in shared_ssh_map(path).items()}


def _argv(value: str | None, option: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{option}'") from None
    if not argv:
        raise typer.BadParameter("must not be empty", param_hint=f"'{option}'")
    return {"argv": argv}


def start_runtime_migration(
    node: list[str] = typer.Option(..., "--node", help="A GlusterFS node to migrate (repeatable; migrated in this order "
                                                       "unless --order is given)."),
    ordering: dict[str, Any] = ordering_options(typer.Option(
        None, "--order", metavar="ORDER", help="Order the --node nodes: zone-oldest (zone label, then creationTimestamp oldest "
                                               "first, then name) | oldest-first | newest-first (creationTimestamp, then name) | "
                                               "explicit (with --node-order FILE). Default: as the --node flags list them. "
                                               "Still one node at a time.")),
    to: str = typer.Option(..., "--to", help="Target container runtime (docker)."),
    scaleup_command: str = typer.Option(..., "--scaleup-command", help="The scale-up playbook run (shell-split; {node} {group})."),
    inventory_command: str | None = typer.Option(None, "--inventory-command", help="Moves {node} to the new_nodes group; default: a gate shows the edit."),
    inventory_restore_command: str | None = typer.Option(None, "--inventory-restore-command", help="Moves {node} back; default: a gate."),
    node_group_command: str | None = typer.Option(None, "--node-group-command", help="The node-group playbook run (optional)."),
    dns_probe: list[str] = typer.Option([], "--dns-probe", help="A name that must resolve on the node after the reboot (repeatable)."),
    ssh_map: Path | None = typer.Option(None, "--ssh-map", envvar=ENV_SSH_MAP, help="JSON node -> host[:port] for every node and peer."),
    ssh_user: str | None = typer.Option(None, "--ssh-user", help="SSH user (default LOCKKEEPER_SSH_USER on the worker, or core)."),
    peer: list[str] = typer.Option([], "--peer", help="Node to compare packages with (default: every non-master node in the map)."),
    namespace: str = typer.Option("glusterfs", "--gluster-namespace", help="Namespace of the GlusterFS pods."),
    gluster_cluster: list[str] = typer.Option(["storage"], "--gluster-cluster", help="GlusterFS cluster(s): pods glusterfs=<name>-pod."),
    gluster_label: str = typer.Option("glusterfs=storage-host", "--gluster-label", help="The node label the GlusterFS DaemonSet selects."),
    record_namespace: str = typer.Option("openshift-config", "--record-namespace",
                                         help="Namespace of the record ConfigMap lockkeeper-record-<ID> (each node's record)."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default forever; a timeout stops)."),
    approvals: Approvals = approval_options("gates", verb="decide"),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("migration")),
) -> None:
    """Migrate GlusterFS nodes from CRI-O to Docker, one node at a time."""
    from workflows.kit.scopes import node_scope

    if ssh_map is None:
        env_map = os.environ.get("CLUSTERSIM_SSH_MAP")
        if not env_map:
            raise typer.BadParameter(f"give --ssh-map or set {ENV_SSH_MAP}", param_hint="'--ssh-map'")
        ssh_map = Path(env_map)
    fields: dict[str, Any] = dict(
        cluster=start.cluster, nodes=node, **ordering,
        host_access=read_ssh_map(ssh_map, ssh_user), target_runtime=to,
        gluster={"namespace": namespace, "clusters": gluster_cluster, "node_label": gluster_label},
        dns_probe_names=dns_probe, scaleup_step=_argv(scaleup_command, "--scaleup-command"),
        inventory_step=_argv(inventory_command, "--inventory-command"),
        inventory_restore_step=_argv(inventory_restore_command, "--inventory-restore-command"),
        node_group_step=_argv(node_group_command, "--node-group-command"), peers=peer or None,
        record_namespace=record_namespace, gates={"timeout_seconds": gate_timeout}, **approvals.nested(start.who),
        alerts=alerts, dry_run=start.dry_run,
    )
    inp = start.validated(PROCEDURE, "invalid runtime-migration input: ", **fields)
    start.go(start.request(
        PROCEDURE, inp, cluster=inp.cluster, scopes=[node_scope(inp.cluster, n) for n in inp.nodes],
        id_name=inp.nodes[0].split(".")[0],
        summary=f"runtime migration of {', '.join(inp.nodes)} to {inp.target_runtime} on {inp.cluster} by {start.who}",
    ), dry_run=_dry_run)


def order_line(inp: Any) -> str:
    """The node order of a migration input, for its dry run: the nodes as listed, or the named
    order (resolved when the migration's preflight has read the Nodes; ``status`` shows it)."""
    from workflows.kit.plan import describe_order

    if inp.node_order is None:
        return f"order: as-listed ({', '.join(inp.nodes)}, one at a time)"
    return (f"order: {describe_order(inp.node_order)}, one at a time; the nodes are put in it when the preflight has "
            f"read them (`lockkeeper status ID` shows the order)")


async def _dry_run(req: Launch, settings: Any) -> int:
    """The node order (a table), then the run's own dry run: every precondition with its result
    (:func:`lockkeeper.cli.start.dryrun.workflow_dry_run`); exit 2 when a real start would be refused."""
    if req.output == "table":
        err(order_line(req.input))
    return await workflow_dry_run(req, settings)
