"""Pure readers for the GlusterFS inventory: pods and nodes as the models, and which pods may
run the CLI (procedures-spec §3.2 step 1: Running, Ready, on a Ready node, not on the excluded
node, sorted by name; o-a ``glusterfs_check_containerized.py`` picks its pod the same way)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from activities.gluster.models import GlusterPod, NodeAddresses
from activities.kube.objects import condition, meta, parse_time


def gluster_pod(obj: dict[str, Any]) -> GlusterPod:
    """A Pod JSON object → :class:`GlusterPod` (name, uid, node, IPs, phase, Ready, terminating)."""
    md = meta(obj)
    spec = obj.get("spec") or {}
    st = obj.get("status") or {}
    return GlusterPod(
        name=md.get("name", ""), uid=md.get("uid", ""), node=spec.get("nodeName") or "",
        pod_ip=st.get("podIP") or "", host_ip=st.get("hostIP") or "", phase=st.get("phase") or "",
        ready=condition(obj, "Ready") == "True", terminating=bool(md.get("deletionTimestamp")),
        created_at=parse_time(md.get("creationTimestamp")),
    )


def node_addresses(obj: dict[str, Any]) -> NodeAddresses:
    """A Node JSON object → :class:`NodeAddresses` (every ``status.addresses`` entry, Ready)."""
    addrs = [a.get("address", "") for a in (obj.get("status") or {}).get("addresses") or [] if a.get("address")]
    return NodeAddresses(name=meta(obj).get("name", ""), addresses=addrs, ready=condition(obj, "Ready") == "True")


def exec_candidates(pods: Iterable[GlusterPod], nodes: Iterable[NodeAddresses], exclude_node: str | None) -> list[GlusterPod]:
    """The pods that may run the CLI, by name: healthy, on a Ready node, not on ``exclude_node``."""
    ready_nodes = {n.name for n in nodes if n.ready}
    return sorted((p for p in pods if p.healthy and p.node in ready_nodes and p.node != exclude_node), key=lambda p: p.name)
