"""Masters of an OpenShift 3.10/3.11 control plane for clustersim (the ``masters:`` section).

See ``clustersim.masters.model`` for the section format and ``clustersim.masters.component`` for
the behaviour (per-master API listeners with ``/healthz/ready``, restarts, availability intervals,
controllers leadership and ClusterNetwork re-creation, ``master-restart``/``master-logs``).
"""

from __future__ import annotations

from clustersim.masters.component import MastersComponent
from clustersim.masters.model import MastersSection, MasterState

__all__ = ["MasterState", "MastersComponent", "MastersSection"]
