"""GlusterFS state: peers, volumes, replica sets, bricks, the heal model and faults (pure).

Nothing here does I/O or reads a clock: every method that changes or reads time-dependent state
takes ``now``, the simulated time in seconds (monotonic; the component derives it from the sim
clock). The model follows procedures-spec §8.4:

- a brick is online iff its host can run containers (the GlusterFS pod is Running and Ready and
  the host runtime is up) and no ``brick_start_failure`` fault stopped its last start;
- a host whose pod comes back (new pod Ready, or the runtime started again) starts its bricks: a
  one-shot fault makes exactly that start fail; a sticky one keeps failing until
  ``gluster volume start VOL force``;
- a client workload writes ``write_rate`` files/s to each volume (round-robin over its replica
  sets); a write to a set with a brick offline (but client quorum, a majority of the set, still
  online) adds a pending-heal entry on the set's online bricks; once every brick of a set is
  online the self-heal daemon removes ``heal_rate`` entries/s; split-brain entries never heal.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from clustersim.gluster.config import (
    FaultCfg,
    GlusterSection,
    VolumeCfg,
    heketi_brick_path,
    stable_hex,
    stable_uuid,
)
from clustersim.gluster.report import max_bricks_down, max_hosts_down, snapshot


class GlusterError(ValueError):
    """A request the model cannot satisfy (unknown volume, brick or host); message says which."""


@dataclass(eq=False)
class Peer:
    """A gluster host. ``pod_ok``: its GlusterFS pod is Running and Ready; ``host_blocked``: its
    runtime is stopped or it is rebooting; ``glusterd_up``: False under the glusterd_down fault."""

    node: str
    address: str
    uuid: str
    shd_pid: int
    next_pid: int
    pod_ok: bool = True
    pod_uid: str | None = None
    host_blocked: bool = False
    glusterd_up: bool = True
    running: bool = True  # containers were running at the last reconcile (edge detection)

    @property
    def runnable(self) -> bool:
        """Containers can run on this host now."""
        return self.pod_ok and not self.host_blocked

    def new_pid(self) -> int:
        """A fresh process id on this host (monotonic, like a kernel's pid counter)."""
        self.next_pid += 7
        return self.next_pid


@dataclass(eq=False)
class Brick:
    """One brick: ``index`` is its 1-based position in ``volume info`` (Brick1..N)."""

    volume: str
    index: int
    host: str  # what the volume was created with (an address or hostname)
    path: str
    peer: Peer
    port: int
    pid: int
    online: bool = True
    arbiter: bool = False
    fail_next_start: bool = False
    sticky: bool = False

    @property
    def name(self) -> str:
        """``host:path`` as gluster prints it."""
        return f"{self.host}:{self.path}"


@dataclass(eq=False)
class ReplicaSet:
    """Consecutive ``replica`` bricks (an AFR subvolume) and its pending-heal index.

    ``entries``: file -> indexes of the bricks that hold the pending marker, oldest first."""

    bricks: list[Brick]
    entries: OrderedDict[str, frozenset[int]] = field(default_factory=OrderedDict)
    split_brain: list[str] = field(default_factory=list)
    heal_acc: float = 0.0

    @property
    def all_online(self) -> bool:
        """Every brick of the set is online (the self-heal daemon can heal)."""
        return all(b.online for b in self.bricks)

    def pending_on(self, brick: Brick) -> list[str]:
        """Entries (split-brain first) that ``brick``'s index lists."""
        return [*self.split_brain, *(f for f, holders in self.entries.items() if brick.index in holders)]


@dataclass(eq=False)
class Volume:
    """A started (or stopped) volume with its bricks and replica sets."""

    name: str
    id: str
    replica: int
    arbiter: int
    bricks: list[Brick]
    sets: list[ReplicaSet]
    options: dict[str, str]
    size_gib: float = 2.0
    used_percent: float = 3.0
    started: bool = True
    write_acc: float = 0.0
    next_set: int = 0
    seq: int = 0
    failed_writes: int = 0

    @property
    def dist_count(self) -> int:
        """Number of replica sets (``distCount`` in the XML)."""
        return len(self.sets)

    @property
    def type_id(self) -> int:
        """glusterfs ``get_vol_type``: 0 Distribute, 2 Replicate, 7 Distributed-Replicate."""
        if self.replica <= 1:
            return 0
        return 2 if self.dist_count <= 1 else 7

    @property
    def type_str(self) -> str:
        """``Type:`` of ``volume info`` (libglusterfs ``vol_type_str``)."""
        return {0: "Distribute", 2: "Replicate", 7: "Distributed-Replicate"}[self.type_id]


class GlusterState:
    """The whole GlusterFS world of one simulated cluster (see the module docstring).

    ``cfg``: the validated ``gluster:`` section; ``now``: simulated seconds at creation. All
    bricks start online; the component then applies pod/host state and the initial faults.
    """

    def __init__(self, cfg: GlusterSection, now: float = 0.0) -> None:
        self.cfg = cfg
        self.now = now
        self.peers: list[Peer] = []
        self._peer_by_key: dict[str, Peer] = {}
        for i, h in enumerate(cfg.hosts):
            base = 100 + int(stable_hex("pid", h.node)[:4], 16) % 400
            peer = Peer(node=h.node, address=h.address, uuid=h.uuid or stable_uuid("peer", h.node),
                        shd_pid=h.shd_pid if h.shd_pid is not None else base + 11, next_pid=base + 20 + i)
            self.peers.append(peer)
            self._peer_by_key[h.node] = peer
            self._peer_by_key[h.address] = peer
        self.volumes: dict[str, Volume] = {}
        ports: dict[str, int] = {}
        for v in cfg.volumes:
            self.volumes[v.name] = self._build_volume(v, ports)
        self.tx_in_progress = 0
        self.timeline: list[dict[str, Any]] = []
        for b in self.all_bricks():
            self._record(b, "initial state")

    # ------------------------------------------------------------------ building

    def _build_volume(self, v: VolumeCfg, ports: dict[str, int]) -> Volume:
        bricks: list[Brick] = []
        for i, bc in enumerate(v.brick_cfgs(), start=1):
            peer = self._peer_by_key[bc.host]
            port = bc.port
            if port is None:
                port = 49152 + ports.get(peer.address, 0)
                ports[peer.address] = ports.get(peer.address, 0) + 1
            pid = bc.pid if bc.pid is not None else peer.new_pid()
            arbiter = bool(v.arbiter) and i % v.replica == 0
            bricks.append(Brick(volume=v.name, index=i, host=bc.host, path=bc.path or heketi_brick_path(v.name, bc.host, i),
                                peer=peer, port=port, pid=pid, arbiter=arbiter))
        sets = [ReplicaSet(bricks[i:i + v.replica]) for i in range(0, len(bricks), v.replica)]
        return Volume(name=v.name, id=v.id or stable_uuid("volume", v.name), replica=v.replica, arbiter=v.arbiter,
                      bricks=bricks, sets=sets, options=dict(v.options), size_gib=v.size_gib,
                      used_percent=v.used_percent)

    # ------------------------------------------------------------------ lookups

    def all_bricks(self) -> list[Brick]:
        """Every brick, volume by volume in configuration order."""
        return [b for v in self.volumes.values() for b in v.bricks]

    def peer(self, key: str) -> Peer:
        """The peer with node name or address ``key``. Raises GlusterError if none."""
        try:
            return self._peer_by_key[key]
        except KeyError:
            raise GlusterError(f"no gluster host {key!r}") from None

    def find_peer(self, key: str) -> Peer | None:
        """Like ``peer`` but None when unknown."""
        return self._peer_by_key.get(key)

    def volume(self, name: str) -> Volume:
        """The volume ``name``. Raises GlusterError if it does not exist."""
        try:
            return self.volumes[name]
        except KeyError:
            raise GlusterError(f"Volume {name} does not exist") from None

    def sorted_volumes(self) -> list[Volume]:
        """Volumes in glusterd's list order (sorted by name, glusterd_compare_volume_name)."""
        return [self.volumes[n] for n in sorted(self.volumes)]

    def brick(self, volume: str, ref: str) -> Brick:
        """A brick of ``volume`` by ``host:/path``, host address, node name or 1-based index.

        Raises GlusterError when nothing or more than one brick matches."""
        vol = self.volume(volume)
        if ref.isdigit():
            idx = int(ref)
            if 1 <= idx <= len(vol.bricks):
                return vol.bricks[idx - 1]
            raise GlusterError(f"volume {volume} has no brick {idx}")
        found = [b for b in vol.bricks if ref in (b.name, b.host, b.peer.node, b.peer.address)]
        if len(found) != 1:
            raise GlusterError(f"brick {ref!r} matches {len(found)} bricks of volume {volume}")
        return found[0]

    def bricks_on_host(self, host: str) -> list[Brick]:
        """The bricks whose peer has node name or address ``host`` (empty for an unknown host)."""
        peer = self.find_peer(host)
        return [b for b in self.all_bricks() if b.peer is peer] if peer else []

    def reachable(self, peer: Peer) -> bool:
        """The peer's glusterd answers other peers (status lists its bricks, peer status says Connected)."""
        if not peer.glusterd_up:
            return False
        return peer.runnable or not self.cfg.absent_when_pod_down

    def usable_locally(self, peer: Peer) -> bool:
        """A CLI in this peer's pod can reach its glusterd."""
        return peer.glusterd_up and peer.runnable

    def set_of(self, brick: Brick) -> ReplicaSet:
        """The replica set holding ``brick``."""
        vol = self.volumes[brick.volume]
        return vol.sets[(brick.index - 1) // vol.replica]

    # ------------------------------------------------------------------ time

    def advance(self, now: float) -> None:
        """Run the client workload and the self-heal daemon up to ``now`` (simulated seconds).

        Callers advance before every state change, so brick states are constant in between."""
        dt = now - self.now
        if dt <= 0:
            return
        self.now = now
        for vol in self.volumes.values():
            if not vol.started:
                continue
            if self.cfg.write_rate > 0:
                vol.write_acc += self.cfg.write_rate * dt
                writes = int(vol.write_acc)
                vol.write_acc -= writes
                for _ in range(writes):
                    rs = vol.sets[vol.next_set % len(vol.sets)]
                    vol.next_set += 1
                    self._write(vol, rs)
            for rs in vol.sets:
                if rs.entries and rs.all_online and self.cfg.heal_rate > 0:
                    rs.heal_acc += self.cfg.heal_rate * dt
                    healed = min(int(rs.heal_acc), len(rs.entries))
                    rs.heal_acc -= int(rs.heal_acc)
                    for _ in range(healed):
                        rs.entries.popitem(last=False)
                else:
                    rs.heal_acc = 0.0

    def _write(self, vol: Volume, rs: ReplicaSet) -> None:
        online = [b for b in rs.bricks if b.online]
        if len(online) == len(rs.bricks):
            return  # every copy written: nothing to heal
        if len(online) < len(rs.bricks) // 2 + 1 or all(b.arbiter for b in online):
            vol.failed_writes += 1  # client quorum lost: the write fails (EROFS), nothing is indexed
            return
        vol.seq += 1
        gfid = uuid.uuid5(uuid.NAMESPACE_OID, f"{vol.name}/{vol.seq}")
        rs.entries[f"<gfid:{gfid}>"] = frozenset(b.index for b in online)

    # ------------------------------------------------------------------ brick state

    def _record(self, b: Brick, reason: str) -> None:
        self.timeline.append({"t": round(self.now, 3), "volume": b.volume, "brick": b.name, "host": b.peer.address,
                              "node": b.peer.node, "online": b.online, "pid": b.pid, "reason": reason})

    def _stop_brick(self, b: Brick, reason: str) -> None:
        if b.online:
            b.online = False
            b.pid = -1
            self._record(b, reason)

    def _start_brick(self, b: Brick, reason: str, *, force: bool = False) -> bool:
        if b.online:
            return True
        if b.fail_next_start and not force:
            if not b.sticky:
                b.fail_next_start = False  # one-shot: this start fails, the next works
            self.timeline.append({"t": round(self.now, 3), "volume": b.volume, "brick": b.name, "host": b.peer.address,
                                  "node": b.peer.node, "online": False, "pid": -1,
                                  "reason": f"{reason}: brick failed to start (fault)"})
            return False
        if force:
            b.fail_next_start = False
            b.sticky = False
        b.online = True
        b.pid = b.peer.new_pid()
        self._record(b, reason)
        return True

    def _reconcile(self, peer: Peer, reason: str) -> None:
        if not peer.runnable:
            for b in self.bricks_on_host(peer.node):
                self._stop_brick(b, reason)
            peer.shd_pid = -1
            peer.running = False
        elif not peer.running:
            # Containers start again: glusterd, the self-heal daemon and every brick of the host.
            peer.running = True
            peer.glusterd_up = True
            peer.shd_pid = peer.new_pid()
            for b in self.bricks_on_host(peer.node):
                self._start_brick(b, reason)

    def set_pod(self, node: str, ok: bool, uid: str | None, now: float) -> None:
        """The GlusterFS pod on ``node`` is (``ok``) or is not Running and Ready; ``uid`` identifies
        it. A different Ready pod than before counts as a restart. Unknown nodes are ignored."""
        peer = self.find_peer(node)
        if peer is None:
            return
        self.advance(now)
        if ok and peer.pod_ok and uid is not None and peer.pod_uid is not None and uid != peer.pod_uid:
            peer.pod_ok = False
            self._reconcile(peer, "GlusterFS pod replaced")
        peer.pod_ok = ok
        if ok:
            peer.pod_uid = uid
        self._reconcile(peer, "GlusterFS pod Ready" if ok else "GlusterFS pod gone or not Ready")

    def set_host_blocked(self, node: str, blocked: bool, reason: str, now: float) -> None:
        """The host's runtime stopped / it reboots (``blocked``), or it is back. Unknown nodes are ignored."""
        peer = self.find_peer(node)
        if peer is None:
            return
        self.advance(now)
        peer.host_blocked = blocked
        self._reconcile(peer, reason)

    def start_force(self, volume: str, now: float) -> list[str]:
        """``gluster volume start VOL force``: start every offline brick whose host can run it,
        clearing brick start faults. Returns the names of the bricks started."""
        vol = self.volume(volume)
        self.advance(now)
        vol.started = True
        started = []
        for b in vol.bricks:
            if not b.online and b.peer.runnable and b.peer.glusterd_up and self._start_brick(b, "volume start force", force=True):
                started.append(b.name)
        return started

    # ------------------------------------------------------------------ faults

    def apply_fault(self, f: FaultCfg, now: float) -> dict[str, Any]:
        """Apply one fault (shapes in ``FaultCfg``). Returns a JSON-able description of what changed.

        Raises GlusterError for unknown volumes, bricks or hosts."""
        self.advance(now)
        if f.kind == "brick_start_failure":
            b = self.brick(f.volume or "", f.brick or "")
            b.fail_next_start = True
            b.sticky = f.sticky
            if f.immediate and b.online:
                self._stop_brick(b, "brick process died (fault)")
                if not f.sticky:
                    b.fail_next_start = False  # its failed start already happened
            return {"brick": b.name, "online": b.online, "sticky": b.sticky, "armed": b.fail_next_start}
        if f.kind == "split_brain":
            vol = self.volume(f.volume or "")
            rs = vol.sets[0]
            base = len(rs.split_brain)
            rs.split_brain.extend(f"/split-brain/file-{base + i + 1:04d}" for i in range(f.n))
            return {"volume": vol.name, "split_brain": len(rs.split_brain)}
        if f.kind == "brick_usage":
            vol = self.volume(f.volume or "")
            vol.used_percent = float(f.percent or 0)
            return {"volume": vol.name, "used_percent": vol.used_percent}
        if f.kind == "transaction_in_progress":
            self.tx_in_progress = f.n
            return {"transaction_in_progress": self.tx_in_progress}
        if f.kind == "glusterd_down":
            peer = self.peer(f.host or "")
            peer.glusterd_up = f.up
            return {"host": peer.address, "glusterd_up": peer.glusterd_up}
        # clear
        self.tx_in_progress = 0
        for b in self.all_bricks():
            b.fail_next_start = False
            b.sticky = False
        for p in self.peers:
            p.glusterd_up = True
        return {"cleared": True}

    def take_transaction_fault(self) -> bool:
        """Consume one ``transaction_in_progress`` call; True if this call must fail."""
        if self.tx_in_progress > 0:
            self.tx_in_progress -= 1
            return True
        return False

    # ------------------------------------------------------------------ reports

    def max_hosts_down_at_once(self) -> int:
        """Largest number of distinct hosts that had a brick offline at the same time."""
        return max_hosts_down(self.timeline)

    def max_bricks_down_per_volume(self) -> dict[str, int]:
        """Per volume, the largest number of its bricks offline at the same time."""
        return max_bricks_down(self.timeline, list(self.volumes))

    def snapshot(self, now: float) -> dict[str, Any]:
        """Everything as JSON (``GET /_sim/gluster``), see ``clustersim.gluster.report.snapshot``."""
        self.advance(now)
        return snapshot(self, now)
