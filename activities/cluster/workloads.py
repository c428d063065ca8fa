"""Generic workload activities: are the pods Ready (a health gate's check), and delete every
pod (R1's network repair: ``oc delete pod -A --all``)."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.models import DeleteAllPodsInput, DeleteAllPodsResult, PodsReadyInput, PodsReadyResult
from activities.context import Pacer, log
from activities.kube import objects
from activities.kube.errors import NotFound


class WorkloadActivities(GatewayActivities):
    """Pod activities, bound to one cluster (see :class:`GatewayActivities`)."""

    ACTIVITIES = ("check_pods_ready", "delete_all_pods")

    @activity.defn(name="check_pods_ready", no_thread_cancel_exception=True)
    def check_pods_ready(self, input: PodsReadyInput) -> PodsReadyResult:
        """Are the matching pods Ready (condition Ready=True, not terminating)?

        Finished pods (Succeeded/Failed: completed jobs) are not counted. With
        ``expect_per_node`` every Ready node of the cluster must also run one Ready matching pod
        (DaemonSet style); the others are listed in ``nodes_missing``.
        """
        pods = self.gateway.list_pods(input.namespace, label_selector=input.label_selector)
        return pods_ready(pods, self.gateway.list_nodes() if input.expect_per_node else None)

    @activity.defn(name="delete_all_pods", no_thread_cancel_exception=True)
    def delete_all_pods(self, input: DeleteAllPodsInput) -> DeleteAllPodsResult:
        """``oc delete pod -A --all`` minus ``exclude_namespaces``: graceful deletes (each pod's
        own grace period), mirror pods and pods already terminating left alone; a pod already
        gone counts as done. ``deleted`` counts the DELETE requests that succeeded.

        Heartbeats ``{"deleted": n, "of": total}`` between deletes by the clock
        (:class:`activities.context.Pacer`: not by the pod count, so a slow API server does not
        look like a dead worker), and stops with ``CancelledError`` on a cancel. Safe to repeat:
        a retry deletes what is left."""
        excluded = set(input.exclude_namespaces)
        deleted = 0
        pods = self.gateway.list_pods()
        pacer = Pacer()
        for pod in pods:
            pacer.beat(lambda: {"deleted": deleted, "of": len(pods)})
            meta = objects.meta(pod)
            if meta.get("namespace") in excluded or objects.is_mirror_pod(pod) or meta.get("deletionTimestamp"):
                continue
            try:
                self.gateway.delete_pod(meta.get("namespace", ""), meta.get("name", ""))
            except NotFound:
                continue
            deleted += 1
        log().info(f"deleted {deleted} pods (namespaces left alone: {', '.join(sorted(excluded)) or 'none'})")
        return DeleteAllPodsResult(deleted=deleted)


def pods_ready(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None) -> PodsReadyResult:
    """Pure core of ``check_pods_ready``: ``nodes`` None skips the per-node check."""
    considered = [p for p in pods if not objects.is_finished(p)]
    not_ready = sorted(
        objects.pod_key(p) for p in considered if objects.meta(p).get("deletionTimestamp") or objects.condition(p, "Ready") != "True"
    )
    missing: list[str] = []
    if nodes is not None:
        ready_on = {
            (p.get("spec") or {}).get("nodeName")
            for p in considered
            if not objects.meta(p).get("deletionTimestamp") and objects.condition(p, "Ready") == "True"
        }
        missing = sorted(
            objects.meta(n).get("name", "")
            for n in nodes
            if objects.condition(n, "Ready") == "True" and objects.meta(n).get("name") not in ready_on
        )
    return PodsReadyResult(ready=not not_ready and not missing, total=len(considered), not_ready=not_ready, nodes_missing=missing)
