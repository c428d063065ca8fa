"""The scheduler: binds pending pods with the kube-scheduler filters (clustersim.agents.logic) or
marks them Unschedulable with a FailedScheduling event carrying the real fit-error message.
"""

from __future__ import annotations

from typing import Any

from clustersim.agents import logic
from clustersim.agents.base import AgentBase
from clustersim.agents.objects import new_uid, random_suffix


class SchedulerMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    def _bound_pods(self) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
        counts: dict[str, int] = {}
        by_node: dict[str, list[dict[str, Any]]] = {}
        for p in self.store.list_refs("pods"):
            n = p["spec"].get("nodeName")
            if n and not logic.is_terminating(p):
                counts[n] = counts.get(n, 0) + 1
                by_node.setdefault(n, []).append(p)
        return counts, by_node

    def _schedule_pending(self) -> None:
        if not self._unscheduled:
            return
        pending, self._unscheduled = sorted(self._unscheduled), set()
        nodes = self.store.list_refs("nodes")
        counts, by_node = self._bound_pods()
        now = self._now()
        for ns, name in pending:
            pod = self.store.try_get("pods", name, ns)
            if pod is None or pod["spec"].get("nodeName") or logic.is_terminating(pod):
                continue
            target, message = logic.schedule(pod, nodes, counts, self.filters, by_node,
                                             self.options.scheduler_messages)
            if target is not None:
                def bind(o: dict[str, Any], target: str = target) -> None:
                    o["spec"]["nodeName"] = target
                    st = o.setdefault("status", {})
                    st["conditions"] = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
                    st["conditions"].append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                             "lastTransitionTime": now})

                self.store.mutate("pods", name, ns, bind)
                counts[target] = counts.get(target, 0) + 1
                by_node.setdefault(target, []).append(pod)
                self._sched_msgs.pop(pod["metadata"]["uid"], None)
                continue

            def unsched(o: dict[str, Any], message: str = message) -> None:
                st = o.setdefault("status", {})
                st["phase"] = "Pending"
                cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                        "lastProbeTime": None}
                logic.set_condition(st, cond, now)

            self.store.mutate("pods", name, ns, unsched, subresource="status")
            uid = pod["metadata"]["uid"]
            if self._sched_msgs.get(uid) != message:
                self._sched_msgs[uid] = message
                self._failed_scheduling_event(pod, message, now)

    def _failed_scheduling_event(self, pod: dict[str, Any], message: str, now: str) -> None:
        m = pod["metadata"]
        self.store.create("events", {
            "metadata": {"name": f"{m['name']}.{new_uid()[:8]}{random_suffix(message, 8)}", "namespace": m["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "namespace": m["namespace"],
                               "uid": m["uid"], "resourceVersion": m.get("resourceVersion", "")},
            "reason": "FailedScheduling",
            "message": message,
            "type": "Warning",
            "source": {"component": "default-scheduler"},
            "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "action": "Scheduling",
        })
