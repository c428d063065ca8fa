"""Node lifecycle: the kubelet's node Lease and the pod garbage collector's orphan cleanup.

- Every Node has a ``coordination.k8s.io/v1`` Lease named after it in ``kube-node-lease``, owned by
  the Node (``kubectl describe node`` shows it). It is written when the node registers and
  deleted with the node; it is not renewed every 10 s as a real kubelet does, to keep the event
  stream quiet.
- Pod GC (k8s ``pkg/controller/podgc``, ``gcOrphaned``): pods bound to a Node that no longer
  exists are force-deleted ``pod_gc_seconds`` (simulated) after the Node's deletion, unless a Node
  of that name registered again meanwhile.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from clustersim.agents.base import AgentBase
from clustersim.agents.objects import rfc3339

if TYPE_CHECKING:
    from clustersim.loops import KeyedTimers

LEASE = "leases.coordination.k8s.io"
LEASE_NAMESPACE = "kube-node-lease"
# kubelet default --node-lease-duration-seconds.
LEASE_DURATION_SECONDS = 40

log = logging.getLogger("clustersim.agents")


class NodeLifecycleMixin(AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    _gc_timers: KeyedTimers

    def _ensure_lease(self, node: dict[str, Any]) -> None:
        meta = node["metadata"]
        name = meta["name"]
        existing = self.store.try_get(LEASE, name, LEASE_NAMESPACE)
        if existing is not None:
            owners = existing["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == meta.get("uid") for o in owners):
                return
            # A lease of an earlier Node of the same name (re-registered): replace it.
            self.store.delete(LEASE, name, LEASE_NAMESPACE)
        if self.store.try_get("namespaces", LEASE_NAMESPACE) is None:
            self.store.create("namespaces", {"metadata": {"name": LEASE_NAMESPACE,
                                                          "labels": {"kubernetes.io/metadata.name": LEASE_NAMESPACE}},
                                             "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        now = self.clock.now()
        self.store.create(LEASE, {
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": meta.get("uid", "")}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                     "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
        })

    def _node_added(self, name: str) -> None:
        self._gc_timers.cancel(name)
        node = self.store.try_get("nodes", name)
        if node is not None:
            self._ensure_lease(node)

    def _node_deleted(self, name: str, uid: str) -> None:
        lease = self.store.try_get(LEASE, name, LEASE_NAMESPACE)
        if lease is not None and any(o.get("uid") == uid for o in lease["metadata"].get("ownerReferences") or []):
            self.store.delete(LEASE, name, LEASE_NAMESPACE)
        self._gc_timers.after(name, self.clock.real(self.options.pod_gc_seconds), partial(self._gc_orphans, name))

    def _gc_orphans(self, name: str) -> None:
        if self.store.try_get("nodes", name) is not None:
            return  # registered again: its pods are not orphans
        now = rfc3339(self.clock.now())
        for pod in self.store.list_refs("pods", field_selector=f"spec.nodeName={name}"):
            m = pod["metadata"]
            try:
                # podgc marks the pod failed with a DisruptionTarget condition, then force-deletes it.
                self.store.mutate("pods", m["name"], m["namespace"], lambda o: _mark_orphaned(o, now),
                                  subresource="status")
                self.store.delete("pods", m["name"], m["namespace"], grace_period_seconds=0)
            except Exception:  # the pod went away meanwhile
                log.debug("pod gc: %s/%s already gone", m.get("namespace"), m.get("name"))

    def _stop_gc(self) -> None:
        self._gc_timers.cancel_all()


def _mark_orphaned(pod: dict[str, Any], now: str) -> None:
    st = pod.setdefault("status", {})
    conds = [c for c in st.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    conds.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                  "message": "PodGC: node no longer exists", "lastTransitionTime": now})
    st["conditions"] = conds
    if st.get("phase") not in ("Succeeded", "Failed"):
        st["phase"] = "Failed"
