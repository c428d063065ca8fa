"""What a kubelet would report for a pod, as a pure function of pod, node and network.

Used by the scenario loader (initial state) and by the kubelet agent (live state), so a
freshly loaded scenario and a running simulator agree.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from clustersim.agents.logic import ANN_CURRENT_CONFIG, annotations, labels, node_ready

LABEL_REQUIRES_OVN = "clustersim.lockkeeper.io/requires-ovn"


@dataclass
class NetworkState:
    """R1 network model. ``ovn_configs``: rendered configs that carry the OVN host files;
    ``switched_at``: RFC 3339 time the cluster network type was switched (pods created
    before it keep stale pod IPs). ``boot_at_switch``: node -> its bootID at the switch; when
    set, a pod created before the switch is stale only while its node is still on that boot (its
    sandbox was attached by the old plugin; a reboot since recreated it on the new one). Empty:
    every pod created before the switch is stale (the loaded R1 scenario). ``enabled`` False
    means the pod network just works."""

    enabled: bool = False
    ovn_configs: set[str] = field(default_factory=set)
    switched_at: str = ""
    boot_at_switch: dict[str, str] = field(default_factory=dict)

    def node_has_ovn(self, node: dict[str, Any]) -> bool:
        return not self.enabled or annotations(node).get(ANN_CURRENT_CONFIG) in self.ovn_configs

    def sandboxes_from_before_switch(self, node: dict[str, Any] | None) -> bool:
        """Whether pods on ``node`` still run in sandboxes the old plugin attached (see
        ``boot_at_switch``)."""
        if not self.boot_at_switch or node is None:
            return True
        boot = ((node.get("status") or {}).get("nodeInfo") or {}).get("bootID", "")
        return self.boot_at_switch.get(node["metadata"]["name"], boot) == boot


def _pod_ip(pod: dict[str, Any]) -> str:
    h = zlib.crc32(f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}".encode())
    return f"10.{128 + (h >> 16) % 64}.{(h >> 8) % 256}.{h % 250 + 2}"


def _cond(ctype: str, ok: bool, now: str, reason: str = "", message: str = "") -> dict[str, Any]:
    c: dict[str, Any] = {"type": ctype, "status": "True" if ok else "False", "lastTransitionTime": now, "lastProbeTime": None}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def kubelet_status(
    pod: dict[str, Any],
    node: dict[str, Any] | None,
    net: NetworkState,
    now: str,
    *,
    restarts: int | None = None,
) -> dict[str, Any]:
    """The pod ``status`` a kubelet on ``node`` reports now.

    - node missing or NotReady (rebooting): phase unchanged, containers not ready;
    - pod labelled requires-ovn (ovnkube-node) on a node without OVN config:
      Running, container waiting CrashLoopBackOff, not Ready;
    - pod-network pod (no hostNetwork) on a node without OVN config: Pending,
      ContainerCreating (no CNI); created before the network switch: Running but not Ready
      (stale pod IP) until recreated;
    - otherwise Running and Ready.
    ``restarts`` overrides the container restartCount (kept from the old status otherwise).
    """
    old = pod.get("status") or {}
    old_cs = {c.get("name"): c for c in old.get("containerStatuses") or []}
    spec = pod["spec"]
    started = old.get("startTime") or now
    ip = (node or {}).get("status", {}).get("addresses", [{}])[0].get("address", "10.0.0.2")
    host_network = bool(spec.get("hostNetwork"))
    ready_node = node is not None and node_ready(node)
    requires_ovn = labels(pod).get(LABEL_REQUIRES_OVN) == "true"
    has_ovn = node is not None and net.node_has_ovn(node)
    stale = (
        net.enabled
        and not host_network
        and bool(net.switched_at)
        and (pod["metadata"].get("creationTimestamp") or now) < net.switched_at
        and net.sandboxes_from_before_switch(node)
    )

    phase = "Running"
    ready = ready_node
    waiting: dict[str, Any] | None = None
    if not ready_node:
        ready = False
    elif requires_ovn and not has_ovn:
        ready = False
        waiting = {
            "reason": "CrashLoopBackOff",
            "message": "back-off 5m0s restarting failed container=ovnkube-controller "
            "(missing /etc/ovn-kubernetes host configuration)",
        }
    elif stale:
        # Started on the old CNI: keeps running with a pod IP nothing routes to any more.
        ready = False
    elif not host_network and not requires_ovn and not has_ovn:
        phase = "Pending" if old.get("phase") in (None, "Pending") else old.get("phase", "Running")
        ready = False
        if phase == "Pending":
            waiting = {"reason": "ContainerCreating"}

    statuses = []
    for c in spec["containers"]:
        prev = old_cs.get(c["name"], {})
        count = restarts if restarts is not None else prev.get("restartCount", 0)
        cs: dict[str, Any] = {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": f"{c.get('image', '')}@sha256:{'0' * 64}",
            "ready": ready,
            "started": waiting is None,
            "restartCount": count,
            "containerID": f"cri-o://{pod['metadata'].get('uid', '').replace('-', '')}{count}",
        }
        if waiting is not None:
            cs["state"] = {"waiting": waiting}
        else:
            cs["state"] = {"running": {"startedAt": now if count != prev.get("restartCount", 0) else
                                       (prev.get("state", {}).get("running", {}).get("startedAt") or now)}}
        statuses.append(cs)
    status: dict[str, Any] = {
        "phase": phase,
        "hostIP": ip,
        "podIP": ip if host_network else _pod_ip(pod),
        "startTime": started,
        "qosClass": old.get("qosClass", "Burstable"),
        "containerStatuses": statuses,
    }
    status["podIPs"] = [{"ip": status["podIP"]}]
    old_conds = {c.get("type"): c for c in old.get("conditions") or []}
    conds = [
        _cond("Initialized", True, now),
        _cond("Ready", ready, now, *(() if ready else ("ContainersNotReady", f"containers with unready status: [{' '.join(c['name'] for c in spec['containers'])}]"))),
        _cond("ContainersReady", ready, now, *(() if ready else ("ContainersNotReady", f"containers with unready status: [{' '.join(c['name'] for c in spec['containers'])}]"))),
        _cond("PodScheduled", True, now),
    ]
    for c in conds:
        prev = old_conds.get(c["type"])
        if prev and prev.get("status") == c["status"] and prev.get("lastTransitionTime"):
            c["lastTransitionTime"] = prev["lastTransitionTime"]
    status["conditions"] = conds
    return status
