"""The OpenShift 3.11 SDN model for clustersim (the ``sdn:`` section, procedures-spec §8.5).

``SdnComponent`` (clustersim.sdn.component) keeps each node's OVS vxlan0 dst_port, the SDN pods'
health check and full-setup rebuilds, and the probe mesh between nodes; ``clustersim.sdn.model``
documents the section format, ``clustersim.sdn.ovs`` the ``ovs-vsctl`` emulation and
``clustersim.sdn.probe`` the mesh.
"""

from __future__ import annotations

from clustersim.sdn.component import SdnComponent
from clustersim.sdn.model import NodeNet, SdnSection

__all__ = ["NodeNet", "SdnComponent", "SdnSection"]
