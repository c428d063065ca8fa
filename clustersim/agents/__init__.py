"""Simulated cluster agents: machine-config-daemons, kubelets and the controllers.

All of them change state only through the Store (so every change bumps resourceVersion
and emits watch events) and react to Store events through one subscription (no polling):

- one machine-config-daemon task per node runs the node handshake of DESIGN.md
  (MCO pkg/daemon: desiredConfig -> Working + desiredDrain=drain-X -> wait lastAppliedDrain
  (1 h deadline) -> write files, reboot -> desiredDrain=uncordon-X -> wait (10 min) ->
  currentConfig=X, Done); in a scenario with the ``mco:`` section it follows the node
  disruption policies (no drain or no reboot when no action needs one) and reports its phases
  in MachineConfigNodes, and the operator keeps ``MachineConfiguration/cluster``'s status
  (clustersim.agents.mco);
- kubelet: pods start (Running/Ready) ``pod_start_seconds`` after binding, go not Ready
  while their node is NotReady, restart after a reboot, crash-loop without OVN files (R1);
- node lifecycle: node Leases, pod GC of pods on deleted Nodes;
- controllers: MachineConfigPool status, DaemonSet pods and status, ReplicaSet replicas
  and Deployment status, the scheduler (FailedScheduling events), PodDisruptionBudget status.

One module per agent (mcd, kubelet, scheduler, daemonset, replicaset, status, nodelifecycle), each a mixin of
``Agents``; this module holds the life cycle, the event routing and the reconcile loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from clustersim.agents import logic
from clustersim.agents.base import (
    MC,
    MCP,
    PDB,
    TEMPLATE_HASH_ANN,
    AgentBase,
    FaultKind,
    NodeFault,
)
from clustersim.agents.daemonset import DaemonSetControllerMixin
from clustersim.agents.kubelet import KubeletMixin
from clustersim.agents.logic import ANN_CURRENT_CONFIG, annotations
from clustersim.agents.mcd import MachineConfigDaemonMixin
from clustersim.agents.mco import HostCommand, HostRebooted, MachineConfigOperatorMixin, UpdateRecord
from clustersim.agents.nodelifecycle import NodeLifecycleMixin
from clustersim.agents.replicaset import ReplicaSetControllerMixin
from clustersim.agents.scheduler import SchedulerMixin
from clustersim.agents.status import StatusControllerMixin
from clustersim.loops import KeyedTimers, cancel_and_wait, route_events
from clustersim.mco.model import MACHINECONFIGURATION

if TYPE_CHECKING:
    from clustersim.clock import Clock
    from clustersim.scenario import Scenario
    from clustersim.store import Event, Store

log = logging.getLogger(__name__)

__all__ = ["MC", "MCP", "PDB", "TEMPLATE_HASH_ANN", "Agents", "FaultKind"]

#: After a reconcile pass of ``RECONCILE_REST_AFTER`` seconds or more, the loop rests
#: ``RECONCILE_REST`` times as long before the next one, so a large cluster's controllers take at
#: most a quarter of the simulator's time (issue 16: a 600-node rollout's pod and node events made
#: them half of it). Shorter passes (every small scenario's) are followed by none.
RECONCILE_REST = 3.0
RECONCILE_REST_AFTER = 0.005


class Agents(MachineConfigDaemonMixin, MachineConfigOperatorMixin, KubeletMixin, SchedulerMixin,
             DaemonSetControllerMixin, ReplicaSetControllerMixin, StatusControllerMixin, NodeLifecycleMixin, AgentBase):
    """Runs every simulated agent against ``store``; timings come from ``scenario.options``
    and are scaled by ``clock``. Use ``await start()`` / ``await stop()``.

    ``host_command(node, argv)`` runs a command on a node's simulated host (the daemon reloads and
    restarts services through it) and ``host_rebooted(node, boot_id)`` tells the host the daemon
    rebooted it (4.16+ scenarios only); None without hosts. ``mcd_updates``: every update the daemons
    started, with its disruption plan (clustersim.agents.mco.UpdateRecord)."""

    def __init__(self, store: Store, clock: Clock, scenario: Scenario, host_command: HostCommand | None = None,
                 host_rebooted: HostRebooted | None = None) -> None:
        self.store = store
        self.host_command = host_command
        self.host_rebooted = host_rebooted
        self.mcd_updates: list[UpdateRecord] = []
        self.clock = clock
        self.scenario = scenario
        self.options = scenario.options
        self.net = scenario.network_state()
        self.filters = logic.FILTERS_LEGACY if self.options.scheduler_filters == "legacy" else logic.FILTERS_CURRENT
        self._tasks: list[asyncio.Task[Any]] = []
        self._daemons: dict[str, asyncio.Task[Any]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._faults: dict[str, NodeFault] = {}
        self._degraded_seen: dict[str, tuple[str, str]] = {}
        self._dirty = asyncio.Event()
        self._dirty_pools = False
        self._pools_synced_at = float("-inf")
        self._pools_took = 0.0
        self._pools_timer: asyncio.TimerHandle | None = None
        self._dirty_ds: set[tuple[str, str]] = set()
        self._dirty_rs: set[tuple[str, str]] = set()
        self._dirty_deploy: set[tuple[str, str]] = set()
        self._dirty_pdb_ns: set[str] = set()
        self._dirty_nodes: set[str] = set()
        self._unscheduled: set[tuple[str, str]] = set()
        #: Pending pods bound to no node, kept from pod events: what a node change or a pod
        #: leaving retries (a scan of every pod per node change cost a 600-node rollout's
        #: simulator an eighth of its CPU, issue 16).
        self._unbound: set[tuple[str, str]] = set()
        self._start_timers = KeyedTimers("kubelet")
        self._gc_timers = KeyedTimers("pod gc")
        self._sched_msgs: dict[str, str] = {}
        self._sub: Any = None
        self.running = False

    async def start(self) -> None:
        """Subscribe to the store and spawn the daemons and controllers (idempotent)."""
        if self.running:
            return
        self.running = True
        self._sub = self.store.subscribe()
        for key in self.store.iter_keys("nodes"):
            self._spawn_daemon(key[1])
            self._node_added(key[1])
        for ns, name in self.store.iter_keys("daemonsets.apps"):
            self._dirty_ds.add((ns, name))
        for ns, name in self.store.iter_keys("replicasets.apps"):
            self._dirty_rs.add((ns, name))
        for ns, name in self.store.iter_keys("deployments.apps"):
            self._dirty_deploy.add((ns, name))
        for ns, _ in self.store.iter_keys(PDB):
            self._dirty_pdb_ns.add(ns)
        for pod in self.store.list_refs("pods"):
            if not pod["spec"].get("nodeName"):
                self._unscheduled.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
            self._track_unbound("ADDED", pod["metadata"]["namespace"], pod["metadata"]["name"], pod)
        self._dirty_pools = True
        self._dirty.set()
        if self.store.serves(MACHINECONFIGURATION):
            for obj in self.store.list(MACHINECONFIGURATION):
                self._sync_machine_configuration(obj)
        self._tasks.append(asyncio.create_task(route_events(self._sub, self._route, "agents"), name="agents-dispatch"))
        self._tasks.append(asyncio.create_task(self._reconcile_loop(), name="agents-controllers"))
        if self.net.enabled:
            self._tasks.append(asyncio.create_task(self._crashloop_loop(), name="agents-crashloop"))

    async def stop(self) -> None:
        """Cancel every task and timer and close the subscription."""
        self.running = False
        tasks = self._tasks + list(self._daemons.values())
        await cancel_and_wait(tasks)
        self._start_timers.cancel_all()
        if self._pools_timer is not None:
            self._pools_timer.cancel()
            self._pools_timer = None
        self._stop_gc()
        self._tasks.clear()
        self._daemons.clear()
        if self._sub is not None:
            self._sub.close()
            self._sub = None

    def inject_node_fault(self, node: str, kind: FaultKind, reason: str | None = None) -> None:
        """Make ``node``'s daemon fail: ``degrade`` (Degraded with ``reason`` at its next step),
        ``stuck_reboot`` (never comes back from the next reboot), ``unreconcilable``
        (refuses the next config with state Unreconcilable)."""
        if kind not in ("degrade", "stuck_reboot", "unreconcilable"):
            raise ValueError(f"unknown node fault kind {kind!r}")
        self._faults[node] = NodeFault(kind, reason)
        self._poke(node)

    def clear_node_fault(self, node: str) -> None:
        """Remove ``node``'s fault; a Degraded/Unreconcilable daemon retries its desiredConfig,
        a node stuck in reboot comes back."""
        self._faults.pop(node, None)
        self._degraded_seen.pop(node, None)
        self._poke(node)

    def _poke(self, node: str) -> None:
        ev = self._wake.get(node)
        if ev is not None:
            ev.set()

    def _mark(self) -> None:
        self._dirty.set()

    def _route(self, ev: Event) -> None:
        obj, res = ev.object, ev.resource
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if res == "nodes":
            if ev.type == "ADDED":
                self._spawn_daemon(name)
                self._node_added(name)
            elif ev.type == "DELETED":
                t = self._daemons.pop(name, None)
                if t:
                    t.cancel()
                self._node_deleted(name, meta.get("uid", ""))
            self._poke(name)
            self._dirty_pools = True
            old = ev.old or {}
            if (
                ev.type != "MODIFIED"
                or logic.node_ready(old) != logic.node_ready(obj)
                or annotations(old).get(ANN_CURRENT_CONFIG) != annotations(obj).get(ANN_CURRENT_CONFIG)
                or old.get("spec") != obj.get("spec")
                or old.get("metadata", {}).get("labels") != meta.get("labels")
            ):
                self._dirty_nodes.add(name)
                self._dirty_ds.update(self.store.iter_keys("daemonsets.apps"))
                self._unscheduled.update(self._unbound)
            self._mark()
        elif res == "pods":
            self._track_unbound(ev.type, ns, name, obj)
            self._dirty_pdb_ns.add(ns)
            for ref in meta.get("ownerReferences") or []:
                if ref.get("kind") == "ReplicaSet":
                    self._dirty_rs.add((ns, ref["name"]))
                    rs = self.store.try_get("replicasets.apps", ref["name"], ns)
                    for r2 in (rs or {}).get("metadata", {}).get("ownerReferences") or []:
                        if r2.get("kind") == "Deployment":
                            self._dirty_deploy.add((ns, r2["name"]))
                elif ref.get("kind") == "DaemonSet":
                    self._dirty_ds.add((ns, ref["name"]))
            if ev.type == "DELETED":
                self._unscheduled.discard((ns, name))
                self._start_timers.cancel((ns, name))
                # A pod leaving frees room: retry the pending ones.
                self._unscheduled.update(self._unbound)
            elif not obj["spec"].get("nodeName"):
                if not logic.is_terminating(obj):
                    self._unscheduled.add((ns, name))
            elif not (obj.get("status") or {}).get("containerStatuses") and not self._start_timers.pending((ns, name)):
                self._schedule_start(ns, name)
            self._mark()
        elif res in ("daemonsets.apps", "replicasets.apps", "deployments.apps"):
            target = {"daemonsets.apps": self._dirty_ds, "replicasets.apps": self._dirty_rs,
                      "deployments.apps": self._dirty_deploy}[res]
            if ev.type != "DELETED":
                target.add((ns, name))
            if res == "deployments.apps" and ev.type != "DELETED":
                for rs in self.store.list_refs("replicasets.apps", ns):
                    if any(r.get("uid") == meta.get("uid") for r in rs["metadata"].get("ownerReferences") or []):
                        self._dirty_rs.add((ns, rs["metadata"]["name"]))
            self._mark()
        elif res == MCP:
            self._dirty_pools = True
            if ev.type != "MODIFIED" or (ev.old or {}).get("spec") != obj.get("spec"):
                # A new rendered config: its status (Updated=False) is due at once, as the MCO's
                # is, or a reader sees the old Updated=True for the new config (status.py).
                self._pools_synced_at = float("-inf")
            self._mark()
        elif res == PDB:
            self._dirty_pdb_ns.add(ns)
            self._mark()
        elif res == MACHINECONFIGURATION and ev.type != "DELETED":
            self._sync_machine_configuration(obj)

    def _track_unbound(self, ev_type: str, ns: str, name: str, pod: dict[str, Any]) -> None:
        if ev_type != "DELETED" and not pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending":
            self._unbound.add((ns, name))
        else:
            self._unbound.discard((ns, name))

    def _spawn_daemon(self, node: str) -> None:
        if node in self._daemons and not self._daemons[node].done():
            return
        self._wake.setdefault(node, asyncio.Event())
        self._daemons[node] = asyncio.create_task(self._daemon(node), name=f"mcd-{node}")

    async def _reconcile_loop(self) -> None:
        loop = asyncio.get_running_loop()
        took = 0.0
        while True:
            await self._dirty.wait()
            # Let a burst of events accumulate: a pass that took RECONCILE_REST_AFTER or more is
            # followed by a rest of RECONCILE_REST times as long, so that under load the
            # controllers, like the real ones behind their work queues, sync once per burst and
            # never take more than a fraction of the simulator from the API server. A small
            # cluster's passes take microseconds: its controllers react in the same loop turn.
            await asyncio.sleep(RECONCILE_REST * took if took >= RECONCILE_REST_AFTER else 0)
            self._dirty.clear()
            started = loop.time()
            for step in (self._sync_nodes, self._schedule_pending, self._sync_daemonsets,
                         self._sync_replicasets, self._sync_deployments, self._sync_pdbs, self._sync_pools):
                try:
                    step()
                except Exception:
                    log.exception("agents: %s failed", step.__name__)
            took = loop.time() - started

