"""Step traps: the simulator stops (``hold``), refuses (``fail``) or counts the first request of
a procedure's step, deterministically (issue 39). Server side: :mod:`.model` (matching, holding)
and :mod:`.admin` (endpoints); the client: :mod:`.client` (re-exported here).
"""

from clustersim.traps.client import Trap, TrapError, api, arm, host, list_traps
from clustersim.traps.model import Hit, TrapClosed, TrapSet, TrapSpec, TrapState

__all__ = ["Hit", "Trap", "TrapClosed", "TrapError", "TrapSet", "TrapSpec", "TrapState", "api", "arm", "host",
           "list_traps"]
