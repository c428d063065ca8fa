"""``CnoComponent``: the simulated cluster-network-operator of the SDN→OVN migration (R1).

Reacts (one store subscription, no polling) to ``network.operator/cluster``,
``network.config/cluster`` and the MachineConfigPools:

- **render**: while OVN-Kubernetes is wanted (see :mod:`clustersim.cno.model`) each pool's
  ``spec.configuration`` gets a rendered config including ``99-<role>-ovn`` (created on first use,
  with the section's ``ovn_files``), marked as carrying the OVN files; ``status.migration`` of
  ``network.config/cluster`` follows ``spec.migration``;
- **switch**: a ``spec.networkType`` change (with the matching migration field) deletes the old
  plugin's DaemonSet and pods (``openshift-sdn/sdn`` or ``openshift-ovn-kubernetes/ovnkube-node``),
  creates the new one, rolls ``openshift-multus/multus`` (a template change), turns the R1 pod
  network model on (OVN: ovnkube-node crash-loops on nodes whose currentConfig lacks the OVN
  files; pods created before the switch keep stale IPs while their node has not rebooted since
  the switch, i.e. pods on nodes that rebooted before it, as in R1) or off (SDN), copies the type to
  ``spec.defaultNetwork.type`` and ``status.networkType``.

``switches`` records each applied switch: ``{"at", "from", "to", "pools_settled"}``.
Admin routes: ``GET /_sim/cno`` (switches, fault), ``POST /_sim/cno/faults`` with
``{"early_switch": bool}``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web

from clustersim.agents.logic import labels
from clustersim.agents.objects import make_machineconfig, rfc3339
from clustersim.cno.model import OVN, SDN, CnoSection, ovn_machineconfig, rendered_name, wanted_sources
from clustersim.loops import Background, reconcile_on_change
from clustersim.scenario_builders import build_daemonset
from clustersim.scenario_specs import DaemonSetSpec
from clustersim.selectors import matches_label_selector_object

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.sim import ClusterSim

log = logging.getLogger("clustersim.cno")

MC = "machineconfigs.machineconfiguration.openshift.io"
MCP = "machineconfigpools.machineconfiguration.openshift.io"
NET_CFG = "networks.config.openshift.io"
NET_OP = "networks.operator.openshift.io"
DS = "daemonsets.apps"
SDN_DS = ("openshift-sdn", "sdn")
OVN_DS = ("openshift-ovn-kubernetes", "ovnkube-node")
MULTUS_DS = ("openshift-multus", "multus")
ANN_NETWORK_TYPE = "clustersim.lockkeeper.io/network-type"


def _pool_settled(pool: dict[str, Any]) -> bool:
    """Updated and not updating, or paused (an administrator holding the pools, as the documented
    migration and rollback do before the switch, has taken the rollout into their own hands)."""
    if (pool.get("spec") or {}).get("paused"):
        return True
    conds = {c.get("type"): c.get("status") for c in (pool.get("status") or {}).get("conditions") or []}
    return conds.get("Updated") == "True" and conds.get("Updating") != "True"


class CnoComponent:
    """The ``cno`` component (see the module docstring)."""

    name = "cno"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = CnoSection.model_validate(section or {})
        self.sim = sim
        self.early_switch = self.section.early_switch
        self.switches: list[dict[str, Any]] = []
        self._sdn_template: dict[str, Any] | None = None
        #: (pool, sorted sources) -> rendered config name, so going back reuses the old config.
        self._memo: dict[tuple[str, tuple[str, ...]], str] = {}
        self._bg = Background("cno")
        self._dirty = asyncio.Event()

    # --- life cycle --------------------------------------------------------------------------------

    async def start(self, sim: ClusterSim) -> None:
        """Keep a copy of the SDN DaemonSet (to put it back on a rollback), fill the operator's
        defaults (``openshiftSDNConfig`` while on SDN) and start reacting."""
        store = sim.store
        sdn = store.try_get(DS, SDN_DS[1], SDN_DS[0])
        if sdn is not None:
            self._sdn_template = copy.deepcopy(sdn)
        op = store.try_get(NET_OP, "cluster")
        if op is not None and ((op.get("spec") or {}).get("defaultNetwork") or {}).get("type") == SDN:
            store.mutate(NET_OP, "cluster", None, lambda o: o["spec"]["defaultNetwork"].setdefault(
                "openshiftSDNConfig", {"mode": "NetworkPolicy", "mtu": 1450, "vxlanPort": 4789}))
        self._bg.sub = store.subscribe([NET_CFG, NET_OP, MCP])
        self._bg.spawn(reconcile_on_change(self._bg.sub, self._dirty, self.reconcile, "cno"), "cno")
        self._dirty.set()

    async def stop(self) -> None:
        """Stop reacting (idempotent)."""
        await self._bg.stop()

    # --- reconcile ---------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """One pass: render, follow the migration status, apply a pending switch."""
        store = self.sim.store
        op, cfg = store.try_get(NET_OP, "cluster"), store.try_get(NET_CFG, "cluster")
        if op is None or cfg is None:
            return
        migration = ((op.get("spec") or {}).get("migration") or {}).get("networkType")
        wanted = (cfg.get("spec") or {}).get("networkType")
        applied = (cfg.get("status") or {}).get("networkType")
        self._render((migration or wanted) == OVN)
        status_migration = ((cfg.get("status") or {}).get("migration") or {}).get("networkType")
        if status_migration != migration:
            def set_migration(o: dict[str, Any]) -> None:
                if migration:
                    o.setdefault("status", {})["migration"] = {"networkType": migration}
                else:
                    o.setdefault("status", {}).pop("migration", None)
            store.mutate(NET_CFG, "cluster", None, set_migration, subresource="status")
        if not wanted or wanted == applied:
            self._condition("Degraded", "False", "", "")
            return
        if migration != wanted:
            self._condition("Degraded", "True", "InvalidOperatorConfig",
                            f"network type change to {wanted} requires spec.migration.networkType={wanted}")
            return
        settled = all(_pool_settled(p) for p in store.list_refs(MCP))
        if not settled and not self.early_switch:
            self._condition("Progressing", "True", "MachineConfigPoolsUpdating",
                            f"waiting for every MachineConfigPool to be Updated before switching to {wanted}")
            return
        self._switch(applied or "", wanted, settled)

    def _condition(self, ctype: str, status: str, reason: str, message: str) -> None:
        def fn(o: dict[str, Any]) -> None:
            conds = o.setdefault("status", {}).setdefault("conditions", [])
            for c in conds:
                if c.get("type") == ctype:
                    if (c.get("status"), c.get("reason"), c.get("message")) != (status, reason, message):
                        c.update(status=status, reason=reason, message=message, lastTransitionTime=rfc3339(self.sim.clock.now()))
                    return
            conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                          "lastTransitionTime": rfc3339(self.sim.clock.now())})
        self.sim.store.mutate(NET_OP, "cluster", None, fn, subresource="status")

    def _render(self, want_ovn: bool) -> None:
        store = self.sim.store
        for pool in store.list_refs(MCP):
            pname = pool["metadata"]["name"]
            conf = (pool.get("spec") or {}).get("configuration") or {}
            sources = [s.get("name", "") for s in conf.get("source") or []]
            new_sources = wanted_sources(pname, sources, want_ovn)
            if new_sources == sources:
                continue
            if want_ovn:
                self._ensure_ovn_machineconfig(pname)
            name = self._rendered_for(pname, sources, conf.get("name", ""), new_sources, want_ovn)
            src = [{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": s} for s in new_sources]
            store.mutate(MCP, pname, None, lambda o, n=name, s=src: o["spec"].__setitem__("configuration", {"name": n, "source": s}))
            log.info("cno: pool %s now renders %s (ovn=%s)", pname, name, want_ovn)

    def _ensure_ovn_machineconfig(self, pool: str) -> None:
        name = ovn_machineconfig(pool)
        if self.sim.store.try_get(MC, name) is None:
            role = "master" if pool == "master" else "worker"
            self.sim.store.create(MC, make_machineconfig(name, role=role, created=rfc3339(self.sim.clock.now()),
                                                         files=list(self.section.ovn_files)))

    def _rendered_for(self, pool: str, old_sources: list[str], old_name: str, sources: list[str], ovn: bool) -> str:
        """The rendered config of ``pool`` with ``sources``: an existing one with these sources
        (the pool's earlier config, remembered by name), else a new one."""
        store = self.sim.store
        memo = self._memo
        memo[(pool, tuple(sorted(old_sources)))] = old_name
        known = memo.get((pool, tuple(sorted(sources))))
        if known and store.try_get(MC, known) is not None:
            return known
        name = rendered_name(pool, sources)
        if store.try_get(MC, name) is None:
            files: list[str] = []
            for s in sources:
                mc = store.try_get(MC, s) or {}
                for f in ((((mc.get("spec") or {}).get("config") or {}).get("storage") or {}).get("files") or []):
                    files.append(f.get("path", ""))
            store.create(MC, make_machineconfig(name, role=pool, created=rfc3339(self.sim.clock.now()), files=files,
                                                owner_pool=pool, sources=sources, carries_ovn=ovn))
        if ovn and self.sim.agents is not None:
            self.sim.agents.net.ovn_configs.add(name)
        memo[(pool, tuple(sorted(sources)))] = name
        return name

    # --- the switch --------------------------------------------------------------------------------

    def _switch(self, old: str, new: str, settled: bool) -> None:
        store = self.sim.store
        now = rfc3339(self.sim.clock.now())
        if new == OVN:
            self._delete_daemonset(*SDN_DS)
            self._ensure_namespace(OVN_DS[0])
            if store.try_get(DS, OVN_DS[1], OVN_DS[0]) is None:
                spec = DaemonSetSpec(name=OVN_DS[1], namespace=OVN_DS[0], labels={"app": "ovnkube-node"},
                                     image=self.section.ovn_image, container="ovnkube-controller", host_network=True,
                                     requires_ovn=True, tolerations=[{"operator": "Exists"}])  # type: ignore[list-item]
                store.create(DS, build_daemonset(spec, now))
        else:
            self._delete_daemonset(*OVN_DS)
            if self._sdn_template is not None and store.try_get(DS, SDN_DS[1], SDN_DS[0]) is None:
                ds = copy.deepcopy(self._sdn_template)
                for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                    ds["metadata"].pop(k, None)
                ds.pop("status", None)
                store.create(DS, ds)
        self._set_pod_network(new == OVN, now)
        store.mutate(DS, MULTUS_DS[1], MULTUS_DS[0], lambda o: o["spec"]["template"]["metadata"].setdefault(
            "annotations", {}).__setitem__(ANN_NETWORK_TYPE, new))

        def op_fn(o: dict[str, Any]) -> None:
            o["spec"].setdefault("defaultNetwork", {})["type"] = new
        store.mutate(NET_OP, "cluster", None, op_fn)
        store.mutate(NET_CFG, "cluster", None, lambda o: o.setdefault("status", {}).__setitem__("networkType", new),
                     subresource="status")
        self._condition("Progressing", "False", "", "")
        self.switches.append({"at": now, "from": old, "to": new, "pools_settled": settled})
        log.info("cno: network type switched %s -> %s (pools settled: %s)", old, new, settled)

    def _delete_daemonset(self, namespace: str, name: str) -> None:
        store = self.sim.store
        ds = store.try_get(DS, name, namespace)
        if ds is None:
            return
        uid = ds["metadata"]["uid"]
        store.delete(DS, name, namespace)
        for pod in store.list_refs("pods", namespace):
            if any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences") or []):
                store.delete("pods", pod["metadata"]["name"], namespace, grace_period_seconds=0)

    def _ensure_namespace(self, ns: str) -> None:
        if self.sim.store.try_get("namespaces", ns) is None:
            self.sim.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                                 "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})

    def _set_pod_network(self, ovn: bool, now: str) -> None:
        """Turn the agents' R1 pod-network model on (OVN) or off (SDN) and have every pod's
        status recomputed."""
        agents = self.sim.agents
        if agents is None:
            return
        net = agents.net
        net.enabled = ovn
        if ovn:
            net.switched_at = now
            # Pods keep the sandboxes the old plugin attached until their node reboots: only
            # those on a node still on its boot of the switch are cut off (R1's stale pod IPs).
            net.boot_at_switch = {n["metadata"]["name"]: ((n.get("status") or {}).get("nodeInfo") or {}).get("bootID", "")
                                  for n in self.sim.store.list_refs("nodes")}
            if not any(t.get_name() == "agents-crashloop" and not t.done() for t in agents._tasks):
                agents._tasks.append(asyncio.get_running_loop().create_task(agents._crashloop_loop(), name="agents-crashloop"))
        agents._dirty_nodes.update(n for _, n in self.sim.store.iter_keys("nodes"))
        agents._mark()

    # --- helpers for tests and admin ---------------------------------------------------------------

    def pool_members(self, pool: dict[str, Any]) -> list[dict[str, Any]]:
        """The nodes ``pool`` selects."""
        sel = (pool.get("spec") or {}).get("nodeSelector")
        return [n for n in self.sim.store.list_refs("nodes") if matches_label_selector_object(sel, labels(n))]

    def state(self) -> dict[str, Any]:
        """What ``GET /_sim/cno`` returns."""
        return {"early_switch": self.early_switch, "switches": list(self.switches)}

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _faults(self, request: web.Request) -> web.Response:
        body = await request.json()
        if "early_switch" in body:
            self.early_switch = bool(body["early_switch"])
            self._dirty.set()
        return web.json_response(self.state())

    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """``GET cno``, ``POST cno/faults``."""
        return [("GET", "cno", self._get), ("POST", "cno/faults", self._faults)]
