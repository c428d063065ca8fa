"""The pydantic models of a scenario file's sections (nodes, pools, workloads, network, options).

``clustersim.scenario.Scenario`` assembles them; every model rejects unknown keys.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RENDERED_RE = re.compile(r"^rendered-[a-z0-9-]+-[0-9a-f]{32}$")


def _exactly_one(what: str, **fields: object) -> None:
    """ValueError ``"<what>: set exactly one of a / b"`` unless exactly one of ``fields`` is set
    (not None)."""
    if sum(v is not None for v in fields.values()) != 1:
        raise ValueError(f"{what}: set exactly one of {' / '.join(fields)}")


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
    # pod GC: pods bound to a deleted Node are force-deleted this long after the deletion
    # (kube-controller-manager's podgc orphan cleanup; real clusters take up to ~40 s).
    pod_gc_seconds: float = 2.0
    # "current": kube-scheduler >= 1.23 filter order; "legacy": 1.19-1.21 (OKD 4.6-4.8),
    # NodeAffinity before TaintToleration (changes which reason a node is counted under).
    scheduler_filters: Literal["current", "legacy"] = "current"
    # FailedScheduling wording: "current" (>= 1.23 reasons plus the preemption suffix) or
    # "v1.11" (kube-scheduler 1.10/1.11 of OpenShift 3.10/3.11: "N node(s) didn't match node selector.").
    scheduler_messages: Literal["current", "v1.11"] = "current"


class FileSpec(_Strict):
    """An Ignition file with content: ``path``, text ``contents``, ``mode`` (decimal, 420 = 0644)."""

    path: str
    contents: str = ""
    mode: int = 420


class UnitSpec(_Strict):
    """An Ignition systemd unit: ``name`` (``x.service``), ``enabled``, unit file ``contents``."""

    name: str
    enabled: bool | None = None
    contents: str | None = None


class MachineConfigSpec(_Strict):
    """A MachineConfig. ``files``: paths (written empty, as scenarios before issue 41 have them) or
    :class:`FileSpec` entries with content; ``units``, ``ssh_authorized_keys`` (user ``core``),
    ``kernel_arguments``, ``os_image_url`` fill the rest of the config so that a diff of two
    rendered configs is what the machine-config-daemon would see."""

    name: str
    role: str
    files: list[str | FileSpec] = Field(default_factory=list)
    created: datetime
    units: list[UnitSpec] = Field(default_factory=list)
    ssh_authorized_keys: list[str] = Field(default_factory=list)
    kernel_arguments: list[str] = Field(default_factory=list)
    os_image_url: str = ""

    def file_paths(self) -> list[str]:
        """The paths of ``files``."""
        return [f if isinstance(f, str) else f.path for f in self.files]

    def ignition_files(self) -> list[str | dict[str, object]]:
        """``files`` as :func:`clustersim.agents.objects.make_machineconfig` takes them."""
        from clustersim.agents.objects import ignition_file

        return [f if isinstance(f, str) else ignition_file(f.path, f.contents, f.mode) for f in self.files]

    def ignition_units(self) -> list[dict[str, object]]:
        """``units`` as Ignition unit entries (unset fields left out)."""
        return [u.model_dump(exclude_none=True) for u in self.units]


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


class CertExpirySpec(_Strict):
    """One MachineConfigPool ``status.certExpirys`` entry (openshift/api machineconfiguration/v1
    ``CertExpiry``; MCO ``pkg/controller/node/status.go`` lists the ``KubeAPIServerServingCAData``
    bundle's certificates). Give ``expiry`` (a time) or ``expires_in_hours`` (from the moment the
    scenario is loaded, so the fact stays as near as written)."""

    subject: str
    bundle: str = "KubeAPIServerServingCAData"
    expiry: datetime | None = None
    expires_in_hours: float | None = None

    @model_validator(mode="after")
    def _one(self) -> CertExpirySpec:
        _exactly_one(f"cert expiry {self.subject}", expiry=self.expiry, expires_in_hours=self.expires_in_hours)
        return self


class PoolSpec(_Strict):
    name: str
    node_selector: dict[str, str]
    current: str  # status.configuration: what the nodes are at
    target: str  # spec.configuration: the rendered config the pool should reach
    max_unavailable: int | str = 1
    cert_expirys: list[CertExpirySpec] = Field(default_factory=list)  # status.certExpirys


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
    # status.addresses InternalIP (hostNetwork pods get it as podIP); default 10.0.x.y by position.
    address: str | None = None
    annotations: dict[str, str] = Field(default_factory=dict)  # extra metadata.annotations


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
    pod_names: dict[str, str] = Field(default_factory=dict)  # node -> explicit name of its pod at start


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
        _exactly_one(f"PDB {self.name}", min_available=self.min_available, max_unavailable=self.max_unavailable)
        return self


class NetworkSpec(_Strict):
    """config.openshift.io/v1 Network ``cluster``. ``switched_at`` set means the R1 model
    is on: pod networking needs a node config with carries_ovn."""

    spec_type: str = "OVNKubernetes"
    status_type: str = "OVNKubernetes"
    switched_at: datetime | None = None
    migration: str | None = None  # status.migration.networkType
