"""Simulated hosts: one per node, with an SSH server, a command interpreter and the coupling
of host state (units, runtime, reboots) with the cluster (procedures-spec §8.2, §8.3).

``HostsComponent`` is the ``hosts`` scenario section's component (clustersim.components).
"""

from clustersim.hosts.component import HostsComponent
from clustersim.hosts.ctx import SessionDropped
from clustersim.hosts.model import HostEvent, HostsSection, HostState, Unit

__all__ = ["HostEvent", "HostState", "HostsComponent", "HostsSection", "SessionDropped", "Unit"]
