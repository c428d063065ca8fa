"""What a procedure on GlusterFS nodes leaves changed in GlusterFS (issue 39), named as the
simulator's diff names it: ``DaemonSet NS/NAME`` for a GlusterFS pod not Ready, ``gluster volume
VOL`` for a volume with a brick offline or restarted. Pure: the procedures pass what they read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from workflows.kit.models import ChangedItem
from workflows.shared.glusterfs.models import Assessment


def volume_items(lines: Mapping[str, list[str]]) -> list[ChangedItem]:
    """One ``gluster volume VOL`` item per volume (in the mapping's order), its lines joined by "; "."""
    return [ChangedItem(target=f"gluster volume {v}", what="; ".join(what)) for v, what in lines.items()]


def node_down_left(node: str, addresses: Iterable[str], *, namespace: str, pods: list[str], brick_hosts: Mapping[str, set[str]],
                   last: Assessment | None, pod_ready_counts: bool) -> list[ChangedItem]:
    """What a node whose container runtime is gone takes down until its bricks are back: its
    GlusterFS pods' DaemonSets (``pods``: the pod names on it, ``<namespace>/<name without the
    suffix>``, one pod not Ready) and each volume of ``brick_hosts`` (volume -> brick hosts)
    with a brick on ``node`` or one of its ``addresses`` (offline). With a ``last`` read, only
    what it still saw down: no DaemonSet when it saw a Ready pod on the node and
    ``pod_ready_counts`` (a pod the API shows Ready on a node whose runtime is stopped is stale),
    no volume whose bricks there are online again."""
    hosts = set(addresses) | {node}
    ready = pod_ready_counts and last is not None and any(p.healthy for p in last.pods if p.node == node)
    items = [] if ready else [
        ChangedItem(target=f"DaemonSet {namespace}/{ds}", what=f"its pod on {node} not Ready (the node's runtime is gone)")
        for ds in sorted({p.rsplit("-", 1)[0] for p in pods})]
    down = None if last is None else {v.name for v in last.volumes for b in v.bricks if b.host in hosts and not b.online}
    return items + volume_items({v: [f"brick on {node} offline until the node is back"]
                                 for v, bh in sorted(brick_hosts.items()) if bh & hosts and (down is None or v in down)})
