"""``SdnComponent``: the OpenShift 3.11 SDN model of procedures-spec §8.5 and its probe mesh.

Per node it keeps the OVS ``vxlan0`` dst_port (changed by ``ovs-vsctl set`` through exec into the
SDN/OVS pods or on the host), the SDN pod's image kind and the ClusterNetwork ``vxlanPort`` it read
at start (origin 3.11 ``pkg/network/node``):

- **SDN start** (an SDN pod becomes Ready, or restarts): ClusterNetwork ``default`` missing ->
  the pod crash-loops until it exists (modelled, unverified on a real 3.11). A **stock** image
  whose node's dst_port differs from ``vxlanPort`` runs a full setup: the bridge is re-created
  with ``dst_port := vxlanPort``, the node's pod network is down for ``rebuild_seconds`` and every
  pod on the pod network of that node restarts (restartCount+1). A **custom** image (the seed's
  build without that check) never does.
- **Health check** (stock only): every ``healthcheck_seconds`` after its start, an SDN whose
  node's dst_port differs from the port it started with exits ("SDN healthcheck detected unhealthy
  OVS server, restarting"): its restartCount goes up and the restart runs the start above.
- **Datapath**: down while the host is down (reboot, runtime stopped), while the ``ovs`` pod is
  gone, during a rebuild and while the SDN image is being pulled (spec §8.9 r5 (d)).

The probe mesh (``clustersim.sdn.probe``) is re-evaluated on those changes only; firewall rules
(``hosts.host(n).allows_udp(port)``, or the section's ``firewall`` without hosts) and host state
are re-read every ``probe_interval`` (N checks per tick). ``GET /_sim/network/probe`` returns the
outages per ordered pair, the totals, each node's dst_port history and rebuild count.
``POST /_sim/network/fault`` takes ``{"underlay_blocks": {"port": P, "from_time": T, "pairs": [...]}}``
(``from_time`` defaults to now) or ``{"clear": true}``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

from clustersim.agents.logic import is_terminating, pod_ready
from clustersim.agents.objects import new_uid, random_suffix, rfc3339
from clustersim.components import ComponentBase
from clustersim.loops import Background
from clustersim.openshift.kinds import CLUSTERNETWORK
from clustersim.sdn.model import NodeNet, SdnSection, UnderlayBlock
from clustersim.sdn.ovs import ovs_vsctl
from clustersim.sdn.probe import Endpoint, ProbeMesh

if TYPE_CHECKING:
    from clustersim.execsim import ExecRequest, ExecResult
    from clustersim.sim import ClusterSim
    from clustersim.store import Event

HEALTHCHECK_MESSAGE = "SDN healthcheck detected unhealthy OVS server, restarting: plugin is not setup"
DEFAULT_VXLAN_PORT = 4789


class SdnComponent(ComponentBase):
    """The ``sdn`` component (see module docstring). Built as ``SdnComponent(section, sim)``."""

    name = "sdn"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = SdnSection.model_validate(section or {})
        self.sim = sim
        self.nodes: dict[str, NodeNet] = {}
        self.blocks: list[UnderlayBlock] = list(self.section.underlay_blocks)
        self.mesh = ProbeMesh(blocked=self._blocked)
        self._bg = Background("sdn")
        self._controllers = False

    # ------------------------------------------------------------------ helpers
    def cluster_port(self) -> int | None:
        """ClusterNetwork ``default`` vxlanPort (4789 when unset), None when the object is missing."""
        cn = self.sim.store.try_get(CLUSTERNETWORK, "default")
        if cn is None:
            return None
        return int(cn.get("vxlanPort") or DEFAULT_VXLAN_PORT)

    def _after(self, key: tuple[str, str], sim_seconds: float, fn: Any) -> None:
        self._bg.timers.after(key, self.sim.clock.real(sim_seconds), fn)

    def _blocked(self, port: int, a: str, b: str) -> bool:
        t = self.now()
        return any(blk.port == port and t >= blk.from_time and (blk.pairs is None or f"{a}->{b}" in blk.pairs)
                   for blk in self.blocks)

    def _allows(self, node: NodeNet) -> bool:
        host = self._host(node.name)
        if host is not None:
            return bool(host.allows_udp(node.dst_port))
        return node.dst_port in node.firewall

    def _refresh(self, name: str) -> None:
        """Copy one node's inputs into the mesh and re-evaluate its pairs."""
        node = self.nodes.get(name)
        if node is None:
            return
        t = self.now()
        self.mesh.nodes[name] = Endpoint(up=node.datapath_up(t), port=node.dst_port, allows=self._allows(node))
        self.mesh.update_node(name, t)

    # ------------------------------------------------------------------ life cycle
    async def start(self, sim: ClusterSim) -> None:
        """Build per-node state from the store, hook commands and events, evaluate the mesh."""
        from clustersim import openshift

        self.sim = sim
        self.mark_started()
        for key in sim.store.iter_keys("nodes"):
            self._add_node(key[1])
        await openshift.acquire(sim)
        self._controllers = True
        sub = sim.store.subscribe(["pods", "nodes", CLUSTERNETWORK])
        for pod in sim.store.list_refs("pods", self.section.namespace):
            self._on_pod("ADDED", pod)
        self.mesh.update_all(self.now())
        sim.exec_router.register("sdn-ovs-vsctl", self._exec_matches, self._exec)
        hosts = self._hosts()
        if hosts is not None:
            hosts.register_command("ovs-vsctl", self._host_command)
        for blk in self.blocks:
            self._arm_block(blk)
        self._bg.follow(sub, self._route, "sdn-dispatch")
        self._bg.spawn(self._poll_inputs(), "sdn-inputs")

    async def stop(self) -> None:
        """Cancel tasks and timers, unhook, release the controllers (idempotent)."""
        from clustersim import openshift

        await self._bg.stop()
        with contextlib.suppress(Exception):
            self.sim.exec_router.unregister("sdn-ovs-vsctl")
        if self._controllers:
            self._controllers = False
            await openshift.release(self.sim)

    def _add_node(self, name: str) -> None:
        port = self.section.ports.get(name, self.section.default_port)
        node = NodeNet(name=name, dst_port=port, firewall=set(self.section.firewall.get(name, [port])))
        node.history.append((self.now(), port, "initial"))
        self.nodes[name] = node
        self.mesh.nodes[name] = Endpoint(up=True, port=port, allows=self._allows(node))

    # ------------------------------------------------------------------ events
    def _route(self, ev: Event) -> None:
        meta = ev.object.get("metadata") or {}
        if ev.resource == "nodes":
            name = meta.get("name", "")
            if ev.type == "ADDED" and name not in self.nodes:
                self._add_node(name)
                self._refresh(name)
            elif ev.type == "DELETED" and name in self.nodes:
                self.nodes.pop(name)
                self.mesh.remove_node(name, self.now())
        elif ev.resource == CLUSTERNETWORK:
            if ev.type != "DELETED":
                for node in self.nodes.values():
                    if node.sdn == "crashloop":
                        self._recover(node)
        elif meta.get("namespace") == self.section.namespace:
            self._on_pod(ev.type, ev.object)

    def _owner_ds(self, pod: dict[str, Any]) -> str:
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "DaemonSet":
                return str(ref.get("name"))
        return ""

    def _on_pod(self, etype: str, pod: dict[str, Any]) -> None:
        ds = self._owner_ds(pod)
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None or ds not in (self.section.sdn_daemonset, self.section.ovs_daemonset):
            return
        uid = pod["metadata"].get("uid", "")
        gone = etype == "DELETED" or is_terminating(pod)
        ready = not gone and (pod.get("status") or {}).get("phase") == "Running" and pod_ready(pod)
        if ds == self.section.ovs_daemonset:
            up = ready if not gone else False
            if node.ovs_up != up and (gone or ready):
                node.ovs_up = up
                self._refresh(node.name)
            return
        if gone:
            if uid == node.sdn_pod:
                node.sdn_pod, node.sdn, node.started_key = "", "absent", None
            return
        if uid != node.sdn_pod:
            node.sdn_pod = uid
            node.started_key = None
            image = self._sdn_image(pod)
            node.image_kind = "custom" if image in self.section.custom_images else "stock"
            node.sdn = "starting"
            host = self._host(node.name)
            if host is not None and image not in host.images:
                node.sdn = "pulling"
                node.pull_until = self.now() + self.section.pull_seconds
                self._after((node.name, "pull"), self.section.pull_seconds, lambda: self._pulled(node, image))
                self._refresh(node.name)
        restarts = max([int(c.get("restartCount", 0)) for c in (pod.get("status") or {}).get("containerStatuses") or []]
                       + [0])
        if ready and node.started_key != (uid, restarts) and (node.pull_until is None or self.now() >= node.pull_until):
            self._sdn_start(node, pod, restarts)

    def _sdn_image(self, pod: dict[str, Any]) -> str:
        for c in (pod.get("spec") or {}).get("containers") or []:
            if c.get("name") == self.section.container:
                return str(c.get("image", ""))
        return ""

    def _pulled(self, node: NodeNet, image: str) -> None:
        host = self._host(node.name)
        if host is not None:
            host.images.add(image)
        node.pull_until = None
        self._refresh(node.name)
        pod = self._pod_by_uid(node)
        if pod is not None:
            self._on_pod("MODIFIED", pod)

    def _pod_by_uid(self, node: NodeNet) -> dict[str, Any] | None:
        for pod in self.sim.store.list_refs("pods", self.section.namespace, field_selector=f"spec.nodeName={node.name}"):
            if pod["metadata"].get("uid") == node.sdn_pod:
                return pod
        return None

    # ------------------------------------------------------------------ SDN start, health check, rebuild
    def _sdn_start(self, node: NodeNet, pod: dict[str, Any], restarts: int) -> None:
        node.started_key = (node.sdn_pod, restarts)
        port = self.cluster_port()
        if port is None:
            node.sdn = "crashloop"
            self._set_pod_running(pod, running=False)
            return
        node.sdn = "running"
        node.sdn_started_at = self.now()
        node.port_at_start = port
        if node.image_kind == "stock" and node.dst_port != port:
            self._full_setup(node, port, pod)
        self._arm_healthcheck(node)

    def _recover(self, node: NodeNet) -> None:
        """ClusterNetwork is back: the crash-looping SDN pod's next restart succeeds."""
        pod = self._pod_by_uid(node)
        if pod is not None:
            self._set_pod_running(pod, running=True, bump=True)

    def _arm_healthcheck(self, node: NodeNet) -> None:
        if node.image_kind != "stock" or node.sdn != "running" or node.dst_port == node.port_at_start:
            return
        interval = self.section.healthcheck_seconds
        elapsed = self.now() - node.sdn_started_at
        wait = interval - (elapsed % interval)
        self._after((node.name, "healthcheck"), wait, lambda: self._healthcheck(node, node.sdn_pod))

    def _healthcheck(self, node: NodeNet, pod_uid: str) -> None:
        if (self.nodes.get(node.name) is not node or node.sdn_pod != pod_uid or node.sdn != "running"
                or node.image_kind != "stock" or node.dst_port == node.port_at_start):
            return
        pod = self._pod_by_uid(node)
        if pod is None:
            return
        # glog.Fatalf in the SDN process: the container exits and the kubelet restarts it; the
        # MODIFIED event with the higher restartCount then runs the start (full setup).
        self._event(pod, "SDNHealthcheckFailed", HEALTHCHECK_MESSAGE, "Warning")
        self._set_pod_running(pod, running=True, bump=True)

    def _full_setup(self, node: NodeNet, port: int, pod: dict[str, Any]) -> None:
        """SetupOVS: re-create br0 with dst_port=port; every pod-network pod on the node restarts."""
        t = self.now()
        node.rebuilds += 1
        node.network_generation += 1
        node.rebuild_until = t + self.section.rebuild_seconds
        if node.dst_port != port:
            node.dst_port = port
            node.history.append((t, port, "full SDN setup"))
        self._event(pod, "SDNSetup", "full SDN setup required", "Normal")
        self._refresh(node.name)
        self._after((node.name, "rebuild"), self.section.rebuild_seconds, lambda: self._refresh(node.name))
        now = rfc3339(self.sim.clock.now())
        for p in self.sim.store.list_refs("pods", field_selector=f"spec.nodeName={node.name}"):
            if is_terminating(p) or (p.get("spec") or {}).get("hostNetwork"):
                continue

            def bump(o: dict[str, Any]) -> None:
                for c in (o.get("status") or {}).get("containerStatuses") or []:
                    c["restartCount"] = int(c.get("restartCount", 0)) + 1
                    c["state"] = {"running": {"startedAt": now}}

            self.sim.store.mutate("pods", p["metadata"]["name"], p["metadata"]["namespace"], bump, subresource="status")

    def _set_pod_running(self, pod: dict[str, Any], *, running: bool, bump: bool = False) -> None:
        now = rfc3339(self.sim.clock.now())
        name = self.section.container

        def fn(o: dict[str, Any]) -> None:
            st = o.setdefault("status", {})
            for c in st.get("containerStatuses") or []:
                if c.get("name") != name:
                    continue
                if bump:
                    c["restartCount"] = int(c.get("restartCount", 0)) + 1
                c["ready"] = running
                c["state"] = ({"running": {"startedAt": now}} if running else
                              {"waiting": {"reason": "CrashLoopBackOff",
                                           "message": f"back-off 10s restarting failed container={name}"}})
            for c in st.get("conditions") or []:
                if c.get("type") in ("Ready", "ContainersReady"):
                    c["status"] = "True" if running else "False"

        self.sim.store.mutate("pods", pod["metadata"]["name"], pod["metadata"]["namespace"], fn, subresource="status")

    def _event(self, pod: dict[str, Any], reason: str, message: str, etype: str) -> None:
        m = pod["metadata"]
        now = rfc3339(self.sim.clock.now())
        self.sim.store.create("events", {
            "metadata": {"name": f"{m['name']}.{new_uid()[:8]}{random_suffix(message, 8)}", "namespace": m["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "namespace": m["namespace"],
                               "uid": m["uid"], "fieldPath": f"spec.containers{{{self.section.container}}}"},
            "reason": reason, "message": message, "type": etype,
            "source": {"component": "openshift-sdn", "host": (pod.get("spec") or {}).get("nodeName", "")},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })

    # ------------------------------------------------------------------ ports and faults
    def get_port(self, node: str) -> int:
        """The node's OVS vxlan0 dst_port (KeyError for an unknown node)."""
        return self.nodes[node].dst_port

    def set_port(self, node: str, port: int, why: str = "ovs-vsctl set") -> None:
        """``ovs-vsctl set interface vxlan0 options:dst_port=PORT`` on ``node``."""
        n = self.nodes[node]
        if n.dst_port != port:
            n.dst_port = port
            n.history.append((self.now(), port, why))
        self._refresh(node)
        self._arm_healthcheck(n)

    def ovs_available(self, node: str) -> bool:
        """The OVS database answers on ``node`` (host up, runtime up, ovs pod present)."""
        n = self.nodes.get(node)
        if n is None:
            return False
        return n.ovs_up and n.host_up

    def add_block(self, port: int, from_time: float | None = None, pairs: list[str] | None = None) -> None:
        """Underlay fault: VXLAN to ``port`` dropped from ``from_time`` (default now)."""
        blk = UnderlayBlock(port=port, from_time=self.now() if from_time is None else from_time, pairs=pairs)
        self.blocks.append(blk)
        self._arm_block(blk)

    def _arm_block(self, blk: UnderlayBlock) -> None:
        self._after(("underlay", f"{blk.port}@{blk.from_time}"), blk.from_time - self.now(),
                    lambda: self.mesh.update_all(self.now()))
        self.mesh.update_all(self.now())

    async def _poll_inputs(self) -> None:
        """Re-read host state and firewall rules (N checks per tick; the mesh only on a change)."""
        interval = max(self.sim.clock.real(self.section.probe_interval), 0.02)
        while True:
            await asyncio.sleep(interval)
            for node in list(self.nodes.values()):
                host = self._host(node.name)
                if host is not None:
                    host_up = bool(host.up) and (not host.runtime or host.runtime_up())
                    if host_up != node.host_up:
                        node.host_up = host_up
                ep = self.mesh.nodes.get(node.name)
                if ep is not None and (ep.up != node.datapath_up(self.now()) or ep.allows != self._allows(node)):
                    self._refresh(node.name)

    # ------------------------------------------------------------------ commands
    def _run_ovs(self, node: str, argv: list[str]) -> tuple[str, str, int]:
        if node not in self.nodes:
            return "", "ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed (No such file or directory)\n", 1
        return ovs_vsctl(argv, get_port=lambda: self.get_port(node), set_port=lambda p: self.set_port(node, p),
                         available=self.ovs_available(node))

    def _exec_matches(self, req: ExecRequest) -> bool:
        return (req.namespace == self.section.namespace and bool(req.argv)
                and req.argv[0].rsplit("/", 1)[-1] == "ovs-vsctl")

    async def _exec(self, req: ExecRequest) -> ExecResult:
        from clustersim.execsim import ExecResult

        out, err, code = self._run_ovs(req.node_name, req.argv)
        return ExecResult(stdout=out.encode(), stderr=err.encode(), exit_code=code)

    async def _host_command(self, host: Any, argv: list[str]) -> tuple[str, str, int]:
        return self._run_ovs(host.name, argv)

    # ------------------------------------------------------------------ admin
    def probe_report(self) -> dict[str, Any]:
        """The ``GET /_sim/network/probe`` document."""
        t = self.now()
        doc = self.mesh.report(t)
        doc["cluster_network_port"] = self.cluster_port()
        doc["nodes"] = {n: node.summary() for n, node in sorted(self.nodes.items())}
        doc["rebuilds"] = {n: node.rebuilds for n, node in sorted(self.nodes.items())}
        doc["underlay_blocks"] = [b.model_dump() for b in self.blocks]
        return doc

    def admin_routes(self) -> list[tuple[str, str, Any]]:
        """``GET network/probe`` and ``POST network/fault``."""
        return [("GET", "network/probe", self._h_probe), ("POST", "network/fault", self._h_fault)]

    async def _h_probe(self, request: web.Request) -> web.Response:
        return web.json_response(self.probe_report())

    async def _h_fault(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("clear"):
            self.blocks.clear()
            self.mesh.update_all(self.now())
        blk = body.get("underlay_blocks")
        if blk:
            self.add_block(int(blk["port"]), blk.get("from_time"), blk.get("pairs"))
        return web.json_response({"underlay_blocks": [b.model_dump() for b in self.blocks]})
