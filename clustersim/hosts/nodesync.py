"""How a host's state shows on its Node object: the kubelet's Ready condition and nodeInfo.

The kubelet agent (clustersim.agents) derives pod readiness from the Node's Ready condition, so
writing the condition here is the whole hook: pods on the node go not Ready when it flips and
come back when it is True again. Rules (Kubernetes 1.11, OCP 3.11):

- kubelet running and runtime up: ``Ready=True`` ``KubeletReady`` "kubelet is posting ready status";
- kubelet running, runtime down: ``Ready=False`` ``KubeletNotReady`` "container runtime is down"
  (the kubelet's runtime-state check);
- kubelet stopped or the host down: the node controller sets ``Ready=Unknown``
  ``NodeStatusUnknown`` "Kubelet stopped posting node status." once
  ``node_monitor_grace_seconds`` have passed without a heartbeat (kube-controller-manager
  ``--node-monitor-grace-period``, 40 s).

Not Ready nodes carry the node controller's ``node.kubernetes.io/not-ready`` (False) or
``node.kubernetes.io/unreachable`` (Unknown) taint with effect NoExecute (TaintBasedEvictions,
the default from Kubernetes 1.13): new pods are not scheduled there, and DaemonSet pods, which
tolerate both, stay bound to the node through a reboot.
"""

from __future__ import annotations

from typing import Any

from clustersim.hosts.model import HostState

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
RUNTIME_VERSIONS = {"cri-o": "cri-o://1.11.16", "docker": "docker://1.13.1"}


def desired_ready(host: HostState) -> tuple[str, str, str] | None:
    """(status, reason, message) the kubelet reports now, or None when no kubelet reports
    (then the node controller's grace applies)."""
    if not host.kubelet_up():
        return None
    if not host.runtime_up():
        return "False", "KubeletNotReady", "container runtime is down"
    return "True", "KubeletReady", "kubelet is posting ready status"


UNKNOWN = ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")


def apply_ready(node: dict[str, Any], status: tuple[str, str, str], now: str, host: HostState | None) -> None:
    """Mutate ``node`` (a store object inside ``Store.mutate``): set the Ready condition to
    ``status``, the matching taint, and (with ``host``) nodeInfo.bootID / containerRuntimeVersion."""
    st = node.setdefault("status", {})
    conds = st.setdefault("conditions", [])
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    if ready is None:
        ready = {"type": "Ready"}
        conds.append(ready)
    value, reason, message = status
    if ready.get("status") != value:
        ready["lastTransitionTime"] = now
    ready.update(status=value, reason=reason, message=message)
    if value != "Unknown":
        ready["lastHeartbeatTime"] = now
    spec = node.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") not in (TAINT_NOT_READY, TAINT_UNREACHABLE)]
    if value == "False":
        taints.append({"key": TAINT_NOT_READY, "effect": "NoExecute", "timeAdded": now})
    elif value == "Unknown":
        taints.append({"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": now})
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
    if host is not None and value != "Unknown":
        info = st.setdefault("nodeInfo", {})
        info["bootID"] = host.boot_id
        if host.runtime in RUNTIME_VERSIONS:
            info["containerRuntimeVersion"] = RUNTIME_VERSIONS[host.runtime]
