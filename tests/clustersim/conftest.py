"""Fixtures for the API-server tests: an agent-less ClusterSim filled with a small schema-valid cluster.

Cluster (tests/support/smallcluster.py, independent of scenarios): nodes node1..node3 (Ready, full nodeInfo);
namespace app: ReplicaSet web-rs with pods web-1, web-2 on node1; DaemonSet agent with pods
agent-node1..3; pod db-1 on node2 protected by PDB db-pdb (disruptionsAllowed 0).
Pods terminate after ``pod_termination_seconds`` (tiny with the time scale used).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary, populate, run_kubectl


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[ClusterSim]:
    """An agent-less simulator with the small test cluster (pods terminate after ~0.02 s)."""
    async with ClusterSim(None, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig") as s:
        populate(s.store)
        yield s


@pytest.fixture
def kubectl() -> Any:
    """``await kubectl(sim, *args)`` -> (exit code, stdout, stderr)."""
    return run_kubectl


@pytest.fixture
def kubectl_path() -> str:
    """Path of the kubectl binary."""
    return kubectl_binary()
