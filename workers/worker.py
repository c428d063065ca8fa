"""The lockkeeper worker: one process serving every procedure's workflows and activities, or
(``LOCKKEEPER_WORKER_ROLE``) only the workflows or only the activities.

Run it as ``lockkeeper worker`` or ``python -m workers.worker``; everything comes from the
environment (see :class:`workers.settings.Settings`): ``TEMPORAL_ADDRESS``,
``LOCKKEEPER_TASK_QUEUE``, ``KUBECONFIG`` / ``KUBE_CONTEXT`` or ``LOCKKEEPER_IN_CLUSTER``.

Synchronous activities (the blocking ``kubernetes`` client) run on a ThreadPoolExecutor sized
``max_concurrent_activities`` + ``max_concurrent_local_activities``. SIGINT/SIGTERM start a graceful shutdown: no new tasks are
polled, running activities get ``graceful_shutdown_seconds`` to finish, then they are
cancelled. Workflows lose nothing either way: their state is in Temporal's history.

Versioning (:mod:`workers.versioning`): unless ``LOCKKEEPER_VERSIONING=false``, every worker, of
every role, declares deployment ``LOCKKEEPER_DEPLOYMENT_NAME`` and build ``LOCKKEEPER_BUILD_ID``
and runs each workflow PINNED to the build it started on. Before it polls it checks that the
server runs worker deployments; once it polls it waits until the server registered its task
queue in its version, makes its build current on a deployment that never had a current version
(``LOCKKEEPER_PROMOTE=auto``), and only then logs :data:`READY_EVENT` with its build and the
deployment's current build.

With ``LOCKKEEPER_HEALTH_PORT`` the worker serves ``/healthz`` and ``/readyz``
(:mod:`workers.health`; not ready until it polls, and again from the start of a shutdown); with
``LOCKKEEPER_METRICS_PORT`` it exports Prometheus metrics (:mod:`workers.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from workers.logging import configure_logging, get_logger

if TYPE_CHECKING:
    import temporalio.client

    from workers.settings import Settings

#: Logged (event text) once the worker polls; :class:`lockkeeper.procs.WorkerProcess` waits for it.
READY_EVENT = "worker started"

log = get_logger("lockkeeper.worker")


async def run_worker(
    settings: Settings,
    *,
    client: temporalio.client.Client | None = None,
    stop: asyncio.Event | None = None,
    activities: Sequence[Callable[..., Any]] | None = None,
    workflows: Sequence[type] | None = None,
    install_signal_handlers: bool = True,
    process_gc: bool = False,
) -> None:
    """Run a worker until ``stop`` is set or SIGINT/SIGTERM arrives, then shut down gracefully.

    ``client``: an existing connection (else :func:`workers.client.connect`).
    ``activities`` / ``workflows``: override the registry (tests register mocks by name).
    ``process_gc``: the worker owns its process (``python -m workers.worker``): once everything
    is loaded, tune the garbage collector for its large live heap (:func:`workers.gctune.tune_gc`).
    Raises :class:`workers.settings.SettingsError` for bad cluster credentials before it
    connects, :class:`workers.client.ConnectionFailed` when Temporal is unreachable,
    :class:`workers.versioning.VersioningRefused` when versioning is on and the server does not
    run worker deployments (or never registers this worker's queue), and (only when it connects
    itself) :class:`workers.search_attributes.SearchAttributesRefused` when lockkeeper's search
    attributes are missing and the server refuses to register them.
    """
    from temporalio.worker import Worker

    from workers.client import connect
    from workers import registry

    settings = settings.for_worker()  # per-cluster queues (issue 38): poll <task_queue>-<cluster>

    interceptors: list[Any] = []
    notify_wired = False
    if activities is None and settings.host_only:
        activities = registry.build_host_activities()
    elif activities is None:
        settings.check_kubeconfig()
        activities = registry.build_activities(registry.build_gateway(settings))
        # Webhook notifications (LOCKKEEPER_NOTIFY_URL): the activity is registered and the
        # workflows send on every full worker, with or without URLs (then it sends nowhere), so
        # all workers of a deployment run the same workflow code.
        import os

        from activities.notify.webhook import Notifier, parse_urls
        from workflows.kit.notify import NotifyInterceptor, wire

        try:
            urls = parse_urls(os.environ.get("LOCKKEEPER_NOTIFY_URL"))
        except ValueError as exc:
            from workers.settings import SettingsError

            raise SettingsError(str(exc)) from None
        activities = [*activities, Notifier(urls).notify]
        interceptors.append(NotifyInterceptor())
        wire(True, targets=bool(urls))  # no URL: new runs record that they send nothing
        notify_wired = True
    if workflows is None:
        workflows = registry.all_workflows(host_only=settings.host_only)
    if settings.worker_role == "activities":
        workflows = []  # another worker (role workflows or all) runs them
    if client is None:
        from workers.metrics import install_prometheus_runtime

        install_prometheus_runtime(settings)  # before connecting: the client's runtime exports
        client = await connect(settings, identity=_identity(settings))
        # Our own connection means a real deployment: make sure `lockkeeper start` and `list`
        # will find the search attributes (raises SearchAttributesRefused with the fix).
        from workers.search_attributes import ensure_search_attributes

        added = await ensure_search_attributes(client, settings.temporal_namespace)
        if added:
            log.info("search attributes registered", namespace=settings.temporal_namespace, names=added)
    from workers import versioning

    deployment = versioning.deployment_config(settings)
    if deployment is not None:
        await versioning.check_server(client, settings)  # a refusing server takes the polls and never answers
    stop = stop or asyncio.Event()
    worker: Worker | None = None
    completer: Any = None
    settled = False

    def readiness() -> str:
        if stop.is_set():
            return "stopping"
        return "ready" if worker is not None and worker.is_running and settled else "starting"

    health = None
    if settings.health_port is not None:
        from workers.health import HealthServer

        health = HealthServer(settings.listen_host, settings.health_port, readiness)
        await health.start()  # before the signal handlers: a taken port fails with nothing to undo
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    if install_signal_handlers:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):  # not the main thread / not Unix
                pass

    from workers.settings import activity_threads

    executor = ThreadPoolExecutor(max_workers=activity_threads(settings), thread_name_prefix="lockkeeper-activity")
    try:
        worker = Worker(
            client,
            task_queue=settings.task_queue,
            workflows=list(workflows),
            activities=list(activities),
            activity_executor=executor,
            max_concurrent_activities=settings.max_concurrent_activities,
            max_concurrent_local_activities=settings.max_concurrent_local_activities,
            workflow_task_poller_behavior=_pollers(settings.workflow_task_pollers),
            activity_task_poller_behavior=_pollers(settings.activity_task_pollers),
            # role workflows: the activities stay registered for the node runs' local calls
            no_remote_activities=settings.worker_role == "workflows",
            graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
            interceptors=interceptors,
            deployment_config=deployment,
        )
        if process_gc:
            from workers.gctune import GC_THRESHOLDS, tune_gc

            frozen = tune_gc()  # everything is imported and built: start-up objects go to the permanent generation
            log.info("garbage collector tuned", frozen_objects=frozen, thresholds=list(GC_THRESHOLDS))
        if settings.hand_off_waits:  # before the worker's task: its activities run in copies of this context
            from activities.cluster.completion import wire

            completer = wire(client, loop)
        run = asyncio.create_task(worker.run())
        stopper = asyncio.create_task(stop.wait())
        try:
            version: dict[str, Any] = {"versioning": False}
            if deployment is not None:
                try:
                    where = await _settle(client, settings, run, stopper, bool(workflows))
                except BaseException:
                    with contextlib.suppress(Exception):  # polls no more; the caller sees why it could not start
                        await worker.shutdown()
                    raise
                version = {"versioning": True, "deployment": settings.deployment_name, "build_id": settings.build_id,
                           "current_build_id": where.current, "promoted": where.promoted}
                if workflows and where.known and where.current != settings.build_id and not stop.is_set():
                    log.warning(
                        "this build is not the deployment's current version: new procedures start on "
                        f"{where.current or 'unversioned workers'}; this worker serves only the runs pinned to its build. "
                        f"Promote it with `lockkeeper deployment promote {settings.build_id}`",
                        deployment=settings.deployment_name, build_id=settings.build_id, current_build_id=where.current,
                    )
            settled = True
            if not stop.is_set():  # asked to stop while settling: it never was ready
                log.info(
                    READY_EVENT,
                    task_queue=settings.task_queue,
                    role=settings.worker_role,
                    namespace=settings.temporal_namespace,
                    address=settings.temporal_address,
                    workflows=[w.__name__ for w in workflows],
                    activities=len(activities),
                    **version,
                )
            done, _ = await asyncio.wait({run, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if run in done:
                run.result()  # the worker failed on its own: raise why
            else:
                log.info("worker stopping", graceful_shutdown_seconds=settings.graceful_shutdown_seconds)
                if completer is not None:  # handed-off waits get the same grace as running activities
                    from activities.cluster.completion import unwire

                    unwire()
                    await asyncio.gather(worker.shutdown(), completer.close(settings.graceful_shutdown_seconds))
                else:
                    await worker.shutdown()
                await run
        finally:
            stopper.cancel()
            if completer is not None and not completer.closed:  # the worker failed: another takes its waits
                from activities.cluster.completion import unwire

                unwire()
                await completer.close()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        executor.shutdown(wait=True)
        if notify_wired:
            from workflows.kit.notify import wire

            wire(False)
        if health is not None:
            await health.stop()
    log.info("worker stopped")


async def _settle(client: Any, settings: Settings, run: asyncio.Task[None], stopper: asyncio.Task[Any],
                  runs_workflows: bool) -> Any:
    """:func:`workers.versioning.settle` for this worker (:class:`workers.versioning.Settled`),
    given up when a stop is asked meanwhile (then the caller's wait sees the stop at once)."""
    from workers import versioning

    task = asyncio.ensure_future(versioning.settle(
        client, settings, identity=_identity(settings), runs_workflows=runs_workflows, running=run
    ))
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if task not in done:
        task.cancel()
        return versioning.Settled(current=None, promoted=False, known=False)
    return task.result()


def _pollers(count: int) -> Any:
    """The SDK's poller behaviour for ``count`` open polls (0: autoscaling, between 1 and 100)."""
    from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

    return PollerBehaviorAutoscaling() if count == 0 else PollerBehaviorSimpleMaximum(maximum=count)


def _identity(settings: Settings) -> str:
    import os
    import socket

    return f"lockkeeper-worker-{os.getpid()}@{socket.gethostname()}"


def main(argv: list[str] | None = None) -> int:
    """``python -m workers.worker``: run with settings from the environment. Exit codes: 0 after
    a clean shutdown, 2 for invalid settings, 3 when Temporal is unreachable, refuses to
    register the search attributes or does not run worker versioning."""
    from workers.client import ConnectionFailed
    from workers.search_attributes import SearchAttributesRefused
    from workers.settings import SettingsError, load_settings
    from workers.versioning import VersioningRefused

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        asyncio.run(run_worker(settings, process_gc=True))
    except SettingsError as exc:
        log.error("invalid settings", error=str(exc))
        return 2
    except ConnectionFailed as exc:
        log.error("cannot connect to Temporal", error=str(exc))
        return 3
    except (SearchAttributesRefused, VersioningRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:
        # KubeconfigError from the gateway is a settings problem too.
        if type(exc).__name__ == "KubeconfigError":
            log.error("invalid cluster credentials", error=str(exc))
            return 2
        raise
    return 0


if __name__ == "__main__":
    # os._exit after flushing, as the `lockkeeper` entrypoint does: once a client has connected,
    # the Temporal core runtime's threads can abort the interpreter's finalization
    # (PyGILState_Release), turning exit code 3 into a crash (-6).
    import os

    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
