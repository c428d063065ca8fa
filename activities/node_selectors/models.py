"""Models of the nodeSelector-migration activities (pure pydantic; workflows import only this).

Paths are JSON Pointers (RFC 6901) into the object: ``/spec/template/spec/nodeSelector`` for
workloads, ``/metadata/annotations/openshift.io~1node-selector`` for a Namespace's project
selector (OpenShift's ``openshift.io/node-selector`` annotation).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from activities.cluster.models import ObjectRef

SCAN_NODE_SELECTORS = "scan_node_selectors"
READ_ROLLOUT = "read_rollout"
READ_POD_STATES = "read_pod_states"

SELECTOR_PATH = "/spec/template/spec/nodeSelector"
NS_SELECTOR_PATH = "/metadata/annotations/openshift.io~1node-selector"


class Workload(BaseModel):
    """One workload with a nodeSelector: DeploymentConfig, Deployment, DaemonSet, StatefulSet, or
    a ReplicationController/ReplicaSet without a controller owner. ``running_nodes``: nodes its
    pods run on now; ``required_anti_affinity``: required pod anti-affinity in the template."""

    ref: ObjectRef
    path: str = SELECTOR_PATH
    node_selector: dict[str, str] = Field(default_factory=dict)
    replicas: int = 0
    required_anti_affinity: bool = False
    running_nodes: list[str] = Field(default_factory=list)


class NamespaceSelector(BaseModel):
    """A Namespace whose ``openshift.io/node-selector`` annotation is set (``k=v,k2=v2``)."""

    ref: ObjectRef
    path: str = NS_SELECTOR_PATH
    node_selector: str


class SelectorNode(BaseModel):
    """A Node's labels and whether new pods may land there (not cordoned)."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    schedulable: bool = True


class ScanInput(BaseModel):
    """Which kinds to scan (default all the table has; CronJobs are not in the gateway's table)."""

    kinds: list[str] = Field(default_factory=lambda: ["DeploymentConfig", "Deployment", "DaemonSet", "StatefulSet",
                                                      "ReplicationController", "ReplicaSet"])


class ScanResult(BaseModel):
    """Every workload with a non-empty nodeSelector, every Namespace with a project selector, and
    every Node's labels."""

    workloads: list[Workload] = Field(default_factory=list)
    namespaces: list[NamespaceSelector] = Field(default_factory=list)
    nodes: list[SelectorNode] = Field(default_factory=list)


class RolloutInput(BaseModel):
    """The rollout of ``ref`` after our patch: ``after_version`` (DC ``status.latestVersion``
    before the patch) or ``after_generation`` (``metadata.generation`` before)."""

    ref: ObjectRef
    after_version: int | None = None
    after_generation: int | None = None


class RolloutState(BaseModel):
    """``done``/``failed`` with the words (origin's DC conditions, the Deployment/DS counters)."""

    done: bool = False
    failed: bool = False
    detail: str = ""
    latest_version: int | None = None
    generation: int | None = None


class PodState(BaseModel):
    """One pod: ``key`` namespace/name, ``phase``, the node, and for a Pending pod the scheduler's
    last FailedScheduling message."""

    key: str
    phase: str
    node: str | None = None
    message: str | None = None


class PodStates(BaseModel):
    """Every pod (mirror pods excluded)."""

    pods: list[PodState] = Field(default_factory=list)
