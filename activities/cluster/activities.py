"""Every generic cluster activity in one class, for a worker: :class:`ClusterActivities`.

The activities are defined per concern (:mod:`.nodes`, :mod:`.drain`, :mod:`.workloads`,
:mod:`.records`); this class combines them over one gateway so a worker registers them with one
call. Activity names are those the workflows call (stored histories replay against them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from activities.cluster.drain import DrainActivities
from activities.cluster.nodes import NodeActivities
from activities.cluster.records import RecordActivities
from activities.cluster.workloads import WorkloadActivities

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway


class ClusterActivities(NodeActivities, DrainActivities, WorkloadActivities, RecordActivities):
    """Node, drain, workload and record activities bound to one gateway factory."""


def make_cluster_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The generic cluster activities for a Worker, bound to ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return ClusterActivities(factory).activities()  # type: ignore[arg-type]
