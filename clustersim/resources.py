"""The resource types the simulated API server serves (rows of its APIResourceLists).

``RESOURCES`` maps a store key (``pods``, ``daemonsets.apps``, ``networks.config.openshift.io``)
to its ``ResourceType``: every store serves these. Components that serve more kinds add rows with
``register_resource`` at import time, before a ``Store`` is created.

``OPTIONAL_RESOURCES`` are kinds only some clusters have (OpenShift 4.16+ CRDs and the Machine API):
a ``Store`` serves one only after ``Store.serve(key)``, which a scenario that says so calls when it
is populated (clustersim.scenario). A scenario that does not name them keeps the exact discovery
documents it had before they existed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    """One served resource (a row of an APIResourceList)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    subresources: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """``pods``, ``daemonsets.apps``, ``networks.config.openshift.io`` ..."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified(self) -> str:
        """Resource name as apiserver messages print it (same as key)."""
        return self.key

    @property
    def api_version(self) -> str:
        """``v1``, ``apps/v1`` ..."""
        return f"{self.group}/{self.version}" if self.group else self.version


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool, short: tuple[str, ...] = (),
        sub: tuple[str, ...] = ()) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, kind.lower(), short, subresources=sub)


RESOURCES: dict[str, ResourceType] = {
    rt.key: rt
    for rt in (
        _rt("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
        _rt("", "v1", "nodes", "Node", False, ("no",), ("status",)),
        _rt("", "v1", "pods", "Pod", True, ("po",), ("status", "eviction", "exec")),
        _rt("", "v1", "events", "Event", True, ("ev",)),
        _rt("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
        _rt("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",)),
        _rt("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("status", "scale")),
        _rt("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("status", "scale")),
        _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ("status",)),
        _rt("machineconfiguration.openshift.io", "v1", "machineconfigs", "MachineConfig", False, ("mc",)),
        _rt("machineconfiguration.openshift.io", "v1", "machineconfigpools", "MachineConfigPool", False,
            ("mcp",), ("status",)),
        _rt("coordination.k8s.io", "v1", "leases", "Lease", True),
        # OpenShift 3.11 world (issue 10): DC controller and R3e scan kinds, R5's ClusterNetwork.
        _rt("apps.openshift.io", "v1", "deploymentconfigs", "DeploymentConfig", True, ("dc",), ("status", "scale")),
        _rt("", "v1", "replicationcontrollers", "ReplicationController", True, ("rc",), ("status", "scale")),
        _rt("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("status", "scale")),
        _rt("batch", "v1", "cronjobs", "CronJob", True, ("cj",), ("status",)),
        _rt("network.openshift.io", "v1", "clusternetworks", "ClusterNetwork", False),
        _rt("config.openshift.io", "v1", "networks", "Network", False, (), ("status",)),
        _rt("operator.openshift.io", "v1", "networks", "Network", False, (), ("status",)),
    )
}


#: Served only by a store that enables them (``Store.serve``), see the module docstring. Sources:
#: openshift/api release-4.21 ``machineconfiguration/v1/types_machineconfignode.go``
#: (machineconfignodes, cluster-scoped, status subresource), ``operator/v1/types_machineconfiguration.go``
#: (machineconfigurations), ``machine/v1beta1`` (machines, machinehealthchecks: namespaced, status
#: subresource, short names ``ma`` / ``mhc``/``mhcs``) and ``config/v1`` (clusterversions).
OPTIONAL_RESOURCES: dict[str, ResourceType] = {
    rt.key: rt
    for rt in (
        _rt("machineconfiguration.openshift.io", "v1", "machineconfignodes", "MachineConfigNode", False, (),
            ("status",)),
        _rt("operator.openshift.io", "v1", "machineconfigurations", "MachineConfiguration", False, (), ("status",)),
        _rt("machine.openshift.io", "v1beta1", "machines", "Machine", True, ("ma",), ("status",)),
        _rt("machine.openshift.io", "v1beta1", "machinehealthchecks", "MachineHealthCheck", True,
            ("mhc", "mhcs"), ("status",)),
        _rt("config.openshift.io", "v1", "clusterversions", "ClusterVersion", False, (), ("status",)),
    )
}


def resource(key: str) -> ResourceType:
    """The ResourceType for a key (``pods``, ``daemonsets.apps`` ...); KeyError if not served."""
    return RESOURCES[key]


def register_resource(rt: ResourceType) -> ResourceType:
    """Serve one more resource type (idempotent for an identical row). Stores created earlier
    do not see it. Raises ValueError when the key is already served with a different row."""
    old = RESOURCES.get(rt.key)
    if old is not None and old != rt:
        raise ValueError(f"resource {rt.key} is already served as {old}")
    RESOURCES[rt.key] = rt
    return rt
