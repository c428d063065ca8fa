"""The one list of what a lockkeeper worker runs: every procedure's workflows and activities.

Workflows come from :data:`workflows.WORKFLOWS`; activities are bound methods made by
:func:`activities.machineconfig.make_activities` around one Kubernetes gateway
(:class:`activities.k8s.KubeGateway`) built from the worker's settings. Tests that mock
activities register their own functions under the same names instead of calling
:func:`build_activities`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockkeeper.settings import Settings


def all_workflows() -> list[type]:
    """Every workflow class of every procedure (``workflows.WORKFLOWS``)."""
    from workflows import WORKFLOWS

    return list(WORKFLOWS)


def build_gateway(settings: Settings) -> Any:
    """The Kubernetes gateway for ``settings`` (kubeconfig + context, or in-cluster).

    Raises :class:`activities.errors.KubeconfigError` when the credentials cannot be loaded.
    """
    from activities.k8s import KubeGateway

    if settings.in_cluster:
        return KubeGateway.in_cluster()
    return KubeGateway.from_kubeconfig(
        str(settings.kubeconfig) if settings.kubeconfig else None, context=settings.kube_context
    )


def build_activities(gateway: Any) -> list[Callable[..., Any]]:
    """Every activity of every procedure: the cluster ones bound to ``gateway``, plus the host
    ones (:func:`build_host_activities`)."""
    from activities.machineconfig import make_activities

    acts: Sequence[Callable[..., Any]] = make_activities(gateway)
    return list(acts) + build_host_activities()


def build_host_activities() -> list[Callable[..., Any]]:
    """The node-command and etcd activities. They need no kubeconfig (SSH keys, known_hosts and,
    for the debug-pod backend only, the kubeconfig come from the environment on first use), so
    a worker serving only host procedures can run with just these."""
    from activities.etcd import make_etcd_activities

    return make_etcd_activities()
