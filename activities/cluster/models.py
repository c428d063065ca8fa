"""Inputs and results of the generic node and workload activities (every procedure uses them).

Plain pydantic v2 models with no Kubernetes import, so workflows may import them (through
``workflow.unsafe.imports_passed_through()``) and the Temporal pydantic data converter carries
them in history. Every activity takes exactly one ``XxxInput`` and returns one ``XxxResult`` (or a
shared model such as :class:`NodeInfo`).

:class:`NodeInfo` carries the machine-config-daemon's annotations (keys and values as in
machine-config-operator ``pkg/daemon/constants/constants.go``) beside the generic facts, because
``read_node`` returns them and stored workflow histories hold that shape; procedures other than
the MachineConfig rollout ignore those fields.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from kubeshared.mco import *  # noqa: F403  (the MCO annotation keys; the project's modules import them from here)

#: Set by lockkeeper in the same patch that cordons a node, valued with the owner (the node
#: run's workflow ID). Its presence is the durable record that *we* cordoned the node, so a
#: node somebody else had cordoned stays cordoned at the end (kured's "undo only what you
#: changed", made crash-safe: the record and the cordon are one atomic write).
ANN_CORDONED_BY = "lockkeeper.io/cordoned-by"

#: Failure types of a read-only planning activity (a preflight) that met an API error
#: (``activities.cluster.base.planning_failure``): ``ApiUnreachable`` (connection refused, DNS),
#: ``ApiUnauthorized`` (401), ``ApiForbidden`` (403) and ``ApiError`` (other refusals: 400, 404,
#: 422) are non-retryable; ``ApiUnavailable`` (5xx, 429, timeouts, a reset) is retried a bounded
#: number of times by the workflow's planning retry policy. A procedure that fails in planning
#: keeps the type, so a client tells "the cluster's API could not be used" from a refused input.
API_UNREACHABLE = "ApiUnreachable"
API_UNAUTHORIZED = "ApiUnauthorized"
API_FORBIDDEN = "ApiForbidden"
API_UNAVAILABLE = "ApiUnavailable"
API_ERROR = "ApiError"
API_FAILURE_TYPES: tuple[str, ...] = (API_UNREACHABLE, API_UNAUTHORIZED, API_FORBIDDEN, API_UNAVAILABLE, API_ERROR)
#: The planning failure types no retry can fix.
API_FAIL_FAST_TYPES: tuple[str, ...] = (API_UNREACHABLE, API_UNAUTHORIZED, API_FORBIDDEN, API_ERROR)

POOL_LABEL_PREFIX = "node-role.kubernetes.io/"
ZONE_LABEL = "topology.kubernetes.io/zone"


class DaemonState(StrEnum):
    """Values of the ``machineconfiguration.openshift.io/state`` annotation."""

    DONE = "Done"
    WORKING = "Working"
    REBOOTING = "Rebooting"
    DEGRADED = "Degraded"
    UNRECONCILABLE = "Unreconcilable"


class JsonWithoutNulls(BaseModel):
    """A model whose JSON (Temporal payloads, ``model_dump(mode="json")``) leaves out the fields
    that are None; Python dumps keep them, and decoding gives the same model back.

    For the per-node models a rollout carries by the thousand (:class:`NodeInfo` here, and the
    kit's NodeStatus and NodeResult): Temporal refuses a payload above 2 MB (TMPRL1103, and the
    server's ``limit.blobSize.error``), and a 5,000-node status spent a third of its bytes on
    ``null`` (tests/machineconfig/test_payload_sizes.py). Readers of the JSON use ``.get``."""

    @model_serializer(mode="wrap")
    def _json_without_nulls(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data = handler(self)
        if info.mode_is_json():
            return {k: v for k, v in data.items() if v is not None}
        return data


class NodeMcoState(BaseModel):
    """A Node's machine-config-daemon annotations (``current_config``, ``desired_config``,
    ``state``, ``reason``, ``desired_drain``, ``last_applied_drain``) plus ``unschedulable``,
    ``cordoned_by`` (who cordoned it, when lockkeeper knows) and ``ready``: what the handshake
    reads of a node (:class:`NodeInfo`) and what a pool's diagnosis shows of one
    (``activities.machineconfig.models.NodeDiagnosis``)."""

    name: str
    current_config: str | None = None
    desired_config: str | None = None
    state: str | None = None
    reason: str | None = None
    desired_drain: str | None = None
    last_applied_drain: str | None = None
    unschedulable: bool = False
    cordoned_by: str | None = None
    ready: bool = False


class NodeInfo(JsonWithoutNulls, NodeMcoState):
    """A Node as the handshake sees it: its MCO annotations plus schedulability and readiness
    (:class:`NodeMcoState`), its pool, zone and creation time."""

    pool: str | None = None
    zone: str | None = None
    created: datetime | None = None
    resource_version: str | None = None
    #: ``status.nodeInfo.bootID``, filled by ``read_node`` only (a new value means the node has
    #: booted since: how a reboot is told from a node that has not gone down yet).
    boot_id: str | None = None

    @property
    def degraded(self) -> bool:
        """True when the daemon reports Degraded or Unreconcilable."""
        return self.state in (DaemonState.DEGRADED, DaemonState.UNRECONCILABLE)


# --- node reads and writes --------------------------------------------------------------------


class ReadNodeInput(BaseModel):
    """Read one Node. Raises a non-retryable ``NodeNotFound`` ApplicationError if it is gone."""

    node: str


class SetNodeAnnotationsInput(BaseModel):
    """Set (or, with value ``None``, remove) annotations on a Node with one merge patch.

    Idempotent: annotations already at their value are not written (no request at all when
    nothing differs). ``read_first`` False: no read, one merge patch of every key (the API
    server skips a write that changes nothing, so the node is the same either way; one request
    instead of two, for a caller whose write is usually needed, issue 16).
    """

    node: str
    annotations: dict[str, str | None]
    read_first: bool = True


class CordonInput(BaseModel):
    """Cordon ``node`` for ``owner`` (a workflow ID). Records ``lockkeeper.io/cordoned-by``."""

    node: str
    owner: str


class CordonResult(BaseModel):
    """``cordoned_by_us`` is False when somebody else had already cordoned the node."""

    cordoned_by_us: bool
    was_unschedulable: bool


class UncordonInput(BaseModel):
    """Uncordon ``node`` only if ``lockkeeper.io/cordoned-by`` equals ``owner``."""

    node: str
    owner: str


class UncordonResult(BaseModel):
    """``uncordoned`` when the node ends schedulable; else ``left_cordoned_reason`` says who holds the cordon."""

    uncordoned: bool
    left_cordoned_reason: str | None = None


class PDBReport(BaseModel):
    """A PodDisruptionBudget as it stands when it blocks an eviction."""

    namespace: str
    name: str
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    current_healthy: int = 0
    desired_healthy: int = 0
    disruptions_allowed: int = 0
    expected_pods: int = 0


class PendingPodReport(BaseModel):
    """A Pending pod (a would-be replacement) and its latest FailedScheduling message.

    ``replaces``: ``namespace/name`` of the blocked pod it would replace (same controller)."""

    namespace: str
    name: str
    message: str | None = None
    replaces: str | None = None


class BlockedPod(BaseModel):
    """A pod whose eviction answered 429, with the API's message and the budgets involved.

    ``message`` is the Status message as the API server wrote it ("Cannot evict pod as it would
    violate the pod's disruption budget."); ``causes`` the Status causes' messages ("The
    disruption budget router-default needs 1 healthy pods and has 1 currently")."""

    namespace: str
    name: str
    message: str
    causes: list[str] = Field(default_factory=list)
    pdbs: list[PDBReport] = Field(default_factory=list)


class DrainReport(BaseModel):
    """Why a drain cannot finish: blocking pods, their budgets, and Pending replacements."""

    blocked_pods: list[BlockedPod] = Field(default_factory=list)
    pending_replacements: list[PendingPodReport] = Field(default_factory=list)


class DrainInput(BaseModel):
    """One drain pass over ``node`` (kubectl drain --ignore-daemonsets --delete-emptydir-data).

    Evicts every pod except DaemonSet-owned and mirror pods through the Eviction API (honouring
    PodDisruptionBudgets), then waits up to ``wait_seconds`` for the evicted pods to be gone,
    heartbeating. ``grace_period_seconds`` None means the pod's own.
    ``force``: also evict pods that no controller owns (kubectl ``--force``); True by default
    like the MCO drain helper (``pkg/daemon/drain.go``: ``Force: true``), whose job lockkeeper
    does. With False such pods are listed in ``DrainResult.refused`` and the drain is not done.
    """

    node: str
    grace_period_seconds: int | None = None
    wait_seconds: float = 30.0
    delete_emptydir_data: bool = True
    ignore_daemonsets: bool = True
    force: bool = True


class DrainResult(BaseModel):
    """``done`` when no evictable pod is left on the node. ``blocked`` carries the report when
    at least one eviction was refused with 429 in this pass. ``evicted``/``remaining`` hold
    ``namespace/name``; ``refused`` holds ``namespace/name: reason`` for pods these options do not
    allow removing (kubectl's "cannot delete ..." errors)."""

    done: bool
    evicted: list[str] = Field(default_factory=list)
    remaining: list[str] = Field(default_factory=list)
    blocked: DrainReport | None = None
    refused: list[str] = Field(default_factory=list)


class RecordEventInput(BaseModel):
    """A Kubernetes Event on a Node (``involvedObject`` kind Node), emitted on transitions only."""

    node: str
    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"


class SetNodeLabelsInput(BaseModel):
    """Set (or, with value ``None``, remove) labels on a Node with one merge patch; labels
    already at their value are not written (no request when nothing differs)."""

    node: str
    labels: dict[str, str | None]


class DeleteNodeInput(BaseModel):
    """Delete the Node object (a node leaving the cluster, e.g. before a re-install).

    ``require_cordoned``: refuse (non-retryable ``NodeNotCordoned``) unless the node is
    unschedulable, so a node still taking pods is never removed by mistake. ``uid``: delete it
    only while it still has this uid (the one recorded before): a Node registered again since,
    with another uid, is left alone (None: any uid)."""

    node: str
    require_cordoned: bool = True
    uid: str | None = None


class DeleteNodeResult(BaseModel):
    """``deleted`` False when the Node was already gone (a retried call) or, with a ``uid``,
    has another uid; ``detail``: what was seen."""

    deleted: bool
    detail: str = ""


class WaitNodeReadyInput(BaseModel):
    """Watch a Node until its Ready condition equals ``ready`` (True: back after a reboot;
    False: gone down) or ``timeout_seconds`` pass. One bounded attempt: the workflow loops."""

    node: str
    ready: bool = True
    timeout_seconds: float = Field(60.0, gt=0)


class WaitNodeReadyResult(BaseModel):
    """``matched`` when the condition held; ``timed_out`` otherwise. ``node``: last seen."""

    node: NodeInfo
    matched: bool
    timed_out: bool = False


# --- workloads ---------------------------------------------------------------------------------


class PodsReadyInput(BaseModel):
    """Check that the pods matching ``label_selector`` in ``namespace`` (all if None) are Ready.

    ``expect_per_node``: also require one Ready pod on every node (DaemonSet style)."""

    namespace: str | None = None
    label_selector: str | None = None
    expect_per_node: bool = False


class PodsReadyResult(BaseModel):
    """``ready`` when every counted pod is Ready (and, per node, present); ``total`` pods counted;
    ``not_ready`` / ``nodes_missing`` as ``namespace/name`` and node names."""

    ready: bool
    total: int
    not_ready: list[str] = Field(default_factory=list)
    nodes_missing: list[str] = Field(default_factory=list)


#: Activity: a cluster's health as a campaign's soak reads it (:class:`ClusterHealthInput`).
CHECK_CLUSTER_HEALTH = "check_cluster_health"


class ClusterHealthInput(BaseModel):
    """What a healthy cluster means for a soak between two waves of a campaign (issue 38).

    - ``nodes_ready``: every Node's ``Ready`` condition is ``True``;
    - ``pools_not_degraded``: no MachineConfigPool has ``Degraded`` (or ``NodeDegraded``)
      ``True``; a cluster that serves no MachineConfigPool (OpenShift 3, plain Kubernetes)
      passes this check and says so;
    - ``pod_namespaces``: every pod in each of these namespaces is Ready (finished pods not
      counted; see ``check_pods_ready``); empty: pods are not checked."""

    nodes_ready: bool = True
    pools_not_degraded: bool = True
    pod_namespaces: list[str] = Field(default_factory=list)


class ClusterHealthResult(BaseModel):
    """What ``check_cluster_health`` saw: ``ok`` when nothing below is listed; ``nodes`` and
    ``pools`` how many it read (``pools`` None: the cluster serves no MachineConfigPool);
    ``not_ready_nodes`` (names), ``degraded_pools`` (``NAME: REASON``), ``not_ready_pods``
    (``namespace/name``)."""

    ok: bool
    nodes: int = 0
    pools: int | None = None
    not_ready_nodes: list[str] = Field(default_factory=list)
    degraded_pools: list[str] = Field(default_factory=list)
    not_ready_pods: list[str] = Field(default_factory=list)

    def problems(self) -> list[str]:
        """One short line per kind of problem, e.g. ``nodes not Ready: n1, n2``."""
        out = []
        for what, items in (("nodes not Ready", self.not_ready_nodes), ("pools degraded", self.degraded_pools),
                            ("pods not Ready", self.not_ready_pods)):
            if items:
                out.append(f"{what}: {', '.join(items[:5])}" + (f" (+{len(items) - 5} more)" if len(items) > 5 else ""))
        return out

    def line(self) -> str:
        """``healthy (N nodes Ready[, M pools])`` or the problems joined by ``; ``."""
        if self.ok:
            return f"healthy ({self.nodes} nodes" + (f", {self.pools} pools" if self.pools is not None else "") + ")"
        return "; ".join(self.problems())


class PodRef(BaseModel):
    """One pod by identity: ``namespace``/``name`` and the ``uid`` it had when it was listed (a
    pod recreated under the same name has another uid, and a delete with this uid as its
    precondition leaves it alone)."""

    namespace: str
    name: str
    uid: str = ""

    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


class ListPodsToDeleteInput(BaseModel):
    """The pods ``oc delete pod -A --all`` would delete now, minus ``exclude_namespaces``; mirror
    pods (the kubelet's static pods) and pods already terminating are left out."""

    exclude_namespaces: list[str] = Field(default_factory=list)


class ListPodsToDeleteResult(BaseModel):
    """``pods``: what to delete, in the API's list order (namespace, name)."""

    pods: list[PodRef] = Field(default_factory=list)


class DeleteAllPodsInput(BaseModel):
    """Delete ``pods`` (each by its uid, as listed by ``list_pods_to_delete``), or, when ``pods``
    is None, ``oc delete pod -A --all`` minus ``exclude_namespaces`` as listed now (mirror pods
    and terminating pods left alone)."""

    exclude_namespaces: list[str] = Field(default_factory=list)
    pods: list[PodRef] | None = None


class DeleteAllPodsResult(BaseModel):
    """``deleted``: DELETE requests that succeeded (with ``pods`` given: each pod at most once);
    ``gone``: listed pods already deleted or replaced by a pod of another uid (404 or 409 on the
    uid precondition: left alone); ``retried``: requests sent again after a transient error
    (500, 503, 429, a dropped connection), in place."""

    deleted: int
    gone: int = 0
    retried: int = 0


class DeleteBlockingPodsInput(BaseModel):
    """Delete the pods that block a drain despite their PodDisruptionBudget: the operator's
    ``delete-pod`` decision (R2). ``pods`` are ``namespace/name`` from the drain report; a pod
    is deleted only while it still runs on ``node`` (a pod that moved or is gone is left alone).
    ``decided_by`` and ``comment`` go into the log and the Event on the node."""

    node: str
    pods: list[str]
    decided_by: str
    comment: str = ""


class DeleteBlockingPodsResult(BaseModel):
    """``deleted``: DELETE requests that succeeded; ``gone``: pods already gone or no longer on the node."""

    deleted: list[str] = Field(default_factory=list)
    gone: list[str] = Field(default_factory=list)


# --- records ---------------------------------------------------------------------------------
# Models of the records activities: store the original value of fields before a change, then
# restore exactly those, refusing when somebody changed them since.
#
# Fields are named by JSON Pointer (RFC 6901, e.g. ``/spec/template/spec/nodeSelector`` or
# ``/metadata/labels/app~1tier`` for the label ``app/tier``). Patches are RFC 6902 operations; the
# activities add ``test`` operations so that the API server applies a change only while the object
# still holds what the record says (a failed ``test`` is refused with 422 and nothing changes).


class ObjectRef(BaseModel):
    """One API object: ``kind`` as in the gateway's resource table (``DaemonSet``,
    ``DeploymentConfig``, ``Network.operator.openshift.io``...), ``name``, ``namespace`` (None for
    cluster-scoped kinds)."""

    kind: str
    name: str
    namespace: str | None = None

    def describe(self) -> str:
        """``DaemonSet openshift-sdn/sdn`` for messages."""
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


class FieldValue(BaseModel):
    """The value at one JSON Pointer: ``present`` False when the field does not exist."""

    path: str
    present: bool
    value: Any = None


class FieldRecord(BaseModel):
    """The original values of ``fields`` of ``ref`` as read at ``resource_version``."""

    ref: ObjectRef
    resource_version: str | None = None
    fields: list[FieldValue] = Field(default_factory=list)

    def value(self, path: str) -> FieldValue | None:
        """The recorded :class:`FieldValue` for ``path``, None when it was not recorded."""
        return next((f for f in self.fields if f.path == path), None)


class SnapshotFieldsInput(BaseModel):
    """Read ``paths`` (JSON Pointers) of ``ref`` into a :class:`FieldRecord`. Read-only."""

    ref: ObjectRef
    paths: list[str] = Field(min_length=1)


class PatchObjectInput(BaseModel):
    """Change ``ref`` with RFC 6902 ``ops`` (``add``/``replace``/``remove``/...), applied only
    while the recorded fields still hold the values of ``record`` (one ``test`` op per recorded
    field is prepended; absent fields are checked by the activity before the patch).
    Idempotent: when every field already holds what the ``ops`` write, nothing is sent."""

    ref: ObjectRef
    ops: list[dict[str, Any]] = Field(min_length=1)
    record: FieldRecord | None = None


class PatchObjectResult(BaseModel):
    """``changed`` False when the object already held the new values; ``resource_version``
    after the change."""

    changed: bool
    resource_version: str | None = None


class RestoreFieldsInput(BaseModel):
    """Put back the values of ``record``, but only where the object still holds ``expected``
    (the values the procedure wrote: a path -> value map; a path missing from it is not
    checked). A field somebody else changed since is refused (non-retryable ``RecordChanged``)
    and nothing is written. Fields that were absent in the record are removed."""

    record: FieldRecord
    expected: dict[str, Any] = Field(default_factory=dict)


class RestoreFieldsResult(BaseModel):
    """``restored``: the paths written back; ``unchanged``: already at their original value;
    ``differences``: after the write the object was read back, and these recorded paths do not
    hold their original value (``path: recorded X, now Y``; e.g. a controller or an admission
    webhook changed it again). Only a result with no differences is a verified restore."""

    restored: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    differences: list[str] = Field(default_factory=list)

    @property
    def verified(self) -> bool:
        """Every recorded field was read back at its original value."""
        return not self.differences


class SaveRecordInput(BaseModel):
    """Create ConfigMap ``namespace/name`` (a record ConfigMap, procedures-spec §1.6: the
    procedure's records, recoverable without Temporal) or merge ``data`` into it: keys added or
    replaced, other keys kept; values are strings, JSON where structured. ``labels`` on create."""

    namespace: str
    name: str
    data: dict[str, str]
    labels: dict[str, str] = Field(default_factory=dict)


class SaveRecordResult(BaseModel):
    """``created``: this call created the ConfigMap; ``resource_version`` after the write."""

    created: bool = False
    resource_version: str = ""
