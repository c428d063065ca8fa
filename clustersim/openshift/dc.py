"""Pure decisions of the DeploymentConfig controller and its Rolling deployer (origin 3.11).

No store, no asyncio: functions take API-shaped dicts and return objects or statuses.
Sources: origin 3.11 ``pkg/apps/controller/deploymentconfig/deploymentconfig_controller.go``
(RC per version, status counters, conditions), ``pkg/apps/util/util.go`` (RC naming ``<dc>-<v>``,
annotations, condition reasons) and ``pkg/apps/strategy/rolling`` (scale the new RC up, the old
ones down as new pods become ready; ``timeoutSeconds`` default 600).

Simplifications (documented, deliberate): no deployer pod (the controller plays the deployer);
the rolling step scales the new RC to the full count at once and the old RC down to
``replicas - ready(new)``, i.e. maxSurge 100% / maxUnavailable 0.
"""

from __future__ import annotations

import json
from typing import Any

from clustersim.agents.logic import is_terminating, pod_ready, set_condition
from clustersim.agents.objects import new_uid
from clustersim.openshift.kinds import (
    ANN_DC_LATEST_VERSION,
    ANN_DC_NAME,
    ANN_DEPLOYER_POD,
    ANN_DEPLOYMENT_NAME,
    ANN_DEPLOYMENT_PHASE,
    ANN_DESIRED_REPLICAS,
    ANN_ENCODED_DC,
    LABEL_DC,
    LABEL_DC_NAME,
    LABEL_DEPLOYMENT,
    PHASE_COMPLETE,
    PHASE_FAILED,
    PHASE_NEW,
    PHASE_RUNNING,
)

DEFAULT_TIMEOUT_SECONDS = 600.0


def rc_name(dc_name: str, version: int) -> str:
    """``router`` v2 -> ``router-2`` (origin LatestDeploymentNameForConfig)."""
    return f"{dc_name}-{version}"


def rc_version(rc: dict[str, Any]) -> int:
    """The DC version an RC belongs to (its latest-version annotation), 0 if absent/invalid."""
    try:
        return int(((rc.get("metadata") or {}).get("annotations") or {}).get(ANN_DC_LATEST_VERSION, "0"))
    except ValueError:
        return 0


def rc_phase(rc: dict[str, Any]) -> str:
    """``openshift.io/deployment.phase`` of an RC (New when absent)."""
    return ((rc.get("metadata") or {}).get("annotations") or {}).get(ANN_DEPLOYMENT_PHASE, PHASE_NEW)


def has_config_change_trigger(dc: dict[str, Any]) -> bool:
    """True when ``spec.triggers`` holds a ``ConfigChange`` trigger (or triggers are unset,
    which the 3.11 API defaults to a ConfigChange trigger)."""
    triggers = (dc.get("spec") or {}).get("triggers")
    if triggers is None:
        return True
    return any(t.get("type") == "ConfigChange" for t in triggers)


def rolling_timeout_seconds(dc: dict[str, Any]) -> float:
    """``spec.strategy.rollingParams.timeoutSeconds`` (simulated seconds, default 600)."""
    params = ((dc.get("spec") or {}).get("strategy") or {}).get("rollingParams") or {}
    value = params.get("timeoutSeconds")
    return float(value) if value is not None else DEFAULT_TIMEOUT_SECONDS


def encoded_template(rc: dict[str, Any]) -> dict[str, Any] | None:
    """The DC pod template an RC was made from (decoded from its encoded-deployment-config)."""
    raw = ((rc.get("metadata") or {}).get("annotations") or {}).get(ANN_ENCODED_DC)
    if not raw:
        return None
    try:
        return (json.loads(raw).get("spec") or {}).get("template")
    except (ValueError, AttributeError):
        return None


def template_changed(dc: dict[str, Any], latest_rc: dict[str, Any] | None) -> bool:
    """True when the DC's pod template differs from the one its latest RC was made from."""
    if latest_rc is None:
        return True
    return encoded_template(latest_rc) != (dc.get("spec") or {}).get("template")


def build_rc(dc: dict[str, Any], version: int, created: str) -> dict[str, Any]:
    """RC ``<dc>-<version>`` for a DC (origin MakeDeployment): replicas 0, selector and pod
    labels extended with ``deployment``/``deploymentconfig``, the deployment annotations and
    an ownerReference to the DC. The deployer scales it up afterwards."""
    meta = dc["metadata"]
    name = rc_name(meta["name"], version)
    spec = dc.get("spec") or {}
    tmpl = json.loads(json.dumps(spec.get("template") or {}))
    tmeta = tmpl.setdefault("metadata", {})
    tlabels = dict(tmeta.get("labels") or {})
    tlabels[LABEL_DEPLOYMENT] = name
    tlabels[LABEL_DC] = meta["name"]
    tmeta["labels"] = tlabels
    tmeta["annotations"] = {**(tmeta.get("annotations") or {}), ANN_DC_LATEST_VERSION: str(version),
                            ANN_DC_NAME: meta["name"], ANN_DEPLOYMENT_NAME: name}
    selector = dict(spec.get("selector") or {})
    selector[LABEL_DEPLOYMENT] = name
    selector[LABEL_DC] = meta["name"]
    encoded = json.dumps({"kind": "DeploymentConfig", "apiVersion": "apps.openshift.io/v1",
                          "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
                          "spec": {"template": spec.get("template"), "replicas": spec.get("replicas", 1)}},
                         sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "uid": new_uid(),
            "creationTimestamp": created,
            "labels": {**(meta.get("labels") or {}), LABEL_DC_NAME: meta["name"]},
            "annotations": {
                ANN_DC_NAME: meta["name"],
                ANN_DC_LATEST_VERSION: str(version),
                ANN_DEPLOYMENT_PHASE: PHASE_NEW,
                ANN_DEPLOYER_POD: f"{name}-deploy",
                ANN_ENCODED_DC: encoded,
                ANN_DESIRED_REPLICAS: str(spec.get("replicas", 1)),
            },
            "ownerReferences": [{"apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
                                 "name": meta["name"], "uid": meta["uid"], "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {"replicas": 0, "selector": selector, "template": tmpl},
        "status": {"replicas": 0},
    }


def rolling_targets(desired: int, latest: dict[str, Any], older: list[dict[str, Any]]) -> dict[str, int]:
    """RC name -> replicas for one Rolling step while ``latest`` is New/Running.

    The new RC goes to ``desired``; the newest Complete older RC keeps ``desired - ready(new)``
    (never below 0) and every other older RC goes to 0."""
    ready_new = int((latest.get("status") or {}).get("readyReplicas", 0))
    out = {latest["metadata"]["name"]: desired}
    active = last_complete(older)
    for rc in older:
        name = rc["metadata"]["name"]
        out[name] = max(0, desired - ready_new) if active is not None and name == active["metadata"]["name"] else 0
    return out


def last_complete(rcs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest RC whose phase is Complete, or None."""
    done = [rc for rc in rcs if rc_phase(rc) == PHASE_COMPLETE]
    return max(done, key=rc_version) if done else None


def rollout_done(desired: int, latest: dict[str, Any], older: list[dict[str, Any]]) -> bool:
    """The new RC has ``desired`` ready pods and every older RC has no pods left."""
    st = latest.get("status") or {}
    return (int(st.get("readyReplicas", 0)) >= desired and int(st.get("replicas", 0)) >= desired
            and all(int((rc.get("status") or {}).get("replicas", 0)) == 0 for rc in older))


def dc_status(dc: dict[str, Any], rcs: list[dict[str, Any]], now: str) -> dict[str, Any]:
    """DeploymentConfig ``status`` (origin calculateStatus/calculateConditions).

    ``rcs``: every RC of the DC. Counters sum the RCs' status; ``updatedReplicas`` is the latest
    RC's. Conditions: Available (MinimumReplicasAvailable "Deployment config has minimum
    availability." / MinimumReplicasUnavailable "... does not have ..."), Progressing (by the
    latest RC's phase: NewReplicationControllerCreated / ReplicationControllerUpdated
    'replication controller "x-2" is progressing' / NewReplicationControllerAvailable
    '... successfully rolled out' / ProgressDeadlineExceeded '... has failed progressing')."""
    spec = dc.get("spec") or {}
    old = dc.get("status") or {}
    latest_version = int(old.get("latestVersion", 0))
    latest = next((rc for rc in rcs if rc_version(rc) == latest_version), None)
    total = sum(int((rc.get("status") or {}).get("replicas", 0)) for rc in rcs)
    ready = sum(int((rc.get("status") or {}).get("readyReplicas", 0)) for rc in rcs)
    available = sum(int((rc.get("status") or {}).get("availableReplicas", 0)) for rc in rcs)
    updated = int(((latest or {}).get("status") or {}).get("replicas", 0))
    status: dict[str, Any] = {
        "latestVersion": latest_version,
        "observedGeneration": dc["metadata"].get("generation", 1),
        "replicas": total,
        "updatedReplicas": updated,
        "availableReplicas": available,
        "unavailableReplicas": max(0, total - available),
        "readyReplicas": ready,
        "conditions": [dict(c) for c in old.get("conditions") or []],
    }
    old_conds = {c.get("type"): c for c in status["conditions"]}

    def put(cond: dict[str, Any]) -> None:
        # lastUpdateTime moves only when the condition says something new, so a resync that
        # changes nothing commits nothing (no event storm).
        prev = old_conds.get(cond["type"])
        if prev and all(prev.get(k) == cond[k] for k in ("status", "reason", "message")):
            cond["lastUpdateTime"] = prev.get("lastUpdateTime", now)
        set_condition(status, cond, now)

    if old.get("details"):
        status["details"] = old["details"]
    desired = int(spec.get("replicas", 1))
    # origin: available when availableReplicas >= replicas - maxUnavailable (rolling 25%, floor).
    max_unavailable = desired // 4
    ok = available >= desired - max_unavailable
    put({"type": "Available", "status": "True" if ok else "False", "lastUpdateTime": now,
                           "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
                           "message": "Deployment config has minimum availability." if ok
                           else "Deployment config does not have minimum availability."})
    if latest is not None:
        name = latest["metadata"]["name"]
        phase = rc_phase(latest)
        if phase == PHASE_NEW:
            cond = ("True", "NewReplicationControllerCreated",
                    f'Created new replication controller "{name}" for version {latest_version}')
        elif phase == PHASE_RUNNING:
            cond = ("True", "ReplicationControllerUpdated", f'replication controller "{name}" is progressing')
        elif phase == PHASE_COMPLETE:
            cond = ("True", "NewReplicationControllerAvailable", f'replication controller "{name}" successfully rolled out')
        else:
            cond = ("False", "ProgressDeadlineExceeded", f'replication controller "{name}" has failed progressing')
        put({"type": "Progressing", "status": cond[0], "reason": cond[1], "message": cond[2], "lastUpdateTime": now})
    return status


def rc_status(rc: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """ReplicationController ``status`` from its non-terminating pods (k8s replication manager)."""
    live = [p for p in pods if not is_terminating(p)]
    ready = sum(1 for p in live if pod_ready(p))
    return {"replicas": len(live), "fullyLabeledReplicas": len(live), "readyReplicas": ready,
            "availableReplicas": ready, "observedGeneration": rc["metadata"].get("generation", 1)}


__all__ = ["PHASE_COMPLETE", "PHASE_FAILED", "PHASE_NEW", "PHASE_RUNNING", "build_rc", "dc_status", "rc_name",
           "rc_phase", "rc_status", "rc_version", "rolling_targets", "rollout_done", "template_changed"]
