"""Activities of the MachineConfig rollout: lockkeeper standing in for the
machine-config-controller's node, drain and pool logic.

Every activity is a synchronous function (the ``kubernetes`` client blocks), run on the
worker's ThreadPoolExecutor, registered under the names of the table in
``notes/workflow-design.md``. They take one model of :mod:`activities.models` and return one.
They are idempotent (read first, write only what differs) so a retried attempt never
double-applies. They reach the cluster only through :class:`activities.k8s.KubeGateway`.

Errors: conditions no retry can fix are raised as non-retryable
``ApplicationError(type=...)`` (``UnknownPool``, ``MissingConfig``, ``ConfigOfOtherPool``,
``ConfigTooOld``, ``NoNodes``, ``NodeNotFound``, ``PoolsNotSettled``, ``KubeconfigError``);
API errors (:mod:`activities.errors`) propagate with their class name as failure type and are
retried per the caller's retry policy.

Sources: MCO ``pkg/controller/drain/drain_controller.go`` (drain then lastAppliedDrain),
``pkg/daemon/drain.go``, kubectl ``pkg/drain/filters.go`` (which pods a drain skips) and
``pkg/drain/drain.go`` (evict, then wait for each pod to be gone or replaced by a new UID).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from activities.errors import (
    Conflict,
    Gone,
    KubeconfigError,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    Unavailable,
)
from activities.k8s import KubeGateway
from activities.models import (
    ANN_CORDONED_BY,
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_REASON,
    ANN_STATE,
    POOL_LABEL_PREFIX,
    ZONE_LABEL,
    BlockedPod,
    CordonInput,
    CordonResult,
    DaemonState,
    DeleteAllPodsInput,
    DeleteBlockingPodsInput,
    DeleteBlockingPodsResult,
    DeleteAllPodsResult,
    DrainInput,
    DrainReport,
    DrainResult,
    NodeInfo,
    PDBReport,
    PendingPodReport,
    PodsReadyInput,
    PodsReadyResult,
    PoolInfo,
    PoolsStatusInput,
    PoolsStatusResult,
    PoolStatus,
    PreflightInput,
    PreflightResult,
    ReadNodeInput,
    RecordEventInput,
    SetNetworkTypeInput,
    SetNetworkTypeResult,
    SetNodeAnnotationsInput,
    UncordonInput,
    UncordonResult,
    WaitForNodeInput,
    WaitForNodeResult,
)

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
#: How often long-running activities heartbeat (seconds). Also the longest a watch request
#: lasts, so a cancellation is noticed within this time even on a silent node.
HEARTBEAT_INTERVAL_SECONDS = 2.0
#: A Node update that loses a race (409) is re-read and retried this many times.
_CONFLICT_RETRIES = 5


# --- pure helpers: objects -> models ---------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 timestamp (``2024-05-01T10:00:00Z``, optional fraction) -> aware datetime."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return _meta(obj).get("annotations") or {}


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return _meta(obj).get("labels") or {}


def _condition(obj: dict[str, Any], type_: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return str(cond.get("status"))
    return None


def pool_of_node_labels(labels: dict[str, str]) -> str | None:
    """The pool a node's role labels suggest: a custom role before ``worker`` (as MCO pools
    for custom roles select nodes that are also workers), ``master`` first of all."""
    roles = sorted(k[len(POOL_LABEL_PREFIX) :] for k in labels if k.startswith(POOL_LABEL_PREFIX))
    if not roles:
        return None
    if "master" in roles:
        return "master"
    custom = [r for r in roles if r not in ("worker", "control-plane")]
    return custom[0] if custom else roles[0]


def node_info(obj: dict[str, Any], pool: str | None = None) -> NodeInfo:
    """A Node JSON object -> :class:`NodeInfo` (MCO annotations, Ready, unschedulable, ...)."""
    meta = _meta(obj)
    ann = _annotations(obj)
    labels = _labels(obj)
    return NodeInfo(
        name=meta.get("name", ""),
        pool=pool or pool_of_node_labels(labels),
        zone=labels.get(ZONE_LABEL),
        created=parse_time(meta.get("creationTimestamp")),
        current_config=ann.get(ANN_CURRENT_CONFIG),
        desired_config=ann.get(ANN_DESIRED_CONFIG),
        state=ann.get(ANN_STATE),
        reason=ann.get(ANN_REASON),
        desired_drain=ann.get(ANN_DESIRED_DRAIN),
        last_applied_drain=ann.get(ANN_LAST_APPLIED_DRAIN),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        ready=_condition(obj, "Ready") == "True",
        cordoned_by=ann.get(ANN_CORDONED_BY),
        resource_version=meta.get("resourceVersion"),
    )


def node_summary(info: NodeInfo) -> dict[str, Any]:
    """The small JSON summary of a node sent as heartbeat details."""
    return {
        "node": info.name,
        "state": info.state,
        "current_config": info.current_config,
        "desired_config": info.desired_config,
        "desired_drain": info.desired_drain,
        "last_applied_drain": info.last_applied_drain,
        "unschedulable": info.unschedulable,
        "ready": info.ready,
        "resource_version": info.resource_version,
    }


def _quote_values(values: Iterable[Any]) -> str:
    return ",".join(str(v) for v in values)


def label_selector_string(selector: dict[str, Any] | None) -> str | None:
    """A ``metav1.LabelSelector`` -> the query-string form (``a=b,c in (d,e),!f``).

    Returns None for a nil selector (matches nothing) and ``""`` for an empty one (matches
    everything). Raises ValueError for an unknown operator.
    """
    if selector is None:
        return None
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({_quote_values(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({_quote_values(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise ValueError(f"unknown label selector operator {op!r}")
    return ",".join(parts)


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics: nil matches nothing, empty matches everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# --- pure helpers: drain ---------------------------------------------------------------------


@dataclass(frozen=True)
class PodDisposition:
    """What a drain does with one pod: ``action`` is ``evict``, ``wait`` (already terminating:
    only wait for it), ``skip`` (DaemonSet-owned or mirror pod: left alone) or ``refuse`` (it
    cannot be removed with these options; ``reason`` says why, in kubectl's words)."""

    action: str
    reason: str = ""


def pod_key(pod: dict[str, Any]) -> str:
    """``namespace/name``."""
    meta = _meta(pod)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in _meta(pod).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def is_mirror_pod(pod: dict[str, Any]) -> bool:
    """A static pod's API mirror (kubelet annotation ``kubernetes.io/config.mirror``)."""
    return MIRROR_POD_ANNOTATION in _annotations(pod)


def is_finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


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
    if is_mirror_pod(pod):
        return PodDisposition("skip", "mirror pod")
    if _meta(pod).get("deletionTimestamp"):
        return PodDisposition("wait", "already terminating")
    if is_finished(pod):
        return PodDisposition("evict", "finished")
    ctrl = controller_of(pod)
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
    meta = _meta(pdb)
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


def matching_pdbs(pod: dict[str, Any], pdbs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The budgets of the pod's namespace whose selector matches its labels."""
    ns = _meta(pod).get("namespace")
    labels = _labels(pod)
    return [
        p for p in pdbs if _meta(p).get("namespace") == ns and selector_matches((p.get("spec") or {}).get("selector"), labels)
    ]


def _event_time(event: dict[str, Any]) -> datetime | None:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        _meta(event).get("creationTimestamp"),
    ):
        parsed = parse_time(value)
        if parsed is not None:
            return parsed
    return None


def latest_failed_scheduling_message(events: Iterable[dict[str, Any]], pod_name: str | None = None) -> str | None:
    """The message of the newest ``FailedScheduling`` Event (by series.lastObservedTime,
    lastTimestamp, eventTime, then creationTimestamp; ties, common at one-second timestamps,
    go to the higher resourceVersion), optionally only events about ``pod_name``."""
    best: tuple[tuple[datetime, int], dict[str, Any]] | None = None
    floor = datetime.min
    for ev in events:
        if ev.get("reason") != "FailedScheduling":
            continue
        if pod_name is not None and (ev.get("involvedObject") or {}).get("name") != pod_name:
            continue
        when = _event_time(ev)
        rv = str(_meta(ev).get("resourceVersion") or "")
        key = (when.replace(tzinfo=None) if when is not None else floor, int(rv) if rv.isdigit() else 0)
        if best is None or key >= best[0]:
            best = (key, ev)
    return None if best is None else best[1].get("message")


def replacement_candidates(blocked: dict[str, Any], pending: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pending pods that would replace ``blocked``: same namespace and same controller
    (by uid, or kind+name when uids are absent)."""
    ctrl = controller_of(blocked)
    if ctrl is None:
        return []
    ns = _meta(blocked).get("namespace")
    out = []
    for pod in pending:
        if _meta(pod).get("namespace") != ns or pod_key(pod) == pod_key(blocked):
            continue
        if (pod.get("status") or {}).get("phase") != "Pending":
            continue
        other = controller_of(pod)
        if other is None:
            continue
        if ctrl.get("uid") and other.get("uid"):
            same = ctrl["uid"] == other["uid"]
        else:
            same = (ctrl.get("kind"), ctrl.get("name")) == (other.get("kind"), other.get("name"))
        if same:
            out.append(pod)
    return out


def pool_status(mcp: dict[str, Any]) -> PoolStatus:
    """A MachineConfigPool -> :class:`PoolStatus` (conditions Updated/Updating/Degraded)."""
    status = mcp.get("status") or {}
    return PoolStatus(
        name=_meta(mcp).get("name", ""),
        updated=_condition(mcp, "Updated") == "True",
        updating=_condition(mcp, "Updating") == "True",
        degraded=_condition(mcp, "Degraded") == "True",
        machine_count=int(status.get("machineCount") or 0),
        updated_machine_count=int(status.get("updatedMachineCount") or 0),
        ready_machine_count=int(status.get("readyMachineCount") or 0),
        degraded_machine_count=int(status.get("degradedMachineCount") or 0),
    )


def config_pool(mc: dict[str, Any], known_pools: Iterable[str]) -> str | None:
    """The pool a rendered MachineConfig belongs to: its MachineConfigPool ownerReference, else
    the longest pool name ``P`` with ``rendered-P-`` as prefix. None if neither says."""
    for ref in _meta(mc).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == "MachineConfigPool" and ref.get("name"):
            return str(ref["name"])
    name = _meta(mc).get("name", "")
    matches = [p for p in known_pools if name.startswith(f"rendered-{p}-")]
    return max(matches, key=len) if matches else None


def newest_rendered_config(pool: str, machineconfigs: Iterable[dict[str, Any]], known_pools: Iterable[str]) -> dict[str, Any] | None:
    """The newest (creationTimestamp, then name) ``rendered-<pool>-*`` MachineConfig of ``pool``."""
    known = list(known_pools)
    mine = [
        mc for mc in machineconfigs if _meta(mc).get("name", "").startswith("rendered-") and config_pool(mc, known) == pool
    ]
    if not mine:
        return None
    return max(mine, key=lambda mc: (_meta(mc).get("creationTimestamp") or "", _meta(mc).get("name", "")))


def _pool_info(mcp: dict[str, Any], target: dict[str, Any], nodes: list[dict[str, Any]]) -> PoolInfo:
    name = _meta(mcp).get("name", "")
    spec = mcp.get("spec") or {}
    return PoolInfo(
        name=name,
        target_config=_meta(target).get("name", ""),
        target_created=parse_time(_meta(target).get("creationTimestamp")),
        spec_max_unavailable=spec.get("maxUnavailable"),
        node_selector=dict((spec.get("nodeSelector") or {}).get("matchLabels") or {}),
        nodes=[node_info(n, pool=name) for n in nodes],
        conditions={
            str(c.get("type")): str(c.get("status"))
            for c in (mcp.get("status") or {}).get("conditions") or []
            if isinstance(c, dict)
        },
    )


def _fail(type_: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=type_, non_retryable=True)


# --- activity-context helpers ----------------------------------------------------------------


def _heartbeat(details: Any) -> None:
    if activity.in_activity():
        activity.heartbeat(details)


def _check_cancelled() -> None:
    if activity.in_activity() and activity.is_cancelled():
        raise CancelledError("activity cancelled")


def _pause(seconds: float) -> None:
    """Sleep that ends early (and raises) when the activity is cancelled."""
    if activity.in_activity():
        activity.wait_for_cancelled_sync(seconds)
        _check_cancelled()
    else:
        time.sleep(seconds)


def _log() -> Any:
    return activity.logger


# --- the activities --------------------------------------------------------------------------


class ClusterActivities:
    """The MachineConfig rollout's activities, bound to one cluster.

    ``gateway_factory`` builds the :class:`KubeGateway` (called once, lazily, on the first
    activity; a failure is retried on the next activity). Register the bound methods, e.g.
    ``Worker(..., activities=ClusterActivities(factory).activities(),
    activity_executor=ThreadPoolExecutor(...))``.
    """

    def __init__(self, gateway_factory: Callable[[], KubeGateway]) -> None:
        self._factory = gateway_factory
        self._gateway: KubeGateway | None = None
        self._lock = threading.Lock()

    @property
    def gateway(self) -> KubeGateway:
        """The gateway; a kubeconfig problem is a non-retryable ``KubeconfigError``."""
        if self._gateway is None:
            with self._lock:
                if self._gateway is None:
                    try:
                        self._gateway = self._factory()
                    except KubeconfigError as exc:
                        raise _fail("KubeconfigError", str(exc)) from None
        return self._gateway

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class, bound, for a Worker's ``activities=``."""
        return [
            self.preflight_machineconfig_rollout,
            self.read_node,
            self.set_node_annotations,
            self.wait_for_node,
            self.cordon_node,
            self.uncordon_node,
            self.drain_node,
            self.record_node_event,
            self.get_pools_status,
            self.check_pods_ready,
            self.delete_all_pods,
            self.set_network_type,
            self.delete_blocking_pods,
        ]

    # --- reads ----------------------------------------------------------------------------------

    def _node(self, name: str) -> dict[str, Any]:
        try:
            return self.gateway.get_node(name)
        except NotFound:
            raise _fail("NodeNotFound", f"node {name} not found") from None

    @activity.defn(name="preflight_machineconfig_rollout")
    def preflight_machineconfig_rollout(self, input: PreflightInput) -> PreflightResult:
        """Resolve pools, target rendered configs and nodes; change nothing (GETs and LISTs only).

        Raises non-retryable ApplicationErrors: ``UnknownPool`` (lists the known pools),
        ``MissingConfig`` (explicit config absent, or a pool without any rendered config),
        ``ConfigOfOtherPool`` (explicit config owned by / named for another pool),
        ``ConfigTooOld`` (target created before ``not_before``), ``NoNodes`` (an explicitly
        requested pool whose nodeSelector matches no node).
        """
        gw = self.gateway
        try:
            mcps = {(_meta(p).get("name") or ""): p for p in gw.list_machineconfigpools()}
        except NotFound:
            raise _fail("UnknownPool", "this cluster serves no MachineConfigPools (not OpenShift?)") from None
        known = sorted(mcps)
        requested = list(dict.fromkeys(input.pools))
        unknown = [p for p in [*requested, *input.target_configs] if p not in mcps]
        if unknown:
            raise _fail(
                "UnknownPool",
                f"unknown MachineConfigPool(s): {', '.join(dict.fromkeys(unknown))}; known pools: {', '.join(known) or 'none'}",
            )
        machineconfigs = gw.list_machineconfigs()
        by_name = {_meta(mc).get("name"): mc for mc in machineconfigs}
        candidates = requested or known
        result: list[PoolInfo] = []
        for pool in candidates:
            explicit = input.target_configs.get(pool)
            if explicit:
                target = by_name.get(explicit)
                if target is None:
                    raise _fail("MissingConfig", f"MachineConfig {explicit} (target of pool {pool}) does not exist")
                owner = config_pool(target, known)
                if owner != pool:
                    whose = f"pool {owner}" if owner else "no pool (not a rendered-<pool>- config)"
                    raise _fail("ConfigOfOtherPool", f"MachineConfig {explicit} belongs to {whose}, not to pool {pool}")
            else:
                target = newest_rendered_config(pool, machineconfigs, known)
                if target is None:
                    raise _fail("MissingConfig", f"pool {pool} has no rendered-{pool}-* MachineConfig")
            created = parse_time(_meta(target).get("creationTimestamp"))
            if input.not_before is not None and (created is None or created < input.not_before):
                raise _fail(
                    "ConfigTooOld",
                    f"target {_meta(target).get('name')} of pool {pool} was created at "
                    f"{_meta(target).get('creationTimestamp')}, before not_before {input.not_before.isoformat()}",
                )
            selector = label_selector_string((mcps[pool].get("spec") or {}).get("nodeSelector"))
            nodes = [] if selector is None else gw.list_nodes(label_selector=selector or None)
            info = _pool_info(mcps[pool], target, nodes)
            if not nodes:
                if requested:
                    raise _fail("NoNodes", f"pool {pool}'s nodeSelector ({selector or 'nil'}) matches no node")
                continue
            if not requested and all(
                n.current_config == info.target_config and n.desired_config in (None, info.target_config) for n in info.nodes
            ):
                continue
            result.append(info)
        network_type: str | None = None
        try:
            net = gw.get_network_config()
            network_type = (net.get("status") or {}).get("networkType") or (net.get("spec") or {}).get("networkType")
        except NotFound:
            network_type = None
        _log().info(
            "preflight: "
            + (", ".join(f"pool {p.name} -> {p.target_config} ({len(p.nodes)} nodes)" for p in result) or "nothing to roll"),
        )
        return PreflightResult(pools=result, network_type=network_type)

    @activity.defn(name="read_node")
    def read_node(self, input: ReadNodeInput) -> NodeInfo:
        """The Node as :class:`NodeInfo`. Raises non-retryable ``NodeNotFound``."""
        return node_info(self._node(input.node))

    # --- node writes ----------------------------------------------------------------------------

    @activity.defn(name="set_node_annotations")
    def set_node_annotations(self, input: SetNodeAnnotationsInput) -> NodeInfo:
        """Set/remove annotations with one merge patch holding only the keys that differ (no
        write at all when none does). Returns the Node after the change."""
        obj = self._node(input.node)
        current = _annotations(obj)
        diff: dict[str, str | None] = {}
        for key, value in input.annotations.items():
            if value is None:
                if key in current:
                    diff[key] = None
            elif current.get(key) != value:
                diff[key] = value
        if not diff:
            return node_info(obj)
        try:
            patched = self.gateway.patch_node(input.node, {"metadata": {"annotations": diff}})
        except NotFound:
            raise _fail("NodeNotFound", f"node {input.node} not found") from None
        _log().info(f"node {input.node}: annotations set {diff}")
        return node_info(patched)

    @activity.defn(name="cordon_node")
    def cordon_node(self, input: CordonInput) -> CordonResult:
        """Cordon for ``owner``: ``spec.unschedulable=true`` and ``lockkeeper.io/cordoned-by=owner``
        in ONE patch conditional on the resourceVersion read (409 -> re-read, retry).

        Already unschedulable: no write; ``cordoned_by_us`` is True only when the annotation
        already names ``owner`` (a retry after our own cordon), False when somebody else
        cordoned it (then lockkeeper never uncordons it).
        """
        for _ in range(_CONFLICT_RETRIES):
            obj = self._node(input.node)
            info = node_info(obj)
            if info.unschedulable:
                return CordonResult(cordoned_by_us=info.cordoned_by == input.owner, was_unschedulable=True)
            patch = {
                "metadata": {"annotations": {ANN_CORDONED_BY: input.owner}, "resourceVersion": info.resource_version},
                "spec": {"unschedulable": True},
            }
            try:
                self.gateway.patch_node(input.node, patch)
            except NotFound:
                raise _fail("NodeNotFound", f"node {input.node} not found") from None
            except Conflict:
                continue
            _log().info(f"node {input.node}: cordoned for {input.owner}")
            return CordonResult(cordoned_by_us=True, was_unschedulable=False)
        raise _ConflictExhausted(f"node {input.node} kept changing while cordoning")

    @activity.defn(name="uncordon_node")
    def uncordon_node(self, input: UncordonInput) -> UncordonResult:
        """Uncordon only if ``lockkeeper.io/cordoned-by == owner``, removing the annotation in
        the same conditional patch.

        ``uncordoned`` is True when the node ends schedulable (also when it already was; a stale
        annotation of ours is then removed). A node cordoned by somebody else stays cordoned:
        ``uncordoned`` False and ``left_cordoned_reason`` says by whom.
        """
        for _ in range(_CONFLICT_RETRIES):
            info = node_info(self._node(input.node))
            if not info.unschedulable:
                if info.cordoned_by == input.owner:
                    self._patch_if_present(input.node, {"metadata": {"annotations": {ANN_CORDONED_BY: None}}})
                return UncordonResult(uncordoned=True)
            if info.cordoned_by != input.owner:
                who = info.cordoned_by or "somebody else (no lockkeeper.io/cordoned-by annotation)"
                return UncordonResult(uncordoned=False, left_cordoned_reason=f"node {input.node} was cordoned by {who}")
            patch = {
                "metadata": {"annotations": {ANN_CORDONED_BY: None}, "resourceVersion": info.resource_version},
                "spec": {"unschedulable": None},
            }
            try:
                self.gateway.patch_node(input.node, patch)
            except NotFound:
                raise _fail("NodeNotFound", f"node {input.node} not found") from None
            except Conflict:
                continue
            _log().info(f"node {input.node}: uncordoned (cordoned by {input.owner})")
            return UncordonResult(uncordoned=True)
        raise _ConflictExhausted(f"node {input.node} kept changing while uncordoning")

    def _patch_if_present(self, node: str, patch: dict[str, Any]) -> None:
        try:
            self.gateway.patch_node(node, patch)
        except NotFound:
            raise _fail("NodeNotFound", f"node {node} not found") from None

    # --- watch ----------------------------------------------------------------------------------

    @activity.defn(name="wait_for_node")
    def wait_for_node(self, input: WaitForNodeInput) -> WaitForNodeResult:
        """Watch the Node until the condition holds, the daemon degrades, or ``timeout_seconds``.

        Condition: ``annotations[annotation] == value`` (``kind='annotation'``) or
        ``currentConfig == value and state == Done`` (``kind='config_done'``), or any
        ``any_of`` pair. ``degraded`` is set whenever the daemon's state is Degraded or
        Unreconcilable (callers check it first: it may coincide with ``matched``).

        One LIST (fieldSelector metadata.name=NODE) then WATCH from its resourceVersion in
        windows of :data:`HEARTBEAT_INTERVAL_SECONDS`, heartbeating the last observed node
        summary between events; an expired resourceVersion (410) or a broken stream re-lists.
        A change is seen as soon as the API server sends it. Raises non-retryable
        ``NodeNotFound`` when the node does not exist or is deleted.
        """
        deadline = time.monotonic() + max(0.0, input.timeout_seconds)
        obj, info, rv = self._list_node(input.node)
        last_beat = 0.0
        while True:
            result = _wait_outcome(input, obj, info)
            if result is not None:
                return result
            now = time.monotonic()
            if now >= deadline:
                return WaitForNodeResult(node=info, matched=False, timed_out=True)
            if now - last_beat >= HEARTBEAT_INTERVAL_SECONDS:
                _heartbeat(node_summary(info))
                last_beat = now
            _check_cancelled()
            window = max(1, min(int(HEARTBEAT_INTERVAL_SECONDS), int(deadline - now + 0.999)))
            try:
                for type_, event_obj in self.gateway.watch_node(input.node, resource_version=rv, timeout_seconds=window):
                    rv = _meta(event_obj).get("resourceVersion") or rv
                    if type_ == "BOOKMARK":
                        continue
                    if type_ == "DELETED":
                        raise _fail("NodeNotFound", f"node {input.node} was deleted")
                    if type_ in ("ADDED", "MODIFIED"):
                        obj, info = event_obj, node_info(event_obj)
                        if _wait_outcome(input, obj, info) is not None:
                            break
                    if time.monotonic() - last_beat >= HEARTBEAT_INTERVAL_SECONDS:
                        _heartbeat(node_summary(info))
                        last_beat = time.monotonic()
            except Gone:
                obj, info, rv = self._list_node(input.node)
            except Unavailable as exc:
                _log().warning(f"node {input.node}: watch broke ({exc}); re-listing")
                _pause(0.5)
                obj, info, rv = self._list_node(input.node)

    def _list_node(self, name: str) -> tuple[dict[str, Any], NodeInfo, str | None]:
        items, rv = self.gateway.list_nodes_with_rv(field_selector=f"metadata.name={name}")
        if not items:
            raise _fail("NodeNotFound", f"node {name} not found")
        return items[0], node_info(items[0]), rv

    # --- drain ----------------------------------------------------------------------------------

    @activity.defn(name="drain_node")
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
        gw = self.gateway
        node = input.node
        pods = gw.list_pods(field_selector=f"spec.nodeName={node}")
        waiting: dict[str, str] = {}
        evicted: list[str] = []
        refused: list[str] = []
        blocked: list[tuple[dict[str, Any], KubeError]] = []
        for i, pod in enumerate(pods):
            disposition = classify_pod_for_drain(
                pod,
                ignore_daemonsets=input.ignore_daemonsets,
                delete_emptydir_data=input.delete_emptydir_data,
                force=input.force,
            )
            key = pod_key(pod)
            if disposition.action == "skip":
                continue
            if disposition.action == "refuse":
                refused.append(f"{key}: {disposition.reason}")
                continue
            if disposition.action == "wait":
                waiting[key] = _meta(pod).get("uid", "")
                continue
            meta = _meta(pod)
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
            if i % 20 == 19:
                _heartbeat({"node": node, "evicted": len(evicted), "blocked": len(blocked)})
                _check_cancelled()
        report = self._blocked_report(blocked) if blocked else None
        if evicted or blocked or refused:
            blocked_names = [pod_key(p) for p, _ in blocked]
            _log().info(
                f"node {node}: drain pass evicted {len(evicted)} pods"
                + (f", blocked by disruption budgets: {', '.join(blocked_names)}" if blocked else "")
                + (f", refused: {'; '.join(refused)}" if refused else "")
            )
        left = self._wait_pods_gone(node, waiting, input.wait_seconds, evicted, blocked)
        remaining = sorted(
            pod_key(p)
            for p in left
            if classify_pod_for_drain(
                p,
                ignore_daemonsets=input.ignore_daemonsets,
                delete_emptydir_data=input.delete_emptydir_data,
                force=input.force,
            ).action
            != "skip"
        )
        return DrainResult(done=not remaining, evicted=evicted, remaining=remaining, blocked=report, refused=refused)

    def _wait_pods_gone(
        self,
        node: str,
        waiting: dict[str, str],
        wait_seconds: float,
        evicted: list[str],
        blocked: list[tuple[dict[str, Any], KubeError]],
    ) -> list[dict[str, Any]]:
        """Poll the node's pods until every ``waiting`` pod (key -> uid) is gone or replaced,
        or ``wait_seconds`` passed. Returns the node's pods at the end."""
        deadline = time.monotonic() + max(0.0, wait_seconds)
        interval = 0.1
        last_beat = 0.0
        while True:
            pods = self.gateway.list_pods(field_selector=f"spec.nodeName={node}")
            present = {pod_key(p): _meta(p).get("uid", "") for p in pods}
            still = sorted(k for k, uid in waiting.items() if k in present and present[k] == uid)
            now = time.monotonic()
            if not still or now >= deadline:
                return pods
            if now - last_beat >= HEARTBEAT_INTERVAL_SECONDS:
                _heartbeat(
                    {
                        "node": node,
                        "evicted": len(evicted),
                        "blocked": [pod_key(p) for p, _ in blocked],
                        "waiting_for": still[:20],
                    }
                )
                last_beat = now
            _pause(min(interval, max(0.0, deadline - now)))
            # kubectl drain polls every second; half a second keeps the hand-off to the daemon
            # prompt (it is on the rollout's critical path) at one cheap indexed list per poll.
            interval = min(0.5, interval * 1.5)

    def _blocked_report(self, blocked: list[tuple[dict[str, Any], KubeError]]) -> DrainReport:
        """Budgets and Pending replacements for the pods whose eviction was refused."""
        gw = self.gateway
        pdbs_by_ns: dict[str, list[dict[str, Any]]] = {}
        pending_by_ns: dict[str, list[dict[str, Any]]] = {}
        blocked_pods: list[BlockedPod] = []
        replacements: dict[str, PendingPodReport] = {}
        for pod, exc in blocked:
            ns = _meta(pod).get("namespace", "")
            if ns not in pdbs_by_ns:
                pdbs_by_ns[ns] = gw.list_pdbs(ns)
                pending_by_ns[ns] = gw.list_pods(ns, field_selector="status.phase=Pending")
            causes = [str(c.get("message")) for c in exc.causes if c.get("message")]
            blocked_pods.append(
                BlockedPod(
                    namespace=ns,
                    name=_meta(pod).get("name", ""),
                    message=exc.message,
                    causes=causes,
                    pdbs=[pdb_report(p) for p in matching_pdbs(pod, pdbs_by_ns[ns])],
                )
            )
            for candidate in replacement_candidates(pod, pending_by_ns[ns]):
                key = pod_key(candidate)
                if key in replacements:
                    continue
                name = _meta(candidate).get("name", "")
                events = gw.list_events(ns, field_selector=f"involvedObject.name={name}")
                replacements[key] = PendingPodReport(
                    namespace=ns,
                    name=name,
                    message=latest_failed_scheduling_message(events, name),
                    replaces=pod_key(pod),
                )
        return DrainReport(blocked_pods=blocked_pods, pending_replacements=list(replacements.values()))

    # --- events ---------------------------------------------------------------------------------

    @activity.defn(name="record_node_event")
    def record_node_event(self, input: RecordEventInput) -> None:
        """Create a core/v1 Event (namespace ``default``, involvedObject kind Node with the
        node's uid, source component ``lockkeeper``). Raises non-retryable ``NodeNotFound``."""
        obj = self._node(input.node)
        self.gateway.create_node_event(
            node=input.node,
            node_uid=_meta(obj).get("uid"),
            reason=input.reason,
            message=input.message,
            type=input.type,
        )

    @activity.defn(name="delete_blocking_pods")
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
                raise _fail("InvalidInput", f"pod {key!r} is not namespace/name")
            try:
                pod = gw.get_pod(namespace, name)
                if (pod.get("spec") or {}).get("nodeName") != input.node:
                    gone.append(key)
                    continue
                if _meta(pod).get("deletionTimestamp"):
                    deleted.append(key)
                    continue
                gw.delete_pod(namespace, name)
            except NotFound:
                gone.append(key)
                continue
            deleted.append(key)
        _log().warning(
            f"node {input.node}: deleted {', '.join(deleted) or 'no pod'} despite their disruption budgets "
            f"(decision delete-pod by {input.decided_by}" + (f": {input.comment}" if input.comment else "") + ")"
        )
        return DeleteBlockingPodsResult(deleted=deleted, gone=gone)

    # --- pools and cluster health ---------------------------------------------------------------

    @activity.defn(name="get_pools_status")
    def get_pools_status(self, input: PoolsStatusInput) -> PoolsStatusResult:
        """MachineConfigPool conditions and machine counts (all pools when ``pools`` is empty).
        Raises non-retryable ``UnknownPool`` for a name that does not exist."""
        mcps = {(_meta(p).get("name") or ""): p for p in self.gateway.list_machineconfigpools()}
        names = list(dict.fromkeys(input.pools)) or sorted(mcps)
        unknown = [n for n in names if n not in mcps]
        if unknown:
            raise _fail("UnknownPool", f"unknown MachineConfigPool(s): {', '.join(unknown)}; known pools: {', '.join(sorted(mcps))}")
        return PoolsStatusResult(pools=[pool_status(mcps[n]) for n in names])

    @activity.defn(name="check_pods_ready")
    def check_pods_ready(self, input: PodsReadyInput) -> PodsReadyResult:
        """Are the matching pods Ready (condition Ready=True, not terminating)?

        Finished pods (Succeeded/Failed: completed jobs) are not counted. With
        ``expect_per_node`` every Ready node of the cluster must also run one Ready matching pod
        (DaemonSet style); the others are listed in ``nodes_missing``.
        """
        pods = self.gateway.list_pods(input.namespace, label_selector=input.label_selector)
        return pods_ready(pods, self.gateway.list_nodes() if input.expect_per_node else None)

    @activity.defn(name="delete_all_pods")
    def delete_all_pods(self, input: DeleteAllPodsInput) -> DeleteAllPodsResult:
        """``oc delete pod -A --all`` minus ``exclude_namespaces``: graceful deletes (each pod's
        own grace period), mirror pods and pods already terminating left alone; a pod already
        gone counts as done. ``deleted`` counts the DELETE requests that succeeded."""
        excluded = set(input.exclude_namespaces)
        deleted = 0
        pods = self.gateway.list_pods()
        for i, pod in enumerate(pods):
            meta = _meta(pod)
            if meta.get("namespace") in excluded or is_mirror_pod(pod) or meta.get("deletionTimestamp"):
                continue
            try:
                self.gateway.delete_pod(meta.get("namespace", ""), meta.get("name", ""))
            except NotFound:
                continue
            deleted += 1
            if i % 50 == 49:
                _heartbeat({"deleted": deleted, "of": len(pods)})
                _check_cancelled()
        _log().info(f"deleted {deleted} pods (namespaces left alone: {', '.join(sorted(excluded)) or 'none'})")
        return DeleteAllPodsResult(deleted=deleted)

    @activity.defn(name="set_network_type")
    def set_network_type(self, input: SetNetworkTypeInput) -> SetNetworkTypeResult:
        """Set ``networks.config.openshift.io/cluster`` spec.networkType (merge patch).

        Guard (R1): raises non-retryable ``PoolsNotSettled`` naming every pool that is not
        Updated=True/Updating=False. No write when the type is already set.
        """
        pools = [pool_status(p) for p in self.gateway.list_machineconfigpools()]
        unsettled = [p for p in pools if not (p.updated and not p.updating)]
        if unsettled:
            names = ", ".join(
                f"{p.name} (updated={p.updated}, updating={p.updating}, degraded={p.degraded})" for p in unsettled
            )
            raise _fail("PoolsNotSettled", f"refusing to switch the network type while pools are not settled: {names}")
        try:
            net = self.gateway.get_network_config()
        except NotFound:
            raise _fail("NetworkConfigNotFound", "networks.config.openshift.io/cluster does not exist") from None
        previous = (net.get("spec") or {}).get("networkType")
        if previous == input.network_type:
            return SetNetworkTypeResult(changed=False, previous=previous)
        self.gateway.patch_network_config({"spec": {"networkType": input.network_type}})
        _log().info(f"network type switched from {previous} to {input.network_type}")
        return SetNetworkTypeResult(changed=True, previous=previous)


def pods_ready(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None) -> PodsReadyResult:
    """Pure core of ``check_pods_ready``: ``nodes`` None skips the per-node check."""
    considered = [p for p in pods if not is_finished(p)]
    not_ready = sorted(
        pod_key(p) for p in considered if _meta(p).get("deletionTimestamp") or _condition(p, "Ready") != "True"
    )
    missing: list[str] = []
    if nodes is not None:
        ready_on = {
            (p.get("spec") or {}).get("nodeName")
            for p in considered
            if not _meta(p).get("deletionTimestamp") and _condition(p, "Ready") == "True"
        }
        missing = sorted(
            _meta(n).get("name", "")
            for n in nodes
            if _condition(n, "Ready") == "True" and _meta(n).get("name") not in ready_on
        )
    return PodsReadyResult(ready=not not_ready and not missing, total=len(considered), not_ready=not_ready, nodes_missing=missing)


def _wait_outcome(input: WaitForNodeInput, obj: dict[str, Any], info: NodeInfo) -> WaitForNodeResult | None:
    """The wait's result if the Node ``obj`` (parsed as ``info``) ends it, else None."""
    matched = wait_condition_holds(input, _annotations(obj))
    if matched or info.degraded:
        return WaitForNodeResult(node=info, matched=matched, degraded=info.degraded)
    return None


def wait_condition_holds(input: WaitForNodeInput, annotations: dict[str, str]) -> bool:
    """True when a Node with these annotations satisfies the wait's main condition
    (``annotation == value``, or for ``config_done`` currentConfig == value and state Done)
    or one of the ``any_of`` pairs."""
    if input.kind == "config_done":
        if annotations.get(ANN_CURRENT_CONFIG) == input.value and annotations.get(ANN_STATE) == DaemonState.DONE:
            return True
    elif annotations.get(input.annotation) == input.value:
        return True
    return any(annotations.get(key) == value for key, value in input.any_of)


class _ConflictExhausted(Exception):
    """The node kept changing under our conditional patches; the activity is retried later."""


def make_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The activity list for a Worker, bound to ``gateway`` (or to a factory building it)."""
    if isinstance(gateway, KubeGateway):
        instance = gateway
        return ClusterActivities(lambda: instance).activities()
    return ClusterActivities(gateway).activities()
