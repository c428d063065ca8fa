"""``MastersComponent``: per-master API listeners, restarts, availability and controllers leadership.

- Each master gets its own loopback HTTP listener serving the same store as the main endpoint
  (every path is handed to the main API server's handler) plus ``/healthz`` and
  ``/healthz/ready`` answering ``ok``. While that master's API restarts the listener is closed:
  clients get "connection refused", as from a real master whose API pod is down.
- The main endpoint stands for the load balancer in front of the masters: it is up while at least
  one master API is up and refuses connections while none is (its listener is closed, then
  reopened on the same port).
- ``restart(master, "api"|"controllers")`` takes ``restart_seconds``; with the fault
  ``api_start_blocked_until_file=<path>`` the API stays down until that file exists on the
  master's host (seed 002: a missing LDAP CA); its log then shows origin's config validation
  error. Each start re-reads the master-config's ``networkConfig``.
- Controllers leadership (origin 3.11 leader election on ConfigMap
  ``kube-system/openshift-master-controllers``, annotation ``control-plane.alpha.kubernetes.io/leader``):
  the scenario names the leader; when its controllers stop, the next running master (in section
  order) takes over. Whoever becomes leader runs the SDN master's start: it creates ClusterNetwork
  ``default`` from the networkConfig **its** controllers read at their start if it is missing
  (origin pkg/network/master/master.go; an existing object is never updated).
- A master whose host reboots (or whose container runtime stops) loses API and controllers at
  once (the lease moves); they start ``restart_seconds`` after the host and its kubelet are back.
- The OpenShift controllers (DCs, RCs, image triggers) run while any master's controllers run.
- Host commands (when the ``hosts`` component is present): ``master-restart api|controllers|etcd``
  and ``master-logs api|controllers api|controllers [--tail=N]`` (also as ``/usr/local/bin/...``).

Admin routes: ``GET /_sim/api/availability``, ``GET /_sim/masters``,
``POST /_sim/masters/{name}/restart`` (``{"what": "api"}``), ``POST /_sim/masters/{name}/fault``
(``{"add": [...], "remove": [...]}``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from clustersim.agents.objects import new_uid, rfc3339
from clustersim.components import ComponentBase
from clustersim.loops import cancel_and_wait
from clustersim.masters.admin import admin_routes, host_command
from clustersim.masters.model import API_MANIFEST, Interval, MastersSection, MasterState, cluster_network_from, manifest_kube_version
from clustersim.masters.pods import ensure_static_pods, mirror_pod
from clustersim.openshift.kinds import CLUSTERNETWORK

if TYPE_CHECKING:
    from clustersim.openshift.controllers import OpenShiftControllers
    from clustersim.sim import ClusterSim

log = logging.getLogger(__name__)

LEADER_CM = ("kube-system", "openshift-master-controllers")
LEADER_ANN = "control-plane.alpha.kubernetes.io/leader"
BLOCKED_RECHECK_SECONDS = 1.0


class MastersComponent(ComponentBase):
    """The ``masters`` component (see module docstring). Built as ``MastersComponent(section, sim)``."""

    name = "masters"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = MastersSection.model_validate(section or {})
        self.sim = sim
        self.masters: dict[str, MasterState] = {
            m.name: MasterState(name=m.name, api_port=m.api_port, faults=set(self.section.faults.get(m.name, [])))
            for m in self.section.masters}
        self.leader: str | None = None
        self.leader_history: list[dict[str, Any]] = []
        self.zero_up: list[Interval] = []
        self.controllers: OpenShiftControllers | None = None
        self._runners: dict[str, web.AppRunner] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._main_site: web.TCPSite | None = None
        self._started = False
        self._watcher: asyncio.Task[None] | None = None
        self._host_down: set[str] = set()

    # ------------------------------------------------------------------ helpers
    def read_network_config(self, master: str) -> dict[str, Any]:
        """master-config ``networkConfig`` of ``master``: from its host file when present, else the
        section's. Raises ValueError when the host's file is not valid YAML."""
        host = self._host(master)
        text = None if host is None else host.files.get(self.section.master_config_path)
        if text is None:
            spec = next(m for m in self.section.masters if m.name == master)
            return dict(spec.network_config if spec.network_config is not None else self.section.network_config)
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"error reading config: {exc}") from exc
        if not isinstance(doc, dict):
            raise ValueError("error reading config: not a YAML mapping")
        return dict(doc.get("networkConfig") or {})

    def api_url(self, master: str) -> str:
        """``http://127.0.0.1:<port>`` of that master's API listener (KeyError for a non-master)."""
        return f"http://127.0.0.1:{self.masters[master].api_port}"

    def _log(self, st: MasterState, line: str, log: str = "api") -> None:
        """Append a glog-style line to the master's ``api`` or ``controllers`` log."""
        ts = self.sim.clock.now()
        lines = st.api_log if log == "api" else st.controllers_log
        lines.append(f"I{ts:%m%d %H:%M:%S}.{ts.microsecond:06d}       1 {line}")
        del lines[:-2000]

    # ------------------------------------------------------------------ life cycle
    async def start(self, sim: ClusterSim) -> None:
        """Open every master's API listener, read configs, elect the leader, start controllers."""
        from clustersim import openshift

        self.sim = sim
        self.mark_started()
        if self.section.kube_version is not None:
            sim.server.version_provider = self.server_version
        for st in self.masters.values():
            st.kube_version = self._manifest_version(st.name) or self.section.kube_version
            st.intervals.append(Interval("up", 0.0))
            await self._open(st)
            st.api_up = st.controllers_up = True
            st.api_config = st.controllers_config = self._config_or_empty(st.name)
            self._log(st, f"start_api.go] Starting master on 0.0.0.0:8443 ({self.section.version})")
            self._log(st, f"leaderelection.go:185] attempting to acquire leader lease  {LEADER_CM[0]}/{LEADER_CM[1]}...",
                      "controllers")
        self._started = True
        if self.section.static_pods:
            for name in self.masters:
                ensure_static_pods(self.sim.store, self.sim.clock, name, self.section.static_pod_images)
        self.controllers = await openshift.acquire(sim, image_streams=self.section.image_streams,
                                                   trigger_seconds=self.section.trigger_seconds)
        self._become_leader(self.section.leader or self.section.masters[0].name)
        hosts = self._hosts()
        if hosts is not None:
            for cmd in ("master-restart", "master-logs"):
                hosts.register_command(cmd, self._host_command)
            self._watcher = asyncio.create_task(self._watch_hosts(), name="masters-hosts")

    async def stop(self) -> None:
        """Cancel restarts, close the listeners, release the controllers (idempotent)."""
        from clustersim import openshift

        tasks = [*self._tasks.values(), self._watcher]
        self._watcher = None
        await cancel_and_wait(tasks)
        self._tasks.clear()
        for name in list(self._runners):
            await self._close(name)
        if self._started:
            self._started = False
            await openshift.release(self.sim)
            self.controllers = None

    def _config_or_empty(self, master: str) -> dict[str, Any]:
        try:
            return self.read_network_config(master)
        except ValueError:
            return {}

    async def _open(self, st: MasterState) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)

        async def ok(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def forward(request: web.Request) -> web.StreamResponse:
            return await self.sim.server._dispatch(request)  # the same store, same handling

        app.router.add_get("/healthz", ok)
        app.router.add_get("/healthz/ready", ok)
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.2)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", st.api_port, reuse_address=True)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        st.api_port = server.sockets[0].getsockname()[1]
        self._runners[st.name] = runner

    async def _close(self, name: str) -> None:
        runner = self._runners.pop(name, None)
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------ availability
    def _mark(self, st: MasterState, up: bool) -> None:
        t = self.now()
        if st.intervals and st.intervals[-1].end is None:
            st.intervals[-1].end = t
        st.intervals.append(Interval("up" if up else "down", t))

    async def _update_main(self) -> None:
        """Close the main listener when no master API is up, reopen it when one is."""
        any_up = any(s.api_up for s in self.masters.values())
        runner = self.sim.runner
        if runner is None:
            return
        if not any_up and self._main_site is None:
            self.zero_up.append(Interval("zero_up", self.now()))
            for site in list(runner.sites):
                if isinstance(site, web.TCPSite) and _bound_port(site) == self.sim.port:
                    await site.stop()
                    self._main_site = site
        elif any_up and self._main_site is not None:
            self._main_site = None
            if self.zero_up and self.zero_up[-1].end is None:
                self.zero_up[-1].end = self.now()
            site = web.TCPSite(runner, self.sim.host, self.sim.port, reuse_address=True)
            await site.start()

    def availability(self) -> dict[str, Any]:
        """Per-master API intervals (simulated seconds since start), restart counts and the
        networkConfig each API/controllers process read at its start; the zero-masters-up
        intervals; the current controllers leader and the leadership history."""
        return {
            "now": round(self.now(), 3),
            "masters": {n: {"api_url": self.api_url(n), "api_up": s.api_up, "controllers_up": s.controllers_up,
                            "api_restarts": s.api_restarts, "controllers_restarts": s.controllers_restarts,
                            # the networkConfig each process read at its last start
                            "api_config": s.api_config, "controllers_config": s.controllers_config,
                            "intervals": [i.as_dict() for i in s.intervals]}
                        for n, s in self.masters.items()},
            "zero_masters_up": [{"start": round(i.start, 3), "end": None if i.end is None else round(i.end, 3)}
                                for i in self.zero_up],
            "leader": self.leader,
            "leader_history": list(self.leader_history),
        }

    # ------------------------------------------------------------------ restarts
    def restart(self, master: str, what: str, *, bump: bool = True) -> asyncio.Task[None]:
        """Start restarting ``what`` (``api``, ``controllers`` or ``etcd``) on ``master``; returns the
        task (already running: the same task). ``bump`` False leaves the mirror pod's restartCount
        to the kubelet (a host coming back). Raises KeyError for an unknown master and ValueError
        for another component."""
        st = self.masters[master]
        if what not in ("api", "controllers", "etcd"):
            raise ValueError(f"unknown master component {what!r}")
        key = (master, what)
        task = self._tasks.get(key)
        if task is not None and not task.done():
            return task
        coro = {"api": self._restart_api, "controllers": self._restart_controllers, "etcd": self._restart_etcd}[what]
        task = asyncio.create_task(coro(st, bump), name=f"master-restart-{master}-{what}")
        self._tasks[key] = task
        return task

    async def _api_down(self, st: MasterState, bump: bool) -> None:
        """Close ``st``'s API listener (no-op when already down)."""
        if not st.api_up:
            return
        st.api_up = False
        st.api_restarts += 1
        self._mark(st, False)
        await self._close(st.name)
        await self._update_main()
        self._mirror_pod(st.name, "api", ready=False, bump=bump)

    async def _restart_api(self, st: MasterState, bump: bool = True) -> None:
        await self._api_down(st, bump)
        await self.sim.clock.sleep(self.section.restart_seconds)
        reported = False
        while True:
            err = self._start_error(st)
            if err is None:
                break
            if not reported:
                for line in err:
                    st.api_log.append(line)
                reported = True
            await self.sim.clock.sleep(BLOCKED_RECHECK_SECONDS)
        st.api_config = self.read_network_config(st.name)
        st.kube_version = self._manifest_version(st.name) or st.kube_version
        await self._open(st)
        st.api_up = True
        self._mark(st, True)
        self._log(st, f"start_api.go] Starting master on 0.0.0.0:8443 ({self.section.version})")
        await self._update_main()
        self._mirror_pod(st.name, "api", ready=True)

    def _manifest_version(self, master: str) -> str | None:
        """The Kubernetes version of the OKD release in the master's API static-pod manifest
        (:data:`API_MANIFEST` on its host), None without one."""
        host = self._host(master)
        text = host.files.get(API_MANIFEST) if host is not None else None
        return manifest_kube_version(text) if text else None

    def server_version(self) -> str | None:
        """What ``/version`` reports: the lowest Kubernetes version among the masters (during a
        rolling control-plane upgrade the API is as old as its oldest member)."""
        versions = [st.kube_version for st in self.masters.values() if st.kube_version]
        return min(versions, key=_version_key) if versions else None

    def _start_error(self, st: MasterState) -> list[str] | None:
        """Why the API cannot start now (its log lines), or None."""
        cfg = self.section.master_config_path
        try:
            self.read_network_config(st.name)
        except ValueError as exc:
            return [f"F{self.sim.clock.now():%m%d %H:%M:%S}.000000       1 start_api.go:68] "
                    f"could not load config file \"{cfg}\" due to an error: {exc}"]
        host = self._host(st.name)
        # The fault may be set on the master (this section / admin route) or on its host.
        path = st.blocking_file() or MasterState(name="", faults=set(getattr(host, "faults", ()) or ())).blocking_file()
        if path is None or (host is not None and host.exists(path)):
            return None
        # origin pkg/cmd/server/apis/config/validation (ValidateFile on the LDAP provider's ca).
        return [f"Invalid MasterConfig {cfg}",
                f'  oauthConfig.identityProviders[0].provider.ca: Invalid value: "{path}": '
                f"could not read file: stat {path}: no such file or directory"]

    def _controllers_down(self, st: MasterState, bump: bool) -> None:
        """Stop ``st``'s controllers; the lease moves to the next running master (no-op when down)."""
        if not st.controllers_up:
            return
        st.controllers_up = False
        st.controllers_restarts += 1
        self._mirror_pod(st.name, "controllers", ready=False, bump=bump)
        if self.leader == st.name:
            nxt = self._next_running(st.name)
            self.leader = None
            if nxt is not None:
                self._become_leader(nxt)
        self._sync_controllers_active()

    async def _restart_controllers(self, st: MasterState, bump: bool = True) -> None:
        self._controllers_down(st, bump)
        await self.sim.clock.sleep(self.section.restart_seconds)
        st.controllers_config = self._config_or_empty(st.name)
        st.controllers_up = True
        self._log(st, f"leaderelection.go:185] attempting to acquire leader lease  {LEADER_CM[0]}/{LEADER_CM[1]}...",
                  "controllers")
        self._mirror_pod(st.name, "controllers", ready=True)
        if self.leader is None:
            self._become_leader(st.name)
        self._sync_controllers_active()

    async def _restart_etcd(self, st: MasterState, bump: bool = True) -> None:
        self._mirror_pod(st.name, "etcd", ready=False, bump=bump)
        await self.sim.clock.sleep(self.section.restart_seconds)
        self._mirror_pod(st.name, "etcd", ready=True)

    async def _watch_hosts(self) -> None:
        """A master whose host is down (rebooting) or whose runtime stopped loses its static pods:
        API and controllers down at once; when the host and its kubelet are back they start again
        after ``restart_seconds``. Polled (one check per master per tick)."""
        interval = max(self.sim.clock.real(0.5), 0.02)
        while True:
            await asyncio.sleep(interval)
            for st in self.masters.values():
                host = self._host(st.name)
                if host is None:
                    continue
                alive = bool(host.up) and (not host.runtime or host.runtime_up())
                if not alive and st.name not in self._host_down:
                    self._host_down.add(st.name)
                    for what in ("api", "controllers", "etcd"):
                        task = self._tasks.pop((st.name, what), None)
                        if task is not None:
                            task.cancel()
                    await self._api_down(st, bump=False)
                    self._controllers_down(st, bump=False)
                elif alive and st.name in self._host_down and host.kubelet_up():
                    self._host_down.discard(st.name)
                    for what in ("api", "controllers", "etcd"):
                        self.restart(st.name, what, bump=False)

    def _next_running(self, after: str) -> str | None:
        names = list(self.masters)
        i = names.index(after)
        for n in names[i + 1:] + names[:i]:
            if self.masters[n].controllers_up:
                return n
        return None

    def _sync_controllers_active(self) -> None:
        if self.controllers is not None:
            self.controllers.active = any(s.controllers_up for s in self.masters.values())

    def _become_leader(self, master: str) -> None:
        """``master``'s controllers take the lease: record it, and run the SDN master's start."""
        self.leader = master
        st = self.masters[master]
        self.leader_history.append({"leader": master, "at": round(self.now(), 3)})
        self._write_leader_cm(master)
        self._log(st, f"leaderelection.go:194] successfully acquired lease {LEADER_CM[0]}/{LEADER_CM[1]}", "controllers")
        if self.sim.store.try_get(CLUSTERNETWORK, "default") is None:
            cn = cluster_network_from(st.controllers_config, rfc3339(self.sim.clock.now()), new_uid())
            self.sim.store.create(CLUSTERNETWORK, cn)
            # origin pkg/network/master/master.go + common.ClusterNetworkToString
            self._log(st, f'master.go:88] Created ClusterNetwork default (network: "{cn["network"]}", '
                          f'hostSubnetBits: {cn["hostsubnetlength"]}, serviceNetwork: "{cn["serviceNetwork"]}", '
                          f'pluginName: "{cn["pluginName"]}")', "controllers")

    def _write_leader_cm(self, master: str) -> None:
        now = rfc3339(self.sim.clock.now())
        record = json.dumps({"holderIdentity": master, "leaseDurationSeconds": 15, "acquireTime": now,
                             "renewTime": now, "leaderTransitions": max(0, len(self.leader_history) - 1)})
        ns, name = LEADER_CM
        store = self.sim.store
        if store.try_get("configmaps", name, ns) is None:
            store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": name, "namespace": ns, "annotations": {LEADER_ANN: record}}})
        else:
            store.mutate("configmaps", name, ns, lambda o: o["metadata"].setdefault("annotations", {}).__setitem__(
                LEADER_ANN, record))

    def _mirror_pod(self, master: str, what: str, *, ready: bool, bump: bool = False) -> None:
        mirror_pod(self.sim.store, master, what, ready=ready, bump=bump)

    # ------------------------------------------------------------------ commands and admin routes
    async def _host_command(self, host: Any, argv: list[str]) -> tuple[str, str, int]:
        return await host_command(self, host, argv)

    def admin_routes(self) -> list[tuple[str, str, Any]]:
        """``GET api/availability``, ``GET masters``, ``POST masters/{name}/restart``,
        ``POST masters/{name}/fault`` (clustersim.masters.admin)."""
        return admin_routes(self)


def _version_key(v: str) -> tuple[int, ...]:
    import re

    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


def _bound_port(site: web.TCPSite) -> int | None:
    """The port a started TCPSite listens on (its configured port may be 0)."""
    server = site._server
    sockets = getattr(server, "sockets", None) if server is not None else None
    return int(sockets[0].getsockname()[1]) if sockets else None
