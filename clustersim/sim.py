"""``ClusterSim``: a simulated OpenShift cluster (store + API server + agents) in one event loop.

Usage::

    async with ClusterSim("r1-ovn-interrupted", time_scale=0.01) as sim:
        subprocess.run(["kubectl", "--kubeconfig", sim.kubeconfig_path, "get", "nodes"])

``scenario=None`` starts an empty cluster without agents (tests then fill ``sim.store``).
The agents (clustersim.agents.Agents) and scenarios (clustersim.scenario) are imported lazily.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from clustersim.clock import Clock
from clustersim.components import SimComponent, build_components
from clustersim.execsim import ExecRouter
from clustersim.faults import FaultInjector, RequestRecord
from clustersim.kubeconfig import write_kubeconfig
from clustersim.server import ApiServer
from clustersim.snapshots.registry import SnapshotRegistry
from clustersim.store import EVENT_HISTORY, Store
from clustersim.traps.model import TrapSet

if TYPE_CHECKING:
    from clustersim.agents import Agents
    from clustersim.scenario import Scenario


class ClusterSim:
    """A running simulated cluster (async context manager).

    ``scenario``: a scenario name, path, ``Scenario``, or None for an empty cluster without agents.
    ``time_scale``: real seconds per simulated second. ``port=0`` picks a free port.
    ``kubeconfig_path``: where to write the kubeconfig (default: a temporary directory).
    ``start_agents=False`` populates the scenario without running agents; ``event_history`` is how
    many events are kept for watch resumption (older resourceVersions get 410 Expired).
    Attributes once started: ``url``, ``port``, ``kubeconfig_path``, ``store``, ``clock``,
    ``agents`` (None without a scenario), ``faults``, ``requests``, ``scenario``, ``server`` (the
    ``ApiServer``), ``runner`` (its aiohttp ``AppRunner``; extra listeners can add sites to it).
    ``components``: name -> component built from the scenario's ``hosts``/``gluster``/``sdn``/
    ``masters``/``external`` sections (clustersim.components), in start order.
    ``exec_router``: the ``ExecRouter`` behind ``pods/exec`` (clustersim.execsim).
    ``traps``: the step traps behind ``/_sim/traps`` (clustersim.traps), acting on API requests
    and on host commands; held requests are failed cleanly when the simulator stops.
    ``GET /metrics`` serves the cluster's state in the Prometheus exposition format
    (clustersim.metrics), outside /api: never faulted or recorded.
    ``snapshots``: the ``SnapshotRegistry`` behind ``/_sim/snapshots`` (clustersim.snapshots).
    ``component_sections`` (optional) overrides/adds sections (name -> dict) to the scenario's, for
    tests that combine a bundled scenario with a component.
    """

    def __init__(self, scenario: str | Path | Scenario | None = "r1-ovn-interrupted", *, time_scale: float = 1.0,
                 host: str = "127.0.0.1", port: int = 0, kubeconfig_path: str | Path | None = None,
                 start_agents: bool = True, event_history: int = EVENT_HISTORY,
                 component_sections: dict[str, dict[str, Any]] | None = None) -> None:
        self.clock = Clock(time_scale)
        self.store = Store(self.clock, history=event_history)
        self.faults = FaultInjector()
        self.requests = RequestRecord()
        self.host = host
        self.port = port
        self.url = ""
        self._scenario_arg = scenario
        self.scenario: Any = None
        self.agents: Agents | None = None
        self._start_agents = start_agents
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._kubeconfig_arg = Path(kubeconfig_path) if kubeconfig_path else None
        self.kubeconfig_path: Path = self._kubeconfig_arg or Path()
        self.exec_router = ExecRouter()
        self.components: dict[str, SimComponent] = {}
        self._component_sections = dict(component_sections or {})
        self._started_components: list[SimComponent] = []
        self.traps = TrapSet()
        self.server = ApiServer(self.store, self.faults, self.requests, agents=lambda: self.agents,
                                exec_router=self.exec_router, traps=self.traps)
        self.server.add_admin_route("GET", "exec", self._exec_log)
        # Outside /api like the admin routes: never faulted, never recorded (clustersim.metrics).
        self.server.app.router.add_route("GET", "/metrics", self._metrics)
        self.snapshots = SnapshotRegistry(self)
        for method, path, handler in self.snapshots.admin_routes():
            self.server.add_admin_route(method, path, handler)
        self._runner: web.AppRunner | None = None

    @property
    def runner(self) -> web.AppRunner | None:
        """The aiohttp runner of the API server (None before ``start``)."""
        return self._runner

    async def _exec_log(self, request: web.Request) -> web.Response:
        return web.json_response({"execs": self.exec_router.log_json()})

    async def _host_command(self, node: str, argv: list[str]) -> tuple[str, str, int]:
        """Run ``argv`` on ``node``'s simulated host for the machine-config-daemon (logged with
        ``via="machine-config-daemon"``). KeyError when the scenario has no host for ``node``."""
        hosts: Any = self.components.get("hosts")
        if hosts is None or node not in getattr(hosts, "hosts", {}):
            raise KeyError(node)
        result: tuple[str, str, int] = await hosts.run(node, argv, via="machine-config-daemon")
        return result

    def _host_rebooted(self, node: str, boot_id: str) -> None:
        """The machine-config-daemon rebooted ``node``: its host (if any) has booted ``boot_id``."""
        hosts: Any = self.components.get("hosts")
        host = getattr(hosts, "hosts", {}).get(node) if hosts is not None else None
        if host is not None:
            host.boot_id = boot_id
            host.boot_ids.append(boot_id)
            host.boot_count += 1

    async def _metrics(self, request: web.Request) -> web.Response:
        from clustersim.metrics import CONTENT_TYPE, render

        return web.Response(body=render(self), headers={"Content-Type": CONTENT_TYPE})

    def _load_scenario(self) -> Any:
        arg = self._scenario_arg
        if arg is None:
            return None
        if isinstance(arg, (str, Path)):
            from clustersim.scenario import load_scenario

            return load_scenario(str(arg))
        return arg

    async def start(self) -> None:
        """Populate the store, start the HTTP server and the agents, write the kubeconfig."""
        self.scenario = self._load_scenario()
        sections = dict(self.scenario.component_sections()) if self.scenario is not None else {}
        sections.update(self._component_sections)
        # Built before the server listens: their admin routes must be in the router before it freezes.
        self.components = build_components(sections, self)
        for component in self.components.values():
            for method, path, handler in component.admin_routes():
                self.server.add_admin_route(method, path, handler)
        if self.scenario is not None:
            self.scenario.populate(self.store)
        self._runner = web.AppRunner(self.server.app, access_log=None, handle_signals=False,
                                     shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        self.server.advertise = f"{self.host}:{self.port}"
        if self._kubeconfig_arg is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="clustersim-")
            self.kubeconfig_path = Path(self._tmp.name) / "kubeconfig"
        write_kubeconfig(self.kubeconfig_path, self.url)
        if self.scenario is not None and self._start_agents:
            from clustersim.agents import Agents

            self.agents = Agents(self.store, self.clock, self.scenario, host_command=self._host_command,
                                 host_rebooted=self._host_rebooted)
            await self.agents.start()
        for component in self.components.values():
            self._started_components.append(component)
            await component.start(self)

    async def stop(self) -> None:
        """Stop components (reverse start order), agents, drop watches, stop the server, remove the
        temporary kubeconfig."""
        errors: list[BaseException] = []
        self.traps.close()  # held requests fail cleanly before anything they need goes away
        self.snapshots.clear()
        while self._started_components:
            try:
                await self._started_components.pop().stop()
            except Exception as exc:  # keep stopping the others; re-raised below
                errors.append(exc)
        if self.agents is not None:
            await self.agents.stop()
        self.faults.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.store.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if errors:
            raise errors[0]

    async def __aenter__(self) -> ClusterSim:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
