"""clustersim: an in-process simulated OpenShift cluster that real kubectl and Python clients talk to.

``ClusterSim`` (clustersim.sim) is the entry point; ``Store`` (clustersim.store) holds the state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.sim import ClusterSim

__all__ = ["ClusterSim"]


def __getattr__(name: str) -> Any:
    # Lazy so that `import clustersim.store` (agents, scenarios) does not pull in aiohttp.
    if name == "ClusterSim":
        from clustersim.sim import ClusterSim

        return ClusterSim
    raise AttributeError(name)
