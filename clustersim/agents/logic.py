"""Pure decision functions of the simulated controllers (no Store, no asyncio).

Each function takes plain Kubernetes objects (dicts as the API serves them) and
returns the status or decision a real controller would compute, so they can be
table-tested and reused by every agent. Sources are named per function.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clustersim.selectors import matches_label_selector_object
from kubeshared.mco import *  # noqa: F403  (the MCO annotation keys; the simulator's modules import them from here)


STATE_DONE = "Done"
STATE_WORKING = "Working"
STATE_REBOOTING = "Rebooting"
STATE_DEGRADED = "Degraded"
STATE_UNRECONCILABLE = "Unreconcilable"

# Marks a rendered MachineConfig that carries the OVN-Kubernetes host files (R1).
ANN_CARRIES_OVN = "clustersim.lockkeeper.io/carries-ovn"

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"

# Default scheduler filter order (kube-scheduler default plugins since 1.23:
# NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, ...). The first
# failing filter is the node's reason in the FitError message.
FILTERS_CURRENT = ("NodeUnschedulable", "TaintToleration", "NodeAffinity", "InterPodAffinity")
# kube-scheduler 1.19-1.21 (OKD 4.6-4.8) ran NodeAffinity before TaintToleration.
FILTERS_LEGACY = ("NodeUnschedulable", "NodeAffinity", "TaintToleration", "InterPodAffinity")
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
# Filters whose failure preemption can never resolve (UnschedulableAndUnresolvable upstream).
_UNRESOLVABLE = ("node(s) were unschedulable", "node(s) had untolerated taint", "node(s) didn't match Pod's node affinity")

# FailedScheduling wording styles (ScenarioOptions.scheduler_messages); see fit_error_message.
MESSAGES_CURRENT = "current"
MESSAGES_V1_11 = "v1.11"
# Current reason (prefix) -> the 1.11 predicate failure reason(s). InterPodAffinityMatches
# reports two reasons for a node that breaks the pod's anti-affinity: ErrPodAffinityNotMatch
# and ErrPodAntiAffinityRulesNotMatch, and FitError counts each.
_V1_11_REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("node(s) were unschedulable", ("node(s) were unschedulable",)),
    ("node(s) had untolerated taint", ("node(s) had taints that the pod didn't tolerate",)),
    ("node(s) didn't match Pod's node affinity", ("node(s) didn't match node selector",)),
    (REASON_ANTI_AFFINITY, ("node(s) didn't match pod affinity/anti-affinity", "node(s) didn't match pod anti-affinity rules")),
)


# ---------------------------------------------------------------- helpers


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` or an empty dict."""
    return obj.get("metadata") or {}


def spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` or an empty dict."""
    return obj.get("spec") or {}


def status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` or an empty dict."""
    return obj.get("status") or {}


def annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.annotations`` or an empty dict."""
    return obj.get("metadata", {}).get("annotations") or {}


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` or an empty dict."""
    return obj.get("metadata", {}).get("labels") or {}


def condition(obj: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    """The ``status.conditions`` entry of type ``ctype``, or None."""
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def set_condition(status: dict[str, Any], cond: dict[str, Any], now: str) -> None:
    """Upsert ``cond`` into ``status.conditions``; lastTransitionTime moves only on a status change."""
    conds = status.setdefault("conditions", [])
    for i, old in enumerate(conds):
        if old.get("type") == cond["type"]:
            ltt = old.get("lastTransitionTime") if old.get("status") == cond["status"] else now
            conds[i] = {**cond, "lastTransitionTime": ltt or now}
            return
    conds.append({**cond, "lastTransitionTime": now})


def match_node_selector(node_selector: Mapping[str, str] | None, lbls: Mapping[str, str]) -> bool:
    """PodSpec.nodeSelector (map, all pairs must match)."""
    return all(lbls.get(k) == v for k, v in (node_selector or {}).items())


def node_ready(node: Mapping[str, Any]) -> bool:
    """True when the Node's Ready condition is True."""
    c = condition(node, "Ready")
    return bool(c and c.get("status") == "True")


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """True when the Pod's Ready condition is True."""
    c = condition(pod, "Ready")
    return bool(c and c.get("status") == "True")


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """True once ``metadata.deletionTimestamp`` is set."""
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def pod_is_healthy(pod: Mapping[str, Any]) -> bool:
    """Disruption controller's notion: Ready and not terminating (k8s pkg/controller/disruption)."""
    return not is_terminating(pod) and pod_ready(pod)


# ---------------------------------------------------------------- MachineConfigPool


def _node_done(node: Mapping[str, Any]) -> bool:
    a = annotations(node)
    cur, des = a.get(ANN_CURRENT_CONFIG, ""), a.get(ANN_DESIRED_CONFIG, "")
    return bool(cur) and bool(des) and cur == des and a.get(ANN_STATE) == STATE_DONE


def _node_schedulable_ready(node: Mapping[str, Any]) -> bool:
    """MCO checkNodeReady: Ready True, DiskPressure/NetworkUnavailable not True, not cordoned."""
    for c in node.get("status", {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") != "True":
            return False
        if c.get("type") in ("DiskPressure", "NetworkUnavailable") and c.get("status") != "False":
            return False
    return not node.get("spec", {}).get("unschedulable", False)


def _node_mcd_failing(node: Mapping[str, Any]) -> bool:
    a = annotations(node)
    if a.get(ANN_CURRENT_CONFIG) == a.get(ANN_DESIRED_CONFIG):
        return False
    return a.get(ANN_STATE) in (STATE_DEGRADED, STATE_UNRECONCILABLE)


def compute_pool_status(pool: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], now: str) -> dict[str, Any]:
    """MachineConfigPool ``status`` from its nodes, as MCO ``pkg/controller/node/status.go``
    ``calculateStatus`` does (4.10+ semantics).

    - updated: current == desired == pool ``spec.configuration.name`` and state Done;
    - ready: updated and schedulable-ready (Ready, not cordoned);
    - unavailable: not schedulable-ready, or not Done unless the daemon is failing;
    - degraded: state Degraded or Unreconcilable (with desiredConfig set).
    Conditions Updated/Updating (messages "All nodes are updated with X" /
    "All nodes are updating to X"), NodeDegraded (reason "N nodes are reporting degraded
    status on sync", message 'Node X is reporting: "reason"' joined by ", "), Degraded.
    ``status.configuration`` moves to the spec's once every node is updated.
    ``now`` is the RFC 3339 time used for changed conditions.
    """
    target = (pool.get("spec", {}).get("configuration") or {}).get("name", "")
    old_status = pool.get("status") or {}
    updated = [n for n in nodes if _node_done(n) and annotations(n).get(ANN_CURRENT_CONFIG) == target]
    ready = [n for n in updated if _node_schedulable_ready(n)]
    unavailable = [
        n for n in nodes if not _node_schedulable_ready(n) or (not _node_done(n) and not _node_mcd_failing(n))
    ]
    degraded = [
        n
        for n in nodes
        if annotations(n).get(ANN_DESIRED_CONFIG)
        and annotations(n).get(ANN_STATE) in (STATE_DEGRADED, STATE_UNRECONCILABLE)
    ]
    reasons = [
        f'Node {n["metadata"]["name"]} is reporting: "{annotations(n)[ANN_REASON]}"'
        for n in degraded
        if annotations(n).get(ANN_REASON)
    ]
    status: dict[str, Any] = {
        "observedGeneration": pool.get("metadata", {}).get("generation", 1),
        "machineCount": len(nodes),
        "updatedMachineCount": len(updated),
        "readyMachineCount": len(ready),
        "unavailableMachineCount": len(unavailable),
        "degradedMachineCount": len(degraded),
        "configuration": dict(old_status.get("configuration") or pool.get("spec", {}).get("configuration") or {}),
        "conditions": [dict(c) for c in old_status.get("conditions") or []],
    }
    if "certExpirys" in old_status:  # from the ControllerConfig's certificates, not from the nodes
        status["certExpirys"] = [dict(c) for c in old_status["certExpirys"]]
    all_updated = len(updated) == len(nodes) and len(ready) == len(nodes) and not unavailable
    if all_updated:
        set_condition(status, _cond("Updated", "True", "", f"All nodes are updated with {target}"), now)
        set_condition(status, _cond("Updating", "False", "", ""), now)
        status["configuration"] = dict(pool.get("spec", {}).get("configuration") or {})
    else:
        set_condition(status, _cond("Updated", "False", "", ""), now)
        set_condition(status, _cond("Updating", "True", "", f"All nodes are updating to {target}"), now)
    if degraded:
        set_condition(
            status,
            _cond("NodeDegraded", "True", f"{len(degraded)} nodes are reporting degraded status on sync", ", ".join(reasons)),
            now,
        )
    else:
        set_condition(status, _cond("NodeDegraded", "False", "", ""), now)
    render_degraded = any(
        c.get("type") == "RenderDegraded" and c.get("status") == "True" for c in status["conditions"]
    )
    set_condition(status, _cond("Degraded", "True" if degraded or render_degraded else "False", "", ""), now)
    return status


def _cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


# ---------------------------------------------------------------- PodDisruptionBudget


def _resolve_int_or_percent(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        q, r = divmod(pct * total, 100)
        return q + (1 if round_up and r else 0)
    return int(text)


def compute_pdb_status(
    pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], now: str
) -> dict[str, Any]:
    """PodDisruptionBudget ``status`` as k8s ``pkg/controller/disruption`` computes it.

    ``pods`` are all pods of the PDB's namespace; those matching ``spec.selector`` are
    expected. currentHealthy counts Ready, non-terminating pods; desiredHealthy comes from
    minAvailable (int or percent, rounded up) or expectedPods - maxUnavailable (percent
    rounded up); disruptionsAllowed = max(0, currentHealthy - desiredHealthy). Entries in
    ``disruptedPods`` whose pod is gone or terminating are dropped (the eviction happened).
    Condition DisruptionAllowed: True/SufficientPods or False/InsufficientPods.
    """
    spec = pdb.get("spec") or {}
    selector = spec.get("selector")
    matching = [p for p in pods if matches_label_selector_object(selector, labels(p))]
    expected = len(matching)
    old = pdb.get("status") or {}
    live = {p["metadata"]["name"] for p in matching if not is_terminating(p)}
    # An evicted pod stays in disruptedPods until its deletion is observed; meanwhile it
    # does not count as healthy (upstream countHealthyPods skips it).
    disrupted = {k: v for k, v in (old.get("disruptedPods") or {}).items() if k in live}
    healthy = sum(1 for p in matching if pod_is_healthy(p) and p["metadata"]["name"] not in disrupted)
    if spec.get("minAvailable") is not None:
        desired = _resolve_int_or_percent(spec["minAvailable"], expected, round_up=True)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _resolve_int_or_percent(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = expected
    allowed = max(0, healthy - desired)
    status: dict[str, Any] = {
        "observedGeneration": pdb.get("metadata", {}).get("generation", 1),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "conditions": [dict(c) for c in old.get("conditions") or []],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    if allowed > 0:
        set_condition(status, _cond("DisruptionAllowed", "True", "SufficientPods", ""), now)
    else:
        set_condition(status, _cond("DisruptionAllowed", "False", "InsufficientPods", ""), now)
    for c in status["conditions"]:
        c["observedGeneration"] = status["observedGeneration"]
    return status


# ---------------------------------------------------------------- scheduler


def tolerates(tolerations: Sequence[Mapping[str, Any]] | None, taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: empty key + Exists tolerates everything; effect
    must match unless the toleration's effect is empty; operator Equal compares values."""
    for t in tolerations or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        key = t.get("key") or ""
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _node_affinity_ok(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    lbls = labels(node)
    if not match_node_selector(pod_spec.get("nodeSelector"), lbls):
        return False
    req = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not req:
        return True
    # nodeSelectorTerms are ORed; matchExpressions within a term are ANDed.
    for term in req.get("nodeSelectorTerms") or []:
        if matches_label_selector_object({"matchExpressions": term.get("matchExpressions") or []}, lbls):
            return True
    return False


def _anti_affinity_ok(pod_spec: Mapping[str, Any], node_pods: Sequence[Mapping[str, Any]]) -> bool:
    terms = ((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    for term in terms:
        # Only the per-node topology (kubernetes.io/hostname) is modelled.
        if term.get("topologyKey") != "kubernetes.io/hostname":
            continue
        for other in node_pods:
            if not is_terminating(other) and matches_label_selector_object(term.get("labelSelector"), labels(other)):
                return False
    return True


def filter_node(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    order: Sequence[str] = FILTERS_CURRENT,
    node_pods: Sequence[Mapping[str, Any]] = (),
) -> str | None:
    """Run the scheduler filters on one node; None if the pod fits, else the first failing
    filter's reason string exactly as kube-scheduler plugins word it:
    NodeUnschedulable "node(s) were unschedulable", TaintToleration
    "node(s) had untolerated taint {KEY: VALUE}", NodeAffinity
    "node(s) didn't match Pod's node affinity/selector"."""
    spec = pod.get("spec") or {}
    tols = spec.get("tolerations") or []
    node_spec = node.get("spec") or {}
    for name in order:
        if name == "NodeUnschedulable":
            if node_spec.get("unschedulable") and not tolerates(
                tols, {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}
            ):
                return "node(s) were unschedulable"
        elif name == "TaintToleration":
            for taint in node_spec.get("taints") or []:
                if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tols, taint):
                    return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
        elif name == "NodeAffinity":
            if not _node_affinity_ok(spec, node):
                return "node(s) didn't match Pod's node affinity/selector"
        elif name == "InterPodAffinity":
            if not _anti_affinity_ok(spec, node_pods):
                return REASON_ANTI_AFFINITY
    return None


def _v1_11_reasons(reason: str) -> tuple[str, ...]:
    for prefix, legacy in _V1_11_REASONS:
        if reason.startswith(prefix):
            return legacy
    raise ValueError(f"no kube-scheduler 1.11 wording for reason {reason!r}")


def fit_error_message(num_nodes: int, reasons: Iterable[str], style: str = MESSAGES_CURRENT) -> str:
    """The FailedScheduling message for ``num_nodes`` nodes failing with ``reasons`` (one
    :func:`filter_node` reason per node). Style "current": FitError.Error() plus the default
    preemption PostFilter's message, e.g. "0/4 nodes are available: 1 node(s) were
    unschedulable, 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes
    are available: 4 Preemption is not helpful for scheduling." (unschedulable/taint/affinity
    failures: "Preemption is not helpful..."; anti-affinity: "No preemption victims found for
    incoming pod"). Style "v1.11": kube-scheduler 1.10/1.11 FitError.Error() with the
    predicate errors of pkg/scheduler/algorithm/predicates/error.go and no preemption part:
    "0/7 nodes are available: 7 node(s) didn't match node selector." Both count reasons,
    format "N reason" and sort the strings, as upstream. Raises ValueError for an unknown style.
    """
    reasons = list(reasons)
    if num_nodes == 0:
        return "no nodes available to schedule pods"
    if style == MESSAGES_V1_11:
        counts = Counter(r for reason in reasons for r in _v1_11_reasons(reason))
        return f"0/{num_nodes} nodes are available: {', '.join(sorted(f'{n} {r}' for r, n in counts.items()))}."
    if style != MESSAGES_CURRENT:
        raise ValueError(f"unknown scheduler message style {style!r}")
    counts = Counter(reasons)
    # Upstream formats "N reason" then sort.Strings()s the formatted strings.
    parts = ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
    pre = Counter(
        "Preemption is not helpful for scheduling" if r.startswith(_UNRESOLVABLE) else "No preemption victims found for incoming pod"
        for r in reasons
    )
    pre_parts = ", ".join(sorted(f"{n} {r}" for r, n in pre.items()))
    return f"0/{num_nodes} nodes are available: {parts}. preemption: 0/{num_nodes} nodes are available: {pre_parts}."


def schedule(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    pods_per_node: Mapping[str, int],
    order: Sequence[str] = FILTERS_CURRENT,
    node_pods: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    messages: str = MESSAGES_CURRENT,
) -> tuple[str | None, str]:
    """Choose a node for ``pod``: filter every node, then spread (fewest pods, then name).
    ``node_pods`` (node name -> pods bound there) feeds the anti-affinity filter; ``messages``
    is the :func:`fit_error_message` style. Returns (node_name, "") or (None, FitError message)."""
    fits: list[str] = []
    reasons: list[str] = []
    for node in nodes:
        why = filter_node(pod, node, order, (node_pods or {}).get(node["metadata"]["name"], ()))
        if why is None:
            fits.append(node["metadata"]["name"])
        else:
            reasons.append(why)
    if fits:
        return min(fits, key=lambda n: (pods_per_node.get(n, 0), n)), ""
    return None, fit_error_message(len(nodes), reasons, messages)


# ---------------------------------------------------------------- DaemonSet


def daemonset_should_run(ds: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """DaemonSet controller's NodeShouldRunDaemonPod: nodeSelector/affinity match and all
    NoSchedule/NoExecute taints tolerated. Like the real controller, DaemonSet pods
    implicitly tolerate node.kubernetes.io/unschedulable and not-ready, so a cordoned or
    rebooting node keeps its DaemonSet pods."""
    tmpl_spec = ds["spec"]["template"].get("spec") or {}
    tols = list(tmpl_spec.get("tolerations") or []) + [
        {"key": TAINT_UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"},
        {"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    ]
    pod = {"spec": {**tmpl_spec, "tolerations": tols}}
    return filter_node(pod, node, ("TaintToleration", "NodeAffinity")) is None


def compute_daemonset_status(
    ds: Mapping[str, Any],
    should_run_nodes: set[str],
    pods: Sequence[Mapping[str, Any]],
    template_hash: str,
) -> dict[str, Any]:
    """DaemonSet ``status`` counters (k8s pkg/controller/daemon ``updateDaemonSetStatus``).

    ``pods`` are the DaemonSet's non-terminating pods; a pod is "updated" when its
    ``controller-revision-hash`` label equals ``template_hash``. Available = Ready (minReadySeconds 0).
    """
    desired = len(should_run_nodes)
    on_nodes: dict[str, list[Mapping[str, Any]]] = {}
    for p in pods:
        on_nodes.setdefault(p.get("spec", {}).get("nodeName", ""), []).append(p)
    current = sum(1 for n in on_nodes if n in should_run_nodes)
    misscheduled = sum(1 for n in on_nodes if n not in should_run_nodes)
    ready = available = updated = 0
    for n, ps in on_nodes.items():
        if n not in should_run_nodes:
            continue
        if any(pod_ready(p) for p in ps):
            ready += 1
            available += 1
        if any(labels(p).get("controller-revision-hash") == template_hash for p in ps):
            updated += 1
    return {
        "observedGeneration": ds.get("metadata", {}).get("generation", 1),
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": current,
        "numberMisscheduled": misscheduled,
        "numberReady": ready,
        "numberAvailable": available,
        "numberUnavailable": max(0, desired - available),
        "updatedNumberScheduled": updated,
    }
