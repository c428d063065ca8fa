"""Row printers of the core kinds, as kube-apiserver's server-side printing produces them.

Each printer is ``(columns, row_fn)``: ``columns`` are ``(Name, type, priority)`` triples (priority 1
= shown only with ``kubectl get -o wide``), ``row_fn(obj, now) -> list`` the cells. The server
always generates the wide cells; kubectl hides priority-1 columns itself.

Sources: kubernetes ``pkg/printers/internalversion/printers.go`` (printNode, printPod, printEvent,
printDeployment, printDaemonSet, printReplicaSet, printReplicationController,
printPodDisruptionBudget, printNamespace, printConfigMap, printLease) and ``apimachinery``
``pkg/util/duration.HumanDuration`` for ages; OpenShift ``oc`` printDeploymentConfig for DCs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from clustersim.agents import logic

Column = tuple[str, str, int]
RowFn = Callable[[dict[str, Any], datetime], list[Any]]


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: 45s, 2m30s, 15m, 5h20m, 30h, 3d4h, 30d, 2y45d, 9y."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def age(timestamp: str | None, now: datetime) -> str:
    """``translateTimestampSince``: "<unknown>" for a missing timestamp."""
    t = _parse_time(timestamp)
    return "<unknown>" if t is None else human_duration((now - t).total_seconds())


def format_labels(labels: dict[str, str] | None) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` joined by commas, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def format_selector(selector: dict[str, Any] | None) -> str:
    """A LabelSelector as ``metav1.LabelSelectorAsSelector(...).String()`` prints it."""
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), sorted(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(sorted(parts)) or "<none>"


def _containers_images(template_spec: dict[str, Any]) -> tuple[str, str]:
    cs = template_spec.get("containers") or []
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


# ------------------------------------------------------------------ nodes
def node_roles(node: dict[str, Any]) -> str:
    """``findNodeRoles``: ``node-role.kubernetes.io/<role>`` labels and ``kubernetes.io/role``."""
    roles = set()
    for k, v in (logic.meta(node).get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/"):
            roles.add(k[len("node-role.kubernetes.io/"):])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def node_status(node: dict[str, Any]) -> str:
    """``Ready``/``NotReady``/``Unknown`` plus ``SchedulingDisabled`` when cordoned."""
    status = []
    for c in logic.status(node).get("conditions") or []:
        if c.get("type") == "Ready":
            status.append("Ready" if c.get("status") == "True" else "NotReady")
            break
    if not status:
        status.append("Unknown")
    if logic.spec(node).get("unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def _address(node: dict[str, Any], kind: str) -> str:
    for a in logic.status(node).get("addresses") or []:
        if a.get("type") == kind:
            return str(a.get("address", ""))
    return "<none>"


def _node_row(n: dict[str, Any], now: datetime) -> list[Any]:
    info = logic.status(n).get("nodeInfo") or {}
    return [logic.meta(n).get("name"), node_status(n), node_roles(n), age(logic.meta(n).get("creationTimestamp"), now),
            info.get("kubeletVersion", ""), _address(n, "InternalIP"), _address(n, "ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


# ------------------------------------------------------------------ pods
def pod_status_cells(pod: dict[str, Any], now: datetime) -> tuple[str, str, str]:
    """(READY, STATUS, RESTARTS) of printPod, init containers and Terminating included."""
    spec, st, meta = logic.spec(pod), logic.status(pod), logic.meta(pod)
    reason = st.get("reason") or st.get("phase") or ""
    for c in st.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    restarts = 0
    last_restart: datetime | None = None
    initializing = False
    inits = spec.get("initContainers") or []
    for i, c in enumerate(st.get("initContainerStatuses") or []):
        restarts += int(c.get("restartCount", 0))
        state = c.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if term is not None:
            reason = "Init:" + (term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal")
                                                      else f"ExitCode:{term.get('exitCode', 0)}"))
        elif wait and wait.get("reason") and wait.get("reason") != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    ready = 0
    if not initializing:
        restarts = 0
        has_running = False
        for c in reversed(st.get("containerStatuses") or []):
            restarts += int(c.get("restartCount", 0))
            last_term = (c.get("lastState") or {}).get("terminated")
            if last_term and last_term.get("finishedAt"):
                t = _parse_time(last_term["finishedAt"])
                if t is not None and (last_restart is None or t > last_restart):
                    last_restart = t
            state = c.get("state") or {}
            wait, term = state.get("waiting"), state.get("terminated")
            if wait and wait.get("reason"):
                reason = wait["reason"]
            elif term and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            elif c.get("ready") and "running" in state:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
            reason = "Running" if pod_ready else "NotReady"
    if meta.get("deletionTimestamp") and st.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and st.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_s = str(restarts)
    if restarts and last_restart is not None:
        restarts_s = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return f"{ready}/{len(spec.get('containers') or [])}", reason, restarts_s


def _pod_row(p: dict[str, Any], now: datetime) -> list[Any]:
    ready, reason, restarts = pod_status_cells(p, now)
    st, spec = logic.status(p), logic.spec(p)
    ips = st.get("podIPs") or ([{"ip": st["podIP"]}] if st.get("podIP") else [])
    gates = spec.get("readinessGates") or []
    gates_s = "<none>"
    if gates:
        wanted = {g.get("conditionType") for g in gates}
        true = sum(1 for c in st.get("conditions") or [] if c.get("type") in wanted and c.get("status") == "True")
        gates_s = f"{true}/{len(gates)}"
    return [logic.meta(p).get("name"), ready, reason, restarts, age(logic.meta(p).get("creationTimestamp"), now),
            (ips[0].get("ip") if ips else "") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", gates_s]


# ------------------------------------------------------------------ events
def _event_row(e: dict[str, Any], now: datetime) -> list[Any]:
    first = age(e.get("firstTimestamp"), now) if e.get("firstTimestamp") else age(e.get("eventTime"), now)
    last = age(e.get("lastTimestamp"), now) if e.get("lastTimestamp") else first
    count = e.get("count") or 1
    series = e.get("series")
    if series:
        last, count = age(series.get("lastObservedTime"), now), series.get("count", count)
    inv = e.get("involvedObject") or {}
    kind = str(inv.get("kind", "")).lower()
    target = f"{kind}/{inv['name']}" if inv.get("name") else kind
    src = e.get("source") or {}
    # formatEventSource: source.component else reportingComponent (Go ReportingController), then
    # ", " + source.host else reportingInstance when there is one.
    component = src.get("component") or e.get("reportingComponent") or ""
    instance = src.get("host") or e.get("reportingInstance") or ""
    source = f"{component}, {instance}" if instance else component
    return [last, e.get("type", ""), e.get("reason", ""), target, inv.get("fieldPath", ""), source,
            str(e.get("message", "")).strip(), first, int(count), logic.meta(e).get("name")]


# ------------------------------------------------------------------ workloads
def _deployment_row(d: dict[str, Any], now: datetime) -> list[Any]:
    st, spec = logic.status(d), logic.spec(d)
    cs, imgs = _containers_images(((spec.get("template") or {}).get("spec")) or {})
    return [logic.meta(d).get("name"), f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0), age(logic.meta(d).get("creationTimestamp"), now),
            cs, imgs, format_selector(spec.get("selector"))]


def _daemonset_row(d: dict[str, Any], now: datetime) -> list[Any]:
    st, spec = logic.status(d), logic.spec(d)
    tspec = ((spec.get("template") or {}).get("spec")) or {}
    cs, imgs = _containers_images(tspec)
    return [logic.meta(d).get("name"), st.get("desiredNumberScheduled", 0), st.get("currentNumberScheduled", 0),
            st.get("numberReady", 0), st.get("updatedNumberScheduled", 0), st.get("numberAvailable", 0),
            format_labels(tspec.get("nodeSelector")), age(logic.meta(d).get("creationTimestamp"), now),
            cs, imgs, format_selector(spec.get("selector"))]


def _replicaset_row(r: dict[str, Any], now: datetime) -> list[Any]:
    st, spec = logic.status(r), logic.spec(r)
    cs, imgs = _containers_images(((spec.get("template") or {}).get("spec")) or {})
    sel = spec.get("selector") or {}
    # ReplicationControllers have a plain map selector.
    sel_s = format_selector(sel) if "matchLabels" in sel or "matchExpressions" in sel else format_labels(sel)
    return [logic.meta(r).get("name"), spec.get("replicas", 1), st.get("replicas", 0), st.get("readyReplicas", 0),
            age(logic.meta(r).get("creationTimestamp"), now), cs, imgs, sel_s]


def _pdb_row(p: dict[str, Any], now: datetime) -> list[Any]:
    spec = logic.spec(p)
    mn, mx = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [logic.meta(p).get("name"), "N/A" if mn is None else str(mn), "N/A" if mx is None else str(mx),
            logic.status(p).get("disruptionsAllowed", 0), age(logic.meta(p).get("creationTimestamp"), now)]


def _dc_row(d: dict[str, Any], now: datetime) -> list[Any]:
    spec, st = logic.spec(d), logic.status(d)
    triggers = set()
    for t in spec.get("triggers") or []:
        if t.get("type") == "ConfigChange":
            triggers.add("config")
        elif t.get("type") == "ImageChange":
            frm = ((t.get("imageChangeParams") or {}).get("from")) or {}
            named = frm.get("kind") == "ImageStreamTag" and frm.get("name")
            triggers.add(f"image({frm['name']})" if named else "image")
        elif t.get("type"):
            triggers.add(str(t["type"]))
    desired = str(spec.get("replicas", 0)) + (" (during test)" if spec.get("test") else "")
    return [logic.meta(d).get("name"), st.get("latestVersion", 0), desired, str(st.get("updatedReplicas", 0)),
            ",".join(sorted(triggers))]


def _namespace_row(n: dict[str, Any], now: datetime) -> list[Any]:
    return [logic.meta(n).get("name"), logic.status(n).get("phase", "Active"), age(logic.meta(n).get("creationTimestamp"), now)]


def _configmap_row(c: dict[str, Any], now: datetime) -> list[Any]:
    return [logic.meta(c).get("name"), len(c.get("data") or {}) + len(c.get("binaryData") or {}),
            age(logic.meta(c).get("creationTimestamp"), now)]


def _lease_row(lease: dict[str, Any], now: datetime) -> list[Any]:
    return [logic.meta(lease).get("name"), logic.spec(lease).get("holderIdentity") or "",
            age(logic.meta(lease).get("creationTimestamp"), now)]


_WORKLOAD_P1: list[Column] = [("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1)]

#: Kind (as ``ResourceType.kind`` + group) -> (columns, row function). Keyed by store key.
PRINTERS: dict[str, tuple[list[Column], RowFn]] = {
    "nodes": ([("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
               ("Version", "string", 0), ("Internal-IP", "string", 1), ("External-IP", "string", 1),
               ("OS-Image", "string", 1), ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)],
              _node_row),
    "pods": ([("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "string", 0),
              ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1), ("Nominated Node", "string", 1),
              ("Readiness Gates", "string", 1)], _pod_row),
    "events": ([("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0), ("Object", "string", 0),
                ("Subobject", "string", 1), ("Source", "string", 1), ("Message", "string", 0),
                ("First Seen", "string", 1), ("Count", "string", 1), ("Name", "string", 1)], _event_row),
    "deployments.apps": ([("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "string", 0),
                          ("Available", "string", 0), ("Age", "string", 0), *_WORKLOAD_P1], _deployment_row),
    "daemonsets.apps": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                         ("Ready", "integer", 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
                         ("Node Selector", "string", 0), ("Age", "string", 0), *_WORKLOAD_P1], _daemonset_row),
    "replicasets.apps": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                          ("Ready", "integer", 0), ("Age", "string", 0), *_WORKLOAD_P1], _replicaset_row),
    "replicationcontrollers": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                                ("Ready", "integer", 0), ("Age", "string", 0), *_WORKLOAD_P1], _replicaset_row),
    "poddisruptionbudgets.policy": ([("Name", "string", 0), ("Min Available", "string", 0),
                                     ("Max Unavailable", "string", 0), ("Allowed Disruptions", "integer", 0),
                                     ("Age", "string", 0)], _pdb_row),
    "deploymentconfigs.apps.openshift.io": ([("Name", "string", 0), ("Revision", "string", 0),
                                             ("Desired", "string", 0), ("Current", "string", 0),
                                             ("Triggered By", "string", 0)], _dc_row),
    "namespaces": ([("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)], _namespace_row),
    "configmaps": ([("Name", "string", 0), ("Data", "string", 0), ("Age", "string", 0)], _configmap_row),
    "leases.coordination.k8s.io": ([("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)],
                                   _lease_row),
}
