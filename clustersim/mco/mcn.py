"""MachineConfigNode (``machineconfiguration.openshift.io/v1``): objects and the upgrade monitor.

The API follows openshift/api ``release-4.21`` (commit 1cb630ce7109)
``machineconfiguration/v1/types_machineconfignode.go``: cluster-scoped, one per node, named like
the node; ``spec.node.name``, ``spec.pool.name``, ``spec.configVersion.desired``;
``status.configVersion{current,desired}``, ``status.conditions`` (metav1.Condition),
``status.observedGeneration`` and ``status.irreconcilableChanges[{fieldPath, diff}]`` (feature gate
IrreconcilableMachineConfig, on by default from the openshift/api master of 2026).

Who writes which condition (machine-config-operator ``release-4.21``, commit db84d8368ef7):

- the daemon (``pkg/daemon/daemon.go`` ``syncNode``, ``updateConfigAndState``;
  ``pkg/daemon/update.go`` ``update``, ``performPostConfigChangeNodeDisruptionAction``,
  ``reportMachineNodeDegradeStatus``): ``Updated``, ``UpdatePrepared``, ``UpdateExecuted`` with
  ``AppliedFilesAndOS`` (and with ``Drained`` when no drain is needed), ``RebootedNode``,
  ``UpdatePostActionComplete``, ``Resumed``, ``NodeDegraded``;
- the controller (``pkg/controller/drain/drain_controller.go``): ``UpdateExecuted`` with
  ``Cordoned`` and ``Drained``, ``UpdateComplete`` with ``Uncordoned``; the node controller sets
  ``spec.configVersion.desired`` when it hands out desiredConfig
  (``pkg/controller/node/node_controller.go`` via ``UpdateMachineConfigNodeSpecDesiredAnnotations``).

:func:`apply_conditions` is ``pkg/upgrademonitor/upgrade_monitor.go``
``generateAndApplyMachineConfigNodes`` as a pure function (read, not copied): one call writes a
parent condition (a phase) and optionally a child (a sub-step); an unchanged parent (same status
and message) writes nothing; a parent ``Updated`` resets every other condition that is not False
to False, prefixing its message with "Action during update to <spec desired>: "; any other parent
turns an ``Updated=True`` into False ("sensed disruption via a manual update"); the first write
creates every condition type, the missing ones False with reason ``NotYetOccurred``.
``status.configVersion.desired`` becomes the node's desiredConfig once ``UpdatePrepared`` is True
(and on any other parent when the node has one), else ``not-yet-set``; ``current`` follows the
node's currentConfig.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MCN = "machineconfignodes.machineconfiguration.openshift.io"
API_VERSION = "machineconfiguration.openshift.io/v1"
NOT_YET_SET = "not-yet-set"
# The node annotations (MCO pkg/daemon/constants), as clustersim.agents.logic names them; spelled
# out here so that this module does not import the agents package (which imports it).
ANN_CURRENT_CONFIG = "machineconfiguration.openshift.io/currentConfig"
ANN_DESIRED_CONFIG = "machineconfiguration.openshift.io/desiredConfig"

# Condition types (openshift/api StateProgress).
UPDATE_PREPARED = "UpdatePrepared"
UPDATE_EXECUTED = "UpdateExecuted"
UPDATE_POST_ACTION_COMPLETE = "UpdatePostActionComplete"
UPDATE_COMPLETE = "UpdateComplete"
UPDATED = "Updated"
RESUMED = "Resumed"
DRAINED = "Drained"
APPLIED_FILES_AND_OS = "AppliedFilesAndOS"
IMAGE_PULLED_FROM_REGISTRY = "ImagePulledFromRegistry"
CORDONED = "Cordoned"
UNCORDONED = "Uncordoned"
REBOOTED_NODE = "RebootedNode"
NODE_DEGRADED = "NodeDegraded"

#: ``allConditionTypes`` of the upgrade monitor, in its order: the conditions every MCN carries.
ALL_CONDITION_TYPES = (UPDATE_PREPARED, UPDATE_EXECUTED, UPDATE_POST_ACTION_COMPLETE, UPDATE_COMPLETE, RESUMED,
                       DRAINED, APPLIED_FILES_AND_OS, IMAGE_PULLED_FROM_REGISTRY, CORDONED, REBOOTED_NODE,
                       UPDATED, UNCORDONED, NODE_DEGRADED)
#: The conditions the controller (or a stand-in for it, like lockkeeper) writes.
CONTROLLER_CONDITIONS = frozenset({CORDONED, DRAINED, UNCORDONED, UPDATE_COMPLETE})


@dataclass(frozen=True)
class Condition:
    """One ``upgrademonitor.Condition``: the condition ``type`` (StateProgress), ``reason``, ``message``."""

    type: str
    reason: str
    message: str


def _cond(c: Condition, status: str, now: str) -> dict[str, Any]:
    return {"type": c.type, "status": status, "reason": c.reason, "message": c.message, "lastTransitionTime": now}


def apply_conditions(mcn: Mapping[str, Any], parent: Condition, child: Condition | None, parent_status: str,
                     child_status: str, node_annotations: Mapping[str, str], now: str) -> dict[str, Any] | None:
    """The new ``status`` of ``mcn`` after the upgrade monitor writes ``parent`` (status
    ``parent_status``: "True", "False" or "Unknown") and ``child`` (``child_status``), as seen by a
    node with ``node_annotations``; None when the monitor writes nothing (the parent is unchanged).
    ``now`` is the RFC 3339 time of new transitions. The input is not modified; fields the monitor
    does not own (``irreconcilableChanges``, ``pinnedImageSets``) are kept. See the module docstring."""
    old_status = copy.deepcopy(dict(mcn.get("status") or {}))
    spec_desired = (((mcn.get("spec") or {}).get("configVersion") or {}).get("desired")) or ""
    new_parent = _cond(parent, parent_status, now)
    new_child = _cond(child, child_status, now) if child is not None else None
    conds: list[dict[str, Any]] = [dict(c) for c in old_status.get("conditions") or []]
    if not conds:
        conds = [new_parent] + ([new_child] if new_child else [])
        for t in ALL_CONDITION_TYPES:
            if not any(c["type"] == t for c in conds):
                conds.append({"type": t, "status": "False", "reason": "NotYetOccurred",
                              "message": f"This node has not yet entered the {t} phase", "lastTransitionTime": now})
    else:
        reset = parent.type == UPDATED
        found_parent = found_child = False
        out = []
        for c in conds:
            if c["type"] == UPDATED and c.get("status") == "True" and c["type"] != parent.type:
                c = {"type": UPDATED, "status": "False", "reason": UPDATED, "lastTransitionTime": now,
                     "message": "This node is not updated, sensed disruption via a manual update."}
            elif new_child is not None and c["type"] == new_child["type"]:
                found_child = True
                c = dict(new_child)
            elif c["type"] == parent.type:
                found_parent = True
                if c.get("status") == parent_status and c.get("message") == parent.message:
                    return None
                c = dict(new_parent)
            elif reset and c.get("status") != "False":
                c = dict(c, status="False", lastTransitionTime=now,
                         message=f"Action during update to {spec_desired}: {c.get('message', '')}")
            out.append(c)
        if not found_child and new_child is not None:
            out.append(new_child)
        if not found_parent:
            out.append(new_parent)
        conds = out
    desired = NOT_YET_SET
    node_desired = node_annotations.get(ANN_DESIRED_CONFIG, "")
    if (parent.type == UPDATE_PREPARED and parent_status == "True") or (parent.type != UPDATE_PREPARED and node_desired):
        desired = node_desired
    version = dict(old_status.get("configVersion") or {})
    version["desired"] = desired
    if node_annotations.get(ANN_CURRENT_CONFIG):
        version["current"] = node_annotations[ANN_CURRENT_CONFIG]
    new_status = dict(old_status)
    new_status["conditions"] = conds
    new_status["configVersion"] = version
    new_status["observedGeneration"] = int((mcn.get("metadata") or {}).get("generation", 1)) + 1
    return new_status


def primary_pool(node: Mapping[str, Any], pools: Iterable[Mapping[str, Any]]) -> str:
    """The MachineConfigPool ``node`` belongs to (``helpers.GetPrimaryPoolNameForMCN``): the pool
    whose nodeSelector selects it, a custom pool before ``worker`` when several do (MCO
    ``GetPrimaryPoolForNode``); "" when none does."""
    from clustersim.agents.logic import labels
    from clustersim.selectors import matches_label_selector_object

    matching = sorted(p["metadata"]["name"] for p in pools
                      if matches_label_selector_object((p.get("spec") or {}).get("nodeSelector"), labels(node)))
    custom = [n for n in matching if n != "worker"]
    return (custom or matching or [""])[0]


def new_machine_config_node(node: Mapping[str, Any], pool: str, created: str) -> dict[str, Any]:
    """A MachineConfigNode for ``node`` (spec as ``GenerateAndApplyMachineConfigNodeSpec`` sets it:
    node and pool names, desired = the node's desiredConfig or ``not-yet-set``, an ownerReference
    to the Node), without status."""
    meta = node["metadata"]
    desired = (meta.get("annotations") or {}).get(ANN_DESIRED_CONFIG) or NOT_YET_SET
    return {
        "apiVersion": API_VERSION, "kind": "MachineConfigNode",
        "metadata": {"name": meta["name"], "creationTimestamp": created, "generation": 1,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"],
                                          "uid": meta.get("uid", "")}]},
        "spec": {"node": {"name": meta["name"]}, "pool": {"name": pool}, "configVersion": {"desired": desired}},
    }


def steady_status(mcn: Mapping[str, Any], node: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The status of a node that finished its last update and whose daemon has since started: the
    first write (daemon boot: ``Resumed`` True) followed by ``Updated`` True, which resets the rest
    to False. Keeps the MCN's own fields (``irreconcilableChanges``)."""
    ann = (node.get("metadata") or {}).get("annotations") or {}
    name = node["metadata"]["name"]
    work = dict(mcn)
    cur = ann.get(ANN_CURRENT_CONFIG, "")
    st = apply_conditions(work, Condition(RESUMED, RESUMED, f"In desired config {cur}. Resumed normal operations."),
                          None, "True", "False", ann, now)
    assert st is not None  # the first write always writes
    work["status"] = st
    st2 = apply_conditions(work, Condition(UPDATED, UPDATED, f"Node {name} Updated"), None, "True", "False", ann, now)
    return st2 if st2 is not None else st


def condition_status(mcn: Mapping[str, Any], ctype: str) -> str | None:
    """The status ("True"/"False"/"Unknown") of condition ``ctype`` of ``mcn``, None if absent."""
    for c in (mcn.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return str(c.get("status"))
    return None


def report(store: Any, node_name: str, parent: Condition, child: Condition | None = None,
           parent_status: str = "True", child_status: str = "False") -> bool:
    """Write one upgrade-monitor update of ``node_name``'s MachineConfigNode through ``store`` (a
    ``clustersim.store.Store``): nothing when the store does not serve MachineConfigNodes or the
    node is gone; the MCN is created first when missing (pool from the MachineConfigPools).
    Returns whether the status changed."""
    if not store.serves(MCN):
        return False
    node = store.try_get("nodes", node_name)
    if node is None:
        return False
    now = store.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    if store.try_get(MCN, node_name) is None:
        pools = store.list_refs("machineconfigpools.machineconfiguration.openshift.io")
        store.create(MCN, new_machine_config_node(node, primary_pool(node, pools), now))
    ann = node["metadata"].get("annotations") or {}
    changed = False

    def fn(o: dict[str, Any]) -> None:
        nonlocal changed
        st = apply_conditions(o, parent, child, parent_status, child_status, ann, now)
        if st is not None:
            o["status"] = st
            changed = True

    store.mutate(MCN, node_name, None, fn, subresource="status")
    return changed


def set_spec_desired(store: Any, node_name: str, pool: str | None = None) -> None:
    """Set ``spec.configVersion.desired`` (and ``spec.pool``/``spec.node``) of ``node_name``'s
    MachineConfigNode from the node's desiredConfig (``GenerateAndApplyMachineConfigNodeSpec``,
    ``UpdateMachineConfigNodeSpecDesiredAnnotations``); nothing when MCNs are not served or the
    node or its MCN is missing."""
    if not store.serves(MCN):
        return
    node = store.try_get("nodes", node_name)
    if node is None:
        return
    desired = (node["metadata"].get("annotations") or {}).get(ANN_DESIRED_CONFIG) or NOT_YET_SET
    if pool is None:
        pool = primary_pool(node, store.list_refs("machineconfigpools.machineconfiguration.openshift.io"))

    def fn(o: dict[str, Any]) -> None:
        spec = o.setdefault("spec", {})
        spec["node"] = {"name": node_name}
        spec["pool"] = {"name": pool}
        spec["configVersion"] = {"desired": desired}

    store.mutate(MCN, node_name, None, fn)
