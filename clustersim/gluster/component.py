"""``GlusterComponent``: the GlusterFS world of a simulated cluster (procedures-spec §8.4, §8.8).

Built by ``ClusterSim`` from the scenario's ``gluster:`` section. At ``start`` it

- registers the ``gluster`` CLI (and ``df``, for openshift-ansible's brick capacity check) on
  ``sim.exec_router`` for the GlusterFS DaemonSet's pods (pods in ``namespace`` carrying every
  ``pod_selector`` label; procedures-spec §2.1), answering as that pod's node's peer;
- watches the store's pods: a host's bricks go offline while its GlusterFS pod is deleted,
  terminating or not Running+Ready, and start again once a pod there is Ready (brick start
  faults permitting);
- subscribes to the hosts component, when there is one: ``runtime_stopped``/``reboot_started``
  take the host's bricks offline, ``runtime_started``/``reboot_done`` let them start again;
- applies the section's initial faults.

Admin endpoints: ``GET /_sim/gluster`` (``GlusterState.snapshot``), ``POST /_sim/gluster/fault``
(a ``FaultCfg`` body) and ``POST /_sim/gluster/symptom`` (``{"name": ...}``, one of the section's
``symptoms``); 400 with the reason for an invalid body.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from clustersim.components import ComponentBase
from clustersim.gluster.cli import CONNECTION_FAILED, run_gluster
from clustersim.gluster.config import FaultCfg, parse_section
from clustersim.gluster.df import run_df
from clustersim.gluster.model import GlusterError, GlusterState
from clustersim.loops import Background

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.execsim import ExecRequest, ExecResult
    from clustersim.sim import ClusterSim
    from clustersim.storeevents import Event


#: Host events that stop a host's containers, and those after which they may run again.
STOP_EVENTS = frozenset({"runtime_stopped", "reboot_started"})
START_EVENTS = frozenset({"runtime_started", "reboot_done"})


def _pod_ok(pod: dict[str, Any]) -> bool:
    """Running, Ready and not terminating."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


class GlusterComponent(ComponentBase):
    """The ``gluster`` component. ``section``: the scenario's ``gluster:`` dict; ``sim``: the
    ClusterSim. Raises pydantic's ValidationError (a ValueError) for an invalid section.

    Attributes: ``state`` (the ``GlusterState``), ``cfg`` (the validated section)."""

    name = "gluster"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.cfg = parse_section(section)
        self.sim = sim
        self.state = GlusterState(self.cfg, 0.0)
        self._bg = Background("gluster")
        self._selector = ",".join(f"{k}={v}" for k, v in sorted(self.cfg.pod_selector.items()))

    # ------------------------------------------------------------------ life cycle

    async def start(self, sim: ClusterSim) -> None:
        """Register the exec route, sync with the store's pods, watch pods and host events,
        then apply the initial faults."""
        self.sim = sim
        self.mark_started()
        sim.exec_router.register("gluster", self._matches, self._exec)
        sub = sim.store.subscribe(["pods"])
        for peer in self.state.peers:
            self._sync_node(peer.node)
        self._bg.follow(sub, self._on_pod_event, "gluster-pods")
        hosts = sim.components.get("hosts")
        if hosts is not None and hasattr(hosts, "subscribe"):
            hosts.subscribe(self._on_host_event)
            for peer in self.state.peers:  # a host whose runtime is already down runs no bricks
                host = getattr(hosts, "hosts", {}).get(peer.node)
                if host is not None and hasattr(host, "runtime_up") and not host.runtime_up():
                    self.state.set_host_blocked(peer.node, True, "host runtime down at start", self.now())
        for f in self.cfg.faults:
            self.state.apply_fault(f, self.now())
        for name in self.cfg.enabled_symptoms:
            self.enable_symptom(name)

    async def stop(self) -> None:
        """Stop watching and unregister the exec route (idempotent)."""
        await self._bg.stop()
        with contextlib.suppress(Exception):
            self.sim.exec_router.unregister("gluster")

    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """``GET gluster``, ``POST gluster/fault`` (a FaultCfg) and ``POST gluster/symptom``
        (``{"name": ...}``: apply one of the section's named symptoms)."""
        return [("GET", "gluster", self._get), ("POST", "gluster/fault", self._post_fault),
                ("POST", "gluster/symptom", self._post_symptom)]

    # ------------------------------------------------------------------ public API

    def bricks_on_host(self, host: str) -> list[dict[str, Any]]:
        """The bricks on ``host`` (node name or address): name, volume, online, pid, port."""
        self.state.advance(self.now())
        return [{"name": b.name, "volume": b.volume, "online": b.online, "pid": b.pid, "port": b.port}
                for b in self.state.bricks_on_host(host)]

    def snapshot(self) -> dict[str, Any]:
        """The same JSON as ``GET /_sim/gluster``."""
        return self.state.snapshot(self.now())

    def enable_symptom(self, name: str) -> list[dict[str, Any]]:
        """Apply the faults of the section's symptom ``name``. Raises GlusterError if unknown."""
        if name not in self.cfg.symptoms:
            raise GlusterError(f"unknown symptom {name!r}; known: {sorted(self.cfg.symptoms)}")
        return [self.state.apply_fault(f, self.now()) for f in self.cfg.symptoms[name]]

    def inject(self, fault: FaultCfg | dict[str, Any]) -> dict[str, Any]:
        """Apply a fault (a FaultCfg or its dict). Raises ValidationError/GlusterError (ValueErrors)."""
        f = fault if isinstance(fault, FaultCfg) else FaultCfg.model_validate(fault)
        return self.state.apply_fault(f, self.now())

    # ------------------------------------------------------------------ store coupling

    def _is_gluster_pod(self, pod: dict[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        return meta.get("namespace") == self.cfg.namespace and all(
            labels.get(k) == v for k, v in self.cfg.pod_selector.items())

    def _sync_node(self, node: str) -> None:
        pods = [p for p in self.sim.store.list_refs("pods", self.cfg.namespace, label_selector=self._selector)
                if (p.get("spec") or {}).get("nodeName") == node]
        ready = [p for p in pods if _pod_ok(p)]
        uid = ready[0]["metadata"].get("uid") if ready else None
        self.state.set_pod(node, bool(ready), uid, self.now())

    def _on_pod_event(self, ev: Event) -> None:
        nodes = {((o or {}).get("spec") or {}).get("nodeName") for o in (ev.object, ev.old)
                 if o is not None and self._is_gluster_pod(o)}
        for node in nodes - {None, ""}:
            self._sync_node(node)

    def _on_host_event(self, event: Any) -> None:
        kind, node = getattr(event, "kind", ""), getattr(event, "host", "")
        if kind not in STOP_EVENTS | START_EVENTS:
            return
        blocked = kind in STOP_EVENTS
        hosts = self.sim.components.get("hosts")
        host = getattr(hosts, "hosts", {}).get(node) if hosts is not None else None
        if host is not None and hasattr(host, "runtime_up"):
            # The host's own state decides: e.g. a reboot ends with the runtime down when its
            # unit is not enabled.
            blocked = not host.runtime_up()
        self.state.set_host_blocked(node, blocked, f"host {kind}", self.now())

    # ------------------------------------------------------------------ exec

    def _matches(self, req: ExecRequest) -> bool:
        return bool(req.argv) and req.argv[0].rsplit("/", 1)[-1] in ("gluster", "df") and self._is_gluster_pod(req.pod)

    async def _exec(self, req: ExecRequest) -> ExecResult:
        from clustersim.execsim import ExecResult

        peer = self.state.find_peer(req.node_name)
        if peer is None:
            return ExecResult(stdout=(CONNECTION_FAILED + "\n").encode(), exit_code=1)
        if req.argv[0].rsplit("/", 1)[-1] == "df":
            out, err, code = run_df(self.state, peer, list(req.argv))
        else:
            out, err, code = run_gluster(self.state, peer, list(req.argv), self.now())
        return ExecResult(stdout=out.encode(), stderr=err.encode(), exit_code=code)

    # ------------------------------------------------------------------ admin

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    async def _post_fault(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            result = self.inject(body)
        except (ValidationError, GlusterError, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"applied": body, "result": result})

    async def _post_symptom(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            result = self.enable_symptom(str(body.get("name", "")))
        except (GlusterError, ValueError, AttributeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"applied": body, "result": result})
