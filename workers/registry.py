"""The one list of what a lockkeeper worker runs: every procedure's workflows and activities.

Workflows come from :data:`workflows.WORKFLOWS` (derived from ``workflows.PROCEDURES``);
activities are the bound methods of the generic cluster activities
(:mod:`activities.cluster.activities`), the MachineConfig ones
(:mod:`activities.machineconfig.activities`) around one Kubernetes gateway
(:class:`activities.kube.gateway.KubeGateway`) built from the worker's settings, plus the host
ones (host commands, etcd and the preflight's ``check_preconditions``) and the lease check that
asks Temporal itself (:func:`activities.leases.activities.find_held_leases`). Tests that mock activities register their own functions under the
same names instead of calling :func:`build_activities`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.settings import Settings


def all_workflows(host_only: bool = False) -> list[type]:
    """The workflow classes a worker registers, read from ``workflows.PROCEDURES``: every
    procedure's workflow and children plus the helpers (``workflows.WORKFLOWS``), or with
    ``host_only`` only those of the procedures whose spec says ``task_queue="host"`` (they need no
    cluster credentials) and the helper workflows they start (the lease)."""
    from workflows import PROCEDURES, WORKFLOWS

    if not host_only:
        return list(WORKFLOWS)
    procedures = {c for spec in PROCEDURES for c in (spec.workflow, *spec.children)}
    host = {c for spec in PROCEDURES if spec.task_queue == "host" for c in (spec.workflow, *spec.children)}
    return [c for c in WORKFLOWS if c in host or c not in procedures]


def build_gateway(settings: Settings) -> Any:
    """The Kubernetes gateway for ``settings`` (kubeconfig + context, or in-cluster).

    Raises :class:`activities.kube.errors.KubeconfigError` when the credentials cannot be loaded.
    """
    from activities.kube.gateway import KubeGateway
    from workers.settings import activity_threads

    # One API connection per activity thread, local activities' included.
    pool = activity_threads(settings)
    if settings.in_cluster:
        return KubeGateway.in_cluster(pool_size=pool)
    return KubeGateway.from_kubeconfig(
        str(settings.kubeconfig) if settings.kubeconfig else None, context=settings.kube_context, pool_size=pool
    )


def build_activities(gateway: Any) -> list[Callable[..., Any]]:
    """Every activity of every procedure: the ones all procedures share (cluster reads and
    writes, records, host commands and etcd, the lease check) bound to ``gateway``, plus each
    procedure's own, from its spec's ``activities`` factories (:class:`workflows.kit.spec.
    ProcedureSpec`; each is called with a function returning ``gateway``)."""
    from activities.alerts.activities import alert_activities
    from activities.cluster.activities import make_cluster_activities
    from activities.leases.activities import find_held_leases
    from workflows import PROCEDURES
    from workflows.kit.spec import resolve

    def gateway_factory() -> Any:
        return gateway

    own: list[Callable[..., Any]] = []
    for spec in PROCEDURES:
        for target in spec.activities:
            factory = resolve(target)
            own += factory(gateway_factory)  # type: ignore[operator]
    return make_cluster_activities(gateway) + own + build_host_activities(gateway_factory=gateway_factory) + [find_held_leases, *alert_activities()]


def build_host_activities(gateway_factory: Callable[[], Any] | None = None) -> list[Callable[..., Any]]:
    """The host-command, etcd and preflight activities. They need no kubeconfig (SSH keys,
    known_hosts and, for the debug-pod backend and the preflight's cluster checks only, the
    cluster come from ``gateway_factory`` or the environment on first use), so a worker serving
    only host procedures can run with just these. The preflight (``check_preconditions``) is here
    so that every worker, a host-queue one included, can check the executables it will run
    itself."""
    from activities.etcd.activities import EtcdActivities
    from activities.host.activities import HostActivities
    from activities.host.debug_pod import gateway_from_environment
    from activities.host.factory import ExecutorFactory
    from activities.preflight.activities import make_preflight_activities

    executors = ExecutorFactory(gateway_factory=gateway_factory)
    return (
        HostActivities(executors).activities()
        + EtcdActivities(executors).activities()
        + make_preflight_activities(gateway_factory or gateway_from_environment, executors)
    )
