"""Inputs, results, status and update payloads of lockkeeper's MachineConfig rollout workflows.

Pure pydantic v2 models (no Temporal, no Kubernetes import) so the CLI, the worker and the
workflows share them; workflows import this module through
``workflow.unsafe.imports_passed_through()`` and the Temporal pydantic data converter carries the
models in history.

Times are timezone-aware UTC datetimes (inside workflows from ``workflow.now()``); durations are
seconds (float). Names follow the machine-config-operator (``maxUnavailable``, rendered config,
desiredConfig, currentConfig).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from activities.etcd_models import ExecBackend, HostAccess
from activities.models import DrainReport

#: Procedure name recorded in the ``LockkeeperProcedure`` search attribute.
PROCEDURE_MACHINECONFIG_ROLLOUT = "machineconfig-rollout"

#: ``maxUnavailable`` as in MachineConfigPool.spec: an integer count or a percent string ("25%").
#: A plain digit string ("2") is accepted as a count.
MaxUnavailable = int | str

#: Search attribute names (Keyword unless noted); registered on the server with
#: ``--search-attribute LockkeeperCluster=Keyword`` etc.
SA_CLUSTER = "LockkeeperCluster"
SA_PROCEDURE = "LockkeeperProcedure"
SA_STATUS = "LockkeeperStatus"
SA_POOLS = "LockkeeperPools"  # KeywordList


class ApprovalPolicy(StrEnum):
    """Where a rollout waits for a person.

    ``none``: never (except the always-gated delete-all-pods step of ``repair_network``);
    ``pool``: one gate before each pool; ``node``: a gate before each node;
    ``canary``: a gate after the first node of each pool completed, before the rest.
    """

    NONE = "none"
    POOL = "pool"
    NODE = "node"
    CANARY = "canary"


class GateTimeoutOutcome(StrEnum):
    """What a gate timeout does. Recorded as a timeout (decided_by ``"timeout"``), never as an approval."""

    REJECT = "reject"
    APPROVE = "approve"
    ABORT = "abort"


class GateKind(StrEnum):
    POOL = "pool"
    NODE = "node"
    CANARY = "canary"
    STEP = "step"
    #: A blocked drain's decision gate (id ``drain/{node}``), answered with ``decide``.
    DRAIN = "drain"


class DrainDecision(StrEnum):
    """The operator's answer to a blocked drain (R2; kured #78/#82, MCO's 1 h drain degrade).

    ``wait``: keep retrying the drain and ask again after another ``decide_after``;
    ``skip``: uncordon only if we cordoned, put the node back (desiredConfig=currentConfig for a
    MachineConfig rollout) and go on with the next node; ``delete-pod``: delete the blocking pods
    despite their PodDisruptionBudget (needs an identity; four-eyes and allowed approvers apply);
    ``abort``: stop the whole procedure at its safe points.
    """

    WAIT = "wait"
    SKIP = "skip"
    DELETE_POD = "delete-pod"
    ABORT = "abort"


#: Outcomes a decision timeout may apply: never ``delete-pod`` (nobody approved it).
TIMEOUT_DECISIONS = frozenset({DrainDecision.WAIT, DrainDecision.SKIP, DrainDecision.ABORT})


class GateState(StrEnum):
    WAITING = "waiting"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed-out"
    CANCELLED = "cancelled"
    #: A drain decision gate answered (``Gate.decision`` says which).
    DECIDED = "decided"


class RolloutPhase(StrEnum):
    """Phase of the whole rollout (also the ``LockkeeperStatus`` search attribute value)."""

    PLANNING = "planning"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_APPROVAL = "waiting-approval"
    COMPLETING = "completing"
    DONE = "done"
    ABORTED = "aborted"
    FAILED = "failed"


class NodePhase(StrEnum):
    """Phase of one node in a rollout; ``step`` in :class:`NodeStatus` says where inside ``running``."""

    PENDING = "pending"
    WAITING_APPROVAL = "waiting-approval"
    RUNNING = "running"
    BLOCKED = "blocked"
    DONE = "done"
    SKIPPED = "skipped"
    DEGRADED = "degraded"
    FAILED = "failed"
    ABORTED = "aborted"


#: Node phases after which a node needs nothing more in this rollout.
FINAL_NODE_PHASES = frozenset({NodePhase.DONE, NodePhase.SKIPPED, NodePhase.FAILED, NodePhase.ABORTED})


class NodeStep(StrEnum):
    """Steps of the node handshake (DESIGN.md, "The MachineConfig node handshake")."""

    READ = "read-node"
    SET_DESIRED_CONFIG = "set-desired-config"
    WAIT_DRAIN_REQUEST = "wait-drain-request"
    CORDON = "cordon"
    DRAIN = "drain"
    HAND_OFF_DRAIN = "hand-off-drain"
    WAIT_REBOOT = "wait-reboot"
    UNCORDON = "uncordon"
    HAND_OFF_UNCORDON = "hand-off-uncordon"
    WAIT_DONE = "wait-done"
    ROLLBACK = "rollback"
    FINISHED = "finished"


# --- input ---------------------------------------------------------------------------------------


def _check_timeout_outcome(v: DrainDecision) -> DrainDecision:
    if v not in TIMEOUT_DECISIONS:
        raise ValueError("a decision timeout may only wait, skip or abort; delete-pod needs a person's approval")
    return v


class MachineConfigRolloutInput(BaseModel):
    """Start a MachineConfig rollout (lockkeeper standing in for the machine-config-controller).

    - ``pools`` empty: preflight picks every pool with a node not at its newest rendered config;
      order: as given, else master first then alphabetical.
    - ``target_configs``: pool -> rendered config; missing pools get their newest rendered config.
    - ``not_before``: refuse a target rendered config created before this instant (R1 check).
    - ``max_unavailable``: int or "N%" of the pool size, rounded down, at least 1 (MCO/intstr).
    - ``node_order``: ``"zone-oldest"`` (zone label, then creationTimestamp, then name) or an
      explicit list of node names (listed nodes first in that order, the rest zone-oldest).
    - ``gate_timeout_seconds``: None waits forever; on timeout ``gate_timeout_outcome`` applies.
    - ``four_eyes``: ``requested_by`` may not approve; ``allowed_approvers`` empty = anyone.
    - ``repair_network`` (R1): after all pools wait for ovnkube-node Ready on every node, then a
      gate "delete-all-pods", delete all pods, then wait for all pods Ready.
    - Daemon deadlines (MCO ``pkg/daemon/drain.go``): the daemon waits 1 h for lastAppliedDrain=drain-X
      and 10 min for uncordon-X; a warning is raised at ``deadline_warn_fraction`` of each.
    - ``activity_timeout_seconds``: start-to-close of one short API call (and the slack added to
      waits/drains); ``activity_heartbeat_timeout_seconds``: how soon a watch/drain lost with a
      crashed worker is retried. Both short, because the daemon's deadlines keep running.
    - ``search_attributes``: upsert the Lockkeeper* search attributes (turn off only where the
      server has not registered them, e.g. the time-skipping test server).
    - ``decide_after_seconds``: a drain blocked this long (seconds) opens the node's decision gate
      (``drain/{node}``; None never asks); ``decision_timeout_seconds`` (None: wait forever) then
      applies ``decision_timeout_outcome`` (wait, skip or abort; never delete-pod), recorded as
      a timeout.
    """

    cluster: str = "default"
    pools: list[str] = Field(default_factory=list)
    target_configs: dict[str, str] = Field(default_factory=dict)
    not_before: datetime | None = None
    max_unavailable: MaxUnavailable = 1
    node_order: Literal["zone-oldest"] | list[str] = "zone-oldest"
    approval: ApprovalPolicy = ApprovalPolicy.NONE
    gate_timeout_seconds: float | None = None
    gate_timeout_outcome: GateTimeoutOutcome = GateTimeoutOutcome.REJECT
    pause_on_degraded: bool = True
    dry_run: bool = False
    requested_by: str = "unknown"
    four_eyes: bool = False
    allowed_approvers: list[str] = Field(default_factory=list)
    repair_network: bool = False
    daemon_drain_deadline_seconds: float = 3600.0
    daemon_uncordon_deadline_seconds: float = 600.0
    deadline_warn_fraction: float = 0.5
    drain_backoff_initial_seconds: float = 5.0
    drain_backoff_max_seconds: float = 60.0
    drain_wait_seconds: float = 30.0
    wait_activity_timeout_seconds: float = 60.0
    network_poll_initial_seconds: float = 5.0
    network_poll_max_seconds: float = 60.0
    activity_timeout_seconds: float = 10.0
    activity_heartbeat_timeout_seconds: float = 10.0
    search_attributes: bool = True
    decide_after_seconds: float | None = 600.0
    decision_timeout_seconds: float | None = None
    decision_timeout_outcome: DrainDecision = DrainDecision.WAIT

    @field_validator("decision_timeout_outcome")
    @classmethod
    def _no_unapproved_delete(cls, v: DrainDecision) -> DrainDecision:
        return _check_timeout_outcome(v)


# --- plan ----------------------------------------------------------------------------------------


class PlannedGate(BaseModel):
    """A gate the plan will open: ``id`` (e.g. "pool/worker"), kind, and where.

    ``before_node``: the gate opens before this node starts (pool/node gates);
    ``after_node``: it opens after this node is done (canary gates).
    """

    id: str
    kind: GateKind
    pool: str | None = None
    before_node: str | None = None
    after_node: str | None = None


class PoolPlan(BaseModel):
    """One pool of the plan.

    ``nodes``: nodes to roll in order; ``skipped``: already at target; ``unavailable``: nodes that
    already count against ``max_unavailable`` (not Ready, cordoned by somebody else, Degraded);
    ``capacity`` = ``max_unavailable`` - len(unavailable), at least 0 (the rollout waits for the
    pool to recover when 0, see ``RolloutStatus.waiting_for``); ``batches``: the nodes grouped by
    ``max(capacity, 1)`` for display (the workflow runs a sliding window of ``capacity``).
    """

    name: str
    target_config: str
    size: int
    max_unavailable: int
    capacity: int
    nodes: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    unavailable: list[str] = Field(default_factory=list)
    batches: list[list[str]] = Field(default_factory=list)
    gates: list[PlannedGate] = Field(default_factory=list)


class RolloutPlan(BaseModel):
    """The ordered pools of a rollout plus anything gated after them (``final_gates``)."""

    pools: list[PoolPlan] = Field(default_factory=list)
    final_gates: list[PlannedGate] = Field(default_factory=list)
    network_type: str | None = None

    @property
    def node_count(self) -> int:
        return sum(len(p.nodes) for p in self.pools)


# --- status --------------------------------------------------------------------------------------


class NodeStatus(BaseModel):
    """Where one node stands: phase, step inside it, what it waits for, since when, until when."""

    name: str
    pool: str
    phase: NodePhase = NodePhase.PENDING
    step: str | None = None
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    warning: str | None = None
    reason: str | None = None
    drain_report: DrainReport | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempt: int = 0
    cordoned_by_us: bool = False
    blocked_since: datetime | None = None
    decision_gate: Gate | None = None


class Gate(BaseModel):
    """A gate currently known to the rollout (``state`` waiting until somebody or the timeout decides)."""

    id: str
    kind: GateKind
    state: GateState = GateState.WAITING
    pool: str | None = None
    node: str | None = None
    opened_at: datetime | None = None
    timeout_at: datetime | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str = ""
    decision: DrainDecision | None = None
    choices: list[DrainDecision] = Field(default_factory=list)


class GateRecord(BaseModel):
    """One entry of the gate history: ``action`` opened/approved/rejected/decided/timeout/cancelled.

    For a timeout ``by`` is ``"timeout"`` and ``outcome`` the declared outcome applied (for a
    drain decision gate ``decision`` holds the applied decision). ``decided`` records a drain
    decision: ``by`` who, ``at`` when, ``decision`` which, ``comment`` why.
    """

    gate_id: str
    action: Literal["opened", "approved", "rejected", "decided", "timeout", "cancelled"]
    by: str
    at: datetime
    comment: str = ""
    outcome: GateTimeoutOutcome | None = None
    decision: DrainDecision | None = None


class RolloutTotals(BaseModel):
    done: int = 0
    skipped: int = 0
    failed: int = 0
    pending: int = 0
    in_flight: int = 0
    degraded: int = 0
    aborted: int = 0


class NetworkRepairStatus(BaseModel):
    """R1 completion: ``stage`` wait-ovnkube / gate / delete-pods / wait-workloads / done."""

    stage: str = "pending"
    ovnkube_ready: bool = False
    pods_deleted: int | None = None
    workloads_ready: bool = False
    not_ready: list[str] = Field(default_factory=list)
    polls: int = 0


class RolloutStatus(BaseModel):
    """Answer of the ``status`` query. ``waiting_for``/``since``/``deadline`` summarise the wait."""

    workflow_id: str = ""
    cluster: str = "default"
    phase: RolloutPhase = RolloutPhase.PLANNING
    paused_reason: str | None = None
    plan: RolloutPlan | None = None
    current_pool: str | None = None
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    gates: list[Gate] = Field(default_factory=list)
    gate_history: list[GateRecord] = Field(default_factory=list)
    totals: RolloutTotals = Field(default_factory=RolloutTotals)
    in_flight: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    started_at: datetime | None = None
    updated_at: datetime | None = None
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    abort_requested: bool = False
    network_repair: NetworkRepairStatus | None = None
    error: str | None = None


# --- updates -------------------------------------------------------------------------------------


class ApproveInput(BaseModel):
    """Approve ``gate_id`` (None = the only waiting gate) as ``identity``."""

    gate_id: str | None = None
    identity: str
    comment: str = ""


class RejectInput(BaseModel):
    """Reject ``gate_id`` (None = the only waiting gate): the rollout pauses; resume re-opens it."""

    gate_id: str | None = None
    identity: str
    comment: str = ""


class ControlInput(BaseModel):
    """pause / resume / abort, attributed to ``identity``."""

    identity: str
    comment: str = ""
    reason: str | None = None


class NodeControlInput(BaseModel):
    """skip_node / retry_node on ``node``."""

    node: str
    identity: str
    comment: str = ""


class DecideInput(BaseModel):
    """Answer ``node``'s open drain decision gate with ``decision`` as ``identity``."""

    node: str
    decision: DrainDecision
    identity: str
    comment: str = ""


class DecideResult(BaseModel):
    gate_id: str
    decision: DrainDecision
    message: str


class DrainDecisionSignal(BaseModel):
    """Parent -> node run (signal ``drain_decision``): a validated decision to apply."""

    decision: DrainDecision
    identity: str
    comment: str = ""
    at: datetime | None = None


class GateDecisionResult(BaseModel):
    gate_id: str
    state: GateState
    message: str


class ControlResult(BaseModel):
    message: str
    status: RolloutStatus | None = None


# --- result --------------------------------------------------------------------------------------


class NodeResult(BaseModel):
    """Final state of one node: phase, attempts, durations (seconds)."""

    name: str
    pool: str
    phase: NodePhase
    attempts: int = 0
    duration_seconds: float | None = None
    drain_seconds: float | None = None
    reboot_seconds: float | None = None
    reason: str | None = None
    safe_point: str | None = None


class MachineConfigRolloutResult(BaseModel):
    """``outcome`` completed / aborted / failed / dry-run; ``summary`` counts per node phase."""

    outcome: Literal["completed", "aborted", "failed", "dry-run"]
    plan: RolloutPlan | None = None
    nodes: dict[str, NodeResult] = Field(default_factory=dict)
    gate_history: list[GateRecord] = Field(default_factory=list)
    summary: RolloutTotals = Field(default_factory=RolloutTotals)
    network_repair: NetworkRepairStatus | None = None
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


# --- child workflow ------------------------------------------------------------------------------


class NodeRolloutInput(BaseModel):
    """One node's handshake. ``owner`` is ``{parent_id}/node/{node}`` (no attempt suffix) so a
    retry attempt recognises the cordon of an earlier attempt as ours."""

    node: str
    pool: str
    target: str
    parent_id: str
    owner: str
    attempt: int = 1
    daemon_drain_deadline_seconds: float = 3600.0
    daemon_uncordon_deadline_seconds: float = 600.0
    deadline_warn_fraction: float = 0.5
    drain_backoff_initial_seconds: float = 5.0
    drain_backoff_max_seconds: float = 60.0
    drain_wait_seconds: float = 30.0
    wait_activity_timeout_seconds: float = 60.0
    activity_timeout_seconds: float = 10.0
    activity_heartbeat_timeout_seconds: float = 10.0
    decide_after_seconds: float | None = None
    decision_timeout_seconds: float | None = None
    decision_timeout_outcome: DrainDecision = DrainDecision.WAIT


class NodeRolloutResult(BaseModel):
    """``outcome`` done / degraded / skipped / aborted / failed; ``safe_point`` the step where it stopped."""

    node: str
    outcome: Literal["done", "degraded", "skipped", "aborted", "failed"]
    reason: str | None = None
    safe_point: str | None = None
    attempt: int = 1
    cordoned_by_us: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    drain_seconds: float | None = None
    reboot_seconds: float | None = None
    drain_report: DrainReport | None = None
    decisions: list[GateRecord] = Field(default_factory=list)
    abort_requested: bool = False


class NodeProgress(BaseModel):
    """Signal payload child -> parent (``node_progress``) on every step change."""

    node: str
    attempt: int
    phase: NodePhase
    step: str | None = None
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    warning: str | None = None
    reason: str | None = None
    drain_report: DrainReport | None = None
    cordoned_by_us: bool = False
    blocked_since: datetime | None = None
    decision_gate: Gate | None = None
    decisions: list[GateRecord] = Field(default_factory=list)


# --- standalone node drain -----------------------------------------------------------------------

#: Procedure name of the standalone drain (``LockkeeperProcedure``).
PROCEDURE_NODE_DRAIN = "node-drain"


class NodeDrainInput(BaseModel):
    """Take one node out for maintenance durably (node-maintenance-operator style): cordon
    (recording ``lockkeeper.io/cordoned-by``), drain with the blocked-drain report and decision
    gate, optionally run ``reboot_command`` (argv) and, with ``uncordon_after``, uncordon it again
    (only if we cordoned it). Knobs and decision rules as in :class:`MachineConfigRolloutInput`.
    """

    node: str
    cluster: str = "default"
    requested_by: str = "unknown"
    four_eyes: bool = False
    allowed_approvers: list[str] = Field(default_factory=list)
    reboot_command: list[str] | None = None
    #: How ``reboot_command`` reaches the node (default: a privileged debug pod pinned to it,
    #: as ``oc debug node/NODE -- chroot /host ...``); see :class:`activities.etcd_models.HostAccess`.
    reboot_access: HostAccess | None = None
    reboot_timeout_seconds: float = Field(600.0, gt=0)
    #: After the reboot command, how long the node may take to report Ready again (seconds)
    #: before the procedure fails (leaving the node cordoned).
    ready_timeout_seconds: float = Field(1800.0, gt=0)
    uncordon_after: bool = False
    decide_after_seconds: float | None = 600.0
    decision_timeout_seconds: float | None = None
    decision_timeout_outcome: DrainDecision = DrainDecision.WAIT
    drain_backoff_initial_seconds: float = 5.0
    drain_backoff_max_seconds: float = 60.0
    drain_wait_seconds: float = 30.0
    activity_timeout_seconds: float = 10.0
    activity_heartbeat_timeout_seconds: float = 10.0
    search_attributes: bool = True

    @field_validator("decision_timeout_outcome")
    @classmethod
    def _no_unapproved_delete(cls, v: DrainDecision) -> DrainDecision:
        return _check_timeout_outcome(v)

    @field_validator("reboot_command")
    @classmethod
    def _argv(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not v[0].strip()):
            raise ValueError("reboot_command must be a non-empty argv list")
        return v

    def command_access(self) -> HostAccess:
        """Where the reboot command runs: ``reboot_access``, or a debug pod on the node."""
        return self.reboot_access or HostAccess(backend=ExecBackend.DEBUG_POD, node=self.node)


class NodeDrainResult(MachineConfigRolloutResult):
    """A rollout-shaped result (so ``lockkeeper status`` reads both): ``outcome`` completed
    (drained, and uncordoned with ``uncordon_after``) or aborted (abort or skip decision: the
    node was uncordoned if we had cordoned it); ``nodes`` holds the one node."""

    node: str = ""
    drained: bool = False
    uncordoned: bool = False


# --- lease ---------------------------------------------------------------------------------------


class LeaseInput(BaseModel):
    """A lease on ``scope`` (e.g. ``pool/worker``) of ``cluster`` held by ``holder`` (a workflow ID).

    The lease workflow's ID is ``lease/{cluster}/{scope-name}``; it runs until released (signal
    ``release``) or until its parent closes (parent close policy TERMINATE).
    """

    cluster: str
    scope: str
    holder: str
    procedure: str = PROCEDURE_MACHINECONFIG_ROLLOUT


class LeaseInfo(BaseModel):
    """Answer of the lease's ``holder`` query."""

    cluster: str
    scope: str
    holder: str
    procedure: str
    acquired_at: datetime | None = None


def lease_workflow_id(cluster: str, pool: str) -> str:
    """``lease/{cluster}/{pool}``: the one workflow ID that makes a pool's lease exclusive."""
    return f"lease/{cluster}/{pool}"


def node_owner(parent_id: str, node: str) -> str:
    """Owner string of a node run (cordoned-by value): ``{parent_id}/node/{node}``."""
    return f"{parent_id}/node/{node}"


def node_workflow_id(parent_id: str, node: str, attempt: int) -> str:
    """Child workflow ID of a node attempt: ``{parent_id}/node/{node}/{attempt}``."""
    return f"{node_owner(parent_id, node)}/{attempt}"
