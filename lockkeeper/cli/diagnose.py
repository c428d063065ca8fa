"""``lockkeeper diagnose``: read-only from the API, no workflow needed. ``diagnose pool NAME``: why a
MachineConfigPool is stuck (exit 3 for an unknown pool or an unreachable cluster, 2 for a
malformed kubeconfig, as ``lockkeeper worker``). ``diagnose gluster``: the GlusterFS report
(:mod:`lockkeeper.cli.gluster`; exit 0 healthy, 1 not, 2 for a malformed kubeconfig, 3 when the
cluster or the GlusterFS pods cannot be reached)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer

from lockkeeper.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    OutputOpt,
    check_output,
    err,
    run,
    settings_of,
    show,
)

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


@diagnose_app.command("gluster")
def diagnose_gluster_cmd(
    ctx: typer.Context,
    namespace: str = typer.Option("glusterfs", "--namespace", help="Namespace of the GlusterFS pods."),
    gluster_cluster: list[str] = typer.Option(["storage"], "--gluster-cluster", help="GlusterFS cluster name(s): pods glusterfs=<name>-pod."),
    exclude_node: str | None = typer.Option(None, "--exclude-node", help="Never run the CLI in this node's pod."),
    heal: bool = typer.Option(True, "--heal/--no-heal", help="Also read heal info of every replicated volume."),
    rule: str = typer.Option("per-volume", "--quorum-rule", help="per-volume | per-replica-set"),
    kubeconfig: str | None = KubeconfigOpt,
    context: str | None = KubeContextOpt,
    output: str = OutputOpt,
) -> None:
    """GlusterFS volumes, bricks, hosts, pods and heal entries, read-only (exit 1 when not healthy)."""
    output = check_output(output)
    if rule not in ("per-volume", "per-replica-set"):
        raise typer.BadParameter("must be per-volume or per-replica-set", param_hint="'--quorum-rule'")
    run(_diagnose_gluster(diagnose_settings(ctx, kubeconfig, context), namespace, gluster_cluster, exclude_node, heal, rule, output))


async def _diagnose_gluster(settings: Any, namespace: str, clusters: list[str], exclude_node: str | None, heal: bool,
                            rule: str, output: str) -> int:
    from temporalio.exceptions import ApplicationError

    from activities.gluster.activities import GlusterActivities
    from activities.gluster.models import GlusterReadInput, GlusterTarget
    from lockkeeper.cli.gluster import assessment_view, diagnosis_data
    from workflows.shared.glusterfs.assess import assess

    def read(gw: Any) -> Any:
        target = GlusterTarget(namespace=namespace, clusters=clusters, exclude_node=exclude_node)
        return GlusterActivities(lambda: gw).read_gluster(GlusterReadInput(target=target, heal=heal))

    report = await read_cluster(settings, read, not_found=(ApplicationError,))
    a = assess(report, rule)  # type: ignore[arg-type]
    show(lambda: assessment_view(a), lambda: diagnosis_data(report, a), output)
    return EXIT_OK if a.healthy else EXIT_FAILED


def register(app: typer.Typer) -> None:
    """Add ``diagnose`` (``pool``, ``gluster``)."""
    app.add_typer(diagnose_app, name="diagnose")
