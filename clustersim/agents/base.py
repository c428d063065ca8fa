"""State and helpers shared by the simulated agents (``clustersim.agents.Agents`` mixes them in)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal

from clustersim.agents.objects import rfc3339

if TYPE_CHECKING:
    from clustersim.agents.podstatus import NetworkState
    from clustersim.clock import Clock
    from clustersim.loops import KeyedTimers
    from clustersim.scenario import Scenario, ScenarioOptions
    from clustersim.store import Store

FaultKind = Literal["degrade", "stuck_reboot", "unreconcilable"]
MC = "machineconfigs.machineconfiguration.openshift.io"
MCP = "machineconfigpools.machineconfiguration.openshift.io"
PDB = "poddisruptionbudgets.policy"
TEMPLATE_HASH_ANN = "clustersim.lockkeeper.io/template-hash"


class NodeFault:
    """A fault injected into one node's machine-config-daemon (``kind``, optional ``reason``)."""

    def __init__(self, kind: FaultKind, reason: str | None) -> None:
        self.kind = kind
        self.reason = reason


class AgentBase:
    """The attributes every agent mixin reads and writes (set by ``Agents.__init__``)."""

    store: Store
    clock: Clock
    scenario: Scenario
    options: ScenarioOptions
    net: NetworkState
    filters: Any
    _wake: dict[str, asyncio.Event]
    _faults: dict[str, NodeFault]
    _degraded_seen: dict[str, tuple[str, str]]
    _dirty_pools: bool
    _dirty: asyncio.Event
    _pools_synced_at: float
    _pools_took: float
    _pools_timer: asyncio.TimerHandle | None
    _dirty_ds: set[tuple[str, str]]
    _dirty_rs: set[tuple[str, str]]
    _dirty_deploy: set[tuple[str, str]]
    _dirty_pdb_ns: set[str]
    _dirty_nodes: set[str]
    _unscheduled: set[tuple[str, str]]
    _start_timers: KeyedTimers
    _sched_msgs: dict[str, str]

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _node(self, node: str) -> dict[str, Any] | None:
        try:
            return self.store.get_ref("nodes", node)
        except Exception:
            return None

    def _owned(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        return self.store.pods_owned_by(owner["metadata"]["uid"])  # an index, not a scan of every pod
