"""Models of the node-upgrade activities (pure pydantic; workflows import only this module).

``kubelet_version`` is ``status.nodeInfo.kubeletVersion`` (e.g. ``v1.10.0+b81c8f8``, seed 002
``oc version``); ``ready`` the Ready condition; ``unschedulable`` ``spec.unschedulable``; ``zone``
the ``topology.kubernetes.io/zone`` label and ``created`` ``metadata.creationTimestamp`` (the node
order; None in results recorded before they were read).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

#: Activity names (stable once committed).
READ_UPGRADE_NODES = "read_upgrade_nodes"
READ_NODE_FACTS = "read_node_facts"


class NodeFacts(BaseModel):
    """What planning and the done check need of one Node: ``labels``, ``kubelet_version``,
    ``ready``, ``unschedulable``, ``exists`` (False when the Node is gone), and for the node order
    ``zone`` and ``created`` (:func:`workflows.kit.plan.order_nodes`)."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    kubelet_version: str | None = None
    ready: bool = False
    unschedulable: bool = False
    exists: bool = True
    zone: str | None = None
    created: datetime | None = None


class ReadUpgradeNodesInput(BaseModel):
    """``label_selector``: None = every Node (the plan applies the selection itself, so the
    masters' exclusion and the explicit names are decided in one pure place)."""

    label_selector: str | None = None


class UpgradeNodes(BaseModel):
    """Every Node read, in name order."""

    nodes: list[NodeFacts] = Field(default_factory=list)


class NodeFactsInput(BaseModel):
    """One Node by name."""

    node: str
