"""The DaemonSet controller: one pod per eligible node, labelled with ``controller-revision-hash``;
RollingUpdate replaces outdated pods at once, OnDelete only when they are deleted.
"""

from __future__ import annotations

from typing import Any

from clustersim.agents import logic
from clustersim.agents.base import AgentBase
from clustersim.agents.objects import make_pod, new_uid, random_suffix


class DaemonSetControllerMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    def _sync_daemonsets(self) -> None:
        from clustersim.scenario_builders import (
            daemon_pod_affinity,
            daemon_tolerations,
            template_hash,
        )

        dirty, self._dirty_ds = self._dirty_ds, set()
        if not dirty:
            return
        nodes = self.store.list_refs("nodes")
        for ns, name in sorted(dirty):
            ds = self.store.try_get("daemonsets.apps", name, ns)
            if ds is None:
                continue
            h = template_hash(ds["spec"]["template"])
            gen = str(ds["metadata"].get("generation", 1))
            should = {n["metadata"]["name"] for n in nodes if logic.daemonset_should_run(ds, n)}
            pods = [p for p in self._owned(ds) if not logic.is_terminating(p)]
            by_node: dict[str, list[dict[str, Any]]] = {}
            for p in pods:
                by_node.setdefault(p["spec"].get("nodeName", ""), []).append(p)
            on_delete = ds["spec"].get("updateStrategy", {}).get("type") == "OnDelete"
            existing = {n["metadata"]["name"] for n in nodes}
            for node_name, ps in by_node.items():
                if node_name not in existing:
                    continue  # on a deleted Node: the pod GC removes it (the DS controller skips it)
                for p in ps:
                    outdated = logic.labels(p).get("controller-revision-hash") != h and not on_delete
                    if node_name not in should or outdated:
                        # Replaced at once (a quick rolling update: the simulator has no image pulls).
                        self.store.delete("pods", p["metadata"]["name"], ns, grace_period_seconds=0)
            current = {p["spec"].get("nodeName") for p in self._owned(ds) if not logic.is_terminating(p)}
            for node_name in sorted(should - current):
                pod = make_pod(f"{name}-{random_suffix(new_uid())}", ns, ds["spec"]["template"], owner=ds,
                               extra_labels={"controller-revision-hash": h, "pod-template-generation": gen},
                               node_name=node_name, generate_name=f"{name}-")
                pod["spec"]["affinity"] = daemon_pod_affinity(node_name)
                pod["spec"]["tolerations"] = daemon_tolerations(pod["spec"].get("tolerations"))
                self.store.create("pods", pod)
            pods = [p for p in self._owned(ds)
                    if not logic.is_terminating(p) and p["spec"].get("nodeName") in existing]
            st = logic.compute_daemonset_status(ds, should, pods, h)

            def fn(o: dict[str, Any], st: dict[str, Any] = st, h: str = h) -> None:
                o["status"] = st

            self.store.mutate("daemonsets.apps", name, ns, fn, subresource="status")
