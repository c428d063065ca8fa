"""``MccComponent``: the simulated machine-config-controller (node controller + drain controller).

It reacts to Node and MachineConfigPool events through one store subscription (no polling):

- **node controller**: per pool that is not paused, sets ``desiredConfig`` to the pool's
  ``spec.configuration.name`` on at most ``maxUnavailable`` nodes at a time
  (:func:`clustersim.mcc.model.pick_candidates`);
- **drain controller**: when a daemon asks ``desiredDrain=drain-X`` it cordons the node, evicts
  its pods through the eviction subresource (PodDisruptionBudgets honoured; DaemonSet and mirror
  pods stay, as ``oc adm drain --ignore-daemonsets`` leaves them), retries a refused eviction every
  ``drain_retry_seconds`` and then sets ``lastAppliedDrain=drain-X``; for ``uncordon-X`` it
  uncordons and sets ``lastAppliedDrain=uncordon-X`` (MCO ``pkg/controller/drain``, read, not
  copied).

Where the store serves MachineConfigNodes (scenario section ``mco:``), the controller also writes
its side of them as MCO ``release-4.21`` does: ``spec.configVersion.desired`` when it hands out a
desiredConfig (``node_controller.go``), ``UpdateExecuted``/``Cordoned``, ``UpdateExecuted``/``Drained``
(Unknown while draining, True when drained) and ``UpdateComplete``/``Uncordoned``
(``drain_controller.go``).

:meth:`kill` takes the controller down (R1: it lost the API): nothing more is handed out or
drained, work in flight stops where it is. :meth:`revive` brings it back. The fault
``kill_after_nodes`` kills it by itself after that many desiredConfig hand-outs. Admin routes:
``GET /_sim/mcc`` (running, hand-outs, drains), ``POST /_sim/mcc/kill``, ``POST /_sim/mcc/revive``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web

from clustersim.agents.logic import (
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    annotations,
    is_terminating,
    labels,
)
from clustersim.apierrors import ApiError
from clustersim.loops import cancel_and_wait, reconcile_on_change
from clustersim.mcc.model import MccSection, pick_candidates
from clustersim.mco.mcn import Condition, report, set_spec_desired
from clustersim.selectors import matches_label_selector_object

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.sim import ClusterSim

log = logging.getLogger("clustersim.mcc")

MCP = "machineconfigpools.machineconfiguration.openshift.io"
MIRROR_ANN = "kubernetes.io/config.mirror"


class MccComponent:
    """The ``mcc`` component (see the module docstring). ``handed_out``: (node, rendered config)
    in the order the node controller set them; ``drains``: (node, desiredDrain value) completed."""

    name = "mcc"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = MccSection.model_validate(section or {})
        self.sim = sim
        self.running = False
        self.killed_at: str | None = None
        self.handed_out: list[tuple[str, str]] = []
        self.drains: list[tuple[str, str]] = []
        self._task: asyncio.Task[None] | None = None
        self._drain_tasks: dict[str, asyncio.Task[None]] = {}
        self._sub: Any = None
        self._dirty = asyncio.Event()
        self._fault_fired = False

    # --- life cycle --------------------------------------------------------------------------------

    async def start(self, sim: ClusterSim) -> None:
        """Start the loops unless the section says ``running: false``."""
        if self.section.running:
            self.revive()

    async def stop(self) -> None:
        """Stop every loop (idempotent)."""
        await self._halt()

    def revive(self) -> None:
        """Start (again) the node and drain controller loops."""
        if self.running:
            return
        self.running = True
        self.killed_at = None
        self._sub = self.sim.store.subscribe(["nodes", MCP])
        self._task = asyncio.get_running_loop().create_task(
            reconcile_on_change(self._sub, self._dirty, self._reconcile, "mcc", lambda: self.running), name="mcc")
        self._dirty.set()

    def kill(self) -> None:
        """The controller goes down now (R1): its loops are cancelled where they are."""
        if not self.running:
            return
        self.running = False
        self.killed_at = self.sim.clock.now().isoformat()
        tasks = [t for t in [self._task, *self._drain_tasks.values()] if t is not None]
        for t in tasks:
            t.cancel()
        self._task = None
        self._drain_tasks.clear()
        if self._sub is not None:
            self._sub.close()
            self._sub = None
        log.info("machine-config-controller killed")

    async def _halt(self) -> None:
        tasks = [self._task, *self._drain_tasks.values()]
        self.kill()
        await cancel_and_wait(tasks)

    # --- loops -------------------------------------------------------------------------------------

    def _reconcile(self) -> None:
        store = self.sim.store
        nodes = store.list_refs("nodes")
        for pool in sorted(store.list_refs(MCP), key=lambda p: p["metadata"]["name"]):
            if not self.running:
                return
            sel = (pool.get("spec") or {}).get("nodeSelector")
            members = [n for n in nodes if matches_label_selector_object(sel, labels(n))]
            target = ((pool.get("spec") or {}).get("configuration") or {}).get("name", "")
            for name in pick_candidates(pool, members):
                store.mutate("nodes", name, None,
                             lambda o, t=target: o["metadata"].setdefault("annotations", {}).__setitem__(ANN_DESIRED_CONFIG, t))
                set_spec_desired(store, name, pool["metadata"]["name"])
                self.handed_out.append((name, target))
                limit = self.section.kill_after_nodes
                if limit is not None and not self._fault_fired and len(self.handed_out) >= limit:
                    self._fault_fired = True  # the fault fires once; a revived controller carries on
                    self.kill()
                    return
        for node in nodes:
            a = annotations(node)
            want = a.get(ANN_DESIRED_DRAIN, "")
            name = node["metadata"]["name"]
            if want and want != a.get(ANN_LAST_APPLIED_DRAIN, "") and name not in self._drain_tasks:
                self._drain_tasks[name] = asyncio.get_running_loop().create_task(self._drain(name, want), name=f"mcc-drain-{name}")

    async def _drain(self, node: str, want: str) -> None:
        store = self.sim.store
        try:
            if want.startswith("drain-"):
                store.mutate("nodes", node, None, lambda o: o["spec"].__setitem__("unschedulable", True))
                report(store, node, Condition("UpdateExecuted", "Cordoned", "Cordoned Node as part of update executed phase"),
                       Condition("Cordoned", "UpdateExecutedCordoned", "Cordoned node. The node is reporting Unschedulable = true"),
                       "Unknown", "True")
                last = annotations(store.get_ref("nodes", node)).get(ANN_LAST_APPLIED_DRAIN, "")
                report(store, node, Condition("UpdateExecuted", "Drained", "Draining Node as part of update executed phase"),
                       Condition("Drained", "UpdateExecutedDrained", "Draining node. The drain will not be complete until "
                                 f"desired drainer {want} matches current drainer {last}"), "Unknown", "Unknown")
                while self._evict_round(node):
                    report(store, node, Condition("UpdateExecuted", "Drained", "Node Drain has not succeeded"),
                           Condition("Drained", "UpdateExecutedDrained", "Error: Node Drain has not succeeded. Error is: "
                                     "some pods could not be evicted yet The drain will not be complete until desired "
                                     f"drainer {want} matches current drainer {last}"), "Unknown", "Unknown")
                    await self.sim.clock.sleep(self.section.drain_retry_seconds)
                report(store, node, Condition("UpdateExecuted", "Drained", "Drained Node as part of update executed phase"),
                       Condition("Drained", "UpdateExecutedDrained", "Drained node. The drain is complete as the desired "
                                 f"drainer matches current drainer: {want}"), "Unknown", "True")
            else:
                store.mutate("nodes", node, None, lambda o: o["spec"].pop("unschedulable", None))
                report(store, node, Condition("UpdateComplete", "Uncordoned", "Uncordoned Node as part of completing upgrade phase"),
                       Condition("Uncordoned", "UpdateCompleteUncordoned", "UnCordoned node. The node is reporting Unschedulable = false"),
                       "True", "True")
            store.mutate("nodes", node, None,
                         lambda o: o["metadata"].setdefault("annotations", {}).__setitem__(ANN_LAST_APPLIED_DRAIN, want))
            self.drains.append((node, want))
        except ApiError as exc:  # the node went away
            log.info("mcc: drain of %s stopped: %s", node, exc)
        finally:
            if self._drain_tasks.get(node) is asyncio.current_task():
                del self._drain_tasks[node]
                self._dirty.set()

    def _evict_round(self, node: str) -> bool:
        """Evict every pod a drain moves; True while some remain (refused or terminating)."""
        store = self.sim.store
        left = False
        for pod in store.list_refs("pods", field_selector=f"spec.nodeName={node}"):
            meta = pod["metadata"]
            if any(r.get("kind") == "DaemonSet" for r in meta.get("ownerReferences") or []):
                continue
            if MIRROR_ANN in (meta.get("annotations") or {}):
                continue
            if is_terminating(pod):
                left = True
                continue
            try:
                store.evict(meta["name"], meta["namespace"])
            except ApiError as exc:
                if exc.status != 404:
                    left = True
        return left

    # --- admin -------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What ``GET /_sim/mcc`` returns."""
        return {"running": self.running, "killed_at": self.killed_at,
                "handed_out": [{"node": n, "config": c} for n, c in self.handed_out],
                "drains": [{"node": n, "drain": d} for n, d in self.drains]}

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _kill(self, request: web.Request) -> web.Response:
        self.kill()
        return web.json_response(self.state())

    async def _revive(self, request: web.Request) -> web.Response:
        self.revive()
        return web.json_response(self.state())

    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """``GET mcc``, ``POST mcc/kill``, ``POST mcc/revive``."""
        return [("GET", "mcc", self._get), ("POST", "mcc/kill", self._kill), ("POST", "mcc/revive", self._revive)]
