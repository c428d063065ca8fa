"""``lockkeeper diagnose pool NAME``: why a MachineConfigPool is stuck, read-only from the API (R2).

R2's operator had to find the machine-config-daemon's log on the node to learn that the router's
PodDisruptionBudget blocked the drain and that the replacement router pod could not be
scheduled. :func:`diagnose_pool` puts those facts in one answer, with GETs and LISTs only (no
workflow needed, nothing written): the nodes not at the pool's target config, degraded nodes
with their ``reason`` annotation, the budgets that allow no disruption over pods on the pool's
nodes, Pending pods with their latest FailedScheduling message, and the pool's conditions.

Raises ``UnknownPool`` (:class:`DiagnoseError`) for a pool that does not exist; API errors
propagate as :mod:`activities.kube.errors` types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from activities.cluster.drain import pdb_report
from activities.cluster.models import DaemonState, NodeInfo, NodeMcoState, PendingPodReport
from activities.cluster.nodeinfo import node_info
from activities.kube.objects import (
    label_selector_string,
    latest_failed_scheduling_message,
    matching_pdbs,
    meta,
    pod_key,
    replacement_candidates,
)
from activities.machineconfig.models import DrainBlocker, NodeDiagnosis, PoolConditionReport, PoolDiagnosis

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: At most this many Pending pods are reported (each costs one events LIST).
MAX_PENDING = 50


class DiagnoseError(Exception):
    """The pool cannot be diagnosed (``kind`` ``UnknownPool``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _node_diag(info: NodeInfo) -> NodeDiagnosis:
    fields = {f: getattr(info, f) for f in NodeMcoState.model_fields}
    return NodeDiagnosis(**{**fields, "reason": info.reason or None})


def diagnose_pool(gw: KubeGateway, pool: str) -> PoolDiagnosis:
    """The read-only diagnosis of MachineConfigPool ``pool`` (see the module docstring).

    Target config: ``spec.configuration.name`` (what the pool wants), else status's.
    Requests: LIST machineconfigpools, LIST nodes (pool selector), LIST pods per node,
    LIST poddisruptionbudgets per namespace involved, LIST Pending pods, LIST events per
    Pending pod (at most :data:`MAX_PENDING`)."""
    mcps = {(meta(p).get("name") or ""): p for p in gw.list_machineconfigpools()}
    mcp = mcps.get(pool)
    if mcp is None:
        raise DiagnoseError("UnknownPool", f"unknown MachineConfigPool {pool}; known pools: {', '.join(sorted(mcps)) or 'none'}")
    spec, status = mcp.get("spec") or {}, mcp.get("status") or {}
    target = (spec.get("configuration") or {}).get("name") or (status.get("configuration") or {}).get("name")
    selector = label_selector_string(spec.get("nodeSelector"))
    nodes = [] if selector is None else gw.list_nodes(label_selector=selector or None)
    infos = [node_info(n, pool=pool) for n in nodes]
    diag = PoolDiagnosis(
        pool=pool,
        target_config=target,
        current_config=(status.get("configuration") or {}).get("name"),
        machine_count=int(status.get("machineCount") or 0),
        updated_machine_count=int(status.get("updatedMachineCount") or 0),
        ready_machine_count=int(status.get("readyMachineCount") or 0),
        degraded_machine_count=int(status.get("degradedMachineCount") or 0),
        nodes=sorted(i.name for i in infos),
        conditions=[
            PoolConditionReport(
                type=str(c.get("type")), status=str(c.get("status")), reason=c.get("reason") or "", message=c.get("message") or ""
            )
            for c in status.get("conditions") or []
            if isinstance(c, dict)
        ],
    )
    for info in sorted(infos, key=lambda i: i.name):
        if info.current_config != target or info.desired_config != target or info.state != DaemonState.DONE:
            diag.nodes_not_at_target.append(_node_diag(info))
        if info.degraded:
            diag.degraded.append(_node_diag(info))

    # Drain blockers: budgets allowing no disruption that cover pods running on the pool's nodes.
    pods_on_pool: list[dict[str, Any]] = []
    for info in infos:
        pods_on_pool.extend(gw.list_pods(field_selector=f"spec.nodeName={info.name}"))
    pdbs_by_ns: dict[str, list[dict[str, Any]]] = {}
    blockers: dict[str, DrainBlocker] = {}
    for pod in pods_on_pool:
        ns = meta(pod).get("namespace", "")
        if ns not in pdbs_by_ns:
            pdbs_by_ns[ns] = gw.list_pdbs(ns)
        for pdb in matching_pdbs(pod, pdbs_by_ns[ns]):
            report = pdb_report(pdb)
            if report.disruptions_allowed > 0:
                continue
            key = f"{report.namespace}/{report.name}"
            blockers.setdefault(key, DrainBlocker(pdb=report)).pods.append(pod_key(pod))
    diag.drain_blockers = [blockers[k] for k in sorted(blockers)]

    # Pending pods cluster-wide (a replacement may be Pending for want of the pool's nodes).
    pending = gw.list_pods(field_selector="status.phase=Pending")
    for pod in sorted(pending, key=pod_key)[:MAX_PENDING]:
        ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
        replaces = next(
            (pod_key(p) for p in pods_on_pool if any(pod_key(c) == pod_key(pod) for c in replacement_candidates(p, [pod]))),
            None,
        )
        events = gw.list_events(ns, field_selector=f"involvedObject.name={name}")
        diag.pending_pods.append(
            PendingPodReport(namespace=ns, name=name, message=latest_failed_scheduling_message(events, name), replaces=replaces)
        )
    return diag
