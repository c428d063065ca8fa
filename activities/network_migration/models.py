"""Models of the network-migration activities (pure pydantic; workflows import these only).

Sources: OpenShift 4.14 "Migrating from the OpenShift SDN network plugin" (offline migration) for
the objects read (``network.config/cluster``, ``network.operator/cluster``, MachineConfigPools,
the ``openshift-multus/multus`` and ``openshift-ovn-kubernetes/ovnkube-node`` DaemonSets), and MCO
node annotations ``machineconfiguration.openshift.io/currentConfig``/``desiredConfig``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class CertExpiry(BaseModel):
    """One MachineConfigPool ``status.certExpirys`` entry (openshift/api machineconfiguration/v1
    ``CertExpiry``: the certificates of the ControllerConfig's bundles, e.g. subject
    ``CN=kube-apiserver-to-kubelet-signer,OU=openshift``); ``expiry`` None when unparseable."""

    bundle: str = ""
    subject: str = ""
    expiry: datetime | None = None


class PoolState(BaseModel):
    """One MachineConfigPool: ``target`` is ``spec.configuration.name`` (the newest rendered
    config the controller rolls out), ``nodes`` the names its nodeSelector matches,
    ``nodes_behind`` those whose currentConfig is not ``target``."""

    name: str
    paused: bool = False
    updated: bool = False
    updating: bool = False
    degraded: bool = False
    target: str = ""
    machine_count: int = 0
    updated_machine_count: int = 0
    nodes: list[str] = Field(default_factory=list)
    nodes_behind: list[str] = Field(default_factory=list)
    cert_expirys: list[CertExpiry] = Field(default_factory=list)


class NodeState(BaseModel):
    """One node: ``pool`` ("" when no pool selects it), MCO annotations, Ready, the boot id
    (``status.nodeInfo.bootID``, changes on every reboot), ``address`` (InternalIP)."""

    name: str
    pool: str = ""
    master: bool = False
    current_config: str = ""
    desired_config: str = ""
    mco_state: str = ""
    ready: bool = False
    boot_id: str = ""
    address: str = ""


class RolloutState(BaseModel):
    """A DaemonSet's rollout: ``present`` False when it does not exist; ``complete`` when the
    controller saw the newest generation and every scheduled pod is updated and available
    (``kubectl rollout status`` semantics)."""

    present: bool = False
    desired: int = 0
    updated: int = 0
    available: int = 0
    ready: int = 0
    complete: bool = False


class MigrationStateInput(BaseModel):
    """What to read: pod readiness of pod-network pods is counted only with ``count_pods``."""

    count_pods: bool = False


class MigrationState(BaseModel):
    """The cluster as the migration sees it (GETs and LISTs only).

    ``config_type``/``status_type``: ``network.config/cluster`` spec/status networkType;
    ``migration``: ``network.operator/cluster`` spec.migration.networkType (None = absent);
    ``sdn_config``: the operator still carries ``spec.defaultNetwork.openshiftSDNConfig``;
    ``sdn_namespace``: namespace ``openshift-sdn`` exists; ``broken_pods``: pod-network pods not
    Ready (namespace/name, first 50) with ``count_pods``."""

    config_type: str = ""
    status_type: str = ""
    migration: str | None = None
    sdn_config: bool = False
    sdn_namespace: bool = False
    pools: list[PoolState] = Field(default_factory=list)
    nodes: list[NodeState] = Field(default_factory=list)
    multus: RolloutState = Field(default_factory=RolloutState)
    ovnkube: RolloutState = Field(default_factory=RolloutState)
    broken_pods: list[str] = Field(default_factory=list)
    broken_pod_count: int = 0
    #: The network plugins' objects that exist (:data:`PLUGIN_OBJECTS`), as lockkeeper names a
    #: target (``DaemonSet openshift-sdn/sdn``) -> ``metadata.generation`` (bumped on a spec change).
    plugin_objects: dict[str, int] = Field(default_factory=dict)
    #: With ``count_pods``: the owners of the pods in ``broken_pods`` (all of them, not the first
    #: 50), each as a target: ``ReplicaSet shop/shop-api-5d9f``, ``DaemonSet openshift-dns/dns-default``
    #: (``Pod NAMESPACE/NAME`` for a pod without a controller).
    broken_owners: list[str] = Field(default_factory=list)


#: The objects the cluster network operator adds, removes or restarts when the network type
#: changes: (kind, namespace, name).
PLUGIN_OBJECTS: list[tuple[str, str, str]] = [
    ("DaemonSet", "openshift-sdn", "sdn"), ("DaemonSet", "openshift-ovn-kubernetes", "ovnkube-node"),
    ("DaemonSet", "openshift-multus", "multus"), ("Namespace", "", "openshift-sdn"), ("Namespace", "", "openshift-ovn-kubernetes"),
]


class PoolsSettledInput(BaseModel):
    """The guard's input: ``baseline`` pool -> rendered config the pool had before the change
    (the newest config must differ, i.e. carry the change); empty = no such requirement;
    ``pools`` empty = every pool."""

    baseline: dict[str, str] = Field(default_factory=dict)
    pools: list[str] = Field(default_factory=list)


class PoolsSettledResult(BaseModel):
    """``ok`` when every pool is Updated=True/Updating=False/Degraded=False and every node's
    currentConfig is its pool's newest rendered config; ``behind`` says what is not (one line
    per pool or node)."""

    ok: bool
    behind: list[str] = Field(default_factory=list)


class DeleteNamespaceInput(BaseModel):
    """Delete namespace ``name`` (absent already = success)."""

    name: str


class DeleteNamespaceResult(BaseModel):
    """``deleted`` False when it was gone already."""

    deleted: bool


# --- the pools guard (pure; here so that workflows, which import only models, evaluate it too) ---
#
# R1's lesson: no network-type switch while any pool is updating. A pool passes when its
# conditions are Updated=True, Updating=False, Degraded=False, and every node it selects has
# currentConfig equal to the pool's newest rendered config (spec.configuration.name); with a
# baseline the newest config must also differ from the pool's config before the change (so it
# carries the change, e.g. the OVN files).


def pools_settled(state: MigrationState, baseline: dict[str, str] | None = None, pools: list[str] | None = None) -> PoolsSettledResult:
    """Evaluate the guard on ``state``; ``pools`` empty = every pool. ``behind`` names each pool
    and node that fails, with what it is at."""
    baseline = baseline or {}
    behind: list[str] = []
    nodes = {n.name: n for n in state.nodes}
    for p in state.pools:
        if pools and p.name not in pools:
            continue
        flags = []
        if not p.updated:
            flags.append("Updated=False")
        if p.updating:
            flags.append("Updating=True")
        if p.degraded:
            flags.append("Degraded=True")
        if flags:
            behind.append(f"pool {p.name}: {', '.join(flags)} ({p.updated_machine_count}/{p.machine_count} updated)")
        if p.name in baseline and p.target == baseline[p.name]:
            behind.append(f"pool {p.name}: newest rendered config {p.target} is still the one from before the change")
        for name in p.nodes:
            n = nodes.get(name)
            if n is not None and n.current_config != p.target:
                behind.append(f"node {name} ({p.name}): currentConfig {n.current_config or '-'}, pool at {p.target}")
    return PoolsSettledResult(ok=not behind, behind=behind)
