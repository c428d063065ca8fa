"""Pure readers of Kubernetes API objects (plain JSON dicts as the gateway returns them).

No client, no I/O: metadata accessors, conditions, label selectors (``metav1.LabelSelector``
semantics and query-string form), pod ownership (kubectl ``pkg/drain/filters.go``'s notion of a
controller, mirror and finished pods), PodDisruptionBudget matching, and the newest
``FailedScheduling`` Event. Used by the generic and the procedure activities alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from kubeshared.labels import label_selector_matches as selector_matches

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 timestamp (``2024-05-01T10:00:00Z``, optional fraction) -> aware datetime."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` of an object (``{}`` when absent)."""
    return obj.get("metadata") or {}


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    """``metadata.annotations`` (``{}`` when absent)."""
    return meta(obj).get("annotations") or {}


def labels(obj: dict[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (``{}`` when absent)."""
    return meta(obj).get("labels") or {}


def condition(obj: dict[str, Any], type_: str) -> str | None:
    """``status`` (``"True"``/``"False"``/``"Unknown"``) of the condition ``type_``, None when absent."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return str(cond.get("status"))
    return None


def boot_id(node: dict[str, Any]) -> str:
    """A Node's ``status.nodeInfo.bootID`` (the kubelet's report; a new value on every boot), or
    ``""`` when the node reports none."""
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


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


def pod_key(pod: dict[str, Any]) -> str:
    """``namespace/name``."""
    md = meta(pod)
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in meta(pod).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def is_mirror_pod(pod: dict[str, Any]) -> bool:
    """A static pod's API mirror (kubelet annotation ``kubernetes.io/config.mirror``)."""
    return MIRROR_POD_ANNOTATION in annotations(pod)


def is_finished(pod: dict[str, Any]) -> bool:
    """Phase Succeeded or Failed: the pod's containers will not run again."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def matching_pdbs(pod: dict[str, Any], pdbs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The budgets of the pod's namespace whose selector matches its labels."""
    ns = meta(pod).get("namespace")
    pod_labels = labels(pod)
    return [
        p for p in pdbs if meta(p).get("namespace") == ns and selector_matches((p.get("spec") or {}).get("selector"), pod_labels)
    ]


def event_time(event: dict[str, Any]) -> datetime | None:
    """When an Event last happened: series.lastObservedTime, lastTimestamp, eventTime, then creationTimestamp."""
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        meta(event).get("creationTimestamp"),
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
        when = event_time(ev)
        rv = str(meta(ev).get("resourceVersion") or "")
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
    ns = meta(blocked).get("namespace")
    out = []
    for pod in pending:
        if meta(pod).get("namespace") != ns or pod_key(pod) == pod_key(blocked):
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
