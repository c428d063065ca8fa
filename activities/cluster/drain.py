"""Generic drain activities: ``drain_node`` (one eviction pass, kubectl drain's rules) and
``delete_blocking_pods`` (the operator's ``delete-pod`` decision on a blocked drain).

Sources: kubectl ``pkg/drain/filters.go`` (which pods a drain skips or refuses) and
``pkg/drain/drain.go`` (evict, then wait for each pod to be gone or replaced by a new UID); MCO
``pkg/daemon/drain.go`` (``Force: true``). A PodDisruptionBudget refusal (429) is reported with
the budgets and the Pending replacements' latest FailedScheduling message, so a person can
decide (R2).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import CancelledError

from activities.cluster.base import GatewayActivities
from activities.cluster.models import (
    BlockedPod,
    DeleteBlockingPodsInput,
    DeleteBlockingPodsResult,
    DrainInput,
    DrainReport,
    DrainResult,
    PDBReport,
    PendingPodReport,
)
from activities.cluster.watch import watch_window
from activities.context import HEARTBEAT_INTERVAL_SECONDS, Pacer, check_cancelled, fail, heartbeat, log
from activities.kube import objects
from activities.kube.errors import KubeError, NotFound, ServerError, TooManyRequests


@dataclass(frozen=True)
class EvictedPass:
    """What :meth:`DrainActivities.evict_pass` did and :meth:`DrainActivities.finish_pass` waits
    for: ``waiting`` (pod key -> uid: evicted or already terminating), the pass's ``evicted``,
    ``refused``, ``blocked`` (pod, the refusal) and its ``report``, and ``listed``: its LIST of
    the node's pods by key with the list's resourceVersion."""

    input: DrainInput
    waiting: dict[str, str]
    evicted: list[str]
    refused: list[str]
    blocked: list[tuple[dict[str, Any], KubeError]]
    report: DrainReport | None
    listed: tuple[dict[str, dict[str, Any]], str | None]


@dataclass(frozen=True)
class PodDisposition:
    """What a drain does with one pod: ``action`` is ``evict``, ``wait`` (already terminating:
    only wait for it), ``skip`` (DaemonSet-owned or mirror pod: left alone) or ``refuse`` (it
    cannot be removed with these options; ``reason`` says why, in kubectl's words)."""

    action: str
    reason: str = ""


def classify_pod_for_drain(
    pod: dict[str, Any],
    *,
    ignore_daemonsets: bool = True,
    delete_emptydir_data: bool = True,
    force: bool = True,
) -> PodDisposition:
    """kubectl ``pkg/drain/filters.go`` for one pod, in kubectl's order.

    Mirror pods are skipped (the kubelet owns them); pods already terminating are only waited
    for; finished pods (Succeeded/Failed) are always removable; DaemonSet pods are skipped with
    ``ignore_daemonsets`` (else refused: the DaemonSet would recreate them); pods without a
    controller are refused unless ``force``; pods with emptyDir volumes are refused unless
    ``delete_emptydir_data``.
    """
    if objects.is_mirror_pod(pod):
        return PodDisposition("skip", "mirror pod")
    if objects.meta(pod).get("deletionTimestamp"):
        return PodDisposition("wait", "already terminating")
    if objects.is_finished(pod):
        return PodDisposition("evict", "finished")
    ctrl = objects.controller_of(pod)
    if ctrl is not None and ctrl.get("kind") == "DaemonSet":
        if ignore_daemonsets:
            return PodDisposition("skip", "DaemonSet-managed")
        return PodDisposition("refuse", "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets)")
    if ctrl is None and not force:
        return PodDisposition(
            "refuse",
            "cannot delete Pods that declare no controller (use --force)",
        )
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if any(isinstance(v, dict) and "emptyDir" in v for v in volumes) and not delete_emptydir_data:
        return PodDisposition("refuse", "cannot delete Pods with local storage (use --delete-emptydir-data)")
    return PodDisposition("evict")


def pdb_report(pdb: dict[str, Any]) -> PDBReport:
    """A policy/v1 PodDisruptionBudget -> :class:`PDBReport` (spec limits, status counters)."""
    meta = objects.meta(pdb)
    spec = pdb.get("spec") or {}
    status = pdb.get("status") or {}
    return PDBReport(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        current_healthy=int(status.get("currentHealthy") or 0),
        desired_healthy=int(status.get("desiredHealthy") or 0),
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
        expected_pods=int(status.get("expectedPods") or 0),
    )


class DrainActivities(GatewayActivities):
    """Drain activities, bound to one cluster (see :class:`GatewayActivities`)."""

    ACTIVITIES = ("drain_node", "delete_blocking_pods")

    @activity.defn(name="drain_node", no_thread_cancel_exception=True)
    def drain_node(self, input: DrainInput) -> DrainResult:
        """One drain pass (``kubectl drain --ignore-daemonsets --delete-emptydir-data`` through
        the Eviction API, ``--force`` as MCO's drainer when ``input.force``).

        Lists the node's pods (fieldSelector spec.nodeName), evicts each one
        :func:`classify_pod_for_drain` marks ``evict`` (404 = already gone = success; 429 = a
        PodDisruptionBudget refused: reported with the budgets and the Pending replacements'
        latest FailedScheduling message), then waits up to ``wait_seconds`` for the evicted and
        already-terminating pods to be gone (absent, or a new UID under the same name),
        heartbeating progress. ``done`` when no removable pod is left on the node. Idempotent:
        a retry re-lists and evicts what is still there.
        """
        return self.finish_pass(self.evict_pass(input))

    def evict_pass(self, input: DrainInput) -> EvictedPass:
        """The first half of a drain pass (:meth:`drain_node`): LIST the node's pods and evict
        each one :func:`classify_pod_for_drain` marks ``evict``. Returns what
        :meth:`finish_pass` waits for. A few requests, no wait: a caller may run the two halves
        on different threads (the shared node watcher, issue 40). Raises the API errors of the
        list and of an eviction other than 404/429/multiple-budgets."""
        gw = self.gateway
        node = input.node
        on_node, listed_rv = self._node_pods(f"spec.nodeName={node}")
        pods = [on_node[k] for k in sorted(on_node)]
        waiting: dict[str, str] = {}
        evicted: list[str] = []
        refused: list[str] = []
        blocked: list[tuple[dict[str, Any], KubeError]] = []
        pacer = Pacer()  # by the clock between evictions: a slow API must not look like a dead worker
        for pod in pods:
            pacer.beat(lambda: {"node": node, "evicted": len(evicted), "blocked": len(blocked)})
            disposition = classify_pod_for_drain(
                pod,
                ignore_daemonsets=input.ignore_daemonsets,
                delete_emptydir_data=input.delete_emptydir_data,
                force=input.force,
            )
            key = objects.pod_key(pod)
            if disposition.action == "skip":
                continue
            if disposition.action == "refuse":
                refused.append(f"{key}: {disposition.reason}")
                continue
            if disposition.action == "wait":
                waiting[key] = objects.meta(pod).get("uid", "")
                continue
            meta = objects.meta(pod)
            try:
                gw.evict_pod(meta.get("namespace", ""), meta.get("name", ""), grace_period_seconds=input.grace_period_seconds)
            except NotFound:
                continue
            except TooManyRequests as exc:
                blocked.append((pod, exc))
                continue
            except ServerError as exc:
                # "This pod has more than one PodDisruptionBudget, which the eviction
                # subresource does not support." is a standing refusal, reported like a 429;
                # any other server error is transient and retried with the whole activity.
                if "PodDisruptionBudget" not in exc.message:
                    raise
                blocked.append((pod, exc))
                continue
            evicted.append(key)
            waiting[key] = meta.get("uid", "")
        report = self._blocked_report(blocked) if blocked else None
        if evicted or blocked or refused:
            blocked_names = [objects.pod_key(p) for p, _ in blocked]
            log().info(
                f"node {node}: drain pass evicted {len(evicted)} pods"
                + (f", blocked by disruption budgets: {', '.join(blocked_names)}" if blocked else "")
                + (f", refused: {'; '.join(refused)}" if refused else "")
            )
        return EvictedPass(input, waiting, evicted, refused, blocked, report, (on_node, listed_rv))

    def finish_pass(self, done: EvictedPass, cancelled: Callable[[], bool] | None = None) -> DrainResult:
        """The second half of a drain pass: wait up to ``wait_seconds`` for the evicted and
        already-terminating pods of ``done`` to be gone (:meth:`_wait_pods_gone`), then the
        :class:`DrainResult`. ``cancelled()``: polled between watch windows where no activity
        context tells of a cancel (the shared node watcher's threads); True raises
        ``CancelledError``."""
        input = done.input
        left = self._wait_pods_gone(input.node, done.waiting, input.wait_seconds, done.evicted, done.blocked, done.listed,
                                    cancelled)
        remaining = sorted(
            objects.pod_key(p)
            for p in left
            if classify_pod_for_drain(
                p,
                ignore_daemonsets=input.ignore_daemonsets,
                delete_emptydir_data=input.delete_emptydir_data,
                force=input.force,
            ).action
            != "skip"
        )
        return DrainResult(done=not remaining, evicted=done.evicted, remaining=remaining, blocked=done.report, refused=done.refused)

    def _wait_pods_gone(
        self,
        node: str,
        waiting: dict[str, str],
        wait_seconds: float,
        evicted: list[str],
        blocked: list[tuple[dict[str, Any], KubeError]],
        listed: tuple[dict[str, dict[str, Any]], str | None],
        cancelled: Callable[[], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Watch the node's pods until every ``waiting`` pod (key -> uid) is gone or replaced,
        or ``wait_seconds`` passed. Returns the node's pods at the end, by key.

        ``listed``: the pass's own LIST of the node's pods (by key) and its resourceVersion.
        WATCH windows of at most :data:`HEARTBEAT_INTERVAL_SECONDS` from that resourceVersion
        replay the evictions' effects and then follow the pods (no second LIST): the pod's DELETED event
        ends the wait as the API server sends it (a poll lost up to its interval on the
        rollout's critical path, issue 16). An expired resourceVersion or a broken stream
        re-lists."""
        field = f"spec.nodeName={node}"
        deadline = time.monotonic() + max(0.0, wait_seconds)
        last_beat = time.monotonic()  # the first beat after an interval: a short wait sends none (issue 16)
        current, rv = dict(listed[0]), listed[1]

        def left() -> list[str]:  # the waiting pods still there (same key, same uid)
            return sorted(k for k, uid in waiting.items() if k in current and objects.meta(current[k]).get("uid", "") == uid)

        def seen(type_: str, pod: dict[str, Any]) -> bool:  # a watch event; True: none left
            if type_ == "DELETED":
                current.pop(objects.pod_key(pod), None)
            elif type_ in ("ADDED", "MODIFIED"):
                current[objects.pod_key(pod)] = pod
            return not left()

        def relist() -> str | None:
            pods, new_rv = self._node_pods(field)
            current.clear()
            current.update(pods)
            return new_rv

        while True:
            still = left()
            now = time.monotonic()
            if not still or now >= deadline:
                return [current[k] for k in sorted(current)]
            if now - last_beat >= HEARTBEAT_INTERVAL_SECONDS:
                heartbeat({"node": node, "evicted": len(evicted), "blocked": [objects.pod_key(p) for p, _ in blocked],
                           "waiting_for": still[:20]})
                last_beat = now
            check_cancelled()
            if cancelled is not None and cancelled():
                raise CancelledError("activity cancelled")
            window = max(1, min(int(HEARTBEAT_INTERVAL_SECONDS), int(deadline - now + 0.999)))
            rv = watch_window(
                lambda rv, s: self.gateway.watch("Pod", field_selector=field, resource_version=rv, timeout_seconds=s),
                rv, window, seen, relist, f"node {node} pods",
            )

    def _node_pods(self, field_selector: str) -> tuple[dict[str, dict[str, Any]], str | None]:
        """The pods matching ``field_selector`` by key, and the list's resourceVersion."""
        pods, rv = self.gateway.list_with_rv("Pod", field_selector=field_selector)
        return {objects.pod_key(p): p for p in pods}, rv

    def _blocked_report(self, blocked: list[tuple[dict[str, Any], KubeError]]) -> DrainReport:
        """Budgets and Pending replacements for the pods whose eviction was refused."""
        gw = self.gateway
        pdbs_by_ns: dict[str, list[dict[str, Any]]] = {}
        pending_by_ns: dict[str, list[dict[str, Any]]] = {}
        blocked_pods: list[BlockedPod] = []
        replacements: dict[str, PendingPodReport] = {}
        for pod, exc in blocked:
            ns = objects.meta(pod).get("namespace", "")
            if ns not in pdbs_by_ns:
                pdbs_by_ns[ns] = gw.list_pdbs(ns)
                pending_by_ns[ns] = gw.list_pods(ns, field_selector="status.phase=Pending")
            causes = [str(c.get("message")) for c in exc.causes if c.get("message")]
            blocked_pods.append(
                BlockedPod(
                    namespace=ns,
                    name=objects.meta(pod).get("name", ""),
                    message=exc.message,
                    causes=causes,
                    pdbs=[pdb_report(p) for p in objects.matching_pdbs(pod, pdbs_by_ns[ns])],
                )
            )
            for candidate in objects.replacement_candidates(pod, pending_by_ns[ns]):
                key = objects.pod_key(candidate)
                if key in replacements:
                    continue
                name = objects.meta(candidate).get("name", "")
                events = gw.list_events(ns, field_selector=f"involvedObject.name={name}")
                replacements[key] = PendingPodReport(
                    namespace=ns,
                    name=name,
                    message=objects.latest_failed_scheduling_message(events, name),
                    replaces=objects.pod_key(pod),
                )
        return DrainReport(blocked_pods=blocked_pods, pending_replacements=list(replacements.values()))

    @activity.defn(name="delete_blocking_pods", no_thread_cancel_exception=True)
    def delete_blocking_pods(self, input: DeleteBlockingPodsInput) -> DeleteBlockingPodsResult:
        """The ``delete-pod`` decision: DELETE each named pod (its own grace period) although
        its PodDisruptionBudget refuses the eviction, but only while it still runs on
        ``input.node`` (GET first: a pod rescheduled elsewhere or gone is not touched; 404 counts
        as gone). Idempotent: a retry finds the deleted pods gone or terminating."""
        gw = self.gateway
        deleted: list[str] = []
        gone: list[str] = []
        for key in input.pods:
            namespace, _, name = key.partition("/")
            if not namespace or not name:
                raise fail("InvalidInput", f"pod {key!r} is not namespace/name")
            try:
                pod = gw.get_pod(namespace, name)
                if (pod.get("spec") or {}).get("nodeName") != input.node:
                    gone.append(key)
                    continue
                if objects.meta(pod).get("deletionTimestamp"):
                    deleted.append(key)
                    continue
                gw.delete_pod(namespace, name)
            except NotFound:
                gone.append(key)
                continue
            deleted.append(key)
        log().warning(
            f"node {input.node}: deleted {', '.join(deleted) or 'no pod'} despite their disruption budgets "
            f"(decision delete-pod by {input.decided_by}" + (f": {input.comment}" if input.comment else "") + ")"
        )
        return DeleteBlockingPodsResult(deleted=deleted, gone=gone)
