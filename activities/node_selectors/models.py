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
#: A CronJob's pod template sits under its Job template (``batch/v1`` CronJob).
CRONJOB_SELECTOR_PATH = "/spec/jobTemplate/spec/template/spec/nodeSelector"
NS_SELECTOR_PATH = "/metadata/annotations/openshift.io~1node-selector"


class Workload(BaseModel):
    """One workload with a nodeSelector: DeploymentConfig, Deployment, DaemonSet, StatefulSet, or
    a ReplicationController/ReplicaSet without a controller owner, or a CronJob (``path``
    :data:`CRONJOB_SELECTOR_PATH`; no running pods counted: its Jobs come and go).
    ``running_nodes``: nodes its pods run on now; ``required_anti_affinity``: required pod
    anti-affinity in the template; ``update_strategy``: a DaemonSet's ``updateStrategy.type``
    (``OnDelete`` pods keep the old template until deleted)."""

    ref: ObjectRef
    path: str = SELECTOR_PATH
    node_selector: dict[str, str] = Field(default_factory=dict)
    replicas: int = 0
    required_anti_affinity: bool = False
    running_nodes: list[str] = Field(default_factory=list)
    update_strategy: str | None = None


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
    """Which kinds to scan (default every workload kind with a pod template, CronJobs included)."""

    kinds: list[str] = Field(default_factory=lambda: ["DeploymentConfig", "Deployment", "DaemonSet", "StatefulSet",
                                                      "ReplicationController", "ReplicaSet", "CronJob"])


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
    """``done``/``failed`` with the words (origin's DC conditions, the Deployment/DS counters).
    A DaemonSet adds ``on_delete`` (its ``updateStrategy`` is OnDelete) and ``old_pods``: its
    pods whose ``pod-template-generation`` label is not the DaemonSet's ``metadata.generation``
    (``namespace/name@node``, sorted by node)."""

    done: bool = False
    failed: bool = False
    detail: str = ""
    latest_version: int | None = None
    generation: int | None = None
    on_delete: bool = False
    old_pods: list[str] = Field(default_factory=list)
    desired: int = 0
    available: int = 0


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
