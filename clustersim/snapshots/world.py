"""Capture of the whole simulated world at one moment: what a snapshot holds.

:func:`capture` runs on the simulator's event loop, so that nothing changes while it reads; it
copies only containers, never the API objects themselves:

- **API objects**: ``Store.snapshot_refs`` (one pointer copy per object; the store never mutates
  a stored object, so the references stay a faithful record);
- **hosts** (clustersim.hosts, one per node): files (path -> text; strings are immutable, so a
  dict copy), directories, systemd units (enabled, active), packages (name -> VERSION-RELEASE),
  iptables rules (runtime and saved), the container runtime, pulled images, the node group, up,
  boot id and boot count;
- **masters** (clustersim.masters): API and controllers up, their restart counts, the
  networkConfig each read at its last start, the controllers leader;
- **GlusterFS** (clustersim.gluster): per volume started, options, and per brick online and pid;
- **SDN** (clustersim.sdn): per node the OVS vxlan0 dst_port, the vxlanPort the running SDN pod
  read at its start, and the count of full SDN setups (rebuilds).

Left out, and why:

- host command logs, host events, the exec log, API request records, GlusterFS brick timelines,
  SDN port histories and probe outages, master availability intervals and logs: history, not
  state (a procedure cannot "leave" them changed; tests read them from their own endpoints);
- injected faults (API faults, node faults, host ``faults``, GlusterFS fault flags, glusterd up,
  the SDN underlay blocks, the machine-config-controller's kill switch, CNO's ``early_switch``):
  the test's own controls, not the procedure's doing;
- GlusterFS pending-heal and split-brain counts: they follow from brick outages and the client
  workload over time, so they move without anyone acting (a brick left offline shows itself);
- the SDN pod's run state (running, pulling, crash-looping) and a host's derived facts (runtime
  up, kubelet up): they follow from the pods and units that are compared;
- the CNO and machine-config-controller models: all they decide lives in API objects
  (MachineConfigs, pools, Network), which are compared;
- etcd: not modelled by clustersim (the project runs real etcd processes for etcd tests).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clustersim.agents.objects import rfc3339
from clustersim.snapshots.models import SnapshotInfo

if TYPE_CHECKING:
    from clustersim.sim import ClusterSim

#: Store key -> {(namespace, name): stored object (READ ONLY)}.
ObjectMap = dict[str, dict[tuple[str, str], dict[str, Any]]]


@dataclass(frozen=True)
class HostCapture:
    """One simulated host's state (see the module docstring). ``units``: name -> (enabled, active)."""

    files: dict[str, str]
    dirs: frozenset[str]
    units: dict[str, tuple[bool, bool]]
    packages: dict[str, str]
    iptables_runtime: tuple[str, ...]
    iptables_saved: tuple[str, ...]
    runtime: str
    images: frozenset[str]
    node_group: str
    up: bool
    boot_id: str
    boot_count: int


@dataclass
class World:
    """Everything a snapshot holds. Component maps are None when the scenario has no such
    component (so a diff does not report a whole component as added or removed).

    ``masters``: name -> {api_up, controllers_up, api_config, controllers_config, api_restarts,
    controllers_restarts}; ``gluster``: volume -> {started, options, bricks: {host:/path:
    {online, pid}}}; ``sdn``: node -> {dst_port, port_at_start, rebuilds}."""

    info: SnapshotInfo
    objects: ObjectMap
    hosts: dict[str, HostCapture] | None = None
    masters: dict[str, dict[str, Any]] | None = None
    leader: str | None = None
    gluster: dict[str, dict[str, Any]] | None = None
    sdn: dict[str, dict[str, Any]] | None = None
    #: Pods per owner and bare pods, computed once on first use by a diff (objects.pod_index).
    pod_index: Any = field(default=None, repr=False)


def _json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _hosts(sim: ClusterSim) -> dict[str, HostCapture] | None:
    comp = sim.components.get("hosts")
    hosts = getattr(comp, "hosts", None)
    if hosts is None:
        return None
    return {name: HostCapture(
        files=dict(h.files), dirs=frozenset(h.dirs),
        units={u: (unit.enabled, unit.active) for u, unit in h.units.items()},
        packages=dict(h.packages), iptables_runtime=tuple(h.iptables_runtime),
        iptables_saved=tuple(h.iptables_saved), runtime=h.runtime, images=frozenset(h.images),
        node_group=h.node_group, up=h.up, boot_id=h.boot_id, boot_count=h.boot_count)
        for name, h in hosts.items()}


def _masters(sim: ClusterSim) -> tuple[dict[str, dict[str, Any]] | None, str | None]:
    comp = sim.components.get("masters")
    masters = getattr(comp, "masters", None)
    if masters is None:
        return None, None
    out = {name: {"api_up": m.api_up, "controllers_up": m.controllers_up,
                  "api_config": _json_copy(m.api_config), "controllers_config": _json_copy(m.controllers_config),
                  "api_restarts": m.api_restarts, "controllers_restarts": m.controllers_restarts}
           for name, m in masters.items()}
    return out, getattr(comp, "leader", None)


def _gluster(sim: ClusterSim) -> dict[str, dict[str, Any]] | None:
    comp = sim.components.get("gluster")
    state = getattr(comp, "state", None)
    volumes = getattr(state, "volumes", None)
    if volumes is None:
        return None
    return {name: {"started": v.started, "options": dict(v.options),
                   "bricks": {b.name: {"online": b.online, "pid": b.pid} for b in v.bricks}}
            for name, v in volumes.items()}


def _sdn(sim: ClusterSim) -> dict[str, dict[str, Any]] | None:
    comp = sim.components.get("sdn")
    nodes = getattr(comp, "nodes", None)
    if nodes is None:
        return None
    return {name: {"dst_port": n.dst_port, "port_at_start": n.port_at_start, "rebuilds": n.rebuilds}
            for name, n in nodes.items()}


def capture(sim: ClusterSim, snapshot_id: str = "", name: str = "") -> World:
    """The world of ``sim`` now (call on its event loop). ``snapshot_id``/``name`` label the
    result's ``info``, whose ``capture_ms`` is the wall time this call took."""
    t0 = time.perf_counter()
    objects = sim.store.snapshot_refs()
    hosts = _hosts(sim)
    masters, leader = _masters(sim)
    world = World(
        info=SnapshotInfo(id=snapshot_id, name=name, taken_at=rfc3339(sim.clock.now()),
                          resource_version=sim.store.resource_version,
                          objects=sum(len(v) for v in objects.values()), hosts=len(hosts or {})),
        objects=objects, hosts=hosts, masters=masters, leader=leader, gluster=_gluster(sim), sdn=_sdn(sim))
    world.info.capture_ms = round((time.perf_counter() - t0) * 1000, 3)
    return world
