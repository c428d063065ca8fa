"""Scenario files: compact, pydantic-validated descriptions of simulated clusters.

A scenario (``clustersim/scenarios/<name>.yaml``) lists MachineConfigs, rendered
configs, MachineConfigPools, nodes, DaemonSets, Deployments, PodDisruptionBudgets, the
cluster network state and agent options; :meth:`Scenario.populate` expands it into
complete, schema-valid API objects in a :class:`clustersim.store.Store`.
"""

from __future__ import annotations

import heapq
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clustersim.agents import logic
from clustersim.agents.objects import (
    make_machineconfig,
    make_node,
    make_pod,
    make_pool,
    new_uid,
    pod_template,
    random_suffix,
    rfc3339,
    short_hash,
)
from clustersim.agents.podstatus import LABEL_REQUIRES_OVN, NetworkState, kubelet_status

if TYPE_CHECKING:
    from clustersim.store import Store

SCENARIO_DIR = Path(__file__).parent / "scenarios"
RENDERED_RE = re.compile(r"^rendered-[a-z0-9-]+-[0-9a-f]{32}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScenarioOptions(_Strict):
    """Agent timings in simulated seconds (scaled by ``Clock.time_scale``) and behaviour switches."""

    reboot_seconds: float = 30.0
    write_files_seconds: float = 2.0
    drain_deadline_seconds: float = 3600.0  # MCO pkg/daemon/drain.go: 1 hour
    uncordon_deadline_seconds: float = 600.0  # 10 minutes
    pod_start_seconds: float = 2.0
    crashloop_seconds: float = 10.0  # interval between restarts of a crash-looping container
    # "current": kube-scheduler >= 1.23 filter order; "legacy": 1.19-1.21 (OKD 4.6-4.8),
    # NodeAffinity before TaintToleration (changes which reason a node is counted under).
    scheduler_filters: Literal["current", "legacy"] = "current"


class MachineConfigSpec(_Strict):
    name: str
    role: str
    files: list[str] = Field(default_factory=list)
    created: datetime


class RenderedConfigSpec(_Strict):
    name: str
    pool: str
    sources: list[str]
    created: datetime
    carries_ovn: bool = False  # R1: has the OVN-Kubernetes host files

    @field_validator("name")
    @classmethod
    def _rendered_name(cls, v: str) -> str:
        if not RENDERED_RE.match(v):
            raise ValueError(f"rendered config name {v!r} must look like rendered-<pool>-<32 hex>")
        return v


class PoolSpec(_Strict):
    name: str
    node_selector: dict[str, str]
    current: str  # status.configuration: what the nodes are at
    target: str  # spec.configuration: the rendered config the pool should reach
    max_unavailable: int | str = 1


class TaintSpec(_Strict):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeSpec(_Strict):
    name: str
    roles: list[str]
    config: str
    zone: str | None = None
    unschedulable: bool = False
    taints: list[TaintSpec] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    created: datetime | None = None


class TolerationSpec(_Strict):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: str | None = None


class DaemonSetSpec(_Strict):
    name: str
    namespace: str
    labels: dict[str, str]
    image: str
    container: str = "main"
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[TolerationSpec] = Field(default_factory=list)
    host_network: bool = False
    requires_ovn: bool = False  # crash-loops on nodes whose config lacks the OVN files (R1)
    update_strategy: Literal["RollingUpdate", "OnDelete"] = "RollingUpdate"
    max_unavailable: int | str = 1
    created: datetime | None = None


class DeploymentSpec(_Strict):
    name: str
    namespace: str
    replicas: int = Field(ge=0)
    labels: dict[str, str]
    image: str
    container: str = "main"
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[TolerationSpec] = Field(default_factory=list)
    template_hash: str | None = None  # pod-template-hash; derived from the template when absent
    pod_names: list[str] = Field(default_factory=list)  # explicit names for the first pods
    # requiredDuringScheduling pod anti-affinity on kubernetes.io/hostname (one pod per node),
    # as the OpenShift ingress operator sets for router-default.
    spread_one_per_node: bool = False
    created: datetime | None = None


class PdbSpec(_Strict):
    name: str
    namespace: str
    selector: dict[str, str]
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    #: policy/v1 spec.unhealthyPodEvictionPolicy (k8s >= 1.27): IfHealthyBudget (the API default)
    #: or AlwaysAllow (unready pods may always be evicted).
    unhealthy_pod_eviction_policy: Literal["IfHealthyBudget", "AlwaysAllow"] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PdbSpec:
        if (self.min_available is None) == (self.max_unavailable is None):
            raise ValueError(f"PDB {self.name}: set exactly one of min_available / max_unavailable")
        return self


class NetworkSpec(_Strict):
    """config.openshift.io/v1 Network ``cluster``. ``switched_at`` set means the R1 model
    is on: pod networking needs a node config with carries_ovn."""

    spec_type: str = "OVNKubernetes"
    status_type: str = "OVNKubernetes"
    switched_at: datetime | None = None
    migration: str | None = None  # status.migration.networkType


class Scenario(_Strict):
    """A simulated cluster. See the module docstring; ``objects`` holds extra raw objects
    (each with apiVersion/kind/metadata) created as given."""

    name: str
    description: str
    options: ScenarioOptions = Field(default_factory=ScenarioOptions)
    machine_configs: list[MachineConfigSpec] = Field(default_factory=list)
    rendered_configs: list[RenderedConfigSpec] = Field(default_factory=list)
    pools: list[PoolSpec] = Field(default_factory=list)
    nodes: list[NodeSpec] = Field(default_factory=list)
    daemonsets: list[DaemonSetSpec] = Field(default_factory=list)
    deployments: list[DeploymentSpec] = Field(default_factory=list)
    pdbs: list[PdbSpec] = Field(default_factory=list)
    network: NetworkSpec | None = None
    objects: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        for label, items in (
            ("machine config", [m.name for m in self.machine_configs] + [r.name for r in self.rendered_configs]),
            ("pool", [p.name for p in self.pools]),
            ("node", [n.name for n in self.nodes]),
        ):
            dup = {x for x in items if items.count(x) > 1} if len(items) < 5000 else _dups(items)
            if dup:
                raise ValueError(f"duplicate {label} names: {sorted(dup)}")
        rendered = {r.name for r in self.rendered_configs}
        mcs = {m.name for m in self.machine_configs}
        for r in self.rendered_configs:
            missing = [s for s in r.sources if s not in mcs]
            if missing:
                raise ValueError(f"rendered config {r.name}: unknown source MachineConfigs {missing}")
        for p in self.pools:
            for cfg in (p.current, p.target):
                if cfg not in rendered:
                    raise ValueError(f"pool {p.name}: unknown rendered config {cfg!r}")
        for n in self.nodes:
            if n.config not in rendered:
                raise ValueError(f"node {n.name}: unknown rendered config {n.config!r}")
        return self

    # ------------------------------------------------------------ network model

    def network_state(self) -> NetworkState:
        """The R1 pod-network model the kubelet agent applies."""
        if self.network is None or self.network.switched_at is None:
            return NetworkState()
        return NetworkState(
            enabled=True,
            ovn_configs={r.name for r in self.rendered_configs if r.carries_ovn},
            switched_at=rfc3339(self.network.switched_at),
        )

    # ------------------------------------------------------------ populate

    def build_objects(self, now: datetime | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Every object of the scenario as (resource key, object), in creation order."""
        now = now or datetime.now(UTC)
        t_now = rfc3339(now)
        default_created = rfc3339(now - timedelta(days=30))
        out: list[tuple[str, dict[str, Any]]] = []

        def ts(value: datetime | None) -> str:
            return rfc3339(value) if value else default_created

        namespaces = sorted(
            {d.namespace for d in self.daemonsets} | {d.namespace for d in self.deployments} | {p.namespace for p in self.pdbs}
            | {"openshift-machine-config-operator"}
        )
        for ns in namespaces:
            out.append(("namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "uid": new_uid(f"ns/{ns}"), "creationTimestamp": default_created,
                             "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"},
            }))
        for mc in self.machine_configs:
            out.append(("machineconfigs.machineconfiguration.openshift.io",
                        make_machineconfig(mc.name, role=mc.role, created=ts(mc.created), files=mc.files)))
        files_by_mc = {m.name: m.files for m in self.machine_configs}
        for r in self.rendered_configs:
            files = [f for s in r.sources for f in files_by_mc[s]]
            if r.carries_ovn and not any("ovn" in f for f in files):
                files.append("/etc/NetworkManager/conf.d/ovn-kubernetes.conf")
            out.append(("machineconfigs.machineconfiguration.openshift.io", make_machineconfig(
                r.name, role=r.pool, created=ts(r.created), files=files, owner_pool=r.pool,
                sources=r.sources, carries_ovn=r.carries_ovn)))
        sources = {r.name: r.sources for r in self.rendered_configs}

        nodes: list[dict[str, Any]] = []
        for i, n in enumerate(self.nodes):
            nodes.append(make_node(
                n.name, roles=n.roles, config=n.config, created=ts(n.created), zone=n.zone,
                unschedulable=n.unschedulable, taints=[t.model_dump(exclude_none=True) for t in n.taints],
                extra_labels=n.labels, index=i))
        out.extend(("nodes", n) for n in nodes)

        for p in self.pools:
            pool = make_pool(p.name, node_selector=p.node_selector, target=p.target, current=p.current,
                             sources=sources[p.target], created=default_created, max_unavailable=p.max_unavailable)
            pool["metadata"]["generation"] = 1
            members = [n for n in nodes if logic.match_node_selector(p.node_selector, logic.labels(n))]
            pool["status"] = logic.compute_pool_status(pool, members, t_now)
            out.append(("machineconfigpools.machineconfiguration.openshift.io", pool))

        net = self.network_state()
        node_by_name = {n["metadata"]["name"]: n for n in nodes}
        pods_per_node: dict[str, int] = {}
        pods: list[dict[str, Any]] = []
        filters = logic.FILTERS_LEGACY if self.options.scheduler_filters == "legacy" else logic.FILTERS_CURRENT

        for d in self.daemonsets:
            ds = build_daemonset(d, ts(d.created))
            out.append(("daemonsets.apps", ds))
            rev_hash = ds["metadata"]["annotations"]["clustersim.lockkeeper.io/template-hash"]
            for node in nodes:
                if not logic.daemonset_should_run(ds, node):
                    continue
                nn = node["metadata"]["name"]
                pod = make_pod(f"{d.name}-{random_suffix(d.namespace + d.name + nn)}", d.namespace, ds["spec"]["template"],
                               owner=ds, extra_labels={"controller-revision-hash": rev_hash, "pod-template-generation": "1"},
                               node_name=nn, created=ts(d.created), generate_name=f"{d.name}-")
                pod["spec"]["affinity"] = daemon_pod_affinity(nn)
                pod["spec"]["tolerations"] = daemon_tolerations(pod["spec"].get("tolerations"))
                pods.append(pod)
                pods_per_node[nn] = pods_per_node.get(nn, 0) + 1

        fits_cache: dict[str, list[str]] = {}
        node_pods: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            node_pods.setdefault(pod["spec"]["nodeName"], []).append(pod)
        for d in self.deployments:
            dep, rs = build_deployment(d, ts(d.created))
            out.append(("deployments.apps", dep))
            out.append(("replicasets.apps", rs))
            tmpl_hash = rs["metadata"]["labels"]["pod-template-hash"]
            # Without anti-affinity the feasible nodes are the same for every replica: filter
            # once and spread with a heap (keeps 20,000-pod scenarios fast).
            heap: list[tuple[int, str]] | None = None
            if not d.spread_one_per_node:
                probe = {"spec": rs["spec"]["template"]["spec"]}
                sched_key = json.dumps([probe["spec"].get(k) for k in ("nodeSelector", "tolerations", "affinity")],
                                       sort_keys=True)
                if sched_key not in fits_cache:
                    fits_cache[sched_key] = [n["metadata"]["name"] for n in nodes
                                             if logic.filter_node(probe, n, filters) is None]
                fits = fits_cache[sched_key]
                heap = [(pods_per_node.get(n, 0), n) for n in fits]
                heapq.heapify(heap)
            for i in range(d.replicas):
                name = d.pod_names[i] if i < len(d.pod_names) else f"{rs['metadata']['name']}-{random_suffix(f'{d.namespace}/{d.name}/{i}')}"
                pod = make_pod(name, d.namespace, rs["spec"]["template"], owner=rs,
                               extra_labels={"pod-template-hash": tmpl_hash}, created=ts(d.created),
                               generate_name=f"{rs['metadata']['name']}-")
                if heap:
                    count, target = heapq.heappop(heap)
                    heapq.heappush(heap, (count + 1, target))
                    message = ""
                else:
                    target, message = logic.schedule(pod, nodes, pods_per_node, filters, node_pods)
                if target is None:
                    pod["status"] = unschedulable_status(message, t_now)
                else:
                    pod["spec"]["nodeName"] = target
                    pods_per_node[target] = pods_per_node.get(target, 0) + 1
                    node_pods.setdefault(target, []).append(pod)
                pods.append(pod)

        for pod in pods:
            node = node_by_name.get(pod["spec"].get("nodeName", ""))
            if node is not None:
                pod["status"] = kubelet_status(pod, node, net, pod["metadata"]["creationTimestamp"])
        # Controller statuses consistent with the pods, as if the controllers had run.
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            for ref in p["metadata"].get("ownerReferences") or []:
                by_owner.setdefault(ref["uid"], []).append(p)
        rs_of: dict[str, dict[str, Any]] = {}
        for key, obj in out:
            if key == "replicasets.apps":
                for ref in obj["metadata"].get("ownerReferences") or []:
                    rs_of[ref["uid"]] = obj
        for key, obj in out:
            if key == "daemonsets.apps":
                mine = by_owner.get(obj["metadata"]["uid"], [])
                should = {n["metadata"]["name"] for n in nodes if logic.daemonset_should_run(obj, n)}
                obj["status"] = logic.compute_daemonset_status(
                    obj, should, mine, obj["metadata"]["annotations"]["clustersim.lockkeeper.io/template-hash"])
            elif key == "replicasets.apps":
                obj["status"] = replicaset_status(obj, by_owner.get(obj["metadata"]["uid"], []))
            elif key == "deployments.apps":
                mine = by_owner.get(rs_of[obj["metadata"]["uid"]]["metadata"]["uid"], [])
                obj["status"] = deployment_status(obj, mine, t_now)
        out.extend(("pods", p) for p in pods)

        pods_by_ns: dict[str, list[dict[str, Any]]] = {}
        for x in pods:
            pods_by_ns.setdefault(x["metadata"]["namespace"], []).append(x)
        for p in self.pdbs:
            pdb = build_pdb(p, default_created)
            pdb["status"] = logic.compute_pdb_status(pdb, pods_by_ns.get(p.namespace, []), t_now)
            out.append(("poddisruptionbudgets.policy", pdb))

        if self.network is not None:
            out.extend(build_network_objects(self.network, default_created))
        for raw in self.objects:
            out.append((_resource_key_for(raw), raw))
        return out

    def populate(self, store: Store) -> None:
        """Create every object of the scenario in ``store`` (statuses included).

        Raises ``clustersim.store.ApiError`` if an object already exists."""
        now = store.clock.now() if getattr(store, "clock", None) else None
        # Store.load takes ownership of the freshly built dicts: no copies, so a 1,000-node /
        # 20,000-pod cluster loads in well under a second once built.
        store.load(self.build_objects(now))


# ---------------------------------------------------------------- workload builders


def _dups(items: list[str]) -> set[str]:
    seen: set[str] = set()
    dup: set[str] = set()
    for x in items:
        (dup if x in seen else seen).add(x)
    return dup


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
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": d.name, "namespace": d.namespace, "uid": new_uid(f"ds/{d.namespace}/{d.name}"),
                     "creationTimestamp": created, "generation": 1, "labels": dict(d.labels),
                     "annotations": {"deprecated.daemonset.template.generation": "1"}},
        "spec": {"selector": {"matchLabels": dict(d.labels)}, "template": tmpl, "updateStrategy": strategy,
                 "revisionHistoryLimit": 10},
        "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0},
    }
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
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": d.name, "namespace": d.namespace, "uid": new_uid(f"deploy/{d.namespace}/{d.name}"),
                     "creationTimestamp": created, "generation": 1, "labels": dict(d.labels),
                     "annotations": {"deployment.kubernetes.io/revision": "1"}},
        "spec": {"replicas": d.replicas, "selector": {"matchLabels": dict(d.labels)}, "template": tmpl,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                 "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
        "status": {},
    }
    rs_tmpl = {"metadata": {"labels": {**d.labels, "pod-template-hash": h}}, "spec": tmpl["spec"]}
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"{d.name}-{h}", "namespace": d.namespace, "uid": new_uid(f"rs/{d.namespace}/{d.name}-{h}"),
                     "creationTimestamp": created, "generation": 1, "labels": {**d.labels, "pod-template-hash": h},
                     "annotations": {"deployment.kubernetes.io/revision": "1",
                                     "deployment.kubernetes.io/desired-replicas": str(d.replicas)}},
        "spec": {"replicas": d.replicas, "selector": {"matchLabels": {**d.labels, "pod-template-hash": h}},
                 "template": rs_tmpl},
        "status": {"replicas": 0},
    }
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


def _resource_key_for(obj: dict[str, Any]) -> str:
    from clustersim.store import RESOURCES

    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group = api_version.split("/")[0] if "/" in api_version else ""
    for key, rt in RESOURCES.items():
        if rt.kind == kind and rt.group == group:
            return key
    raise ValueError(f"scenario object of unknown kind {api_version}/{kind}")


# ---------------------------------------------------------------- loading


class ScenarioError(ValueError):
    """A scenario name is unknown or its file is invalid (message says which and why)."""


def list_scenarios() -> list[tuple[str, str]]:
    """(name, description) of every bundled scenario, sorted by name."""
    out = []
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        out.append((path.stem, str(data.get("description", "")).strip().splitlines()[0] if data.get("description") else ""))
    return out


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a bundled scenario by name (``r2-pdb-blocked``) or a YAML file by path.

    Raises ScenarioError for unknown names (listing the known ones) and invalid files
    (with pydantic's field-by-field explanation)."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            known = ", ".join(n for n, _ in list_scenarios())
            raise ScenarioError(f"unknown scenario {str(name_or_path)!r}; known scenarios: {known}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario file {path}: invalid YAML: {exc}") from exc
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"scenario file {path} is invalid:\n{exc}") from exc


def generate_scenario(
    nodes: int,
    pods: int,
    pools: dict[str, int] | None = None,
    *,
    name: str = "generated",
    namespaces: int = 10,
    pods_per_deployment: int = 10,
    **options: Any,
) -> Scenario:
    """A synthetic cluster: ``nodes`` nodes across ``pools`` (name -> node count; default
    3 masters and the rest workers), ``pods`` Deployment pods spread over the workers
    (``pods_per_deployment`` replicas per Deployment, across ``namespaces`` namespaces),
    one ovnkube-node-like DaemonSet is NOT added (it would add ``nodes`` pods). Each pool
    gets an old and a new rendered config; nodes are at the old one, pools target the new.
    ``options`` are ScenarioOptions fields. Raises ValueError if pool counts don't sum to ``nodes``.
    """
    if pools is None:
        masters = min(3, nodes)
        pools = {"master": masters, "worker": nodes - masters}
    if sum(pools.values()) != nodes:
        raise ValueError(f"pool sizes {pools} do not add up to {nodes} nodes")
    base = datetime(2024, 1, 1, tzinfo=UTC)
    mcs, rendered, pool_specs, node_specs = [], [], [], []
    for pname, count in pools.items():
        mcs.append(MachineConfigSpec(name=f"00-{pname}", role=pname, files=[f"/etc/{pname}.conf"], created=base))
        mcs.append(MachineConfigSpec(name=f"99-{pname}-update", role=pname, files=[f"/etc/{pname}-update.conf"],
                                     created=base + timedelta(days=10)))
        old = f"rendered-{pname}-{short_hash(pname, 'old', length=32)}"
        new = f"rendered-{pname}-{short_hash(pname, 'new', length=32)}"
        rendered.append(RenderedConfigSpec(name=old, pool=pname, sources=[f"00-{pname}"], created=base))
        rendered.append(RenderedConfigSpec(name=new, pool=pname, sources=[f"00-{pname}", f"99-{pname}-update"],
                                           created=base + timedelta(days=10)))
        pool_specs.append(PoolSpec(name=pname, node_selector={f"node-role.kubernetes.io/{pname}": ""},
                                   current=old, target=new))
        for i in range(count):
            node_specs.append(NodeSpec(
                name=f"{pname}-{i:04d}", roles=[pname], config=old, zone=f"zone-{'abc'[i % 3]}",
                taints=[TaintSpec(key="node-role.kubernetes.io/master", effect="NoSchedule")] if pname == "master" else [],
                created=base + timedelta(seconds=i)))
    worker_sel = {} if "worker" not in pools else {"node-role.kubernetes.io/worker": ""}
    deployments = []
    full, rest = divmod(pods, pods_per_deployment)
    for i in range(full + (1 if rest else 0)):
        ns = f"app-{i % namespaces:02d}"
        deployments.append(DeploymentSpec(
            name=f"app-{i:05d}", namespace=ns, replicas=pods_per_deployment if i < full else rest,
            labels={"app": f"app-{i:05d}"}, image="registry.example.com/app:1.0", node_selector=worker_sel,
            created=base + timedelta(days=1)))
    return Scenario(
        name=name,
        description=f"generated: {nodes} nodes ({pools}), {pods} pods",
        options=ScenarioOptions(**options),
        machine_configs=mcs,
        rendered_configs=rendered,
        pools=pool_specs,
        nodes=node_specs,
        deployments=deployments,
    )
