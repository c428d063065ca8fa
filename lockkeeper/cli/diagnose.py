"""``lockkeeper diagnose pool NAME``: why a MachineConfigPool is stuck, read-only from the API
(no workflow needed; exit 3 for an unknown pool or an unreachable cluster, 2 for a malformed
kubeconfig, as ``lockkeeper worker``)."""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    OutputOpt,
    check_output,
    err,
    run,
    settings_of,
)

diagnose_app = typer.Typer(help="Read-only diagnosis straight from the API (no workflow needed).", no_args_is_help=True)


@diagnose_app.command("pool")
def diagnose_pool_cmd(
    ctx: typer.Context,
    pool: str = typer.Argument(..., metavar="NAME"),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Path (KUBECONFIG)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context (KUBE_CONTEXT)."),
    output: str = OutputOpt,
) -> None:
    """Why a MachineConfigPool is stuck: nodes behind, degraded reasons, drain blockers, Pending pods, conditions."""
    output = check_output(output)
    try:
        settings = settings_of(ctx, kubeconfig=kubeconfig, kube_context=context)
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    run(_diagnose(settings, pool, output))


async def _diagnose(settings: Any, pool: str, output: str) -> int:
    import asyncio

    from activities.kube.errors import KubeconfigError, KubeError
    from activities.machineconfig.diagnose import DiagnoseError, diagnose_pool
    from lockkeeper import output as out
    from workers.registry import build_gateway

    def work() -> Any:
        gw = build_gateway(settings)
        try:
            return diagnose_pool(gw, pool)
        finally:
            gw.close()

    try:
        diag = await asyncio.to_thread(work)
    except DiagnoseError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from None
    except KubeconfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None  # the CLI's own input, as `lockkeeper worker`
    except KubeError as exc:  # unreachable, refused, unauthorized: no usable connection
        raise CliError(str(exc), EXIT_NOT_FOUND) from None
    if output == "table":
        out.console().print(out.diagnosis_view(diag))
    else:
        print(out.dump(diag, output))
    return EXIT_OK


def register(app: typer.Typer) -> None:
    """Add ``diagnose``."""
    from lockkeeper.cli.gluster import diagnose_gluster_cmd

    diagnose_app.command("gluster")(diagnose_gluster_cmd)
    app.add_typer(diagnose_app, name="diagnose")
