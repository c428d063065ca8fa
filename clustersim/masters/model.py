"""The ``masters:`` scenario section and the per-master state (OpenShift 3.10/3.11 control plane).

Section format (validated by :class:`MastersSection`; times in simulated seconds)::

    masters:
      restart_seconds: 10            # master-restart api|controllers: down this long
      version: v3.11.0+d4cacc0       # printed by the API's start log line
      leader: master-01              # whose controllers lead at start (default: the first)
      master_config_path: /etc/origin/master/master-config.yaml
      network_config:                # master-config networkConfig when the host has no such file
        clusterNetworks: [{cidr: 10.128.0.0/14, hostSubnetLength: 9}]
        serviceNetworkCIDR: 172.30.0.0/16
        networkPluginName: redhat/openshift-ovs-subnet
        # vxlanPort: 4889            # absent means 4789 (o-a writes it only when it differs)
      masters:
        - {name: master-01}          # a node/host name; api_port 0 = a free loopback port
        - {name: master-02, api_port: 0, network_config: {vxlanPort: 4889}}   # per-master override
      faults: {master-01: ["api_start_blocked_until_file=/etc/origin/master/ldap_ca.crt"]}
      image_streams: {"openshift-sdn/node:v3.11": "registry.redhat.io/openshift3/ose-node:v3.11"}
      trigger_seconds: 2             # image-trigger controller delay
      static_pods: true              # mirror pods kube-system/master-{api,controllers,etcd}-<master>
      static_pod_images: {api: ..., controllers: ..., etcd: ...}
      kube_version: v1.9.1+a0ce1bc657   # the Kubernetes version the API reports at /version (OKD 3.9);
                                        # a master whose API restarts from a static-pod manifest
                                        # (/etc/origin/node/pods/apiserver.yaml) of another OKD
                                        # release reports that release's; /version answers the
                                        # lowest of the masters (unset: the simulator's own)

The master-config is read from the host (``hosts`` component, file ``master_config_path``,
YAML, key ``networkConfig``) when there is one, else from ``network_config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_NETWORK_CONFIG: dict[str, Any] = {
    "clusterNetworks": [{"cidr": "10.128.0.0/14", "hostSubnetLength": 9}],
    "serviceNetworkCIDR": "172.30.0.0/16",
    "networkPluginName": "redhat/openshift-ovs-subnet",
}
DEFAULT_IMAGE_STREAMS = {"openshift-sdn/node:v3.11": "registry.redhat.io/openshift3/ose-node:v3.11"}
DEFAULT_STATIC_POD_IMAGES = {"api": "registry.redhat.io/openshift3/ose-control-plane:v3.11",
                             "controllers": "registry.redhat.io/openshift3/ose-control-plane:v3.11",
                             "etcd": "registry.redhat.io/rhel7/etcd:3.2.22"}
FAULT_API_BLOCKED = "api_start_blocked_until_file="
DEFAULT_VXLAN_PORT = 4789


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MasterSpec(_Strict):
    """One master. ``network_config`` overrides the section's for this master (without hosts)."""

    name: str
    api_port: int = 0
    network_config: dict[str, Any] | None = None


class MastersSection(_Strict):
    """The scenario's ``masters:`` section (see module docstring)."""

    restart_seconds: float = 10.0
    version: str = "v3.11.0+d4cacc0"  # what the API's start line reports (OKD 3.10: v3.10.0+...)
    leader: str | None = None
    master_config_path: str = "/etc/origin/master/master-config.yaml"
    network_config: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_NETWORK_CONFIG))
    masters: list[MasterSpec] = Field(min_length=1)
    faults: dict[str, list[str]] = Field(default_factory=dict)
    image_streams: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_IMAGE_STREAMS))
    trigger_seconds: float = 2.0
    # Mirror pods kube-system/master-{api,controllers,etcd}-<master> (created Running when missing).
    static_pods: bool = True
    static_pod_images: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_STATIC_POD_IMAGES))
    kube_version: str | None = None

    @model_validator(mode="after")
    def _known(self) -> MastersSection:
        names = [m.name for m in self.masters]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate master names: {names}")
        if self.leader is not None and self.leader not in names:
            raise ValueError(f"leader {self.leader!r} is not a master ({names})")
        unknown = sorted(set(self.faults) - set(names))
        if unknown:
            raise ValueError(f"faults for unknown masters: {unknown}")
        return self


@dataclass
class Interval:
    """A state interval: ``start``/``end`` in simulated seconds since the component started
    (``end`` None while open)."""

    state: str
    start: float
    end: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"state", "start", "end"}`` with times rounded to milliseconds."""
        return {"state": self.state, "start": round(self.start, 3),
                "end": None if self.end is None else round(self.end, 3)}


@dataclass
class MasterState:
    """One master: API and controllers up/down, restart counts, the networkConfig each read at
    its last start, fault strings, availability intervals and the API and controllers log lines."""

    name: str
    api_port: int = 0
    api_up: bool = False
    controllers_up: bool = False
    api_restarts: int = 0
    controllers_restarts: int = 0
    api_config: dict[str, Any] = field(default_factory=dict)
    controllers_config: dict[str, Any] = field(default_factory=dict)
    faults: set[str] = field(default_factory=set)
    intervals: list[Interval] = field(default_factory=list)
    api_log: list[str] = field(default_factory=list)
    controllers_log: list[str] = field(default_factory=list)
    #: The Kubernetes version this master's API reports (``kube_version``, or its manifest's).
    kube_version: str | None = None

    def blocking_file(self) -> str | None:
        """The path of an ``api_start_blocked_until_file`` fault, if set."""
        for f in self.faults:
            if f.startswith(FAULT_API_BLOCKED):
                return f[len(FAULT_API_BLOCKED):]
        return None


def vxlan_port(network_config: dict[str, Any]) -> int:
    """``networkConfig.vxlanPort`` (4789 when absent, as origin defaults it)."""
    value = network_config.get("vxlanPort")
    return int(value) if value not in (None, "") else DEFAULT_VXLAN_PORT


def cluster_network_from(network_config: dict[str, Any], created: str, uid: str) -> dict[str, Any]:
    """ClusterNetwork ``default`` as the 3.11 SDN master builds it from master-config
    (origin pkg/network/master/master.go): top-level fields, ``clusterNetworks`` entries with the
    capitalised ``CIDR`` key, the legacy ``network``/``hostsubnetlength`` from the first entry."""
    nets = [{"CIDR": n.get("cidr") or n.get("CIDR"), "hostSubnetLength": int(n.get("hostSubnetLength", 9))}
            for n in network_config.get("clusterNetworks") or DEFAULT_NETWORK_CONFIG["clusterNetworks"]]
    return {
        "apiVersion": "network.openshift.io/v1",
        "kind": "ClusterNetwork",
        "metadata": {"name": "default", "uid": uid, "creationTimestamp": created},
        "clusterNetworks": nets,
        "network": nets[0]["CIDR"],
        "hostsubnetlength": nets[0]["hostSubnetLength"],
        "serviceNetwork": network_config.get("serviceNetworkCIDR", DEFAULT_NETWORK_CONFIG["serviceNetworkCIDR"]),
        "pluginName": network_config.get("networkPluginName", DEFAULT_NETWORK_CONFIG["networkPluginName"]),
        "vxlanPort": vxlan_port(network_config),
    }


#: OKD/OpenShift 3.x release -> the Kubernetes gitVersion its API reports (``oc version``:
#: OKD 3.9 "kubernetes v1.9.1+a0ce1bc657", 3.10 "v1.10.0+b81c8f8", 3.11 "v1.11.0+d4cacc0").
OKD_KUBE_VERSIONS = {"3.9": "v1.9.1+a0ce1bc657", "3.10": "v1.10.0+b81c8f8", "3.11": "v1.11.0+d4cacc0"}

#: Where the 3.10+ API static-pod manifest lives on a master (openshift-ansible 3.10).
API_MANIFEST = "/etc/origin/node/pods/apiserver.yaml"


def manifest_kube_version(text: str) -> str | None:
    """The Kubernetes version of the OKD release of the first container image in a static-pod
    manifest (``...origin-control-plane:v3.10.0`` -> ``v1.10.0+b81c8f8``), None when there is
    no image or no known release in its tag."""
    import re

    import yaml

    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return None
    containers = ((doc.get("spec") or {}).get("containers") or []) if isinstance(doc, dict) else []
    for c in containers:
        m = re.search(r":v?(\d+)\.(\d+)", str(c.get("image", "")))
        if m:
            return OKD_KUBE_VERSIONS.get(f"{m.group(1)}.{m.group(2)}")
    return None
