"""Inputs and results of lockkeeper's activities: the contract between workflows and the cluster.

These models are plain pydantic v2 models with no Kubernetes import, so workflows may import
them (through ``workflow.unsafe.imports_passed_through()``) and the Temporal pydantic data
converter carries them in history. Every activity takes exactly one ``XxxInput`` and returns
one ``XxxResult`` (or a shared model such as :class:`NodeInfo`).

Annotation keys and values follow the machine-config-operator
(``pkg/daemon/constants/constants.go`` and ``pkg/daemon/drain.go``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

MCO_PREFIX = "machineconfiguration.openshift.io/"
ANN_CURRENT_CONFIG = MCO_PREFIX + "currentConfig"
ANN_DESIRED_CONFIG = MCO_PREFIX + "desiredConfig"
ANN_STATE = MCO_PREFIX + "state"
ANN_REASON = MCO_PREFIX + "reason"
ANN_DESIRED_DRAIN = MCO_PREFIX + "desiredDrain"
ANN_LAST_APPLIED_DRAIN = MCO_PREFIX + "lastAppliedDrain"
#: Set by lockkeeper in the same patch that cordons a node, valued with the owner (the node
#: run's workflow ID). Its presence is the durable record that *we* cordoned the node, so a
#: node somebody else had cordoned stays cordoned at the end (kured's "undo only what you
#: changed", made crash-safe: the record and the cordon are one atomic write).
ANN_CORDONED_BY = "lockkeeper.io/cordoned-by"

POOL_LABEL_PREFIX = "node-role.kubernetes.io/"
ZONE_LABEL = "topology.kubernetes.io/zone"


class DaemonState(StrEnum):
    """Values of the ``machineconfiguration.openshift.io/state`` annotation."""

    DONE = "Done"
    WORKING = "Working"
    REBOOTING = "Rebooting"
    DEGRADED = "Degraded"
    UNRECONCILABLE = "Unreconcilable"


def drain_value(rendered: str) -> str:
    """``drain-<rendered>``: the desiredDrain/lastAppliedDrain value that asks for a drain."""
    return f"drain-{rendered}"


def uncordon_value(rendered: str) -> str:
    """``uncordon-<rendered>``: the desiredDrain/lastAppliedDrain value that asks for an uncordon."""
    return f"uncordon-{rendered}"


class NodeInfo(BaseModel):
    """A Node as the handshake sees it: its MCO annotations plus schedulability and readiness."""

    name: str
    pool: str | None = None
    zone: str | None = None
    created: datetime | None = None
    current_config: str | None = None
    desired_config: str | None = None
    state: str | None = None
    reason: str | None = None
    desired_drain: str | None = None
    last_applied_drain: str | None = None
    unschedulable: bool = False
    ready: bool = False
    cordoned_by: str | None = None
    resource_version: str | None = None

    @property
    def degraded(self) -> bool:
        """True when the daemon reports Degraded or Unreconcilable."""
        return self.state in (DaemonState.DEGRADED, DaemonState.UNRECONCILABLE)


class PoolInfo(BaseModel):
    """A MachineConfigPool resolved for a rollout: its target rendered config and its nodes."""

    name: str
    target_config: str
    target_created: datetime | None = None
    spec_max_unavailable: int | str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    nodes: list[NodeInfo] = Field(default_factory=list)
    conditions: dict[str, str] = Field(default_factory=dict)


# --- preflight ---------------------------------------------------------------------------------


class PreflightInput(BaseModel):
    """Read-only checks before a MachineConfig rollout.

    ``pools`` empty means: every pool that has a node not at the pool's newest rendered config.
    ``target_configs`` maps pool name to an explicit rendered config; a pool missing from it gets
    the newest ``rendered-<pool>-*`` MachineConfig by creationTimestamp.
    ``not_before``: refuse a target rendered config created before this instant.
    """

    pools: list[str] = Field(default_factory=list)
    target_configs: dict[str, str] = Field(default_factory=dict)
    not_before: datetime | None = None


class PreflightResult(BaseModel):
    """The pools to roll, each with its target and its nodes (unsorted; planning sorts).

    ``network_type``: ``networks.config.openshift.io/cluster`` status.networkType (what runs),
    else spec.networkType; None on a cluster without that object."""

    pools: list[PoolInfo]
    network_type: str | None = None


# --- node handshake ----------------------------------------------------------------------------


class ReadNodeInput(BaseModel):
    """Read one Node. Raises a non-retryable ``NodeNotFound`` ApplicationError if it is gone."""

    node: str


class SetNodeAnnotationsInput(BaseModel):
    """Set (or, with value ``None``, remove) annotations on a Node with one merge patch.

    Idempotent: annotations already at their value are not written (no request at all when
    nothing differs).
    """

    node: str
    annotations: dict[str, str | None]


class WaitForNodeInput(BaseModel):
    """Watch a Node until ``annotation == value`` (or, for ``kind='config_done'``, until
    ``currentConfig == value`` and ``state == Done``).

    Returns early with ``degraded=True`` when the daemon sets Degraded or Unreconcilable.
    ``timeout_seconds`` bounds one activity attempt; the workflow loops, so a long wait shows in
    history as a few short attempts, never one hour-long blocking call.
    ``any_of``: extra (annotation, value) pairs that also end the wait (e.g. resuming after a crash
    when the daemon has moved further than expected).
    """

    node: str
    kind: Literal["annotation", "config_done"] = "annotation"
    annotation: str = ANN_DESIRED_DRAIN
    value: str
    any_of: list[tuple[str, str]] = Field(default_factory=list)
    timeout_seconds: float = 60.0


class WaitForNodeResult(BaseModel):
    """What ended the wait, and the Node as last observed."""

    node: NodeInfo
    matched: bool
    degraded: bool = False
    timed_out: bool = False


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


# --- pool / cluster health ----------------------------------------------------------------------


class PoolStatus(BaseModel):
    """The MachineConfigPool conditions and counters (status.*MachineCount)."""

    name: str
    updated: bool
    updating: bool
    degraded: bool
    machine_count: int = 0
    updated_machine_count: int = 0
    ready_machine_count: int = 0
    degraded_machine_count: int = 0


class PoolsStatusInput(BaseModel):
    """``pools`` empty: all MachineConfigPools."""

    pools: list[str] = Field(default_factory=list)


class PoolsStatusResult(BaseModel):
    pools: list[PoolStatus]

    @property
    def all_settled(self) -> bool:
        """Every pool Updated=True and Updating=False (R1's guard before a network-type switch)."""
        return all(p.updated and not p.updating for p in self.pools)


class PodsReadyInput(BaseModel):
    """Check that the pods matching ``label_selector`` in ``namespace`` (all if None) are Ready.

    ``expect_per_node``: also require one Ready pod on every node (DaemonSet style)."""

    namespace: str | None = None
    label_selector: str | None = None
    expect_per_node: bool = False


class PodsReadyResult(BaseModel):
    ready: bool
    total: int
    not_ready: list[str] = Field(default_factory=list)
    nodes_missing: list[str] = Field(default_factory=list)


class DeleteAllPodsInput(BaseModel):
    """``oc delete pod -A --all`` minus ``exclude_namespaces``; mirror pods are left alone."""

    exclude_namespaces: list[str] = Field(default_factory=list)


class DeleteAllPodsResult(BaseModel):
    deleted: int


class SetNetworkTypeInput(BaseModel):
    """Switch ``networks.config.openshift.io/cluster`` spec.networkType.

    Guarded (R1): refused with a non-retryable ``PoolsNotSettled`` ApplicationError while any
    MachineConfigPool is not Updated=True/Updating=False.
    """

    network_type: Literal["OVNKubernetes", "OpenShiftSDN"]


class SetNetworkTypeResult(BaseModel):
    changed: bool
    previous: str | None = None


# --- blocked drain: decisions and diagnosis ----------------------------------------------------


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


class PoolConditionReport(BaseModel):
    """One MachineConfigPool condition as the API shows it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


class NodeDiagnosis(BaseModel):
    """A pool node that is not at the pool's target config, or degraded, or cordoned."""

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


class DrainBlocker(BaseModel):
    """A PodDisruptionBudget that allows no disruption, with its pods on the pool's nodes."""

    pdb: PDBReport
    pods: list[str] = Field(default_factory=list)


class PoolDiagnosis(BaseModel):
    """``lockkeeper diagnose pool NAME``: everything R2's operator needed, read-only from the API.

    ``target_config``: spec.configuration.name (what the pool wants); ``nodes_not_at_target``;
    ``degraded`` (state Degraded/Unreconcilable with their ``reason`` annotation);
    ``drain_blockers`` (budgets with 0 disruptions allowed covering pods on the pool's nodes);
    ``pending_pods`` (cluster-wide, with their latest FailedScheduling message);
    ``conditions`` and machine counts of the pool."""

    pool: str
    target_config: str | None = None
    current_config: str | None = None
    machine_count: int = 0
    updated_machine_count: int = 0
    ready_machine_count: int = 0
    degraded_machine_count: int = 0
    nodes: list[str] = Field(default_factory=list)
    nodes_not_at_target: list[NodeDiagnosis] = Field(default_factory=list)
    degraded: list[NodeDiagnosis] = Field(default_factory=list)
    drain_blockers: list[DrainBlocker] = Field(default_factory=list)
    pending_pods: list[PendingPodReport] = Field(default_factory=list)
    conditions: list[PoolConditionReport] = Field(default_factory=list)
