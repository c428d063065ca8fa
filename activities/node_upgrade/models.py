"""Models of the node-upgrade activities (pure pydantic; workflows import only this module).

``kubelet_version`` is ``status.nodeInfo.kubeletVersion`` (e.g. ``v1.10.0+b81c8f8``, seed 002
``oc version``); ``ready`` the Ready condition; ``unschedulable`` ``spec.unschedulable``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Activity names (stable once committed).
READ_UPGRADE_NODES = "read_upgrade_nodes"
READ_NODE_FACTS = "read_node_facts"


class NodeFacts(BaseModel):
    """What planning and the done check need of one Node: ``labels``, ``kubelet_version``,
    ``ready``, ``unschedulable`` and ``exists`` (False when the Node is gone)."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    kubelet_version: str | None = None
    ready: bool = False
    unschedulable: bool = False
    exists: bool = True


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
