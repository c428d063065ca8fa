"""``lockkeeper diagnose pool NAME``: why a MachineConfigPool is stuck, read-only from the API
(no workflow needed; exit 3 for an unknown pool or an unreachable cluster, 2 for a malformed
kubeconfig, as ``lockkeeper worker``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer

from lockkeeper.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError, OutputOpt, check_output, err, run, settings_of, show

T = TypeVar("T")

diagnose_app = typer.Typer(help="Read-only diagnosis straight from the API (no workflow needed).", no_args_is_help=True)

#: ``--kubeconfig`` and ``--context`` of every ``diagnose`` command (:func:`diagnose_settings`).
KubeconfigOpt = typer.Option(None, "--kubeconfig", help="Path (KUBECONFIG).")
KubeContextOpt = typer.Option(None, "--context", help="kubeconfig context (KUBE_CONTEXT).")


def diagnose_settings(ctx: typer.Context, kubeconfig: str | None, context: str | None) -> Any:
    """The settings with ``--kubeconfig`` / ``--context``; invalid ones: one line, exit 2 (``typer.Exit``)."""
    try:
        return settings_of(ctx, kubeconfig=kubeconfig, kube_context=context)
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None


async def read_cluster(settings: Any, read: Callable[[Any], T], not_found: tuple[type[Exception], ...] = ()) -> T:
    """``read(gateway)`` in a thread with a gateway to the cluster of ``settings`` (closed after).
    Raises :class:`CliError`: exit 2 for a malformed kubeconfig (the CLI's own input, as
    ``lockkeeper worker``), exit 3 when the API is unreachable, refuses or is unauthorized, or for
    ``not_found`` (what ``read`` raises when its object is missing)."""
    import asyncio

    from activities.kube.errors import KubeconfigError, KubeError
    from workers.registry import build_gateway

    def work() -> T:
        gw = build_gateway(settings)
        try:
            return read(gw)
        finally:
            gw.close()

    try:
        return await asyncio.to_thread(work)
    except KubeconfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except (KubeError, *not_found) as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from None


@diagnose_app.command("pool")
def diagnose_pool_cmd(
    ctx: typer.Context,
    pool: str = typer.Argument(..., metavar="NAME"),
    kubeconfig: str | None = KubeconfigOpt,
    context: str | None = KubeContextOpt,
    output: str = OutputOpt,
) -> None:
    """Why a MachineConfigPool is stuck: nodes behind, degraded reasons, drain blockers, Pending pods, conditions."""
    output = check_output(output)
    run(_diagnose(diagnose_settings(ctx, kubeconfig, context), pool, output))


async def _diagnose(settings: Any, pool: str, output: str) -> int:
    from activities.machineconfig.diagnose import DiagnoseError, diagnose_pool
    from lockkeeper import output as out

    diag = await read_cluster(settings, lambda gw: diagnose_pool(gw, pool), not_found=(DiagnoseError,))
    show(lambda: out.diagnosis_view(diag), lambda: diag, output)
    return EXIT_OK


def register(app: typer.Typer) -> None:
    """Add ``diagnose``."""
    from lockkeeper.cli.gluster import diagnose_gluster_cmd

    diagnose_app.command("gluster")(diagnose_gluster_cmd)
    app.add_typer(diagnose_app, name="diagnose")
