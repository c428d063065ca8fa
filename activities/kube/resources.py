"""The resource table: every kind the gateway's generic verbs reach, one line each.

A :class:`Resource` names the API group, version, plural and scope of a kind, which is all a
REST path needs (Kubernetes API conventions: ``/api/v1/...`` for the core group,
``/apis/GROUP/VERSION/...`` for the others; ``namespaces/NS/`` before the plural for namespaced
kinds). Adding a kind (a StatefulSet, a DeploymentConfig, a ClusterNetwork) is one line in
:data:`RESOURCES`; no new gateway method is needed.

Kinds are looked up by name (``"Pod"``) or, where two groups use the same kind, by
``Kind.group`` (``"Network.operator.openshift.io"``); the plain kind then means the first
entry (``Network`` is ``config.openshift.io``'s).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

MCO_GROUP = "machineconfiguration.openshift.io"
CONFIG_GROUP = "config.openshift.io"


@dataclass(frozen=True)
class Resource:
    """One API resource: ``kind`` (``DaemonSet``), ``group`` (``""`` for core), ``version``,
    ``plural`` (the URL segment) and whether objects live in a namespace."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, else ``GROUP/VERSION``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path. ``namespace`` None on a namespaced kind means all namespaces (a list
        or watch only). Raises ValueError for a namespaced object without namespace or a
        namespace given to a cluster-scoped kind."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        elif self.namespaced and name is not None:
            raise ValueError(f"{self.kind} {name}: a namespaced object needs a namespace")
        elif not self.namespaced and namespace:
            raise ValueError(f"{self.kind} is cluster-scoped; got namespace {namespace!r}")
        path = f"{base}/{self.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
            if subresource:
                path += f"/{subresource}"
        return path


_TABLE = (
    Resource("Namespace", "", "v1", "namespaces", False),
    Resource("Node", "", "v1", "nodes", False),
    Resource("Pod", "", "v1", "pods", True),
    Resource("Event", "", "v1", "events", True),
    Resource("ConfigMap", "", "v1", "configmaps", True),
    Resource("Service", "", "v1", "services", True),
    Resource("Endpoints", "", "v1", "endpoints", True),
    Resource("ReplicationController", "", "v1", "replicationcontrollers", True),
    Resource("DaemonSet", "apps", "v1", "daemonsets", True),
    Resource("Deployment", "apps", "v1", "deployments", True),
    Resource("ReplicaSet", "apps", "v1", "replicasets", True),
    Resource("StatefulSet", "apps", "v1", "statefulsets", True),
    Resource("CronJob", "batch", "v1", "cronjobs", True),
    Resource("Job", "batch", "v1", "jobs", True),
    Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    Resource("DeploymentConfig", "apps.openshift.io", "v1", "deploymentconfigs", True),
    Resource("ClusterNetwork", "network.openshift.io", "v1", "clusternetworks", False),
    Resource("HostSubnet", "network.openshift.io", "v1", "hostsubnets", False),
    Resource("MachineConfigPool", MCO_GROUP, "v1", "machineconfigpools", False),
    Resource("MachineConfig", MCO_GROUP, "v1", "machineconfigs", False),
    Resource("MachineConfigNode", MCO_GROUP, "v1", "machineconfignodes", False),
    Resource("MachineConfiguration", "operator.openshift.io", "v1", "machineconfigurations", False),
    Resource("Machine", "machine.openshift.io", "v1beta1", "machines", True),
    Resource("MachineHealthCheck", "machine.openshift.io", "v1beta1", "machinehealthchecks", True),
    Resource("Network", CONFIG_GROUP, "v1", "networks", False),
    Resource("Network", "operator.openshift.io", "v1", "networks", False),
    Resource("ClusterVersion", CONFIG_GROUP, "v1", "clusterversions", False),
)

#: Kind (and ``Kind.group``) -> :class:`Resource`.
RESOURCES: dict[str, Resource] = {}
for _r in _TABLE:
    RESOURCES.setdefault(_r.kind, _r)
    RESOURCES[f"{_r.kind}.{_r.group}" if _r.group else _r.kind] = _r


def resource(kind: str) -> Resource:
    """The :class:`Resource` for ``kind`` (``"Pod"``, ``"Network.operator.openshift.io"``).
    Raises KeyError naming the known kinds when the table has no such entry."""
    try:
        return RESOURCES[kind]
    except KeyError:
        raise KeyError(f"unknown kind {kind!r}; known: {', '.join(sorted(RESOURCES))}") from None
