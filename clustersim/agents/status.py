"""Status controllers: MachineConfigPool status from its nodes, PodDisruptionBudget status from its pods.
"""

from __future__ import annotations

from clustersim.agents import logic
from clustersim.agents.base import MCP, PDB, AgentBase


class StatusControllerMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    def _sync_pools(self) -> None:
        if not self._dirty_pools:
            return
        self._dirty_pools = False
        now = self._now()
        nodes = self.store.list_refs("nodes")
        for pool in self.store.list_refs(MCP):
            sel = pool["spec"].get("nodeSelector")
            members = [n for n in nodes if logic.match_label_selector(sel, logic.labels(n))]
            st = logic.compute_pool_status(pool, members, now)
            self.store.mutate(MCP, pool["metadata"]["name"], None, lambda o, st=st: o.__setitem__("status", st),
                              subresource="status")

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
