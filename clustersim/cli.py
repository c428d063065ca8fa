"""``sim`` command group: run a simulated cluster (mounted by lockkeeper's CLI as ``lockkeeper sim``).

``serve --scenario NAME [--port P] [--time-scale X] [--kubeconfig-out PATH]`` runs until SIGINT or
SIGTERM and prints where its kubeconfig is; ``scenarios`` lists the bundled scenarios.
Data goes to stdout, messages for people to stderr. Exit codes: 0 ok, 2 bad arguments/unknown scenario.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

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
    time_scale: float = typer.Option(1.0, "--time-scale", help="Real seconds per simulated second."),
    kubeconfig_out: Path | None = typer.Option(None, "--kubeconfig-out",
                                               help="Where to write the kubeconfig (default: a temp file)."),
) -> None:
    """Serve the simulated cluster until interrupted; prints KUBECONFIG=<path> and URL=<url> on stdout."""
    if time_scale <= 0:
        typer.echo("error: --time-scale must be > 0", err=True)
        raise typer.Exit(2)
    try:
        asyncio.run(_serve(scenario, port, time_scale, kubeconfig_out))
    except ValueError as e:  # unknown scenario / invalid scenario file
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


async def _serve(scenario: str, port: int, time_scale: float, kubeconfig_out: Path | None) -> None:
    from clustersim.sim import ClusterSim

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with ClusterSim(scenario, time_scale=time_scale, port=port, kubeconfig_path=kubeconfig_out) as sim:
        typer.echo(f"KUBECONFIG={sim.kubeconfig_path}")
        typer.echo(f"URL={sim.url}")
        typer.echo(f"clustersim: scenario {scenario!r} serving on {sim.url}; "
                   f"export KUBECONFIG={sim.kubeconfig_path}; Ctrl-C stops", err=True)
        await stop.wait()
    typer.echo("clustersim: stopped", err=True)


def main() -> None:
    """Console entry point (``python -m clustersim``)."""
    sim_app()
