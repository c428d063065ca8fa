"""Builders of complete, schema-valid workload objects (DaemonSets, Deployments + ReplicaSets,
PDBs, the cluster Network) and the status computations the workload controllers share.

Used by the scenario loader (``clustersim.scenario``) and by the agents (``clustersim.agents``).
"""

from __future__ import annotations

import json
from typing import Any

from clustersim.agents import logic
from clustersim.agents.objects import new_uid, pod_template, rfc3339, short_hash
from clustersim.agents.podstatus import LABEL_REQUIRES_OVN
from clustersim.scenario_specs import (
    DaemonSetSpec,
    DeploymentSpec,
    NetworkSpec,
    PdbSpec,
)


def _owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    return any(r.get("uid") == owner["metadata"]["uid"] for r in obj["metadata"].get("ownerReferences") or [])


def template_hash(template: dict[str, Any]) -> str:
    """Stable hash of a pod template (stands in for pod-template-hash / controller-revision-hash)."""
    return short_hash(json.dumps(template, sort_keys=True), length=10)


def daemon_tolerations(existing: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Tolerations the DaemonSet controller adds to its pods (pkg/controller/daemon/util)."""
    tols = list(existing or [])
    for key, effect in (
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ):
        if not any(t.get("key") == key and t.get("effect") == effect for t in tols):
            tols.append({"key": key, "operator": "Exists", "effect": effect})
    return tols


def daemon_pod_affinity(node_name: str) -> dict[str, Any]:
    """DaemonSet pods are bound through required node affinity on metadata.name."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}}


def _apps_v1(kind: str, uid_kind: str, name: str, namespace: str, created: str, labels: dict[str, str],
             annotations: dict[str, str], *, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """An ``apps/v1`` ``kind`` object as the apiserver stores a new one (generation 1, created at
    ``created``, RFC 3339), its uid derived from ``<uid_kind>/<namespace>/<name>`` so a scenario
    loads the same uids every time."""
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": new_uid(f"{uid_kind}/{namespace}/{name}"),
                     "creationTimestamp": created, "generation": 1, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": status,
    }


def build_daemonset(d: DaemonSetSpec, created: str) -> dict[str, Any]:
    """A DaemonSet object from its scenario spec (status filled by the caller/agent)."""
    lbls = dict(d.labels)
    if d.requires_ovn:
        lbls[LABEL_REQUIRES_OVN] = "true"
    tmpl = pod_template(lbls, d.image, container=d.container, node_selector=d.node_selector,
                        tolerations=[t.model_dump(exclude_none=True) for t in d.tolerations],
                        host_network=d.host_network, priority_class="system-node-critical")
    strategy: dict[str, Any] = {"type": d.update_strategy}
    if d.update_strategy == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxUnavailable": d.max_unavailable, "maxSurge": 0}
    ds = _apps_v1(
        "DaemonSet", "ds", d.name, d.namespace, created, dict(d.labels),
        {"deprecated.daemonset.template.generation": "1"},
        spec={"selector": {"matchLabels": dict(d.labels)}, "template": tmpl, "updateStrategy": strategy,
              "revisionHistoryLimit": 10},
        status={"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0},
    )
    ds["metadata"]["annotations"]["clustersim.lockkeeper.io/template-hash"] = template_hash(tmpl)
    return ds


def build_deployment(d: DeploymentSpec, created: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Deployment and its current ReplicaSet (named <deployment>-<pod-template-hash>)."""
    tmpl = pod_template(d.labels, d.image, container=d.container, node_selector=d.node_selector,
                        tolerations=[t.model_dump(exclude_none=True) for t in d.tolerations])
    if d.spread_one_per_node:
        tmpl["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(d.labels)}, "topologyKey": "kubernetes.io/hostname"}]}}
    h = d.template_hash or template_hash(tmpl)
    dep = _apps_v1(
        "Deployment", "deploy", d.name, d.namespace, created, dict(d.labels),
        {"deployment.kubernetes.io/revision": "1"},
        spec={"replicas": d.replicas, "selector": {"matchLabels": dict(d.labels)}, "template": tmpl,
              "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
              "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
        status={},
    )
    rs_tmpl = {"metadata": {"labels": {**d.labels, "pod-template-hash": h}}, "spec": tmpl["spec"]}
    rs = _apps_v1(
        "ReplicaSet", "rs", f"{d.name}-{h}", d.namespace, created, {**d.labels, "pod-template-hash": h},
        {"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": str(d.replicas)},
        spec={"replicas": d.replicas, "selector": {"matchLabels": {**d.labels, "pod-template-hash": h}},
              "template": rs_tmpl},
        status={"replicas": 0},
    )
    rs["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": d.name,
                                          "uid": dep["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    return dep, rs


def replicaset_status(rs: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """ReplicaSet status counters from its non-terminating pods."""
    live = [p for p in pods if not logic.is_terminating(p)]
    ready = sum(1 for p in live if logic.pod_ready(p))
    return {"replicas": len(live), "fullyLabeledReplicas": len(live), "readyReplicas": ready,
            "availableReplicas": ready, "observedGeneration": rs["metadata"].get("generation", 1)}


def deployment_status(dep: dict[str, Any], pods: list[dict[str, Any]], now: str) -> dict[str, Any]:
    """Deployment status counters and Available/Progressing conditions."""
    live = [p for p in pods if not logic.is_terminating(p)]
    ready = sum(1 for p in live if logic.pod_ready(p))
    want = dep["spec"].get("replicas", 1)
    status: dict[str, Any] = {"observedGeneration": dep["metadata"].get("generation", 1), "replicas": len(live),
                              "updatedReplicas": len(live), "readyReplicas": ready, "availableReplicas": ready,
                              "unavailableReplicas": max(0, want - ready),
                              "conditions": [dict(c) for c in (dep.get("status") or {}).get("conditions") or []]}
    max_unavail = 0 if want <= 1 else want // 4
    available = ready >= want - max_unavail
    logic.set_condition(status, {"type": "Available", "status": "True" if available else "False",
                                 "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                                 "message": "Deployment has minimum availability." if available
                                 else "Deployment does not have minimum availability.", "lastUpdateTime": now}, now)
    logic.set_condition(status, {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                                 "message": f'ReplicaSet "{dep["metadata"]["name"]}" has successfully progressed.',
                                 "lastUpdateTime": now}, now)
    return status


def unschedulable_status(message: str, now: str) -> dict[str, Any]:
    """Pending pod status with PodScheduled False / Unschedulable."""
    return {"phase": "Pending", "qosClass": "Burstable", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        "lastProbeTime": None, "lastTransitionTime": now}]}


def build_pdb(p: PdbSpec, created: str) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget."""
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(p.selector)}}
    if p.min_available is not None:
        spec["minAvailable"] = p.min_available
    if p.max_unavailable is not None:
        spec["maxUnavailable"] = p.max_unavailable
    if p.unhealthy_pod_eviction_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = p.unhealthy_pod_eviction_policy
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": p.name, "namespace": p.namespace, "uid": new_uid(f"pdb/{p.namespace}/{p.name}"),
                         "creationTimestamp": created, "generation": 1},
            "spec": spec}


def build_network_objects(n: NetworkSpec, created: str) -> list[tuple[str, dict[str, Any]]]:
    """config.openshift.io and operator.openshift.io Network ``cluster`` objects."""
    status: dict[str, Any] = {"networkType": n.status_type, "clusterNetworkMTU": 1400,
                              "clusterNetwork": [{"cidr": "10.128.0.0/14", "hostPrefix": 23}],
                              "serviceNetwork": ["172.30.0.0/16"]}
    if n.migration:
        status["migration"] = {"networkType": n.migration}
    cfg = {"apiVersion": "config.openshift.io/v1", "kind": "Network",
           "metadata": {"name": "cluster", "uid": new_uid("network/config/cluster"), "creationTimestamp": created,
                        "generation": 2},
           "spec": {"networkType": n.spec_type, "clusterNetwork": status["clusterNetwork"],
                    "serviceNetwork": status["serviceNetwork"], "externalIP": {"policy": {}}},
           "status": status}
    if n.switched_at:
        cfg["metadata"]["annotations"] = {"clustersim.lockkeeper.io/network-switched-at": rfc3339(n.switched_at)}
    op = {"apiVersion": "operator.openshift.io/v1", "kind": "Network",
          "metadata": {"name": "cluster", "uid": new_uid("network/operator/cluster"), "creationTimestamp": created,
                       "generation": 2},
          "spec": {"defaultNetwork": {"type": n.spec_type}, "managementState": "Managed",
                   **({"migration": {"networkType": n.migration}} if n.migration else {})},
          "status": {}}
    return [("networks.config.openshift.io", cfg), ("networks.operator.openshift.io", op)]


def resource_key_for(obj: dict[str, Any]) -> str:
    """The store key (``pods``, ``daemonsets.apps`` ...) of a raw object by its apiVersion/kind,
    always-served or optional (``clustersim.resources.OPTIONAL_RESOURCES``: the scenario then serves it).

    Raises ValueError for a kind the simulator does not serve."""
    from clustersim.resources import OPTIONAL_RESOURCES, RESOURCES

    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group = api_version.split("/")[0] if "/" in api_version else ""
    for key, rt in (*RESOURCES.items(), *OPTIONAL_RESOURCES.items()):
        if rt.kind == kind and rt.group == group:
            return key
    raise ValueError(f"scenario object of unknown kind {api_version}/{kind}")
