"""Inputs, plan, status and results of the MachineConfig rollout (R1, R2) and its node runs.

Pure pydantic v2 models (no Temporal, no Kubernetes import) so the CLI, the worker and the
workflows share them; the Temporal pydantic data converter carries them in history, so field names
are a stored format (add fields with defaults, never rename). The status and result extend the
kit's :class:`ProcedureStatus` / :class:`ProcedureResult`; the node run's result extends
:class:`NodeRunResult`. Times are timezone-aware UTC datetimes; durations are seconds (float).
Names follow the machine-config-operator (``maxUnavailable``, rendered config, desiredConfig,
currentConfig).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, field_validator, model_validator

from activities.cluster.models import DrainReport
from activities.machineconfig.models import HealthCheckFact
from workflows.kit.inputs import CallTimeouts, DrainPolicy, MaintenanceWindows, NodeOrder, ProcedureInput, Strict
from workflows.kit.models import NodeResult, NodeStatus, ProcedurePhase, ProcedureResult, ProcedureStatus
from workflows.kit.noderun import NodeRunResult
from workflows.kit.plan import ApprovalPolicy, MaxUnavailable, PlannedGate

#: Procedure name recorded in the ``LockkeeperProcedure`` search attribute (and the CLI's name).
PROCEDURE_MACHINECONFIG_ROLLOUT = "machineconfig-rollout"


#: Phase of the whole rollout (also the ``LockkeeperStatus`` value): the kit's phases.
RolloutPhase = ProcedurePhase


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


class PoolOrder(StrEnum):
    """How the pools of a rollout follow each other.

    ``sequential`` (the default): one pool after the other in plan order; ``parallel``: every pool
    at once, each in its own maxUnavailable window, as the machine-config-controller does
    (``pkg/controller/node/node_controller.go`` syncs each MachineConfigPool on its own);
    ``masters-first``: the master pool alone first, then every other pool in parallel.
    """

    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"
    MASTERS_FIRST = "masters-first"


class DaemonPolicy(Strict):
    """The machine-config-daemon's clocks as the node runs answer them (MCO ``pkg/daemon/drain.go``),
    passed whole to each node run; seconds.

    - ``drain_deadline_seconds`` / ``uncordon_deadline_seconds``: the daemon waits 1 h for
      lastAppliedDrain=drain-X and 10 min for uncordon-X; a warning is raised at ``warn_fraction``
      of each;
    - ``escalate_after_seconds`` (deadline guard, issue 41; ``--drain-escalate-after``): a drain
      the daemon asked for that has not finished this long after the request (as the run first
      saw it) opens its decision gate ``drain/{node}`` then at the latest, whatever the drain's
      ``decide_after_seconds`` says: 2,700 s, 15 min before the daemon's drain deadline; None: never;
    - ``wait_activity_timeout_seconds``: one watch of the daemon's next move (drain request,
      reboot, Done) before it is asked again.
    """

    drain_deadline_seconds: float = Field(3600.0, gt=0)
    uncordon_deadline_seconds: float = Field(600.0, gt=0)
    warn_fraction: float = Field(0.5, gt=0, le=1)
    escalate_after_seconds: float | None = Field(2700.0, gt=0)
    wait_activity_timeout_seconds: float = Field(60.0, gt=0)


def rollout_drain_policy() -> DrainPolicy:
    """The rollout's drain defaults: 30 s a pass, back-off 5 s doubling to 60 s (the daemon's own
    drain waits longer than a one-off drain's)."""
    return DrainPolicy(wait_seconds=30.0, backoff_initial_seconds=5.0, backoff_max_seconds=60.0)


class MachineConfigRolloutInput(ProcedureInput):
    """Start a MachineConfig rollout (lockkeeper standing in for the machine-config-controller).

    The kit's :class:`ProcedureInput` (cluster, approvals, gates, calls, search attributes, dry
    run, alerts) plus:

    - ``pools`` empty: preflight picks every pool with a node not at its newest rendered config;
      order: as given, else master first then alphabetical.
    - ``target_configs``: pool -> rendered config; missing pools get their newest rendered config.
    - ``not_before``: refuse a target rendered config created before this instant (R1 check).
    - ``max_unavailable``: int or "N%" of the pool size, rounded down, at least 1 (MCO/intstr).
    - ``node_order``: :data:`workflows.kit.inputs.NodeOrder`: ``"zone-oldest"`` (zone label, then
      creationTimestamp, then name; the default), ``"oldest-first"``, ``"newest-first"``, or an
      explicit list of node names (listed nodes first in that order, the rest zone-oldest).
    - ``pool_order``: :class:`PoolOrder` (sequential, parallel, masters-first).
    - ``repair_network`` (R1): after all pools wait for ovnkube-node Ready on every node, then a
      gate "delete-all-pods", delete all pods, then wait for all pods Ready.
    - ``drain``: the kit's :class:`DrainPolicy` (the rollout's defaults for what it leaves out;
      its timeout fields unused: the daemon's deadlines bound a drain), ``daemon``:
      :class:`DaemonPolicy`; both passed whole to every node run.
    - ``continue_as_new_after_events``: once the run's history reaches this many events, the
      window starts nothing more, lets its nodes finish and continues as new (0: never; Temporal
      caps a history at 51,200 events). ``carried``: set by the rollout itself on continue-as-new
      (:meth:`workflows.kit.batches.NodeBatches.hand_over`), never by a caller.
    - ``window_node_leases_above``: a plan of more nodes leases each node only while it is in the
      window (its pools for the whole run); smaller plans lease every node up front. Every lease
      is a child, and Temporal caps a workflow's pending children (2,000 by default); up front
      costs 5 parent history events per node (issue 16).
    - ``preflight_page_size``: nodes per pool in the preflight's result, the rest read in pages
      of as many (``list_pool_nodes``; about 470 bytes a node, under Temporal's 2 MB payload limit).

    One name per concept (the kit's nested ``approvals``, ``gates``, ``calls``, ``drain``): raises
    pydantic's ValidationError for an unknown field (a flat spelling such as ``requested_by``
    included) or a value its model refuses.
    """

    pools: list[str] = Field(default_factory=list)
    target_configs: dict[str, str] = Field(default_factory=dict)
    not_before: datetime | None = None
    max_unavailable: MaxUnavailable = 1
    node_order: NodeOrder = "zone-oldest"
    #: Maintenance windows (:data:`workflows.kit.inputs.MaintenanceWindows`, ``--window``): no node
    #: starts outside them; empty: always.
    windows: MaintenanceWindows = Field(default_factory=list)
    pool_order: PoolOrder = PoolOrder.SEQUENTIAL
    approval: ApprovalPolicy = ApprovalPolicy.NONE
    pause_on_degraded: bool = True
    repair_network: bool = False
    drain: DrainPolicy = Field(default_factory=rollout_drain_policy)
    daemon: DaemonPolicy = Field(default_factory=DaemonPolicy)
    network_poll_initial_seconds: float = 5.0
    network_poll_max_seconds: float = 60.0
    continue_as_new_after_events: int = 10_000
    window_node_leases_above: int = Field(50, ge=0)
    preflight_page_size: int = Field(1000, ge=1)
    carried: str | None = None

    @field_validator("drain", mode="before")
    @classmethod
    def _rollout_drain(cls, value: Any) -> Any:
        """A partial ``drain`` keeps the rollout's defaults (:func:`rollout_drain_policy`) for the rest."""
        return {**rollout_drain_policy().model_dump(), **value} if isinstance(value, dict) else value


# --- plan ----------------------------------------------------------------------------------------


class DisruptionAction(BaseModel):
    """One node disruption action (openshift/api ``operator/v1`` ``NodeDisruptionPolicyStatusAction``):
    ``type`` None, Drain, Reload, Restart, DaemonReload, Reboot or Special (the daemon's own rule
    for ``/etc/containers/registries.conf``: reload crio); ``service`` the unit a Reload or
    Restart acts on."""

    type: str
    service: str | None = None

    def text(self) -> str:
        """``Reload crio.service``, ``Reboot``."""
        return f"{self.type} {self.service}" if self.service else self.type


class NodeDisruption(BaseModel):
    """What the machine-config-daemon will do to the nodes of a pool that are at ``from_config``
    when they move to the pool's target (:func:`workflows.machineconfig.disruption.plan_disruption`):
    ``actions`` in the daemon's order, whether it asks for a ``drain`` and whether the node
    ``reboot``s; ``nodes`` the nodes it applies to; ``why`` one line on how it was decided
    (e.g. the first unlisted file)."""

    from_config: str
    nodes: list[str] = Field(default_factory=list)
    actions: list[DisruptionAction] = Field(default_factory=list)
    drain: bool = True
    reboot: bool = True
    why: str = ""

    def text(self) -> str:
        """``Reload crio.service; no drain, no reboot``."""
        acts = ", ".join(a.text() for a in self.actions) or "-"
        return f"{acts}; {'drain' if self.drain else 'no drain'}, {'reboot' if self.reboot else 'no reboot'}"


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
    #: The daemon's node disruption decision per current config (OpenShift 4.16+ node disruption
    #: policies); empty where the cluster has none (every node drains and reboots).
    disruption: list[NodeDisruption] = Field(default_factory=list)
    #: Nodes to roll whose MachineConfigNode reports irreconcilableChanges -> their field paths;
    #: each gets the gate ``irreconcilable/<node>`` before it starts.
    irreconcilable: dict[str, list[str]] = Field(default_factory=dict)
    #: MachineHealthChecks that are not paused and cover nodes this pool will reboot: they may
    #: replace a node that stays NotReady too long (see :func:`workflows.machineconfig.plan.health_check_gates`).
    health_checks: list[HealthCheckFact] = Field(default_factory=list)


class RolloutPlan(BaseModel):
    """The ordered pools of a rollout plus anything gated after them (``final_gates``);
    ``pool_order`` says whether the pools roll one after another or at once (:class:`PoolOrder`)."""

    pools: list[PoolPlan] = Field(default_factory=list)
    pool_order: PoolOrder = PoolOrder.SEQUENTIAL
    #: The node order within each pool: zone-oldest, oldest-first, newest-first or explicit
    #: (:func:`workflows.kit.plan.order_name`); each pool's ``nodes`` are in that order.
    node_order: str = "zone-oldest"
    final_gates: list[PlannedGate] = Field(default_factory=list)
    network_type: str | None = None
    #: The API serves MachineConfigNodes (OpenShift 4.16+): status names node phases as they do.
    machine_config_nodes: bool = False

    @property
    def node_count(self) -> int:
        return sum(len(p.nodes) for p in self.pools)


# --- status --------------------------------------------------------------------------------------


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
    #: Pods listed for the delete when it began (the approved set), deleted by uid, and of those
    #: already gone or replaced when their turn came.
    pods_listed: int | None = None
    pods_deleted: int | None = None
    pods_gone: int = 0
    workloads_ready: bool = False
    not_ready: list[str] = Field(default_factory=list)
    polls: int = 0


class RolloutStatus(ProcedureStatus):
    """Answer of the ``status`` query. ``waiting_for``/``since``/``deadline`` summarise the wait."""

    procedure: str = PROCEDURE_MACHINECONFIG_ROLLOUT
    phase: RolloutPhase = RolloutPhase.PLANNING
    plan: RolloutPlan | None = None
    current_pool: str | None = None
    #: Pools whose window is open now (several with pool_order parallel / masters-first).
    current_pools: list[str] = Field(default_factory=list)
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    totals: RolloutTotals = Field(default_factory=RolloutTotals)
    in_flight: list[str] = Field(default_factory=list)
    network_repair: NetworkRepairStatus | None = None
    #: Continue-as-new boundaries this rollout crossed (its runs minus one).
    continued: int = 0

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        """``mcn_phases`` is computed, never loaded (the kit's status keeps unknown fields)."""
        return {k: v for k, v in data.items() if k != "mcn_phases"} if isinstance(data, dict) else data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mcn_phases(self) -> dict[str, str]:
        """Where the API serves MachineConfigNodes (``plan.machine_config_nodes``): each node in
        an update -> its phase as MachineConfigNode names it
        (:func:`workflows.machineconfig.mcnphase.mcn_phase`, e.g. ``UpdateExecuted/Drained``);
        empty otherwise. Computed from ``nodes`` whenever the status is dumped, so a live step
        merged in by the CLI is named too."""
        if self.plan is None or not self.plan.machine_config_nodes:
            return {}
        from workflows.machineconfig.mcnphase import mcn_phase

        no_reboot = {n for p in self.plan.pools for d in p.disruption if not d.reboot for n in d.nodes}
        return {name: got for name, ns in self.nodes.items()
                if (got := mcn_phase(ns.phase, ns.step, reboot=name not in no_reboot)) is not None}


# --- result --------------------------------------------------------------------------------------


class MachineConfigRolloutResult(ProcedureResult):
    """``outcome`` completed / aborted / failed / dry-run / refused (a precondition failed: nothing
    written, ``problems`` one line each); ``summary`` counts per node phase."""

    procedure: str = PROCEDURE_MACHINECONFIG_ROLLOUT
    outcome: Literal["completed", "aborted", "failed", "dry-run", "refused"]
    plan: RolloutPlan | None = None
    nodes: dict[str, NodeResult] = Field(default_factory=dict)
    summary: RolloutTotals = Field(default_factory=RolloutTotals)
    network_repair: NetworkRepairStatus | None = None


# --- node run ------------------------------------------------------------------------------------


class NodeRolloutInput(BaseModel):
    """One node's handshake. ``owner`` is ``{parent_id}/node/{node}`` (no attempt suffix) so a
    retry attempt recognises the cordon of an earlier attempt as ours. ``drain``, ``daemon`` and
    ``calls`` are the rollout's, whole. ``lease_scope``: the node scope this run IS the lease of
    (:meth:`workflows.kit.noderun.NodeRunWorkflow.be_lease`), None when the rollout holds it."""

    node: str
    pool: str
    target: str
    parent_id: str
    owner: str
    attempt: int = 1
    drain: DrainPolicy = Field(default_factory=rollout_drain_policy)
    daemon: DaemonPolicy = Field(default_factory=DaemonPolicy)
    calls: CallTimeouts = Field(default_factory=CallTimeouts)
    lease_scope: str | None = None
    #: What the plan expects the daemon to do to this node (node disruption policies, OpenShift
    #: 4.16+); None: drain and reboot. Only the words of the waits depend on it: the handshake
    #: answers whatever the daemon asks.
    disruption: NodeDisruption | None = None
    #: The API serves MachineConfigNodes (the plan's ``machine_config_nodes``): the run writes the
    #: controller's side of the node's as it cordons, drains and uncordons (issue 41).
    machine_config_nodes: bool = False


class NodeRolloutResult(NodeRunResult):
    """One node's handshake result (:class:`NodeRunResult` plus the handshake's durations in
    seconds and the last drain report); ``safe_point`` the step where it stopped."""

    drain_seconds: float | None = None
    reboot_seconds: float | None = None
    drain_report: DrainReport | None = None


def node_owner(parent_id: str, node: str) -> str:
    """Owner string of a node run (cordoned-by value): ``{parent_id}/node/{node}``."""
    return f"{parent_id}/node/{node}"


def node_workflow_id(parent_id: str, node: str, attempt: int) -> str:
    """Child workflow ID of a node attempt: ``{parent_id}/node/{node}/{attempt}``."""
    return f"{node_owner(parent_id, node)}/{attempt}"
