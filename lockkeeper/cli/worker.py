"""``lockkeeper worker``: run every procedure's workflows and activities on the task queue
(:func:`workers.worker.run_worker`), as one build of the worker deployment
(:mod:`workers.versioning`: ``--build-id``, ``--promote``)."""

from __future__ import annotations

import typer

from lockkeeper.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError, err, run, settings_of


def worker(
    ctx: typer.Context,
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Path (KUBECONFIG)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context (KUBE_CONTEXT)."),
    in_cluster: bool | None = typer.Option(None, "--in-cluster", help="Use the pod's service account."),
    role: str | None = typer.Option(
        None, "--role",
        help="all (default): workflows and activities; workflows: workflow tasks and local activities only; "
        "activities: activity tasks only (LOCKKEEPER_WORKER_ROLE). Run a workflows and an activities worker "
        "on the same task queue to give workflow code its own process.",
    ),
    build_id: str | None = typer.Option(
        None, "--build-id",
        help="This worker's build in the worker deployment (LOCKKEEPER_BUILD_ID; default: the lockkeeper package "
        "version). Runs stay on the build they started on.",
    ),
    cluster: str | None = typer.Option(
        None, "--cluster",
        help="Serve one cluster of a fleet: poll the task queue <task queue>-NAME with this cluster's kubeconfig only "
        "(LOCKKEEPER_CLUSTER with LOCKKEEPER_CLUSTER_QUEUES=true). Without it: the one task queue, as before.",
    ),
    promote: str | None = typer.Option(
        None, "--promote",
        help="auto (default): make this build the deployment's current version if it never had one (a fresh "
        "namespace); never: leave it to `lockkeeper deployment promote` (LOCKKEEPER_PROMOTE).",
    ),
) -> None:
    """Run a worker: every procedure's workflows and activities on the task queue (or one of the two, --role).

    Every run it starts stays on this worker's build (worker versioning, LOCKKEEPER_VERSIONING=false
    turns it off); `lockkeeper deployment status` shows the builds, `promote` switches new runs to one.
    """
    try:
        per_cluster = {"cluster": cluster, "cluster_queues": True} if cluster else {}
        settings = settings_of(ctx, kubeconfig=kubeconfig, kube_context=context, in_cluster=in_cluster, worker_role=role,
                               build_id=build_id, promote=promote, **per_cluster)
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    from workers.logging import configure_logging

    configure_logging(settings.log_level, settings.log_format)

    async def body() -> int:
        from activities.kube.errors import KubeconfigError
        from workers.search_attributes import SearchAttributesRefused
        from workers.settings import SettingsError
        from workers.versioning import VersioningRefused
        from workers.worker import run_worker

        try:
            await run_worker(settings)
        except (SettingsError, KubeconfigError) as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except (SearchAttributesRefused, VersioningRefused) as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from None
        return EXIT_OK

    run(body())


def register(app: typer.Typer) -> None:
    """Add ``worker``."""
    app.command("worker")(worker)
