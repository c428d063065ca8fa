"""The cluster-network-operator model for clustersim (the ``cno:`` scenario section).

``CnoComponent`` (clustersim.cno.component) follows the OpenShift 4.14 offline SDN→OVN-Kubernetes
migration from the cluster's side: ``spec.migration.networkType`` on ``network.operator/cluster``
renders the OVN MachineConfigs into a new rendered config per pool; a change of
``network.config/cluster`` ``spec.networkType`` replaces the SDN pods with ovnkube-node and rolls
multus. ``clustersim.cno.model`` holds the section model and the pure rendering rules.
"""

from __future__ import annotations

from clustersim.cno.component import CnoComponent
from clustersim.cno.model import CnoSection

__all__ = ["CnoComponent", "CnoSection"]
