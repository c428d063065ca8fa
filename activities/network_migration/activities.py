"""Activities of the network migration: one read of everything the migration decides on, the
pools guard as an activity any procedure's health gate can call, and a namespace delete.

Synchronous (the gateway blocks); reads are GETs and LISTs only. Errors: a missing
``network.config/cluster`` or ``network.operator/cluster`` is the non-retryable
``NetworkConfigNotFound``; API errors propagate and are retried by the caller's policy.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.context import fail
from activities.kube import objects
from activities.kube.errors import NotFound
from activities.network_migration.models import (
    CertExpiry,
    DeleteNamespaceInput,
    DeleteNamespaceResult,
    MigrationState,
    MigrationStateInput,
    PLUGIN_OBJECTS,
    NodeState,
    PoolsSettledInput,
    PoolsSettledResult,
    PoolState,
    RolloutState,
    pools_settled,
)

MCO = "machineconfiguration.openshift.io/"


def _selected(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    match = (selector or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in match.items())


def rollout_state(ds: dict[str, Any] | None) -> RolloutState:
    """A DaemonSet -> :class:`RolloutState` (``kubectl rollout status`` rule)."""
    if ds is None:
        return RolloutState()
    st = ds.get("status") or {}
    desired = int(st.get("desiredNumberScheduled") or 0)
    updated = int(st.get("updatedNumberScheduled") or 0)
    available = int(st.get("numberAvailable") or 0)
    seen = int(st.get("observedGeneration") or 0) >= int(objects.meta(ds).get("generation") or 1)
    return RolloutState(present=True, desired=desired, updated=updated, available=available,
                        ready=int(st.get("numberReady") or 0), complete=seen and updated == desired == available)


def _owner_target(pod: dict[str, Any]) -> str:
    """``KIND NAMESPACE/NAME`` of the pod's controller (the pod's own when it has none)."""
    meta = objects.meta(pod)
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    kind, name = (owner.get("kind", "Pod"), owner.get("name", "")) if owner else ("Pod", meta.get("name", ""))
    return f"{kind} {meta.get('namespace', '')}/{name}"


def _pod_ready(pod: dict[str, Any]) -> bool:
    return objects.condition(pod, "Ready") == "True"


class NetworkMigrationActivities(GatewayActivities):
    """The network migration's own activities (see the module docstring)."""

    ACTIVITIES = ("read_migration_state", "check_pools_settled", "delete_namespace")

    def _state(self, count_pods: bool) -> MigrationState:
        gw = self.gateway
        try:
            cfg = gw.get("Network", "cluster")
            op = gw.get("Network.operator.openshift.io", "cluster")
        except NotFound:
            raise fail("NetworkConfigNotFound", "network.config/cluster or network.operator/cluster does not exist") from None
        nodes_raw = gw.list("Node")
        pools: list[PoolState] = []
        pool_of: dict[str, str] = {}
        for mcp in sorted(gw.list("MachineConfigPool"), key=lambda p: objects.meta(p).get("name", "")):
            spec, st = mcp.get("spec") or {}, mcp.get("status") or {}
            name = objects.meta(mcp).get("name", "")
            members = [objects.meta(n)["name"] for n in nodes_raw if _selected(spec.get("nodeSelector"), objects.labels(n))]
            target = (spec.get("configuration") or {}).get("name", "")
            for m in members:
                pool_of.setdefault(m, name)
            behind = [objects.meta(n)["name"] for n in nodes_raw if objects.meta(n)["name"] in members
                      and objects.annotations(n).get(MCO + "currentConfig") != target]
            pools.append(PoolState(
                name=name, paused=bool(spec.get("paused")), updated=objects.condition(mcp, "Updated") == "True",
                updating=objects.condition(mcp, "Updating") == "True", degraded=objects.condition(mcp, "Degraded") == "True",
                target=target, machine_count=int(st.get("machineCount") or 0),
                updated_machine_count=int(st.get("updatedMachineCount") or 0), nodes=sorted(members), nodes_behind=sorted(behind),
                cert_expirys=[CertExpiry(bundle=str(c.get("bundle") or ""), subject=str(c.get("subject") or ""),
                                         expiry=objects.parse_time(c.get("expiry")))
                              for c in st.get("certExpirys") or [] if isinstance(c, dict)]))
        nodes = []
        for n in sorted(nodes_raw, key=lambda n: objects.meta(n)["name"]):
            a, lb = objects.annotations(n), objects.labels(n)
            addrs = [x.get("address", "") for x in (n.get("status") or {}).get("addresses") or [] if x.get("type") == "InternalIP"]
            nodes.append(NodeState(
                name=objects.meta(n)["name"], pool=pool_of.get(objects.meta(n)["name"], ""),
                master="node-role.kubernetes.io/master" in lb or "node-role.kubernetes.io/control-plane" in lb,
                current_config=a.get(MCO + "currentConfig", ""), desired_config=a.get(MCO + "desiredConfig", ""),
                mco_state=a.get(MCO + "state", ""), ready=objects.condition(n, "Ready") == "True",
                boot_id=objects.boot_id(n), address=addrs[0] if addrs else ""))
        state = MigrationState(
            config_type=(cfg.get("spec") or {}).get("networkType", ""),
            status_type=(cfg.get("status") or {}).get("networkType", ""),
            migration=((op.get("spec") or {}).get("migration") or {}).get("networkType"),
            sdn_config="openshiftSDNConfig" in ((op.get("spec") or {}).get("defaultNetwork") or {}),
            sdn_namespace=self._exists("Namespace", "openshift-sdn"),
            pools=pools, nodes=nodes,
            multus=rollout_state(self._try("DaemonSet", "multus", "openshift-multus")),
            ovnkube=rollout_state(self._try("DaemonSet", "ovnkube-node", "openshift-ovn-kubernetes")),
        )
        for kind, namespace, name in PLUGIN_OBJECTS:
            obj = self._try(kind, name, namespace or None)
            if obj is not None:
                state.plugin_objects[f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"] = int(
                    objects.meta(obj).get("generation") or 1)
        if count_pods:
            pods = [p for p in gw.list("Pod")
                    if not (p.get("spec") or {}).get("hostNetwork") and not objects.meta(p).get("deletionTimestamp")
                    and (p.get("status") or {}).get("phase") in ("Running", "Pending") and not _pod_ready(p)]
            broken = [f"{objects.meta(p).get('namespace')}/{objects.meta(p).get('name')}" for p in pods]
            state.broken_pod_count, state.broken_pods = len(broken), broken[:50]
            state.broken_owners = sorted({_owner_target(p) for p in pods})
        return state

    def _try(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.gateway.get(kind, name, namespace)
        except NotFound:
            return None

    def _exists(self, kind: str, name: str) -> bool:
        return self._try(kind, name) is not None

    @activity.defn(name="read_migration_state", no_thread_cancel_exception=True)
    def read_migration_state(self, input: MigrationStateInput) -> MigrationState:
        """Read network configs, pools, nodes and the CNI DaemonSets (see :class:`MigrationState`).
        API errors are raised as their retryable ``Api*`` failure types (:meth:`planning_errors`
        with ``policy_decides``): the preflight's read fails fast under the planning retry policy,
        a read in the middle of the migration keeps retrying."""
        with self.planning_errors(policy_decides=True):
            return self._state(input.count_pods)

    @activity.defn(name="check_pools_settled", no_thread_cancel_exception=True)
    def check_pools_settled(self, input: PoolsSettledInput) -> PoolsSettledResult:
        """The pools guard (:func:`activities.network_migration.guard.pools_settled`) on a fresh read."""
        return pools_settled(self._state(False), input.baseline, input.pools)

    @activity.defn(name="delete_namespace", no_thread_cancel_exception=True)
    def delete_namespace(self, input: DeleteNamespaceInput) -> DeleteNamespaceResult:
        """DELETE namespace ``input.name``; already gone is success (``deleted`` False)."""
        try:
            self.gateway.delete("Namespace", input.name)
        except NotFound:
            return DeleteNamespaceResult(deleted=False)
        return DeleteNamespaceResult(deleted=True)


def make_network_migration_activities(gateway_factory: Any) -> list[Any]:
    """The network-migration activities for a Worker, bound to ``gateway_factory``."""
    factory = (lambda: gateway_factory) if hasattr(gateway_factory, "get_node") else gateway_factory
    return NetworkMigrationActivities(factory).activities()
