"""The nodeSelector-migration activities over the Kubernetes gateway.

- ``scan_node_selectors``: every workload kind of :class:`ScanInput` with a non-empty
  ``spec.template.spec.nodeSelector`` (a CronJob's ``spec.jobTemplate.spec.template.spec``; RCs
  and ReplicaSets only without a controller owner: the owner is what gets patched), the nodes its
  pods run on, a DaemonSet's update strategy, every Namespace with an
  ``openshift.io/node-selector`` annotation, every Node's labels;
- ``read_rollout``: is the rollout our patch caused finished? DeploymentConfig: origin's
  conditions (``Progressing`` reason ``NewReplicationControllerAvailable`` for a version past
  ours = done, ``ProgressDeadlineExceeded`` = failed) and ``availableReplicas == spec.replicas``
  (origin ``pkg/apps/util/const.go``); Deployment: ``observedGeneration >= generation`` and
  updated == available == replicas; DaemonSet: updatedNumberScheduled == desiredNumberScheduled
  == numberAvailable, plus its pods still on an older ``pod-template-generation`` (an OnDelete
  DaemonSet keeps them until they are deleted); a CronJob has no rollout; StatefulSet: updated == ready == replicas;
- ``read_pod_states``: every pod's phase and, for Pending ones, the FailedScheduling message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.models import ObjectRef
from activities.context import beating
from activities.kube import objects
from activities.node_selectors.models import (
    CRONJOB_SELECTOR_PATH,
    READ_POD_STATES,
    SELECTOR_PATH,
    READ_ROLLOUT,
    SCAN_NODE_SELECTORS,
    NamespaceSelector,
    PodState,
    PodStates,
    RolloutInput,
    RolloutState,
    ScanInput,
    ScanResult,
    SelectorNode,
    Workload,
)
from activities.preflight.references import NS_ANNOTATION, template_spec

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

# Moved to activities.preflight.references (the preflight's label scan reads the same templates);
# the old names stay importable from here.
_template_spec = template_spec


def _old_template_pods(ds: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]:
    """``ns/name@node`` of ``ds``'s pods whose ``pod-template-generation`` is not its generation."""
    meta = objects.meta(ds)
    gen = str(meta.get("generation") or "")
    out = []
    for p in pods:
        pm = objects.meta(p)
        owned = any(o.get("kind") == "DaemonSet" and o.get("name") == meta.get("name") for o in pm.get("ownerReferences") or [])
        if owned and pm.get("namespace") == meta.get("namespace") and not pm.get("deletionTimestamp") \
                and objects.labels(p).get("pod-template-generation") != gen:
            out.append((str((p.get("spec") or {}).get("nodeName") or ""), f"{pm.get('namespace')}/{pm.get('name')}"))
    return [f"{name}@{node}" for node, name in sorted(out)]


def _pod_selector(obj: dict[str, Any]) -> dict[str, str]:
    sel = (obj.get("spec") or {}).get("selector") or {}
    if isinstance(sel, dict) and "matchLabels" in sel:
        return dict(sel.get("matchLabels") or {})
    return {k: v for k, v in sel.items() if isinstance(v, str)} if isinstance(sel, dict) else {}


def _anti_affinity(spec: dict[str, Any]) -> bool:
    anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {})
    return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return {}


class NodeSelectorActivities(GatewayActivities):
    """``scan_node_selectors``, ``read_rollout`` and ``read_pod_states`` on one gateway."""

    ACTIVITIES = ("scan_node_selectors", "read_rollout", "read_pod_states")

    @activity.defn(name=SCAN_NODE_SELECTORS, no_thread_cancel_exception=True)
    def scan_node_selectors(self, input: ScanInput) -> ScanResult:
        """The scan (module doc). Sorted by kind order, namespace, name. Read-only: API errors
        are raised as their retryable ``Api*`` failure types (:meth:`planning_errors` with
        ``policy_decides``), so the first scan fails fast under the planning retry policy and
        the re-scan after the changes keeps retrying."""
        with self.planning_errors(policy_decides=True), beating("scan"):
            return self._scan(input)

    def _scan(self, input: ScanInput) -> ScanResult:
        gw = self.gateway
        pods = [p for p in gw.list("Pod") if not objects.is_mirror_pod(p)]
        workloads: list[Workload] = []
        for kind in input.kinds:
            for obj in gw.list(kind):
                meta = objects.meta(obj)
                if kind in ("ReplicationController", "ReplicaSet") and any(o.get("controller") for o in meta.get("ownerReferences") or []):
                    continue
                tspec = _template_spec({**obj, "kind": kind})
                sel = dict(tspec.get("nodeSelector") or {})
                if not sel:
                    continue
                ns = meta.get("namespace")
                want = {} if kind == "CronJob" else _pod_selector(obj)
                nodes = sorted({(p.get("spec") or {}).get("nodeName") for p in pods
                                if objects.meta(p).get("namespace") == ns and want and objects.selector_matches({"matchLabels": want}, objects.labels(p))
                                and (p.get("status") or {}).get("phase") == "Running"} - {None})
                strategy = ((obj.get("spec") or {}).get("updateStrategy") or {}).get("type") if kind == "DaemonSet" else None
                workloads.append(Workload(ref=ObjectRef(kind=kind, name=meta["name"], namespace=ns), node_selector=sel,
                                          path=CRONJOB_SELECTOR_PATH if kind == "CronJob" else SELECTOR_PATH,
                                          replicas=int((obj.get("spec") or {}).get("replicas") or 0),
                                          required_anti_affinity=_anti_affinity(tspec), running_nodes=nodes,
                                          update_strategy=strategy or ("RollingUpdate" if kind == "DaemonSet" else None)))
        namespaces = [NamespaceSelector(ref=ObjectRef(kind="Namespace", name=objects.meta(n)["name"]),
                                        node_selector=objects.annotations(n)[NS_ANNOTATION])
                      for n in gw.list("Namespace") if objects.annotations(n).get(NS_ANNOTATION)]
        nodes_ = [SelectorNode(name=objects.meta(n)["name"], labels=objects.labels(n),
                               schedulable=not (n.get("spec") or {}).get("unschedulable"))
                  for n in gw.list_nodes()]
        return ScanResult(workloads=workloads, namespaces=namespaces, nodes=sorted(nodes_, key=lambda n: n.name))

    @activity.defn(name=READ_ROLLOUT, no_thread_cancel_exception=True)
    def read_rollout(self, input: RolloutInput) -> RolloutState:
        """Where the rollout of ``input.ref`` stands (module doc)."""
        obj = self.gateway.get(input.ref.kind, input.ref.name, input.ref.namespace)
        st, spec = obj.get("status") or {}, obj.get("spec") or {}
        gen = (obj.get("metadata") or {}).get("generation")
        replicas = int(spec.get("replicas") or 0)
        kind = input.ref.kind
        if kind == "DeploymentConfig":
            latest = int(st.get("latestVersion") or 0)
            prog = _condition(obj, "Progressing")
            moved = input.after_version is None or latest > input.after_version
            if prog.get("reason") == "ProgressDeadlineExceeded" and moved:
                return RolloutState(failed=True, detail=prog.get("message", "ProgressDeadlineExceeded"), latest_version=latest)
            done = (moved and prog.get("reason") == "NewReplicationControllerAvailable"
                    and int(st.get("availableReplicas") or 0) >= replicas and int(st.get("updatedReplicas") or 0) >= replicas)
            return RolloutState(done=done, latest_version=latest, detail=f"version {latest}: {prog.get('reason') or 'no Progressing'}; "
                                f"available {st.get('availableReplicas', 0)}/{replicas}")
        if kind == "DaemonSet":
            want = int(st.get("desiredNumberScheduled") or 0)
            old = _old_template_pods(obj, self.gateway.list("Pod", input.ref.namespace))
            on_delete = (spec.get("updateStrategy") or {}).get("type") == "OnDelete"
            done = (int(st.get("observedGeneration") or 0) >= int(gen or 0) and int(st.get("updatedNumberScheduled") or 0) == want
                    and int(st.get("numberAvailable") or 0) == want and not old)
            return RolloutState(done=done, generation=gen, on_delete=on_delete, old_pods=old, desired=want,
                                available=int(st.get("numberAvailable") or 0),
                                detail=f"updated {st.get('updatedNumberScheduled', 0)}/{want}, available {st.get('numberAvailable', 0)}"
                                + (f", {len(old)} pod(s) on the old template" if old else ""))
        if kind == "CronJob":
            return RolloutState(done=True, generation=gen, detail="CronJob: its next Job uses the new template")
        updated = int(st.get("updatedReplicas") or 0)
        ready = int(st.get("availableReplicas" if kind == "Deployment" else "readyReplicas") or 0)
        observed = int(st.get("observedGeneration") or 0) >= int(gen or 0)
        if kind not in ("Deployment", "StatefulSet"):  # an unowned RC/RS: no rollout, its pods are replaced by hand
            return RolloutState(done=True, detail=f"{kind} has no rollout")
        return RolloutState(done=observed and updated == replicas and ready == replicas, generation=gen,
                            detail=f"updated {updated}/{replicas}, ready {ready}")

    @activity.defn(name=READ_POD_STATES, no_thread_cancel_exception=True)
    def read_pod_states(self, input: ScanInput) -> PodStates:
        """Every non-mirror pod with its phase; a Pending pod carries its latest FailedScheduling
        message (from the namespace's events). Heartbeats while it reads (:func:`activities.context.beating`)."""
        with beating("pod states"):
            return self._pod_states()

    def _pod_states(self) -> PodStates:
        gw = self.gateway
        out: list[PodState] = []
        events: dict[str, list[dict[str, Any]]] = {}
        for p in gw.list("Pod"):
            if objects.is_mirror_pod(p):
                continue
            meta, st = objects.meta(p), p.get("status") or {}
            phase = st.get("phase") or "Unknown"
            message = None
            if phase == "Pending":
                ns = meta.get("namespace", "")
                if ns not in events:
                    events[ns] = gw.list_events(ns, field_selector="reason=FailedScheduling")
                message = objects.latest_failed_scheduling_message(events[ns], meta.get("name"))
                if message is None:
                    cond = _condition(p, "PodScheduled")
                    message = cond.get("message") if cond.get("status") == "False" else None
            out.append(PodState(key=objects.pod_key(p), phase=phase, node=(p.get("spec") or {}).get("nodeName"), message=message))
        return PodStates(pods=out)


def make_node_selector_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The nodeSelector-migration activities for a Worker, bound to ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return NodeSelectorActivities(factory).activities()  # type: ignore[arg-type]
