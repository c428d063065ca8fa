"""The machine-config-controller model for clustersim (the ``mcc:`` scenario section).

``MccComponent`` (clustersim.mcc.component) plays the two controller loops of the
machine-config-operator that the simulated machine-config-daemons (clustersim.agents.mcd)
talk to: the node controller (desiredConfig on at most maxUnavailable nodes per pool, nothing
while the pool is paused) and the drain controller (the controller's side of the
desiredDrain/lastAppliedDrain handshake of DESIGN.md). ``clustersim.mcc.model`` holds the
section model and the pure selection rules.
"""

from __future__ import annotations

from clustersim.mcc.component import MccComponent
from clustersim.mcc.model import MccSection

__all__ = ["MccComponent", "MccSection"]
