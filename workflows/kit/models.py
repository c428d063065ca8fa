"""Models every procedure shares: gates, operator updates, node status, leases, and the status and
result bases each procedure extends.

Pure pydantic v2 (no Temporal import), so the CLI, the worker and the workflows share them; the
Temporal pydantic data converter carries them in history, so field names are a stored format:
add fields with defaults, never rename. Times are timezone-aware UTC datetimes (inside workflows
from ``workflow.now()``); durations are seconds.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from activities.cluster.models import DrainReport, FieldRecord, JsonWithoutNulls
from activities.preflight.models import PreconditionResult

# --- search attributes ------------------------------------------------------------------------------

#: Search attribute names (Keyword unless noted), registered on the server with
#: ``--search-attribute LockkeeperCluster=Keyword`` etc. Never rename: `lockkeeper list` and
#: stored histories use them.
SA_CLUSTER = "LockkeeperCluster"
SA_PROCEDURE = "LockkeeperProcedure"
SA_STATUS = "LockkeeperStatus"
SA_POOLS = "LockkeeperPools"  # KeywordList


# --- gates --------------------------------------------------------------------------------------------


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
    ``skip``: uncordon only if we cordoned, put the node back and go on with the next node;
    ``delete-pod``: delete the blocking pods despite their PodDisruptionBudget (needs an identity;
    four-eyes and allowed approvers apply); ``abort``: stop the whole procedure at its safe points.
    """

    WAIT = "wait"
    SKIP = "skip"
    DELETE_POD = "delete-pod"
    ABORT = "abort"


#: Outcomes a decision timeout may apply: never ``delete-pod`` (nobody approved it).
TIMEOUT_DECISIONS = frozenset({DrainDecision.WAIT, DrainDecision.SKIP, DrainDecision.ABORT})


def check_timeout_decision(v: DrainDecision) -> DrainDecision:
    """Field validator of ``decision_timeout_outcome``: raises ValueError for ``delete-pod``."""
    if v not in TIMEOUT_DECISIONS:
        raise ValueError("a decision timeout may only wait, skip or abort; delete-pod needs a person's approval")
    return v


class GateState(StrEnum):
    WAITING = "waiting"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed-out"
    CANCELLED = "cancelled"
    #: A drain decision gate answered (``Gate.decision`` says which).
    DECIDED = "decided"


class Gate(BaseModel):
    """A gate known to the procedure (``state`` waiting until somebody or the timeout decides)."""

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
    #: The choice made (a drain decision gate's ``wait``/``skip``/..., a step gate's declared
    #: choice such as ``restart``); None for a plain approve or reject of a gate without choices.
    decision: str | None = None
    #: The choices a person may make on this gate besides reject (``decide ID GATE CHOICE``);
    #: ``approve`` takes the first. Empty: the gate takes approve or reject.
    choices: list[str] = Field(default_factory=list)
    #: The decider's credential identity (:class:`OperatorInput`), None when unauthenticated.
    connection_identity: str | None = None
    #: The workflow whose gate this is when it is shown by another (a parent shows its
    #: children's gates, :mod:`workflows.kit.report`); None: the workflow showing it. Decisions
    #: go to that workflow.
    workflow_id: str | None = None


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
    #: The choice recorded with ``decided`` (a drain decision, or a step gate's choice).
    decision: str | None = None
    #: ``by`` is the identity the decider asserted; this is the identity of the credential its
    #: connection used (a TLS client certificate's CN), None when the connection was
    #: unauthenticated (:class:`OperatorInput`).
    connection_identity: str | None = None


class ApprovalRules(BaseModel):
    """Who may decide a procedure's gates (DESIGN.md "Gate"): ``requested_by`` may not approve
    its own gates under ``four_eyes``; a non-empty ``allowed_approvers`` lists who may decide."""

    requested_by: str = "unknown"
    four_eyes: bool = False
    allowed_approvers: list[str] = Field(default_factory=list)


# --- node status ----------------------------------------------------------------------------------------


class NodePhase(StrEnum):
    """Phase of one node in a procedure; ``step`` in :class:`NodeStatus` says where inside ``running``."""

    PENDING = "pending"
    WAITING_APPROVAL = "waiting-approval"
    RUNNING = "running"
    BLOCKED = "blocked"
    DONE = "done"
    SKIPPED = "skipped"
    DEGRADED = "degraded"
    FAILED = "failed"
    ABORTED = "aborted"


#: Node phases after which a node needs nothing more in this procedure.
FINAL_NODE_PHASES = frozenset({NodePhase.DONE, NodePhase.SKIPPED, NodePhase.FAILED, NodePhase.ABORTED})


class NodeStatus(JsonWithoutNulls):
    """Where one node stands: phase, step inside it, what it waits for, since when, until when.

    Its JSON leaves out the fields that are None (:class:`~activities.cluster.models.JsonWithoutNulls`)."""

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
    #: The workflow ID of the node's latest run; while it runs, its ``progress`` query has the
    #: live step (:func:`lockkeeper.live.merge_live_progress`), which the parent is not sent.
    #: With ``in_process``: the ID of that step inside this workflow, not a workflow.
    run_id: str | None = None
    #: The node's step runs inside the procedure's own workflow (:class:`workflows.kit.batches.
    #: LocalRun`, e.g. a control-plane master), not as a child: its steps are this row's own and
    #: there is no run to query. None (left out of the JSON, as every None here) otherwise.
    in_process: bool | None = None
    #: The step with which the node passed its point of no return (a node step that changes the
    #: node so that the window cannot undo it), from its run's reports and result; None: not
    #: passed. Once set it stays: the window then refuses to skip the node while it runs, and a
    #: skip of the stopped node leaves it as it is (:class:`workflows.kit.batches.NodeBatches`).
    past_no_return: str | None = None


class NodeProgress(BaseModel):
    """Signal payload node run -> parent (``node_progress``) on every step change. ``seq``: the
    run's count of reports sent, 1, 2, ... (None from runs before it existed): signals sent
    without waiting for each other may arrive out of order, and the parent keeps the latest."""

    node: str
    attempt: int
    seq: int | None = None
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
    #: The step with which the run passed the node's point of no return (None: not yet).
    past_no_return: str | None = None


class NodeResult(JsonWithoutNulls):
    """Final state of one node: phase, attempts, durations (seconds). Its JSON leaves out the
    fields that are None."""

    name: str
    pool: str
    phase: NodePhase
    attempts: int = 0
    duration_seconds: float | None = None
    drain_seconds: float | None = None
    reboot_seconds: float | None = None
    reason: str | None = None
    safe_point: str | None = None


# --- health waits, barriers, records, host steps (what status shows of them) ----------------------------


class HealthStatus(BaseModel):
    """One health wait (:func:`workflows.kit.health.wait_until`): ``state`` waiting / ok /
    timed-out / stopped; ``last`` what the last check said; ``polls`` how many checks ran."""

    name: str
    state: Literal["waiting", "ok", "timed-out", "stopped"] = "waiting"
    since: datetime | None = None
    deadline: datetime | None = None
    polls: int = 0
    last: str = ""


class BarrierStatus(BaseModel):
    """One barrier (:mod:`workflows.kit.barrier`): targets done, failed (target -> why), pending."""

    name: str
    state: Literal["running", "passed", "failed"] = "running"
    pending: list[str] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    rounds: int = 0


class HostStepStatus(BaseModel):
    """One host step (:mod:`workflows.kit.host`): ``state`` pending / already-done / running /
    done / failed / unknown (the command may or may not have run: a gate asks a person)."""

    name: str
    state: Literal["pending", "already-done", "running", "done", "failed", "unknown"] = "pending"
    attempts: int = 0
    detail: str = ""


class RecordStatus(BaseModel):
    """One record (:mod:`workflows.kit.records`): the object, the recorded paths, ``state``
    recorded (originals stored, change pending) / changed / reverted (written back and read back
    at the originals) / refused (the object changed since we wrote it: nothing was reverted) /
    differs (written back, but the read-back shows differences: ``detail`` names them)."""

    name: str
    object: str
    paths: list[str] = Field(default_factory=list)
    state: Literal["recorded", "changed", "reverted", "refused", "differs"] = "recorded"
    detail: str = ""


class ChangedItem(BaseModel):
    """One thing a procedure leaves changed when it ends other than completed or restored (an
    abort past its point of no return, a failure, a stop): ``target`` what it is, named as the
    simulator's diff names it (``DaemonSet openshift-sdn/sdn``, ``Node node01``, ``host node01``,
    ``network type``); ``what`` what stays changed (fields, "cordoned by this run", a file);
    ``undo`` the exact command that undoes it, when one exists (``oc adm uncordon node01``,
    ``lockkeeper revert ID --full``)."""

    target: str
    what: str
    undo: str | None = None

    def line(self) -> str:
        return f"{self.target}: {self.what}" + (f" (undo: {self.undo})" if self.undo else "")


class RecordEntry(BaseModel):
    """A record as a reverse run needs it after its procedure ended: ``name``, the original
    values (``record``) and what the procedure wrote (``written``, path -> value; a revert
    restores only while the object still holds these)."""

    name: str
    record: FieldRecord
    written: dict[str, Any] = Field(default_factory=dict)


# --- operator updates -------------------------------------------------------------------------------------


class OperatorInput(BaseModel):
    """What every operator update carries besides its own fields (DESIGN.md "Gate"; issue 18
    "Decisions are confirmed or never happen", "Identity has a trust model").

    - ``sent_at``: when the client sent it (the sender's clock, timezone-aware UTC);
    - ``deadline``: after it (compared with ``workflow.now()`` when the update reaches a
      worker) the update is refused and nothing is decided: the CLI waits for an answer until
      about then and says "nothing was decided" when none came, so an update a worker picks up
      later must not act (:func:`workflows.kit.control.check_in_time`);
    - ``connection_identity``: the identity of the client's credential (the CN of its TLS client
      certificate) when the connection to Temporal is authenticated; None on an
      unauthenticated connection (a dev server), where ``identity`` is self-declared;
    - ``request_id``: the Temporal update ID the client chose, which a ``withdraw_decision``
      signal names when the client gives up on it (:mod:`workflows.kit.decisions`).

    All optional, so stored histories and older clients still decode. A procedure's own update
    input inherits this model to get the same checks (the kit's validators read the fields by
    name, so any model or dict with them works).
    """

    sent_at: datetime | None = None
    deadline: datetime | None = None
    connection_identity: str | None = None
    request_id: str | None = None


class ApproveInput(OperatorInput):
    """Approve ``gate_id`` (None = the only waiting gate) as ``identity``."""

    gate_id: str | None = None
    identity: str
    comment: str = ""


class RejectInput(OperatorInput):
    """Reject ``gate_id`` (None = the only waiting gate); what follows is the procedure's rule
    (the rollout pauses and ``resume`` re-opens the gate; the etcd restore stops)."""

    gate_id: str | None = None
    identity: str
    comment: str = ""


class ControlInput(OperatorInput):
    """pause / resume / abort, attributed to ``identity``."""

    identity: str
    comment: str = ""
    reason: str | None = None


class NodeOperatorInput(OperatorInput):
    """An operator update on one node: the ``node`` and who sends it (``identity``)."""

    node: str
    identity: str


class NodeControlInput(NodeOperatorInput):
    """skip_node / retry_node on ``node``."""

    comment: str = ""


class HoldInput(NodeOperatorInput):
    """hold_node on ``node`` as ``identity`` for ``reason``: until ``until`` (an absolute time),
    or for ``for_seconds`` from when the workflow accepts it, or (neither) until released. The
    validator refuses both at once, a time in the past and an empty reason."""

    reason: str = ""
    until: datetime | None = None
    for_seconds: float | None = None


class ReleaseInput(NodeOperatorInput):
    """release_node: end the hold on ``node`` as ``identity`` (``reason`` optional)."""

    reason: str = ""


class NodeHold(BaseModel):
    """A hold on a node (workflows.kit.holds): the window does not start ``node`` while it
    holds; placed by ``by`` at ``since`` for ``reason``, until ``until`` (None: until released)."""

    node: str
    by: str
    reason: str
    since: datetime
    until: datetime | None = None
    connection_identity: str | None = None

    def until_text(self) -> str:
        """``until 2026-01-01T10:00:00+00:00`` or ``until released``."""
        return f"until {self.until.isoformat(timespec='seconds')}" if self.until is not None else "until released"


class HoldRecord(BaseModel):
    """One entry of the hold history: ``action`` held / released / expired / ended (the node
    finished or was skipped while held), ``by`` who (``timer`` for an expiry), ``at`` when."""

    node: str
    action: Literal["held", "released", "expired", "ended"]
    by: str
    at: datetime
    reason: str = ""
    until: datetime | None = None

    def line(self) -> str:
        """``hold on n1 expired``, ``hold on n1 released by bob: fixed``, ..."""
        text = f"hold on {self.node} {self.action}"
        if self.action == "held":
            text += f" by {self.by} " + (f"until {self.until.isoformat(timespec='seconds')}" if self.until else "until released")
        elif self.action == "released":
            text += f" by {self.by}"
        return text + (f": {self.reason}" if self.reason else "")


class DecideInput(OperatorInput):
    """Make a choice on a gate as ``identity``: ``node`` names either a gate of the procedure
    that declares choices (``gate_id`` may name it too) or a node whose blocked drain waits for
    a decision (``decision`` one of wait / skip / delete-pod / abort). The validator refuses a
    choice the gate does not declare."""

    node: str
    decision: str
    identity: str
    comment: str = ""
    gate_id: str | None = None


class RevertInput(OperatorInput):
    """``revert`` as ``identity``: restore what the run's records hold (``full``: the whole change
    in reverse, for procedures that can; an ended run gets a reverse run). ``reason`` is kept
    with the request."""

    identity: str
    comment: str = ""
    reason: str = ""
    full: bool = False


class RevertAnswer(BaseModel):
    """The answer to ``revert``: ``mode`` "in-run" (this run restores at its next safe point) or
    "reverse-run" (a new run reverses the change: ``workflow_id``), and the operator's message."""

    mode: Literal["in-run", "reverse-run"] = "in-run"
    message: str = ""
    workflow_id: str | None = None


class DecideResult(BaseModel):
    gate_id: str
    decision: str
    message: str


class DrainDecisionSignal(BaseModel):
    """Parent -> node run (signal ``drain_decision``): a validated decision to apply."""

    decision: DrainDecision
    identity: str
    comment: str = ""
    at: datetime | None = None
    #: The decider's credential identity (:class:`OperatorInput`), None when unauthenticated.
    connection_identity: str | None = None


class GateDecisionResult(BaseModel):
    gate_id: str
    state: GateState
    message: str


# --- status and result bases ------------------------------------------------------------------------------


class ProcedurePhase(StrEnum):
    """The phases the kit itself computes (a procedure's own phase enum uses these values for
    the same states, and the ``LockkeeperStatus`` search attribute carries them)."""

    PLANNING = "planning"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_APPROVAL = "waiting-approval"
    COMPLETING = "completing"
    DONE = "done"
    ABORTED = "aborted"
    FAILED = "failed"
    REJECTED = "rejected"


#: Phases after which a procedure accepts no control update.
FINAL_PHASES = frozenset({"done", "aborted", "failed", "rejected"})


class ProcedureStatus(BaseModel):
    """What every procedure's ``status`` query returns at least; each procedure's status model
    extends it (narrowing ``phase`` to its own enum). Unknown fields are kept, so a client that
    only knows this base (``lockkeeper status`` of a newer procedure) still shows everything.

    ``waiting_for`` / ``since`` / ``deadline`` summarise the current wait; ``gates`` the gates
    known now, ``gate_history`` every opened/decided/timed-out/cancelled record; ``health`` the
    health waits, ``barriers`` the barriers, ``host_steps`` the host steps, ``records`` the
    records (by name); ``leases`` the scopes held.
    """

    model_config = ConfigDict(extra="allow")

    procedure: str = ""
    workflow_id: str = ""
    cluster: str = "default"
    phase: str = ProcedurePhase.RUNNING
    paused_reason: str | None = None
    abort_requested: bool = False
    gates: list[Gate] = Field(default_factory=list)
    gate_history: list[GateRecord] = Field(default_factory=list)
    health: dict[str, HealthStatus] = Field(default_factory=dict)
    barriers: dict[str, BarrierStatus] = Field(default_factory=dict)
    host_steps: dict[str, HostStepStatus] = Field(default_factory=dict)
    records: dict[str, RecordStatus] = Field(default_factory=dict)
    leases: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    #: Every precondition checked before the first write, with its result (workflows.kit.preflight).
    preconditions: list[PreconditionResult] = Field(default_factory=list)
    started_at: datetime | None = None
    updated_at: datetime | None = None
    waiting_for: str | None = None
    since: datetime | None = None
    deadline: datetime | None = None
    error: str | None = None
    #: The procedure's current step (:meth:`ProcedureWorkflow.kit_step`), what it does there and
    #: since when: the headline's fallback when nothing else waits.
    step: str | None = None
    step_doing: str | None = None
    step_since: datetime | None = None
    step_until: datetime | None = None
    #: The preflight: ``none`` (the procedure declares no preconditions), ``pending`` (not
    #: checked yet: nothing is written before), ``passed``, ``refused`` (one problem per line in
    #: ``error``; the run ends refused, nothing written). The CLI waits past ``pending``.
    preflight: Literal["none", "pending", "passed", "refused"] = "none"
    #: What the procedure did that a revert inside the run cannot undo (None: not yet).
    point_of_no_return: str | None = None
    #: A revert was requested and is being carried out (by whom).
    revert_requested_by: str | None = None
    #: Once it failed or stopped: what stays changed and how to undo it.
    left_changed: list[ChangedItem] = Field(default_factory=list)
    #: Node procedures: the nodes held now (workflows.kit.holds), by node, and every hold,
    #: release and expiry so far.
    holds: dict[str, NodeHold] = Field(default_factory=dict)
    hold_history: list[HoldRecord] = Field(default_factory=list)


class ProcedureResult(BaseModel):
    """What every procedure's run returns at least; each procedure's result extends it.
    ``outcome`` is the procedure's word (completed, aborted, rejected, ...)."""

    model_config = ConfigDict(extra="allow")

    procedure: str = ""
    workflow_id: str = ""
    outcome: str = "completed"
    message: str = ""
    gate_history: list[GateRecord] = Field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    #: A refusal's problems, one line each (a failed precondition): nothing was written.
    problems: list[str] = Field(default_factory=list)
    #: What an abort or a revert restored, each read back at its original value.
    restored: list[str] = Field(default_factory=list)
    #: What stays changed (an abort past the point of no return, a stop) and how to undo it.
    left_changed: list[ChangedItem] = Field(default_factory=list)
    #: What this run changed and left so, named as ``left_changed`` names it: any ending other
    #: than completed, its ``left_changed``; a completed run that reports to a parent, what it
    #: did (a composing procedure, the cluster upgrade, sums its children's into its own
    #: ``left_changed``); a completed run on its own lists nothing here (its result is small).
    changed: list[ChangedItem] = Field(default_factory=list)
    #: The exact commands to continue or to revert from here.
    next_commands: list[str] = Field(default_factory=list)
    #: The records still holding changes, for a reverse run (``revert --full``) after the end.
    open_records: list[RecordEntry] = Field(default_factory=list)
    #: Every precondition the preflight checked, with its result (empty when the procedure
    #: checked none): what ``--dry-run`` prints, and why a refused run was refused.
    preconditions: list[PreconditionResult] = Field(default_factory=list)


class ControlResult(BaseModel):
    """Answer of pause / resume / abort / skip_node / retry_node: a message and (pause, resume,
    abort) the procedure's status right after; serialised with all of the procedure's fields."""

    message: str
    status: SerializeAsAny[ProcedureStatus] | None = None


# --- leases -------------------------------------------------------------------------------------------------

# Scope strings and lease IDs live in workflows.kit.scopes; the names are re-exported here.
from workflows.kit.scopes import (  # noqa: E402,F401 - re-exported for importers of the models
    LeaseScope,
    cluster_scope,
    lease_workflow_id,
    node_scope,
    pool_scope,
    scope_workflow_id,
    scopes_overlap,
    subsystem_scope,
)

class LeaseInput(BaseModel):
    """A lease on ``scope`` of ``cluster`` held by ``holder`` (a workflow ID) for ``procedure``.

    ``scope`` is a scope string (``pool/c1/worker``, :mod:`workflows.kit.scopes`); leases started
    before scopes existed carry ``pool/<pool>``. The lease workflow's ID is
    :func:`workflows.kit.scopes.scope_workflow_id`; it runs until
    released (signal ``release``) or until its parent closes (parent close policy TERMINATE).
    """

    cluster: str
    scope: str
    holder: str
    procedure: str = "machineconfig-rollout"


class LeaseInfo(BaseModel):
    """Answer of the lease's ``holder`` query and of its ``lease_denied`` signal."""

    cluster: str
    scope: str
    holder: str
    procedure: str
    acquired_at: datetime | None = None


# --- failures -----------------------------------------------------------------------------------------------


def failure_message(err: BaseException) -> str:
    """The innermost failure message of a Temporal error chain (the activity's own words):
    follows ``.cause`` (Temporal failures) and ``__cause__`` (raise ... from)."""
    message = str(err)
    cur: BaseException | None = err
    seen: set[int] = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        message = getattr(cur, "message", None) or str(cur) or message
        nxt: Any = getattr(cur, "cause", None)
        cur = nxt if isinstance(nxt, BaseException) else cur.__cause__
    return message
