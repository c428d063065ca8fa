"""The controller's side of a MachineConfigNode, written by lockkeeper where it stands in for the
machine-config-controller (issue 41).

Who writes what (machine-config-operator ``release-4.21``): the drain controller
(``pkg/controller/drain/drain_controller.go``) reports through the upgrade monitor
(``pkg/upgrademonitor/upgrade_monitor.go`` ``GenerateAndApplyMachineConfigNodes``) the parent
``UpdateExecuted`` with the child ``Cordoned`` when it cordons, ``Drained`` (Unknown while
draining, True when drained) and the parent ``UpdateComplete`` with the child ``Uncordoned``
when it uncordons; every other condition is the daemon's. The words (reasons and messages)
below are the controller's.

:func:`controller_status` is the monitor's update of ``status`` for one such write, as a pure
function (read, not copied): the parent and child conditions replace those of the same type (a
condition list without them gets them appended); an unchanged parent and child (same status
and message) writes nothing, so a repeated call is a no-op; ``configVersion.desired`` follows
the node's desiredConfig; ``current`` is the daemon's and left alone. As the MCO drain controller
does, the caller writes the condition before it answers the daemon (``lastAppliedDrain``), so
the daemon's own next write (``Updated``) comes after it.

:func:`report_controller_step` writes it: it lists the node's MachineConfigNode (one request;
``list`` is what the ClusterRole already grants), and merge-patches ``status`` through the status
subresource with the ``metadata.resourceVersion`` it read, so the patch applies only to the
object it computed from (409 Conflict otherwise: read again, at most :data:`ATTEMPTS` times;
the daemon writes its side of the same object). Best effort: the handshake's answer is the Node
annotation, which the caller has already written or writes regardless; where the API serves no
MachineConfigNodes (NotFound), the node has none, or the ClusterRole does not allow the write
(Forbidden), nothing is written and nothing is raised; any other API error is logged, not raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from activities.kube import objects
from activities.kube.errors import Conflict, Forbidden, KubeError, NotFound

#: A controller step: cordoned, draining (a pass did not empty the node), drained, uncordoned.
ControllerStep = Literal["cordoned", "draining", "drained", "uncordoned"]

#: Reads and patches tried when the object keeps changing under the write.
ATTEMPTS = 3

#: step -> ((parent type, reason, message, status), (child type, reason, message, status)).
STEPS: dict[str, tuple[tuple[str, str, str, str], tuple[str, str, str, str]]] = {
    "cordoned": (("UpdateExecuted", "Cordoned", "Cordoned Node as part of update executed phase", "Unknown"),
                 ("Cordoned", "UpdateExecutedCordoned", "Cordoned node. The node is reporting Unschedulable = true", "True")),
    "draining": (("UpdateExecuted", "Drained", "Draining Node as part of update executed phase", "Unknown"),
                 ("Drained", "UpdateExecutedDrained", "Draining node. The drain will not be complete until desired drainer "
                  "{drain} matches current drainer", "Unknown")),
    "drained": (("UpdateExecuted", "Drained", "Drained Node as part of update executed phase", "Unknown"),
                ("Drained", "UpdateExecutedDrained", "Drained node. The drain is complete as the desired drainer matches "
                 "current drainer: {drain}", "True")),
    "uncordoned": (("UpdateComplete", "Uncordoned", "Uncordoned Node as part of completing upgrade phase", "True"),
                   ("Uncordoned", "UpdateCompleteUncordoned", "UnCordoned node. The node is reporting Unschedulable = false",
                    "True")),
}

ANN_CURRENT = "machineconfiguration.openshift.io/currentConfig"
ANN_DESIRED = "machineconfiguration.openshift.io/desiredConfig"


def _cond(spec: tuple[str, str, str, str], now: str, drain: str) -> dict[str, Any]:
    t, reason, message, status = spec
    return {"type": t, "status": status, "reason": reason, "message": message.format(drain=drain), "lastTransitionTime": now}


def controller_status(mcn: Mapping[str, Any], step: ControllerStep, node_annotations: Mapping[str, str],
                      now: datetime | None = None, drain: str = "") -> dict[str, Any] | None:
    """The new ``status`` of ``mcn`` after the controller reports ``step`` (see the module doc),
    or None when it already says so. ``drain``: the drain request (``drain-<config>``) named in
    the Drained messages. ``mcn`` is not modified."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    parent_spec, child_spec = STEPS[step]
    parent, child = _cond(parent_spec, stamp, drain), _cond(child_spec, stamp, drain)
    status = dict(mcn.get("status") or {})
    conds = [dict(c) for c in status.get("conditions") or []]
    by_type = {c.get("type"): c for c in conds}
    same = all(
        by_type.get(c["type"], {}).get("status") == c["status"] and by_type.get(c["type"], {}).get("message") == c["message"]
        for c in (parent, child)
    )
    if same:
        return None
    out, seen = [], set()
    for c in conds:
        for new in (parent, child):
            if c.get("type") == new["type"]:
                keep_time = c.get("status") == new["status"] and c.get("lastTransitionTime")
                c = dict(new, lastTransitionTime=keep_time or new["lastTransitionTime"])
                seen.add(new["type"])
        out.append(c)
    out += [c for c in (parent, child) if c["type"] not in seen]
    version = dict(status.get("configVersion") or {})
    if node_annotations.get(ANN_DESIRED):
        version["desired"] = node_annotations[ANN_DESIRED]
    return {**status, "conditions": out, "configVersion": version}


def report_controller_step(gateway: Any, node: str, step: ControllerStep, node_annotations: Mapping[str, str],
                           drain: str = "", log: Any = None) -> bool:
    """Write ``step`` into ``node``'s MachineConfigNode (module doc). True when a patch was
    applied; False when there was nothing to write, nothing served, or the write was refused."""
    for _ in range(ATTEMPTS):
        try:
            found = gateway.list_machine_config_nodes(node)
        except KubeError as exc:
            return _not_reported(exc, log, f"MachineConfigNode {node}: not read ({exc}); {step} not reported")
        if not found:
            return False
        mcn = found[0]
        new = controller_status(mcn, step, node_annotations, drain=drain)
        if new is None:
            return False
        patch = {"metadata": {"resourceVersion": objects.meta(mcn).get("resourceVersion")}, "status": new}
        try:
            gateway.patch("MachineConfigNode", node, patch, subresource="status")
            return True
        except Conflict:
            continue
        except KubeError as exc:
            return _not_reported(exc, log, f"MachineConfigNode {node}: {step} not reported ({exc})")
    return False


def _not_reported(exc: KubeError, log: Any, message: str) -> bool:
    """False, the answer of a step not reported: ``message`` goes to ``log`` unless ``exc`` is
    NotFound or Forbidden (no MachineConfigNode served, or not ours to write: nothing to say)."""
    if log is not None and not isinstance(exc, (NotFound, Forbidden)):
        log(message)
    return False
