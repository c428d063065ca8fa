"""The kubelet: pods start (Running/Ready) ``pod_start_seconds`` after binding, go not Ready while
their node is NotReady, and crash-loop without the OVN files (R1).
"""

from __future__ import annotations

from functools import partial

from clustersim.agents import logic
from clustersim.agents.base import AgentBase
from clustersim.agents.podstatus import LABEL_REQUIRES_OVN, kubelet_status


class KubeletMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    def _schedule_start(self, ns: str, name: str) -> None:
        self._start_timers.after((ns, name), self.clock.real(self.options.pod_start_seconds),
                                 partial(self._start_pod, ns, name))

    def _start_pod(self, ns: str, name: str) -> None:
        self._sync_pod(ns, name)

    def _sync_pod(self, ns: str, name: str) -> None:
        try:
            pod = self.store.get_ref("pods", name, ns)
        except Exception:
            return
        node = self._node(pod["spec"].get("nodeName", ""))
        if logic.is_terminating(pod):
            return
        st = kubelet_status(pod, node, self.net, self._now())
        self.store.mutate("pods", name, ns, lambda o: o.__setitem__("status", st), subresource="status")

    def _sync_node_pods(self, node: str) -> None:
        for pod in self.store.list_refs("pods", field_selector=f"spec.nodeName={node}"):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if self._start_timers.pending(key) or not (pod.get("status") or {}).get("containerStatuses"):
                continue  # not started yet: the start timer will sync it
            self._sync_pod(*key)

    async def _crashloop_loop(self) -> None:
        """Crash-looping containers (ovnkube-node without OVN files) restart every crashloop_seconds."""
        while True:
            await self.clock.sleep(self.options.crashloop_seconds)
            now = self._now()
            for pod in self.store.list_refs("pods", label_selector=f"{LABEL_REQUIRES_OVN}=true"):
                statuses = (pod.get("status") or {}).get("containerStatuses") or []
                if not any((c.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff" for c in statuses):
                    continue
                count = max(c.get("restartCount", 0) for c in statuses)
                node = self._node(pod["spec"].get("nodeName", ""))
                st = kubelet_status(pod, node, self.net, now, restarts=count + 1)
                self.store.mutate("pods", pod["metadata"]["name"], pod["metadata"]["namespace"],
                                  lambda o, st=st: o.__setitem__("status", st), subresource="status")

    def _sync_nodes(self) -> None:
        nodes, self._dirty_nodes = self._dirty_nodes, set()
        for n in nodes:
            self._sync_node_pods(n)
