"""Simulated cluster agents: machine-config-daemons, kubelets and the controllers.

All of them change state only through the Store (so every change bumps resourceVersion
and emits watch events) and react to Store events through one subscription (no polling):

- one machine-config-daemon task per node runs the node handshake of DESIGN.md
  (MCO pkg/daemon: desiredConfig -> Working + desiredDrain=drain-X -> wait lastAppliedDrain
  (1 h deadline) -> write files, reboot -> desiredDrain=uncordon-X -> wait (10 min) ->
  currentConfig=X, Done);
- kubelet: pods start (Running/Ready) ``pod_start_seconds`` after binding, go not Ready
  while their node is NotReady, restart after a reboot, crash-loop without OVN files (R1);
- controllers: MachineConfigPool status, DaemonSet pods and status, ReplicaSet replicas
  and Deployment status, the scheduler (FailedScheduling events), PodDisruptionBudget status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from clustersim.agents import logic
from clustersim.agents.logic import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_REASON,
    ANN_STATE,
    STATE_DEGRADED,
    STATE_DONE,
    STATE_REBOOTING,
    STATE_UNRECONCILABLE,
    STATE_WORKING,
    annotations,
)
from clustersim.agents.objects import make_pod, new_uid, random_suffix, rfc3339
from clustersim.agents.podstatus import LABEL_REQUIRES_OVN, kubelet_status

if TYPE_CHECKING:
    from clustersim.clock import Clock
    from clustersim.scenario import Scenario
    from clustersim.store import Event, Store

log = logging.getLogger(__name__)

FaultKind = Literal["degrade", "stuck_reboot", "unreconcilable"]
MC = "machineconfigs.machineconfiguration.openshift.io"
MCP = "machineconfigpools.machineconfiguration.openshift.io"
PDB = "poddisruptionbudgets.policy"
TEMPLATE_HASH_ANN = "clustersim.lockkeeper.io/template-hash"


class _Fault:
    def __init__(self, kind: FaultKind, reason: str | None) -> None:
        self.kind = kind
        self.reason = reason


class Agents:
    """Runs every simulated agent against ``store``; timings come from ``scenario.options``
    and are scaled by ``clock``. Use ``await start()`` / ``await stop()``."""

    def __init__(self, store: Store, clock: Clock, scenario: Scenario) -> None:
        self.store = store
        self.clock = clock
        self.scenario = scenario
        self.options = scenario.options
        self.net = scenario.network_state()
        self.filters = logic.FILTERS_LEGACY if self.options.scheduler_filters == "legacy" else logic.FILTERS_CURRENT
        self._tasks: list[asyncio.Task[Any]] = []
        self._daemons: dict[str, asyncio.Task[Any]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._faults: dict[str, _Fault] = {}
        self._degraded_seen: dict[str, tuple[str, str]] = {}
        self._dirty = asyncio.Event()
        self._dirty_pools = False
        self._dirty_ds: set[tuple[str, str]] = set()
        self._dirty_rs: set[tuple[str, str]] = set()
        self._dirty_deploy: set[tuple[str, str]] = set()
        self._dirty_pdb_ns: set[str] = set()
        self._dirty_nodes: set[str] = set()
        self._unscheduled: set[tuple[str, str]] = set()
        self._start_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._sched_msgs: dict[str, str] = {}
        self._sub: Any = None
        self.running = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Subscribe to the store and spawn the daemons and controllers (idempotent)."""
        if self.running:
            return
        self.running = True
        self._sub = self.store.subscribe()
        for key in self.store.iter_keys("nodes"):
            self._spawn_daemon(key[1])
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
        self._dirty_pools = True
        self._dirty.set()
        self._tasks.append(asyncio.create_task(self._dispatch(), name="agents-dispatch"))
        self._tasks.append(asyncio.create_task(self._reconcile_loop(), name="agents-controllers"))
        if self.net.enabled:
            self._tasks.append(asyncio.create_task(self._crashloop_loop(), name="agents-crashloop"))

    async def stop(self) -> None:
        """Cancel every task and timer and close the subscription."""
        self.running = False
        tasks = self._tasks + list(self._daemons.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for h in self._start_timers.values():
            h.cancel()
        self._tasks.clear()
        self._daemons.clear()
        self._start_timers.clear()
        if self._sub is not None:
            self._sub.close()
            self._sub = None

    def inject_node_fault(self, node: str, kind: FaultKind, reason: str | None = None) -> None:
        """Make ``node``'s daemon fail: ``degrade`` (Degraded with ``reason`` at its next step),
        ``stuck_reboot`` (never comes back from the next reboot), ``unreconcilable``
        (refuses the next config with state Unreconcilable)."""
        if kind not in ("degrade", "stuck_reboot", "unreconcilable"):
            raise ValueError(f"unknown node fault kind {kind!r}")
        self._faults[node] = _Fault(kind, reason)
        self._poke(node)

    def clear_node_fault(self, node: str) -> None:
        """Remove ``node``'s fault; a Degraded/Unreconcilable daemon retries its desiredConfig,
        a node stuck in reboot comes back."""
        self._faults.pop(node, None)
        self._degraded_seen.pop(node, None)
        self._poke(node)

    # ------------------------------------------------------------------ event routing

    def _poke(self, node: str) -> None:
        ev = self._wake.get(node)
        if ev is not None:
            ev.set()

    def _mark(self) -> None:
        self._dirty.set()

    async def _dispatch(self) -> None:
        assert self._sub is not None
        while True:
            ev = await self._sub.get()
            try:
                self._route(ev)
            except Exception:  # never let one bad object stop the cluster
                log.exception("agents: routing %s %s failed", ev.type, ev.resource)

    def _route(self, ev: Event) -> None:
        obj, res = ev.object, ev.resource
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if res == "nodes":
            if ev.type == "ADDED":
                self._spawn_daemon(name)
            elif ev.type == "DELETED":
                t = self._daemons.pop(name, None)
                if t:
                    t.cancel()
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
                self._unscheduled.update(
                    (p["metadata"]["namespace"], p["metadata"]["name"])
                    for p in self.store.list_refs("pods", field_selector="status.phase=Pending")
                    if not p["spec"].get("nodeName")
                )
            self._mark()
        elif res == "pods":
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
                h = self._start_timers.pop((ns, name), None)
                if h:
                    h.cancel()
                # A pod leaving frees room: retry the pending ones.
                self._unscheduled.update(
                    (p["metadata"]["namespace"], p["metadata"]["name"])
                    for p in self.store.list_refs("pods", field_selector="status.phase=Pending")
                    if not p["spec"].get("nodeName")
                )
            elif not obj["spec"].get("nodeName"):
                if not logic.is_terminating(obj):
                    self._unscheduled.add((ns, name))
            elif not (obj.get("status") or {}).get("containerStatuses") and (ns, name) not in self._start_timers:
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
            self._mark()
        elif res == PDB:
            self._dirty_pdb_ns.add(ns)
            self._mark()

    def _spawn_daemon(self, node: str) -> None:
        if node in self._daemons and not self._daemons[node].done():
            return
        self._wake.setdefault(node, asyncio.Event())
        self._daemons[node] = asyncio.create_task(self._daemon(node), name=f"mcd-{node}")

    # ------------------------------------------------------------------ machine-config-daemon

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _set_annotations(self, node: str, values: dict[str, str]) -> dict[str, Any] | None:
        def fn(o: dict[str, Any]) -> None:
            o["metadata"].setdefault("annotations", {}).update(values)

        return self.store.mutate("nodes", node, None, fn)

    def _node(self, node: str) -> dict[str, Any] | None:
        try:
            return self.store.get_ref("nodes", node)
        except Exception:
            return None

    async def _wait_node(self, node: str, pred: Callable[[dict[str, Any]], Any], timeout_real: float | None) -> Any:
        """Wait until ``pred(node)`` is truthy (returns its value) or the timeout (returns None)."""
        ev = self._wake[node]
        loop = asyncio.get_running_loop()
        deadline = None if timeout_real is None else loop.time() + timeout_real
        while True:
            ev.clear()
            obj = self._node(node)
            if obj is None:
                raise asyncio.CancelledError
            got = pred(obj)
            if got:
                return got
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ev.wait(), remaining)

    async def _daemon(self, node: str) -> None:
        while True:
            obj = self._node(node)
            if obj is None:
                return
            a = annotations(obj)
            cur, des, state = a.get(ANN_CURRENT_CONFIG, ""), a.get(ANN_DESIRED_CONFIG, ""), a.get(ANN_STATE, "")
            seen = (des, a.get(ANN_LAST_APPLIED_DRAIN, ""))
            fault = self._faults.get(node)
            act = bool(des) and des != cur
            if state in (STATE_DEGRADED, STATE_UNRECONCILABLE) and self._degraded_seen.get(node) == seen:
                act = False  # failed on exactly this; retry only on a change or clear_node_fault
            if fault is not None and fault.kind == "stuck_reboot" and state == STATE_REBOOTING:
                act = False
            if act:
                try:
                    await self._apply(node, cur, des)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("machine-config-daemon %s failed", node)
                    await asyncio.sleep(0.05)
                continue
            self._wake[node].clear()
            await self._wake[node].wait()

    def _fail(self, node: str, state: str, reason: str) -> None:
        obj = self._set_annotations(node, {ANN_STATE: state, ANN_REASON: reason})
        if obj is not None:
            a = annotations(obj)
            self._degraded_seen[node] = (a.get(ANN_DESIRED_CONFIG, ""), a.get(ANN_LAST_APPLIED_DRAIN, ""))

    async def _apply(self, node: str, cur: str, rendered: str) -> None:
        """One update attempt of ``node`` from ``cur`` to ``rendered`` (MCO daemon update path)."""
        fault = self._faults.get(node)
        if fault and fault.kind == "unreconcilable":
            self._fail(node, STATE_UNRECONCILABLE, fault.reason or
                       f"can't reconcile config {cur} with {rendered}: ignition file changes unsupported")
            return
        if self.store.try_get(MC, rendered) is None:
            self._fail(node, STATE_DEGRADED,
                       f'machineconfig.machineconfiguration.openshift.io "{rendered}" not found')
            return
        if fault and fault.kind == "degrade":
            self._fail(node, STATE_DEGRADED, fault.reason or f"failed to apply {rendered}: injected fault")
            return
        drain = f"drain-{rendered}"
        self._degraded_seen.pop(node, None)
        obj = self._node(node)
        if obj is None:
            return
        values = {ANN_STATE: STATE_WORKING, ANN_REASON: ""}
        if annotations(obj).get(ANN_LAST_APPLIED_DRAIN) != drain:
            values[ANN_DESIRED_DRAIN] = drain
        self._set_annotations(node, values)

        def drained_or_changed(o: dict[str, Any]) -> str | None:
            a = annotations(o)
            if a.get(ANN_DESIRED_CONFIG) != rendered:
                return "changed"
            if a.get(ANN_LAST_APPLIED_DRAIN) == drain:
                return "drained"
            if self._faults.get(node) is not None and self._faults[node].kind in ("degrade", "unreconcilable"):
                return "fault"
            return None

        got = await self._wait_node(node, drained_or_changed, self.clock.real(self.options.drain_deadline_seconds))
        if got is None:
            self._fail(node, STATE_DEGRADED, f"failed to drain node: {node} after 1 hour. "
                       "Please see machine-config-controller logs for more information")
            return
        if got == "fault":
            return  # the loop re-enters _apply and applies the fault
        if got == "changed":
            a = annotations(self._node(node) or {})
            if a.get(ANN_DESIRED_CONFIG) == a.get(ANN_CURRENT_CONFIG):
                # Rolled back / skipped while waiting for the drain: back to idle at the current config.
                self._set_annotations(node, {ANN_STATE: STATE_DONE, ANN_REASON: "",
                                             ANN_DESIRED_DRAIN: f"uncordon-{a.get(ANN_CURRENT_CONFIG, '')}"})
            return
        # Drained: write files, then reboot.
        await self.clock.sleep(self.options.write_files_seconds)
        self._set_annotations(node, {ANN_STATE: STATE_REBOOTING})
        self._set_node_ready(node, False)
        if self._faults.get(node) is not None and self._faults[node].kind == "stuck_reboot":
            await self._wait_node(node, lambda o: self._faults.get(node) is None, None)
        else:
            await self.clock.sleep(self.options.reboot_seconds)
        self._set_node_ready(node, True, rebooted=True)
        self._restart_pods(node)
        uncordon = f"uncordon-{rendered}"
        self._set_annotations(node, {ANN_STATE: STATE_WORKING, ANN_DESIRED_DRAIN: uncordon})
        ok = await self._wait_node(node, lambda o: annotations(o).get(ANN_LAST_APPLIED_DRAIN) == uncordon,
                                   self.clock.real(self.options.uncordon_deadline_seconds))
        if not ok:
            self._fail(node, STATE_DEGRADED, f"failed to uncordon node: {node} after 10 minutes. "
                       "Please see machine-config-controller logs for more information")
            return
        self._set_annotations(node, {ANN_CURRENT_CONFIG: rendered, ANN_STATE: STATE_DONE, ANN_REASON: ""})

    def _set_node_ready(self, node: str, ready: bool, rebooted: bool = False) -> None:
        now = self._now()

        def fn(o: dict[str, Any]) -> None:
            st = o.setdefault("status", {})
            for c in st.get("conditions") or []:
                if c.get("type") == "Ready":
                    new = "True" if ready else "False"
                    if c.get("status") != new:
                        c["lastTransitionTime"] = now
                    c["status"] = new
                    c["reason"] = "KubeletReady" if ready else "KubeletNotReady"
                    c["message"] = "kubelet is posting ready status" if ready else "node is rebooting"
                    c["lastHeartbeatTime"] = now
            if rebooted:
                st.setdefault("nodeInfo", {})["bootID"] = new_uid()
            taints = [t for t in (o["spec"].get("taints") or []) if t.get("key") != logic.TAINT_NOT_READY]
            if not ready:
                taints.append({"key": logic.TAINT_NOT_READY, "effect": "NoSchedule", "timeAdded": now})
            if taints:
                o["spec"]["taints"] = taints
            else:
                o["spec"].pop("taints", None)

        self.store.mutate("nodes", node, None, fn)

    def _restart_pods(self, node: str) -> None:
        """After a reboot every container on the node restarted once."""
        now = self._now()
        target = self._node(node)
        for pod in self.store.list_refs("pods", field_selector=f"spec.nodeName={node}"):
            if logic.is_terminating(pod):
                continue
            count = max([c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or []] + [0])
            st = kubelet_status(pod, target, self.net, now, restarts=count + 1)
            self.store.mutate("pods", pod["metadata"]["name"], pod["metadata"]["namespace"],
                              lambda o, st=st: o.__setitem__("status", st), subresource="status")

    # ------------------------------------------------------------------ kubelet

    def _schedule_start(self, ns: str, name: str) -> None:
        loop = asyncio.get_running_loop()
        self._start_timers[(ns, name)] = loop.call_later(
            self.clock.real(self.options.pod_start_seconds), self._start_pod, ns, name)

    def _start_pod(self, ns: str, name: str) -> None:
        self._start_timers.pop((ns, name), None)
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
            if key in self._start_timers or not (pod.get("status") or {}).get("containerStatuses"):
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

    # ------------------------------------------------------------------ controllers

    async def _reconcile_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await asyncio.sleep(0)  # let a burst of events accumulate
            for step in (self._sync_nodes, self._schedule_pending, self._sync_daemonsets,
                         self._sync_replicasets, self._sync_deployments, self._sync_pdbs, self._sync_pools):
                try:
                    step()
                except Exception:
                    log.exception("agents: %s failed", step.__name__)

    def _sync_nodes(self) -> None:
        nodes, self._dirty_nodes = self._dirty_nodes, set()
        for n in nodes:
            self._sync_node_pods(n)

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
            target, message = logic.schedule(pod, nodes, counts, self.filters, by_node)
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

    def _owned(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        return [p for p in self.store.list_refs("pods", owner["metadata"]["namespace"])
                if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]

    def _sync_daemonsets(self) -> None:
        from clustersim.scenario import daemon_pod_affinity, daemon_tolerations, template_hash

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
            for node_name, ps in by_node.items():
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
            pods = [p for p in self._owned(ds) if not logic.is_terminating(p)]
            st = logic.compute_daemonset_status(ds, should, pods, h)

            def fn(o: dict[str, Any], st: dict[str, Any] = st, h: str = h) -> None:
                o["status"] = st

            self.store.mutate("daemonsets.apps", name, ns, fn, subresource="status")

    def _sync_replicasets(self) -> None:
        from clustersim.scenario import replicaset_status

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
        from clustersim.scenario import deployment_status

        dirty, self._dirty_deploy = self._dirty_deploy, set()
        now = self._now()
        for ns, name in sorted(dirty):
            dep = self.store.try_get("deployments.apps", name, ns)
            if dep is None:
                continue
            uid = dep["metadata"]["uid"]
            pods: list[dict[str, Any]] = []
            for rs in self.store.list_refs("replicasets.apps", ns):
                if any(r.get("uid") == uid for r in rs["metadata"].get("ownerReferences") or []):
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
