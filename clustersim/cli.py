"""``sim`` command group: run a simulated cluster (mounted by lockkeeper's CLI as ``lockkeeper sim``).

``serve --scenario NAME [--port P] [--time-scale X] [--kubeconfig-out PATH] [--write-files DIR]``
runs until SIGINT or SIGTERM and prints where its kubeconfig is, then the SSH client settings and
map of the simulated hosts and the per-master API URLs when the scenario has them; with
``--write-files`` it also writes the files the scenario ships for its procedures (the
``external.files`` of :mod:`clustersim.external`: an openshift-ansible inventory, an inventory
hook) and the ``ansible-playbook`` stand-in link into DIR and prints where they are
(:func:`file_lines`); ``scenarios`` lists the bundled scenarios; ``snapshot [--name N]`` snapshots
a running simulator and prints the id, ``diff ID`` prints what changed since (clustersim.snapshots;
both find the simulator by ``--url``, ``$CLUSTERSIM_URL`` or ``$KUBECONFIG``).
Data goes to stdout, messages for people to stderr. Exit codes: 0 ok, 2 bad arguments/unknown
scenario/unreachable simulator; ``diff`` exits 1 when something changed, as diff(1) does.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import typer

sim_app = typer.Typer(help="Run the cluster simulator (a fake OpenShift API server with agents).",
                      no_args_is_help=True)


@sim_app.command("scenarios")
def scenarios() -> None:
    """List the bundled scenarios (name and description), one per line, tab-separated."""
    from clustersim.scenario import list_scenarios

    for name, description in list_scenarios():
        typer.echo(f"{name}\t{description}")


@sim_app.command("serve")
def serve(
    scenario: str = typer.Option("r1-ovn-interrupted", "--scenario", "-s", help="Scenario name or YAML path."),
    port: int = typer.Option(0, "--port", "-p", help="TCP port on 127.0.0.1 (0 = any free port)."),
    time_scale: float = typer.Option(1.0, "--time-scale", envvar="CLUSTERSIM_TIME_SCALE",
                                     help="Real seconds per simulated second (below 1: faster than real time)."),
    kubeconfig_out: Path | None = typer.Option(None, "--kubeconfig-out",
                                               help="Where to write the kubeconfig (default: a temp file)."),
    write_files: Path | None = typer.Option(None, "--write-files", help="Write the scenario's files (inventory, hooks) "
                                            "and bin/ansible-playbook (the playbook stand-in) into this directory."),
) -> None:
    """Serve the simulated cluster until interrupted; prints KUBECONFIG=<path>, URL=<url> and the
    components' access details (SSH key, known_hosts, SSH map, master API URLs) on stdout, and
    with --write-files where the scenario's files went (ANSIBLE_INVENTORY=, FILE name=path)."""
    if time_scale <= 0:
        typer.echo("error: --time-scale must be > 0", err=True)
        raise typer.Exit(2)
    try:
        asyncio.run(_serve(scenario, port, time_scale, kubeconfig_out, write_files))
    except (ValueError, OSError) as e:  # unknown scenario / invalid scenario file / files not writable
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


async def _serve(scenario: str, port: int, time_scale: float, kubeconfig_out: Path | None,
                 write_files: Path | None = None) -> None:
    from clustersim.sim import ClusterSim

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with ClusterSim(scenario, time_scale=time_scale, port=port, kubeconfig_path=kubeconfig_out) as sim:
        typer.echo(f"KUBECONFIG={sim.kubeconfig_path}")
        typer.echo(f"URL={sim.url}")
        for line in component_lines(sim):
            typer.echo(line)
        if write_files is not None:
            external = sim.components.get("external")
            if external is None:
                raise ValueError(f"--write-files: scenario {scenario!r} ships no files (it has no external: section)")
            for line in file_lines(external.write_files(write_files)):
                typer.echo(line)
        typer.echo(f"clustersim: scenario {scenario!r} serving on {sim.url}; "
                   f"export KUBECONFIG={sim.kubeconfig_path}; Ctrl-C stops", err=True)
        await stop.wait()
    typer.echo("clustersim: stopped", err=True)


def component_lines(sim: Any) -> list[str]:
    """``KEY=VALUE`` lines describing the running components, for people and scripts:
    the SSH client environment (key, known_hosts, user, node -> address map file), one
    ``SSH_HOST <node>=<127.0.0.1:port>`` line per simulated host, and ``MASTER_API <master>=<url>``
    per master API listener. Components that are absent print nothing."""
    lines: list[str] = []
    hosts = sim.components.get("hosts")
    if hosts is not None:
        env = hosts.client_env() if hasattr(hosts, "client_env") else {}
        lines.extend(f"{k}={v}" for k, v in sorted(env.items()))
        lines.extend(f"SSH_HOST {node}={addr}" for node, addr in sorted(getattr(hosts, "ssh_map", {}).items()))
    masters = sim.components.get("masters")
    if masters is not None and hasattr(masters, "api_url"):
        lines.extend(f"MASTER_API {name}={masters.api_url(name)}" for name in sorted(getattr(masters, "masters", {})))
    lines.append("EXEC_LOG=" + sim.url + "/_sim/exec")
    return lines


def file_lines(written: dict[str, Path]) -> list[str]:
    """Lines for the files ``--write-files`` wrote (name -> path): ``ANSIBLE_INVENTORY=<path>``
    when one is named ``inventory`` (ansible-playbook and its stand-in read it when no ``-i`` is
    given), then ``FILE <name>=<path>`` for each, in name order."""
    lines = [f"ANSIBLE_INVENTORY={written['inventory']}"] if "inventory" in written else []
    return lines + [f"FILE {name}={path}" for name, path in sorted(written.items())]


def _sim_url(url: str | None) -> str:
    """``--url``, else ``$CLUSTERSIM_URL``, else the server of ``$KUBECONFIG``'s current context.
    Exits 2 when none is set."""
    if url:
        return url.rstrip("/")
    from clustersim.external.shim import sim_url

    try:
        return sim_url()
    except (ValueError, OSError) as exc:
        typer.echo(f"error: {exc} (or pass --url)", err=True)
        raise typer.Exit(2) from None


_URL_HELP = "The simulator's URL (default: $CLUSTERSIM_URL, else the server of $KUBECONFIG's current context)."


@sim_app.command("snapshot")
def snapshot(
    name: str = typer.Option("", "--name", help="A label for the snapshot."),
    url: str | None = typer.Option(None, "--url", help=_URL_HELP),
) -> None:
    """Snapshot the running simulator's whole world (API objects, hosts, masters, GlusterFS, SDN);
    prints the snapshot id for ``diff``. Exit 2 when the simulator cannot be reached."""
    import aiohttp

    from clustersim.snapshots.client import SnapshotClientError, take

    base = _sim_url(url)
    try:
        typer.echo(asyncio.run(take(base, name)))
    except (SnapshotClientError, aiohttp.ClientError, OSError) as exc:
        typer.echo(f"error: {base}: {exc}", err=True)
        raise typer.Exit(2) from None


@sim_app.command("diff")
def diff(
    snapshot_id: str = typer.Argument(..., metavar="ID", help="The snapshot id `snapshot` printed."),
    ignore: list[str] = typer.Option([], "--ignore", help="Pattern of expected changes (repeatable), e.g. "
                                     "'ConfigMap/*/lockkeeper-record-*', 'Event', 'host/node-1/file/etc/x'."),
    pods: str = typer.Option("owners", "--pods", help="owners: pod counts per owner; each: every pod."),
    include_events: bool = typer.Option(False, "--include-events", help="Compare Events too."),
    include_leases: bool = typer.Option(False, "--include-leases", help="Compare Leases too."),
    include_status: bool = typer.Option(False, "--include-status", help="Compare every object's status."),
    to: str | None = typer.Option(None, "--to", help="Compare with this snapshot instead of the world now."),
    output: str = typer.Option("text", "--output", "-o", help="text (one change per line) or json."),
    url: str | None = typer.Option(None, "--url", help=_URL_HELP),
) -> None:
    """What changed in the simulated world since snapshot ID: one change per line, then reboots,
    restarts and ignore counts. Exit codes as diff(1): 0 nothing changed, 1 changes, 2 trouble."""
    import aiohttp

    from clustersim.snapshots.client import SnapshotClientError
    from clustersim.snapshots.client import diff as get_diff

    if pods not in ("owners", "each") or output not in ("text", "json"):
        typer.echo("error: --pods takes owners|each, --output text|json", err=True)
        raise typer.Exit(2)
    base = _sim_url(url)
    try:
        d = asyncio.run(get_diff(base, snapshot_id, ignore=ignore, pods=pods,  # type: ignore[arg-type]
                                 include_events=include_events, include_leases=include_leases,
                                 include_status=include_status, to=to))
    except (SnapshotClientError, aiohttp.ClientError, OSError) as exc:
        typer.echo(f"error: {base}: {exc}", err=True)
        raise typer.Exit(2) from None
    if output == "json":
        typer.echo(d.model_dump_json(indent=2))
    else:
        for line in d.lines():
            typer.echo(line)
    raise typer.Exit(0 if d.empty else 1)


def main() -> None:
    """Console entry point (``python -m clustersim``)."""
    sim_app()
