"""The node-upgrade activities over the Kubernetes gateway: ``read_upgrade_nodes`` (every Node's
labels, kubelet version, Ready, unschedulable, zone label, creationTimestamp) and ``read_node_facts`` (one Node; a missing Node
is returned with ``exists=False`` so a waiting workflow sees a node that is re-registering rather
than failing). Field paths are the Node API's (``status.nodeInfo.kubeletVersion``,
``status.conditions[type=Ready]``, ``spec.unschedulable``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.models import ZONE_LABEL
from activities.kube import objects
from activities.kube.errors import NotFound
from activities.node_upgrade.models import (
    READ_NODE_FACTS,
    READ_UPGRADE_NODES,
    NodeFacts,
    NodeFactsInput,
    ReadUpgradeNodesInput,
    UpgradeNodes,
)

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway


def node_facts(obj: dict[str, Any]) -> NodeFacts:
    """:class:`NodeFacts` of a Node object (a dict as the API returns it)."""
    status = obj.get("status") or {}
    return NodeFacts(
        name=objects.meta(obj).get("name", ""),
        labels=objects.labels(obj),
        kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion"),
        ready=objects.condition(obj, "Ready") == "True",
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        zone=objects.labels(obj).get(ZONE_LABEL),
        created=objects.parse_time(objects.meta(obj).get("creationTimestamp")),
    )


class NodeUpgradeActivities(GatewayActivities):
    """``read_upgrade_nodes`` and ``read_node_facts`` bound to one gateway factory."""

    ACTIVITIES = ("read_upgrade_nodes", "read_node_facts")

    @activity.defn(name=READ_UPGRADE_NODES, no_thread_cancel_exception=True)
    def read_upgrade_nodes(self, input: ReadUpgradeNodesInput) -> UpgradeNodes:
        """Every Node (matching ``label_selector`` if given) as facts, in name order. Read-only
        planning: API errors fail fast as ``Api*`` failure types (:meth:`planning_errors`)."""
        with self.planning_errors():
            nodes = [node_facts(o) for o in self.gateway.list_nodes(label_selector=input.label_selector)]
        return UpgradeNodes(nodes=sorted(nodes, key=lambda n: n.name))

    @activity.defn(name=READ_NODE_FACTS, no_thread_cancel_exception=True)
    def read_node_facts(self, input: NodeFactsInput) -> NodeFacts:
        """One Node's facts; ``exists=False`` when it is gone (not an error: it may come back)."""
        try:
            return node_facts(self.gateway.get_node(input.node))
        except NotFound:
            return NodeFacts(name=input.node, exists=False)


def make_node_upgrade_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The node-upgrade activities for a Worker, bound to ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return NodeUpgradeActivities(factory).activities()  # type: ignore[arg-type]
