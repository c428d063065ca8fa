"""Status controllers: MachineConfigPool status from its nodes, PodDisruptionBudget status from its pods.
"""

from __future__ import annotations

import asyncio

from clustersim.agents import logic
from clustersim.agents.base import MCP, PDB, AgentBase
from clustersim.selectors import matches_label_selector_object


#: Shortest real time between two MachineConfigPool status syncs, seconds. The MCO's node
#: controller syncs a pool from a work queue (``pkg/controller/node/node_controller.go``: node
#: events only enqueue the pool, and a queued key is synced once), so a burst of node changes makes
#: one status update. Recomputing every pool over every node for each node event cost the
#: simulator half its CPU in a 600-node rollout (issue 16).
POOL_STATUS_MIN_INTERVAL = 0.1

#: A pool status sync waits at least this many times as long as the last one took: the status of
#: a thousand-node pool is synced less often than that of a few nodes, and never takes more than
#: a twentieth of the simulator (issue 16).
POOL_STATUS_REST = 20.0


class StatusControllerMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    def _pools_due(self) -> None:
        self._pools_timer = None
        self._dirty.set()  # _dirty_pools is still set: the reconcile loop syncs the pools now

    def _sync_pools(self) -> None:
        if not self._dirty_pools:
            return
        loop = asyncio.get_running_loop()
        wait = self._pools_synced_at + max(POOL_STATUS_MIN_INTERVAL, POOL_STATUS_REST * self._pools_took) - loop.time()
        if wait > 0:  # synced moments ago: once more when the interval is over, for all changes since
            if self._pools_timer is None:
                self._pools_timer = loop.call_later(wait, self._pools_due)
            return
        self._pools_synced_at = loop.time()
        self._dirty_pools = False
        now = self._now()
        nodes = self.store.list_refs("nodes")
        for pool in self.store.list_refs(MCP):
            sel = pool["spec"].get("nodeSelector")
            members = [n for n in nodes if matches_label_selector_object(sel, logic.labels(n))]
            st = logic.compute_pool_status(pool, members, now)
            self.store.mutate(MCP, pool["metadata"]["name"], None, lambda o, st=st: o.__setitem__("status", st),
                              subresource="status")
        self._pools_took = loop.time() - self._pools_synced_at

    def _sync_pdbs(self) -> None:
        namespaces, self._dirty_pdb_ns = self._dirty_pdb_ns, set()
        now = self._now()
        for ns in namespaces:
            pdbs = self.store.list_refs(PDB, ns)
            if not pdbs:
                continue
            pods = self.store.list_refs("pods", ns)
            for pdb in pdbs:
                st = logic.compute_pdb_status(pdb, pods, now)
                self.store.mutate(PDB, pdb["metadata"]["name"], ns, lambda o, st=st: o.__setitem__("status", st),
                                  subresource="status")
