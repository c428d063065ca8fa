"""The ``sdn:`` scenario section and the per-node OpenShift SDN state (procedures-spec §8.5).

Section format (validated by :class:`SdnSection`; times in simulated seconds)::

    sdn:
      namespace: openshift-sdn        # where the sdn and ovs DaemonSets run
      sdn_daemonset: sdn              # pods of this DS (container ``sdn``) are the SDN pods
      ovs_daemonset: ovs              # pods of this DS run OVS (datapath down while absent)
      container: sdn
      custom_images: [registry.example.com/default/ose-node:v3.11-custom]   # no port health check
      healthcheck_seconds: 30         # ovsHealthcheckInterval of the stock image
      rebuild_seconds: 5              # a full SDN setup: the node's pod network is down this long
      pull_seconds: 20                # image missing on the host: the SDN pod waits this long
      default_port: 4789              # OVS vxlan0 dst_port of nodes not listed in ``ports``
      ports: {node-3: 4889}           # per-node dst_port at start
      firewall: {node-1: [4789]}      # UDP ports accepted, only used without the hosts component
      underlay_blocks: [{port: 4789, from_time: 120}]   # NSX: VXLAN to 4789 dropped from t=120
      probe_interval: 0.5             # how often the firewall inputs are re-read (N checks, not N²)

Every image not in ``custom_images`` is the stock image (with the health check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UnderlayBlock(_Strict):
    """The underlay drops VXLAN to ``port`` from ``from_time`` (simulated seconds since start);
    ``pairs`` limits it to some ``"a->b"`` pairs (default: every pair)."""

    port: int
    from_time: float = 0.0
    pairs: list[str] | None = None


class SdnSection(_Strict):
    """The scenario's ``sdn:`` section (see module docstring)."""

    namespace: str = "openshift-sdn"
    sdn_daemonset: str = "sdn"
    ovs_daemonset: str = "ovs"
    container: str = "sdn"
    custom_images: list[str] = Field(default_factory=list)
    healthcheck_seconds: float = 30.0
    rebuild_seconds: float = 5.0
    pull_seconds: float = 20.0
    default_port: int = Field(default=4789, ge=1, le=65535)
    ports: dict[str, int] = Field(default_factory=dict)
    firewall: dict[str, list[int]] = Field(default_factory=dict)
    underlay_blocks: list[UnderlayBlock] = Field(default_factory=list)
    probe_interval: float = Field(default=0.5, gt=0)


@dataclass
class NodeNet:
    """SDN state of one node. ``dst_port``: OVS ``vxlan0`` options:dst_port; ``image_kind`` of the
    running SDN pod (``stock``/``custom``/``""``); ``port_at_start``: the ClusterNetwork vxlanPort
    the SDN pod read at its start; ``sdn``: ``absent``/``pulling``/``running``/``crashloop``;
    ``rebuild_until``: simulated time a full setup ends; ``started_key``: (pod uid, restartCount)
    of the start already processed; ``history``: [(time, port, why)]."""

    name: str
    dst_port: int
    image_kind: str = ""
    port_at_start: int | None = None
    sdn: str = "absent"
    sdn_pod: str = ""
    ovs_up: bool = True
    host_up: bool = True
    rebuild_until: float | None = None
    pull_until: float | None = None
    rebuilds: int = 0
    network_generation: int = 1
    started_key: tuple[str, int] | None = None
    sdn_started_at: float = 0.0
    history: list[tuple[float, int, str]] = field(default_factory=list)
    firewall: set[int] = field(default_factory=set)

    def datapath_up(self, now: float) -> bool:
        """Pods on this node can send/receive VXLAN traffic now."""
        if not self.host_up or not self.ovs_up:
            return False
        if self.rebuild_until is not None and now < self.rebuild_until:
            return False
        return not (self.pull_until is not None and now < self.pull_until)

    def summary(self) -> dict[str, Any]:
        """JSON-able state for ``GET /_sim/network/probe``."""
        return {"dst_port": self.dst_port, "image": self.image_kind, "sdn": self.sdn,
                "port_at_start": self.port_at_start, "rebuilds": self.rebuilds,
                "network_generation": self.network_generation, "ovs_up": self.ovs_up, "host_up": self.host_up,
                "port_history": [{"time": round(t, 3), "port": p, "why": w} for t, p, w in self.history]}
