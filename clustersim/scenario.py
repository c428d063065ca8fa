"""Scenario files: compact, pydantic-validated descriptions of simulated clusters.

A scenario (``clustersim/scenarios/<name>.yaml``) lists MachineConfigs, rendered
configs, MachineConfigPools, nodes, DaemonSets, Deployments, PodDisruptionBudgets, the
cluster network state and agent options; :meth:`Scenario.populate` expands it into
complete, schema-valid API objects in a :class:`clustersim.store.Store`. Raw objects of any
served kind go under ``objects:``; the optional component sections (``hosts``, ``gluster``,
``sdn``, ``masters``, ``external``) are kept as dicts for clustersim.components.

The section models live in clustersim.scenario_specs, the object builders in
clustersim.scenario_builders; this module re-exports both.
"""

from __future__ import annotations

import heapq
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import Field, ValidationError, model_validator

from clustersim.agents import logic
from clustersim.agents.objects import (
    make_machineconfig,
    make_node,
    merge_machineconfigs,
    make_pod,
    make_pool,
    new_uid,
    random_suffix,
    rfc3339,
    short_hash,
)
from clustersim.agents.podstatus import NetworkState, kubelet_status
from clustersim.components import SECTIONS
from clustersim.mco.model import McoSection, build_mco_objects
from clustersim.scenario_builders import (
    build_daemonset,
    build_deployment,
    build_network_objects,
    build_pdb,
    daemon_pod_affinity,
    daemon_tolerations,
    deployment_status,
    replicaset_status,
    resource_key_for,
    template_hash,
    unschedulable_status,
)
from clustersim.scenario_specs import (
    RENDERED_RE,
    DaemonSetSpec,
    DeploymentSpec,
    MachineConfigSpec,
    NetworkSpec,
    NodeSpec,
    PdbSpec,
    PoolSpec,
    RenderedConfigSpec,
    ScenarioOptions,
    TaintSpec,
    TolerationSpec,
    _Strict,
)

if TYPE_CHECKING:
    from clustersim.store import Store

# Names other modules import from here (kept stable across the split into scenario_specs/_builders).
__all__ = [
    "RENDERED_RE", "SCENARIO_DIR", "DaemonSetSpec", "DeploymentSpec", "MachineConfigSpec", "NetworkSpec", "NodeSpec",
    "PdbSpec", "PoolSpec", "RenderedConfigSpec", "Scenario", "ScenarioError", "ScenarioOptions", "TaintSpec",
    "TolerationSpec", "build_daemonset", "build_deployment", "build_network_objects", "build_pdb",
    "daemon_pod_affinity", "daemon_tolerations", "deployment_status", "generate_scenario", "list_scenarios",
    "load_scenario", "replicaset_status", "template_hash", "unschedulable_status",
]

SCENARIO_DIR = Path(__file__).parent / "scenarios"


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
    # Component sections (clustersim.components): kept as plain dicts and validated by the
    # component that owns them. A key given with no value (``hosts:``) means "defaults".
    hosts: dict[str, Any] | None = None
    gluster: dict[str, Any] | None = None
    sdn: dict[str, Any] | None = None
    masters: dict[str, Any] | None = None
    external: dict[str, Any] | None = None
    cno: dict[str, Any] | None = None
    mcc: dict[str, Any] | None = None
    # OpenShift 4.16+ machine-config world (clustersim.mco.model): MachineConfigNodes, node
    # disruption policies. Absent: none of it is served and the daemon drains and reboots always.
    mco: McoSection | None = None

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

    def component_sections(self) -> dict[str, dict[str, Any]]:
        """The component sections present in the scenario: name -> dict (``{}`` when empty)."""
        return {name: dict(getattr(self, name) or {}) for name in sorted(SECTIONS) if name in self.model_fields_set}

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
        versions = ("4.14.0", "4.14.6") if self.mco is None else (f"{self.mco.version}.0", self.mco.release)
        mc_objs: dict[str, dict[str, Any]] = {}
        for mc in self.machine_configs:
            mc_objs[mc.name] = make_machineconfig(
                mc.name, role=mc.role, created=ts(mc.created), files=mc.ignition_files(), units=mc.ignition_units(),
                ssh_keys=mc.ssh_authorized_keys, kernel_arguments=mc.kernel_arguments, os_image_url=mc.os_image_url)
            out.append(("machineconfigs.machineconfiguration.openshift.io", mc_objs[mc.name]))
        for r in self.rendered_configs:
            merged = merge_machineconfigs([mc_objs[s] for s in r.sources])
            if r.carries_ovn and not any("ovn" in f["path"] for f in merged["files"]):
                merged["files"].append("/etc/NetworkManager/conf.d/ovn-kubernetes.conf")
            out.append(("machineconfigs.machineconfiguration.openshift.io", make_machineconfig(
                r.name, role=r.pool, created=ts(r.created), owner_pool=r.pool,
                sources=r.sources, carries_ovn=r.carries_ovn, versions=versions, **merged)))
        sources = {r.name: r.sources for r in self.rendered_configs}

        nodes: list[dict[str, Any]] = []
        for i, n in enumerate(self.nodes):
            nodes.append(make_node(
                n.name, roles=n.roles, config=n.config, created=ts(n.created), zone=n.zone,
                unschedulable=n.unschedulable, taints=[t.model_dump(exclude_none=True) for t in n.taints],
                extra_labels=n.labels, index=i))
            if n.address:
                nodes[-1]["status"]["addresses"][0]["address"] = n.address
            nodes[-1]["metadata"]["annotations"].update(n.annotations)
        out.extend(("nodes", n) for n in nodes)

        for p in self.pools:
            pool = make_pool(p.name, node_selector=p.node_selector, target=p.target, current=p.current,
                             sources=sources[p.target], created=default_created, max_unavailable=p.max_unavailable)
            pool["metadata"]["generation"] = 1
            members = [n for n in nodes if logic.match_node_selector(p.node_selector, logic.labels(n))]
            if p.cert_expirys:
                pool["status"]["certExpirys"] = [
                    {"bundle": c.bundle, "subject": c.subject,
                     "expiry": rfc3339(c.expiry if c.expiry is not None
                                       else now + timedelta(hours=c.expires_in_hours or 0.0))}
                    for c in p.cert_expirys]
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
                pod_name = d.pod_names.get(nn) or f"{d.name}-{random_suffix(d.namespace + d.name + nn)}"
                pod = make_pod(pod_name, d.namespace, ds["spec"]["template"],
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
                    target, message = logic.schedule(pod, nodes, pods_per_node, filters, node_pods,
                                                     self.options.scheduler_messages)
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
        if self.mco is not None:
            pools = [o for k, o in out if k == "machineconfigpools.machineconfiguration.openshift.io"]
            out.extend(build_mco_objects(self.mco, nodes, pools, default_created, t_now))
        for raw in self.objects:
            out.append((resource_key_for(raw), raw))
        return out

    def served_kinds(self) -> list[str]:
        """The optional resource keys (clustersim.resources.OPTIONAL_RESOURCES) this scenario
        serves: those of its ``mco`` section and the kinds of its ``objects``. Raises ValueError
        for an object of a kind the simulator does not serve."""
        from clustersim.resources import RESOURCES

        keys = list(self.mco.served()) if self.mco is not None else []
        for raw in self.objects:
            key = resource_key_for(raw)
            if key not in RESOURCES and key not in keys:
                keys.append(key)
        return keys

    def populate(self, store: Store) -> None:
        """Create every object of the scenario in ``store`` (statuses included).

        Raises ``clustersim.store.ApiError`` if an object already exists."""
        now = store.clock.now() if getattr(store, "clock", None) else None
        store.serve(*self.served_kinds())
        # Store.load takes ownership of the freshly built dicts: no copies, so a 1,000-node /
        # 20,000-pod cluster loads in well under a second once built.
        store.load(self.build_objects(now))


def _dups(items: list[str]) -> set[str]:
    seen: set[str] = set()
    dup: set[str] = set()
    for x in items:
        (dup if x in seen else seen).add(x)
    return dup


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
