"""``HostsComponent``: one simulated host per node, its SSH server, and the coupling of host
state with the cluster (procedures-spec §8.2, §8.3).

Built by ``ClusterSim`` from the scenario's ``hosts:`` section (:class:`~clustersim.hosts.model.HostsSection`).
At ``start`` it creates a host for every Node in the store and every name in ``hosts.hosts``,
starts one asyncssh server per host, writes the client key, ``known_hosts`` and node -> address
map, and registers the debug-pod exec route. Attributes for clients: ``ssh_map``
(node -> "127.0.0.1:port"), ``client_key_path``, ``known_hosts_path``, ``ssh_map_path``.

World coupling: stopping the node service or the active runtime rewrites the Node's Ready
condition (:mod:`~clustersim.hosts.nodesync`) and publishes a :class:`HostEvent`; ``reboot``
runs :meth:`HostsComponent.reboot_sequence`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustersim.agents.objects import rfc3339
from clustersim.hosts import nodesync
from clustersim.hosts.admin import admin_routes
from clustersim.hosts.debugpod import register_debug_route
from clustersim.hosts.interp import CommandHandler, Interpreter
from clustersim.hosts.model import (
    ORIGIN_DNS_WATERMARK,
    HostEvent,
    HostsSection,
    HostState,
    PackageDef,
    build_host,
    new_boot_id,
)
from clustersim.hosts.netcmd import load_saved_at_boot, render_saved
from clustersim.hosts.sockets import Listener
from clustersim.hosts.sshd import HostSSHServer, KeyMaterial
from clustersim.loops import KeyedTimers, cancel_and_wait

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.sim import ClusterSim

log = logging.getLogger(__name__)
DISPATCHER = "/etc/NetworkManager/dispatcher.d/99-origin-dns.sh"
#: Faults a host accepts (``name`` or ``name=value``).
FAULTS = ("dns_breaks_on_reboot", "ssh_down", "pull_slow", "api_start_blocked_until_file", "exec_broken")
PULL_SLOW_FACTOR = 10.0
#: Simulated seconds before a running kubelet re-registers its deleted Node (the kubelet's
#: node status update period, --node-status-update-frequency 10 s).
REGISTER_RETRY_SECONDS = 10.0


def _node_ip(node: dict[str, Any]) -> str:
    for a in (node.get("status") or {}).get("addresses") or []:
        if a.get("type") == "InternalIP":
            return str(a.get("address"))
    return "127.0.0.1"


class HostsComponent:
    """The ``hosts`` component (see module docstring). ``section``: the scenario's dict;
    ``sim``: the ClusterSim (its store, clock and exec router). Raises pydantic's
    ValidationError for an invalid section."""

    name = "hosts"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = HostsSection.model_validate(section or {})
        self.options = self.section.options
        self.sim = sim
        self.hosts: dict[str, HostState] = {}
        self.servers: dict[str, HostSSHServer] = {}
        self.interpreter = Interpreter(self, lambda: rfc3339(sim.clock.now()))
        self.interpreter.traps = getattr(sim, "traps", None)
        self._subscribers: list[Callable[[HostEvent], Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._grace = KeyedTimers("hosts")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.keys: KeyMaterial | None = None
        self.ssh_map: dict[str, str] = {}
        self.client_key_path: Path | None = None
        self.known_hosts_path: Path | None = None
        self.ssh_map_path: Path | None = None
        self.events: list[HostEvent] = []
        self._node_sub: Any = None

    # ------------------------------------------------------------------ life cycle
    async def start(self, sim: ClusterSim) -> None:
        """Create the hosts, start their SSH servers, write key/known_hosts/map files."""
        self.sim = sim
        names: dict[str, tuple[str, str]] = {}
        for node in sim.store.list_refs("nodes"):
            labels = node["metadata"].get("labels") or {}
            role = "master" if "node-role.kubernetes.io/master" in labels else "node"
            names[node["metadata"]["name"]] = (_node_ip(node), role)
        for name in self.section.hosts:
            names.setdefault(name, ("127.0.0.1", "node"))
        for name, (ip, role) in names.items():
            host = build_host(name, self.section, ip, role)
            if host.iptables_saved and "/etc/sysconfig/iptables" not in host.files:
                host.files["/etc/sysconfig/iptables"] = render_saved(host.iptables_saved)
            self.hosts[name] = host
        self._tmp = tempfile.TemporaryDirectory(prefix="clustersim-hosts-")
        self.keys = KeyMaterial(Path(self._tmp.name))
        self.client_key_path = self.keys.client_key_path
        self.known_hosts_path = self.keys.known_hosts_path
        self.ssh_map_path = self.keys.ssh_map_path
        for i, (name, host) in enumerate(self.hosts.items()):
            port = self.options.ssh_port_base + i if self.options.ssh_port_base else 0
            server = HostSSHServer(name, self._runner_for(name), self.keys, port,
                                   honours_signals=lambda h=host: h.sshd_honours_signals)
            self.servers[name] = server
            await server.open()
            host.ssh_port, host.host_key = server.port, server.host_key_line
            if "ssh_down" in host.faults:
                await server.close()
        self.ssh_map = {n: f"127.0.0.1:{s.port}" for n, s in self.servers.items()}
        self.keys.write_maps({n: (s.port, s.host_key_line) for n, s in self.servers.items()})
        register_debug_route(self, sim.exec_router)
        for host in self.hosts.values():
            self._adopt_node(host)
        self._node_sub = sim.store.subscribe(["nodes"])
        self._spawn(self._watch_nodes(), "hosts-node-watch")

    async def _watch_nodes(self) -> None:
        """A running kubelet whose Node is deleted registers it again (new uid) after one node
        status update period, as a real kubelet does; only an invalid or stopped kubelet stays
        away. Labels then come from the host's node group (3.11 ``kubeletArguments.node-labels``),
        so labels added later by hand or by a playbook (the GlusterFS label) are lost."""
        assert self._node_sub is not None
        async for ev in self._node_sub:
            name = ev.object.get("metadata", {}).get("name", "")
            host = self.hosts.get(name)
            if ev.type == "DELETED" and host is not None and host.kubelet_up():
                self._grace.after(f"register:{name}", self.sim.clock.real(REGISTER_RETRY_SECONDS),
                                  partial(self._reregister, name))

    def _reregister(self, name: str) -> None:
        host = self.hosts[name]
        if not host.kubelet_up() or self.sim.store.try_get("nodes", name) is not None:
            return
        from clustersim.hosts.join import node_object

        labels = dict(self.section.node_groups.get(host.node_group, {}))
        version = self.options.kubelet_version or self.section.scaleup.kubelet_version
        self.sim.store.register_node(node_object(host, labels, self._now(), version))
        self.sync_node(host)

    def _adopt_node(self, host: HostState) -> None:
        """Make the Node agree with its host at start: bootID, runtime (and kubelet) version, Ready."""
        if self.sim.store.try_get("nodes", host.name) is None:
            return
        version = self.options.kubelet_version
        if version:
            def set_version(o: dict[str, Any]) -> None:
                info = o.setdefault("status", {}).setdefault("nodeInfo", {})
                info["kubeletVersion"] = info["kubeProxyVersion"] = version
            self.sim.store.mutate("nodes", host.name, None, set_version)
        self.sync_node(host)

    async def stop(self) -> None:
        """Stop every SSH server, timer and background task; remove the key files."""
        if self._node_sub is not None:
            self._node_sub.close()
            self._node_sub = None
        self._grace.cancel_all()
        await cancel_and_wait(list(self._tasks))
        for server in self.servers.values():
            await server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """GET hosts, GET hosts/{name}, POST hosts/{name}/fault|scaleup|upgrade (see admin.py)."""
        return admin_routes(self)

    # ------------------------------------------------------------------ public API
    def client_env(self) -> dict[str, str]:
        """The environment lockkeeper's ExecutorFactory reads for SSH (``LOCKKEEPER_SSH_KEY``,
        ``LOCKKEEPER_SSH_KNOWN_HOSTS``, ``LOCKKEEPER_SSH_USER``) plus ``CLUSTERSIM_SSH_MAP``
        (the JSON node -> "127.0.0.1:port" file). Empty before ``start``."""
        if self.client_key_path is None or self.known_hosts_path is None or self.ssh_map_path is None:
            return {}
        return {"LOCKKEEPER_SSH_KEY": str(self.client_key_path),
                "LOCKKEEPER_SSH_KNOWN_HOSTS": str(self.known_hosts_path),
                "LOCKKEEPER_SSH_USER": "root", "CLUSTERSIM_SSH_MAP": str(self.ssh_map_path)}

    def describe(self, name: str) -> dict[str, Any]:
        """``GET /_sim/hosts/<name>``: the host's summary plus its OVS vxlan0 dst_port when the
        SDN component models it. Raises KeyError for an unknown host."""
        out = self.hosts[name].summary()
        sdn = self.sim.components.get("sdn")
        get_port = getattr(sdn, "get_port", None)
        if callable(get_port):
            with contextlib.suppress(Exception):
                out["ovs"] = {"vxlan0": {"dst_port": str(get_port(name))}}
        return out

    def extra_listeners(self, host: HostState) -> list[Listener]:
        """Listening sockets other components know of (``ss`` reads them): the VXLAN port of the
        node's OVS ``vxlan0`` (``dst_port``) when the SDN component models the node, UDP on
        ``0.0.0.0`` (the kernel socket of OVS's ``vxlan_sys_<port>`` device), while the host is up."""
        sdn = self.sim.components.get("sdn")
        get_port = getattr(sdn, "get_port", None)
        if not host.up or not callable(get_port):
            return []
        try:
            return [Listener("udp", "0.0.0.0", int(get_port(host.name)))]
        except (KeyError, ValueError, TypeError):
            return []

    def host(self, name: str) -> HostState:
        """The host of node ``name``; raises KeyError for an unknown host."""
        return self.hosts[name]

    def register_command(self, name: str, handler: CommandHandler) -> None:
        """Provide a host command: ``handler(host, argv) -> (stdout, stderr, exit code)``."""
        self.interpreter.register_command(name, handler)

    def subscribe(self, callback: Callable[[HostEvent], Any]) -> None:
        """Call ``callback(HostEvent)`` for every host event (a coroutine result is scheduled)."""
        self._subscribers.append(callback)

    async def run(self, host: str, argv: list[str], via: str = "ssh", stdin: bytes = b"") -> tuple[str, str, int]:
        """Run ``argv`` on ``host`` as if through ``via``. Raises SessionDropped for a reboot."""
        return await self.interpreter.run(self.hosts[host], argv, stdin=stdin, via=via)

    def api_start_blocked(self, host: str) -> str | None:
        """The file whose absence keeps ``host``'s master API from starting (fault
        ``api_start_blocked_until_file=PATH``), or None when the API may start (no fault, or the
        file exists now). Meant for the masters component's ``master-restart``."""
        h = self.hosts.get(host)
        if h is None:
            return None
        for f in h.faults:
            if f.startswith("api_start_blocked_until_file="):
                path = f.split("=", 1)[1]
                return None if h.exists(path) else path
        return None

    async def set_fault(self, host: str, fault: str, clear: bool = False) -> None:
        """Set (or clear) ``fault`` (``name`` or ``name=value``) on ``host``. Raises ValueError
        for an unknown fault, KeyError for an unknown host."""
        h = self.hosts[host]
        name = fault.split("=", 1)[0]
        if name not in FAULTS:
            raise ValueError(f"unknown host fault {name!r}; known: {', '.join(FAULTS)}")
        if clear:
            h.faults = {f for f in h.faults if f.split("=", 1)[0] != name}
        else:
            h.faults = {f for f in h.faults if f.split("=", 1)[0] != name} | {fault}
        server = self.servers.get(host)
        if name == "ssh_down" and server is not None:
            if clear and h.up:
                await server.open()
            elif not clear:
                await server.close()

    # ------------------------------------------------------------------ HostWorld
    def unit_changed(self, host: HostState, unit: str, was_active: bool) -> None:
        """HostWorld: ``unit`` changed on ``host``; publish runtime/node-service events and update the Node."""
        now_active = host.unit_active(unit)
        if was_active == now_active:
            return
        if unit == host.node_service():
            self.publish(HostEvent("node_service_started" if now_active else "node_service_stopped", host.name))
        elif unit == host.runtime_unit:
            self.publish(HostEvent("runtime_started" if now_active else "runtime_stopped", host.name,
                                   {"runtime": host.runtime}))
        self.sync_node(host)

    def request_reboot(self, host: HostState) -> None:
        """HostWorld: start ``host``'s reboot sequence in the background (ignored while it is down)."""
        if host.up:
            self._spawn(self.reboot_sequence(host), f"reboot-{host.name}")

    def catalog(self) -> dict[str, PackageDef]:
        """HostWorld: the section's package catalog (name -> PackageDef)."""
        return self.section.catalog

    def registry_images(self) -> set[str]:
        """HostWorld: images a pull can fetch (empty set: any image)."""
        return set(self.section.registry_images)

    def pods_on(self, host: HostState) -> list[dict[str, Any]]:
        """HostWorld: pods bound to ``host``'s node (store references, do not mutate)."""
        return self.sim.store.list_refs("pods", field_selector=f"spec.nodeName={host.name}")

    async def sim_sleep(self, sim_seconds: float) -> None:
        """HostWorld: sleep ``sim_seconds`` of simulated time."""
        await self.sim.clock.sleep(sim_seconds)

    def pull_seconds(self, host: HostState) -> float:
        """HostWorld: simulated seconds of one image pull (``pull_slow`` multiplies by 10)."""
        slow = any(f.split("=", 1)[0] == "pull_slow" for f in host.faults)
        return self.options.pull_seconds * (PULL_SLOW_FACTOR if slow else 1.0)

    # ------------------------------------------------------------------ internals
    def publish(self, event: HostEvent) -> None:
        """Record ``event`` and hand it to every subscriber (errors are logged, not raised)."""
        self.events.append(event)
        for cb in list(self._subscribers):
            try:
                res = cb(event)
                if inspect.isawaitable(res):
                    self._spawn(res, f"host-event-{event.kind}")
            except Exception:
                log.exception("hosts: subscriber failed on %s", event)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _runner_for(self, name: str) -> Callable[[list[str], bytes], Any]:
        async def run(argv: list[str], stdin: bytes) -> tuple[str, str, int]:
            return await self.interpreter.run(self.hosts[name], argv, stdin=stdin, via="ssh")
        return run

    def _now(self) -> str:
        return rfc3339(self.sim.clock.now())

    def sync_node(self, host: HostState) -> None:
        """Write what the kubelet (or, after the grace, the node controller) reports for ``host``."""
        self._grace.cancel(host.name)
        want = nodesync.desired_ready(host)
        if want is None:
            self._grace.after(host.name, self.sim.clock.real(self.options.node_monitor_grace_seconds),
                              partial(self._mark_unknown, host.name))
            return
        self.write_ready(host, want)

    def _mark_unknown(self, name: str) -> None:
        host = self.hosts[name]
        if nodesync.desired_ready(host) is None:
            self.write_ready(host, nodesync.UNKNOWN)

    def write_ready(self, host: HostState, status: tuple[str, str, str]) -> None:
        """Set ``host``'s Node Ready condition to ``status`` (status, reason, message) now; no-op
        while the Node does not exist."""
        if self.sim.store.try_get("nodes", host.name) is None:
            return  # deleted (R4 step 13) or never registered
        now = self._now()
        self.sim.store.mutate("nodes", host.name, None,
                              lambda o: nodesync.apply_ready(o, status, now, host))

    async def reboot_sequence(self, host: HostState) -> None:
        """Reboot ``host`` (spec §8.2): sessions aborted, listener closed, units stopped (events),
        Node NotReady after the grace, ``reboot_seconds`` later a new boot id, saved iptables rules
        loaded, resolv.conf as the boot leaves it, enabled units started, SSH back."""
        host.up = False
        self.publish(HostEvent("reboot_started", host.name, {"boot_id": host.boot_id}))
        server = self.servers.get(host.name)
        if server is not None:
            await server.close()
            server.abort_sessions()
        for name in list(host.units):
            if host.units[name].active:
                host.units[name].active = False
                self.unit_changed(host, name, True)
        self.sync_node(host)
        await self.sim.clock.sleep(self.options.reboot_seconds)
        host.boot_id = new_boot_id()
        host.boot_ids.append(host.boot_id)
        host.boot_count += 1
        load_saved_at_boot(host)
        host.up = True
        enabled = [n for n, u in host.units.items() if u.enabled]
        # Fault dns_breaks_on_reboot (one boot): the dispatcher points resolv.conf at the node
        # while dnsmasq fails to start, so no name resolves until someone fixes it.
        dns_breaks = "dns_breaks_on_reboot" in host.faults
        host.faults.discard("dns_breaks_on_reboot")
        # dnsmasq first: the NetworkManager dispatcher runs once it is up (99-origin-dns.sh).
        for name in sorted(enabled, key=lambda n: n != "dnsmasq"):
            if name == "dnsmasq" and dns_breaks:
                continue
            host.units[name].active = True
            if name == "dnsmasq" and DISPATCHER in host.files:
                self.origin_dns(host)
            self.unit_changed(host, name, False)
        if dns_breaks:
            self.origin_dns(host)
        if server is not None and "ssh_down" not in {f.split("=", 1)[0] for f in host.faults}:
            await server.open()
        self._count_restarts(host)
        self.sync_node(host)
        self.publish(HostEvent("reboot_done", host.name, {"boot_id": host.boot_id, "boot_count": host.boot_count}))

    def _count_restarts(self, host: HostState) -> None:
        """Every container of the node's pods ran again after the boot: restartCount+1 (the
        kubelet agent keeps counts when it recomputes the status)."""
        now = self._now()

        def bump(o: dict[str, Any]) -> None:
            for c in (o.get("status") or {}).get("containerStatuses") or []:
                c["restartCount"] = int(c.get("restartCount", 0)) + 1
                if "running" in (c.get("state") or {}):
                    c["lastState"] = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now,
                                                     "startedAt": c["state"]["running"].get("startedAt", now)}}
                    c["state"] = {"running": {"startedAt": now}}

        for pod in self.pods_on(host):
            if pod["metadata"].get("deletionTimestamp") or not (pod.get("status") or {}).get("containerStatuses"):
                continue
            self.sim.store.mutate("pods", pod["metadata"]["name"], pod["metadata"]["namespace"], bump,
                                  subresource="status")

    @staticmethod
    def origin_dns(host: HostState) -> None:
        """What 99-origin-dns.sh does with dnsmasq up: point resolv.conf at the node address."""
        search = [ln for ln in host.files.get("/etc/resolv.conf", "").splitlines() if ln.startswith("search ")]
        host.files["/etc/resolv.conf"] = "\n".join([ORIGIN_DNS_WATERMARK, *search, f"nameserver {host.ip}"]) + "\n"
