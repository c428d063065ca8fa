"""Generic workload activities: are the pods Ready (a health gate's check), and delete every
pod (R1's network repair: ``oc delete pod -A --all``), as a list taken once and deleted by uid
(issue 39 case 6: a retry must not delete the replacements created since)."""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.models import (
    CHECK_CLUSTER_HEALTH,
    ClusterHealthInput,
    ClusterHealthResult,
    DeleteAllPodsInput,
    DeleteAllPodsResult,
    ListPodsToDeleteInput,
    ListPodsToDeleteResult,
    PodRef,
    PodsReadyInput,
    PodsReadyResult,
)
from activities.context import Pacer, check_cancelled, heartbeat, log
from activities.kube import objects
from activities.kube.errors import Conflict, KubeError, NotFound

#: Tries of one pod's DELETE before a transient error fails the attempt (pauses 0.2 s, 0.4 s, ...;
#: a 429's Retry-After instead, at most 5 s).
DELETE_TRIES = 8


class WorkloadActivities(GatewayActivities):
    """Pod activities, bound to one cluster (see :class:`GatewayActivities`)."""

    ACTIVITIES = ("check_pods_ready", "list_pods_to_delete", "delete_all_pods", "check_cluster_health")

    @activity.defn(name="check_pods_ready", no_thread_cancel_exception=True)
    def check_pods_ready(self, input: PodsReadyInput) -> PodsReadyResult:
        """Are the matching pods Ready (condition Ready=True, not terminating)?

        Finished pods (Succeeded/Failed: completed jobs) are not counted. With
        ``expect_per_node`` every Ready node of the cluster must also run one Ready matching pod
        (DaemonSet style); the others are listed in ``nodes_missing``.
        """
        pods = self.gateway.list_pods(input.namespace, label_selector=input.label_selector)
        return pods_ready(pods, self.gateway.list_nodes() if input.expect_per_node else None)

    @activity.defn(name=CHECK_CLUSTER_HEALTH, no_thread_cancel_exception=True)
    def check_cluster_health(self, input: ClusterHealthInput) -> ClusterHealthResult:
        """The cluster's health for a campaign's soak (:class:`ClusterHealthInput`): one list of
        Nodes, one of MachineConfigPools (a 404 for the resource: none served) and one of pods
        per namespace. Read-only. Raises the gateway's KubeError for any other API failure (the
        caller's retry policy decides)."""
        nodes = self.gateway.list_nodes() if input.nodes_ready else []
        pools: list[dict[str, Any]] | None = None
        if input.pools_not_degraded:
            try:
                pools = self.gateway.list("MachineConfigPool")
            except NotFound:
                pools = None
        pods = [p for ns in input.pod_namespaces for p in self.gateway.list_pods(ns)]
        return cluster_health(nodes, pools, pods if input.pod_namespaces else None)

    @activity.defn(name="list_pods_to_delete", no_thread_cancel_exception=True)
    def list_pods_to_delete(self, input: ListPodsToDeleteInput) -> ListPodsToDeleteResult:
        """What ``oc delete pod -A --all`` would delete now (see :class:`ListPodsToDeleteInput`),
        each pod with its uid: the set a cleanup is approved for, recorded in the workflow's
        history so a retry or a new worker deletes exactly these and nothing created since."""
        return ListPodsToDeleteResult(pods=deletable(self.gateway.list_pods(), set(input.exclude_namespaces)))

    @activity.defn(name="delete_all_pods", no_thread_cancel_exception=True)
    def delete_all_pods(self, input: DeleteAllPodsInput) -> DeleteAllPodsResult:
        """Delete ``input.pods`` (graceful: each pod's own grace period), each by its uid, or
        with ``pods`` None what ``list_pods_to_delete`` lists now.

        Each pod is deleted at most once: a transient error (500, 503, 429 with its
        Retry-After, a dropped connection) is retried in place, up to
        :data:`DELETE_TRIES` times with a growing pause, so one lost request does not send the
        whole list again; a pod already gone (404) or replaced by one of another uid (409 on
        the uid precondition) is counted in ``gone`` and left alone. Heartbeats
        ``{"next": i, "deleted": n, "gone": g, "of": total}`` by the clock
        (:class:`activities.context.Pacer`) and after every pod; a retried attempt (worker lost,
        timeout) starts at the last ``next`` it heartbeated. Stops with ``CancelledError`` on a
        cancel. Raises the API error of a pod that still fails after its tries (retryable: the
        next attempt starts at that pod)."""
        pods = input.pods if input.pods is not None else deletable(self.gateway.list_pods(), set(input.exclude_namespaces))
        details = activity.info().heartbeat_details if activity.in_activity() else ()
        last = details[0] if details and isinstance(details[0], dict) else {}
        start = int(last.get("next", 0)) if input.pods is not None else 0
        deleted, gone, retried = int(last.get("deleted", 0)), int(last.get("gone", 0)), int(last.get("retried", 0))
        pacer = Pacer()
        for i in range(start, len(pods)):
            pod = pods[i]
            pacer.beat(lambda: {"next": i, "deleted": deleted, "gone": gone, "retried": retried, "of": len(pods)})
            for attempt in range(1, DELETE_TRIES + 1):
                try:
                    self.gateway.delete_pod(pod.namespace, pod.name, uid=pod.uid or None)
                    deleted += 1
                except (NotFound, Conflict):
                    gone += 1
                except KubeError as exc:
                    if not exc.transient or attempt == DELETE_TRIES:
                        raise
                    retried += 1
                    time.sleep(min(exc.retry_after or 0.2 * attempt, 5.0))
                    check_cancelled()
                    continue
                break
            if input.pods is not None:
                heartbeat({"next": i + 1, "deleted": deleted, "gone": gone, "retried": retried, "of": len(pods)})
        log().info(f"deleted {deleted} of {len(pods)} pods ({gone} already gone or replaced, {retried} requests retried)")
        return DeleteAllPodsResult(deleted=deleted, gone=gone, retried=retried)


def deletable(pods: list[dict[str, Any]], excluded: set[str]) -> list[PodRef]:
    """Pure core of ``list_pods_to_delete``: ``pods`` minus the ``excluded`` namespaces, mirror
    pods and terminating pods, as :class:`PodRef`."""
    out = []
    for pod in pods:
        meta = objects.meta(pod)
        if meta.get("namespace") in excluded or objects.is_mirror_pod(pod) or meta.get("deletionTimestamp"):
            continue
        out.append(PodRef(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", "")))
    return out


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


def cluster_health(nodes: list[dict[str, Any]], pools: list[dict[str, Any]] | None,
                   pods: list[dict[str, Any]] | None) -> ClusterHealthResult:
    """Pure core of ``check_cluster_health``: ``pools`` None = none served, ``pods`` None = not
    checked. A pool is degraded when its ``Degraded`` or ``NodeDegraded`` condition is True
    (MachineConfigPool status as the machine-config-operator writes it)."""
    not_ready = sorted(objects.meta(n).get("name", "") for n in nodes if objects.condition(n, "Ready") != "True")
    degraded = []
    for p in pools or []:
        for cond in ("Degraded", "NodeDegraded"):
            if objects.condition(p, cond) == "True":
                reason = next((c.get("reason") or c.get("message") or "" for c in (p.get("status") or {}).get("conditions") or []
                               if c.get("type") == cond), "")
                degraded.append(f"{objects.meta(p).get('name', '')}: {cond}" + (f" ({reason})" if reason else ""))
                break
    not_ready_pods = pods_ready(pods, None).not_ready if pods is not None else []
    return ClusterHealthResult(ok=not (not_ready or degraded or not_ready_pods), nodes=len(nodes),
                               pools=len(pools) if pools is not None else None, not_ready_nodes=not_ready,
                               degraded_pools=sorted(degraded), not_ready_pods=not_ready_pods)
