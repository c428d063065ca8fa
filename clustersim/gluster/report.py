"""Reports over the GlusterFS state: the admin snapshot and brick-timeline maxima.

The timeline (``GlusterState.timeline``) holds one dict per brick state change, in order:
``{"t": simulated seconds, "volume", "brick": "host:/path", "host", "node", "online", "pid",
"reason"}``; the first entries record every brick's initial state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.gluster.model import GlusterState


def max_hosts_down(timeline: Sequence[dict[str, Any]]) -> int:
    """Largest number of distinct hosts with at least one brick offline at the same time
    (replaying the timeline), e.g. to assert "never two hosts' bricks down at once"."""
    down: dict[str, str] = {}
    best = 0
    for ev in timeline:
        if ev["online"]:
            down.pop(ev["brick"], None)
        else:
            down[ev["brick"]] = ev["host"]
        best = max(best, len(set(down.values())))
    return best


def max_bricks_down(timeline: Sequence[dict[str, Any]], volumes: Sequence[str]) -> dict[str, int]:
    """Per volume, the largest number of its bricks offline at the same time."""
    down: dict[str, set[str]] = {v: set() for v in volumes}
    best = dict.fromkeys(volumes, 0)
    for ev in timeline:
        s = down.setdefault(ev["volume"], set())
        (s.discard if ev["online"] else s.add)(ev["brick"])
        best[ev["volume"]] = max(best.get(ev["volume"], 0), len(s))
    return best


def snapshot(state: GlusterState, now: float) -> dict[str, Any]:
    """``GET /_sim/gluster``: ``time``; ``peers`` (node, address, uuid, glusterd_up, pod_ready,
    host_blocked, connected); ``volumes`` (name, id, type, replica, arbiter, started, bricks with
    online/pid/port/pending_heal/fault, replica_sets with pending_heal/split_brain, totals,
    failed_writes); ``faults``; ``timeline``; ``max_hosts_down_at_once``;
    ``max_bricks_down_per_volume``. Call after ``state.advance(now)``."""
    vols = []
    for vol in state.volumes.values():
        bricks = []
        for b in vol.bricks:
            rs = state.set_of(b)
            bricks.append({"name": b.name, "index": b.index, "host": b.host, "node": b.peer.node, "path": b.path,
                           "online": b.online, "pid": b.pid, "port": b.port, "arbiter": b.arbiter,
                           "pending_heal": len(rs.pending_on(b)),
                           "fault": {"armed": b.fail_next_start, "sticky": b.sticky}})
        sets = [{"bricks": [b.name for b in rs.bricks], "pending_heal": len(rs.entries),
                 "split_brain": len(rs.split_brain)} for rs in vol.sets]
        vols.append({"name": vol.name, "id": vol.id, "type": vol.type_str, "replica": vol.replica,
                     "arbiter": vol.arbiter, "started": vol.started, "bricks": bricks, "replica_sets": sets,
                     "pending_heal": sum(len(rs.entries) for rs in vol.sets),
                     "split_brain": sum(len(rs.split_brain) for rs in vol.sets),
                     "failed_writes": vol.failed_writes, "used_percent": vol.used_percent})
    peers = [{"node": p.node, "address": p.address, "uuid": p.uuid, "glusterd_up": p.glusterd_up,
              "pod_ready": p.pod_ok, "host_blocked": p.host_blocked, "connected": state.reachable(p)}
             for p in state.peers]
    return {"time": round(now, 3), "peers": peers, "volumes": vols,
            "faults": {"transaction_in_progress": state.tx_in_progress},
            "timeline": list(state.timeline), "max_hosts_down_at_once": max_hosts_down(state.timeline),
            "max_bricks_down_per_volume": max_bricks_down(state.timeline, list(state.volumes))}
