"""The ReplicaSet and Deployment controllers: replica counts, pod creation/deletion and status.
"""

from __future__ import annotations

from typing import Any

from clustersim.agents import logic
from clustersim.agents.base import AgentBase
from clustersim.agents.objects import make_pod, new_uid, random_suffix


class ReplicaSetControllerMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    def _sync_replicasets(self) -> None:
        from clustersim.scenario_builders import replicaset_status

        dirty, self._dirty_rs = self._dirty_rs, set()
        for ns, name in sorted(dirty):
            rs = self.store.try_get("replicasets.apps", name, ns)
            if rs is None:
                continue
            for ref in rs["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Deployment":
                    dep = self.store.try_get("deployments.apps", ref["name"], ns)
                    want = (dep or {}).get("spec", {}).get("replicas")
                    if dep is not None and want is not None and rs["spec"].get("replicas") != want:
                        rs = self.store.mutate("replicasets.apps", name, ns,
                                               lambda o, want=want: o["spec"].__setitem__("replicas", want)) or rs
            live = [p for p in self._owned(rs) if not logic.is_terminating(p)]
            want = rs["spec"].get("replicas", 1)
            for _ in range(want - len(live)):
                pod = make_pod(f"{name}-{random_suffix(new_uid())}", ns, rs["spec"]["template"], owner=rs,
                               generate_name=f"{name}-")
                self.store.create("pods", pod)
            if len(live) > want:
                # Delete unscheduled/not-ready pods first, as the ReplicaSet controller ranks them.
                victims = sorted(live, key=lambda p: (bool(p["spec"].get("nodeName")), logic.pod_ready(p)))
                for p in victims[: len(live) - want]:
                    self.store.delete("pods", p["metadata"]["name"], ns)
            st = replicaset_status(rs, self._owned(rs))
            self.store.mutate("replicasets.apps", name, ns, lambda o, st=st: o.__setitem__("status", st),
                              subresource="status")

    def _sync_deployments(self) -> None:
        from clustersim.scenario_builders import deployment_status

        dirty, self._dirty_deploy = self._dirty_deploy, set()
        now = self._now()
        # The ReplicaSets of each owner, one pass over each namespace's ReplicaSets for all the
        # dirty Deployments in it (a 600-node rollout dirties hundreds at once).
        owned_rs: dict[str, list[dict[str, Any]]] = {}
        for ns in sorted({ns for ns, _ in dirty}):
            for rs in self.store.list_refs("replicasets.apps", ns):
                for uid in {ref.get("uid") for ref in rs["metadata"].get("ownerReferences") or []} - {None}:
                    owned_rs.setdefault(uid, []).append(rs)
        for ns, name in sorted(dirty):
            dep = self.store.try_get("deployments.apps", name, ns)
            if dep is None:
                continue
            pods: list[dict[str, Any]] = []
            for rs in owned_rs.get(dep["metadata"]["uid"], []):
                pods.extend(self._owned(rs))
            old_conds = (dep.get("status") or {}).get("conditions")
            st = deployment_status(dep, pods, now)
            if old_conds:
                # Keep lastUpdateTime stable when nothing but the time would change.
                for c in st["conditions"]:
                    prev = next((x for x in old_conds if x.get("type") == c["type"]), None)
                    if prev and prev.get("status") == c.get("status") and prev.get("reason") == c.get("reason"):
                        c["lastUpdateTime"] = prev.get("lastUpdateTime", c.get("lastUpdateTime"))
            self.store.mutate("deployments.apps", name, ns, lambda o, st=st: o.__setitem__("status", st),
                              subresource="status")
